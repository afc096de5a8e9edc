"""The engine interface: decoded planes on the host in, upscaled planes on the host out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import EngineError  # noqa: F401 - re-exported; defined below the kernels
from ..model import SRCNNModel
from ..samples import from_unit_float, to_unit_float  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from .imageproc import ImageProcessor


@dataclass(frozen=True)
class PlaneSpec:
    """How one plane of a frame is upscaled: to ``out_shape`` (H, W), through SRCNN or bicubic only."""

    out_shape: tuple[int, int]
    srcnn: bool


@dataclass(frozen=True)
class FrameFormat:
    """What every frame of a stream looks like: plane shapes in, sample dtype, what to make of each."""

    in_shapes: tuple[tuple[int, int], ...]
    dtype: np.dtype
    specs: tuple[PlaneSpec, ...]
    max_value: float


class Submitted:
    """A frame handed to a FrameProcessor: ``wait()`` gives its upscaled planes, valid until
    ``release()`` (which the consumer calls once it has used them)."""

    def __init__(self, planes: list[np.ndarray]) -> None:
        self._planes = planes

    def wait(self) -> list[np.ndarray]:
        return self._planes

    def release(self) -> None:
        """Nothing to give back for planes the engine allocated."""


class FrameProcessor:
    """Frames of one format through an engine, possibly several at once (GPU engines overlap
    upload, compute and download). This base runs each frame synchronously at submit."""

    in_flight = 1  # frames worth submitting before waiting for the oldest

    def __init__(self, engine: "Engine", fmt: FrameFormat) -> None:
        self.engine = engine
        self.fmt = fmt

    def input_buffer(self, nbytes: int) -> np.ndarray:
        """Host memory (1-D uint8) for the caller to decode frames into, reused frame after frame.
        Engines hand out memory they read fastest: the GPU's is pinned, so ``submit`` uploads
        straight from it with no copy on the host."""
        return np.empty(nbytes, np.uint8)

    def submit(self, planes: Sequence[np.ndarray]) -> Any:
        """Queue one frame. When this returns, ``planes`` have been copied or consumed: the caller
        may reuse their memory at once (the video reader recycles its buffers on that promise), and
        the result never aliases them."""
        return Submitted(self.engine.upscale_frame(planes, self.fmt.specs, self.fmt.max_value))

    def close(self) -> None:
        """Wait for everything queued."""


class Engine(ABC):
    """Upscales planes with one model at one scale. Integer planes come back in the same dtype,
    quantised against ``max_value`` (255, 1023, 65535, ...); float planes in [0, 1] come back
    as float32 clipped to [0, 1]."""

    name: str = "engine"
    def __init__(self, model: SRCNNModel, scale: int) -> None:
        model.check_scale(scale)
        self.model = model
        self.scale = scale

    @abstractmethod
    def srcnn_plane(self, plane: np.ndarray, out_shape: tuple[int, int], max_value: float) -> np.ndarray:
        """Bicubic upscale to ``out_shape``, then SRCNN (the luma path)."""

    @abstractmethod
    def bicubic_plane(self, plane: np.ndarray, out_shape: tuple[int, int], max_value: float) -> np.ndarray:
        """Bicubic only (chroma, alpha)."""

    def upscale_frame(self, planes: Sequence[np.ndarray], specs: Sequence[PlaneSpec],
                      max_value: float) -> list[np.ndarray]:
        if len(planes) != len(specs):
            raise ValueError(f"{len(planes)} planes but {len(specs)} plane specs")
        return [
            self.srcnn_plane(p, s.out_shape, max_value) if s.srcnn else self.bicubic_plane(p, s.out_shape, max_value)
            for p, s in zip(planes, specs)
        ]

    def frame_processor(self, fmt: FrameFormat, slots: int | None = None) -> FrameProcessor:
        """A processor for a stream of frames of ``fmt`` (videos). ``slots``: how many frames may
        be between submit and release at once (engines that overlap work use it)."""
        return FrameProcessor(self, fmt)

    def image_processor(self) -> "ImageProcessor | None":
        """Whole images (interleaved, any size) through the device, colour conversion included
        (srgpu.engine.imageproc), or None where the engine has no such path: srgpu.images then
        upscales an image's planes with upscale_frame, the CPU engine's exact path. An engine with
        the GPU engine's device API (``plane_device`` queued on its CUDA ``stream``) gets the
        overlapped GPU image path."""
        if getattr(self, "name", None) == "cuda" and callable(getattr(self, "plane_device", None)):
            from .imageproc import OverlappedImages

            return OverlappedImages(self)  # type: ignore[arg-type]
        return None

    def close(self) -> None:
        """Release device resources (nothing for the CPU engine)."""

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
