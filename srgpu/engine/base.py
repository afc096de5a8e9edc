"""The engine interface: decoded planes on the host in, upscaled planes on the host out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import EngineError  # noqa: F401 - re-exported; defined below the kernels
from ..model import SRCNNModel
from ..samples import from_unit_float, to_unit_float  # noqa: F401 - re-exported
from .frames import FrameFormat, FrameProcessor, PlaneSpec

if TYPE_CHECKING:
    from .imageproc import ImageProcessor


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
        (srgpu.engine.imageproc), or None where the engine has no such path: srgpu.batch.local then
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
