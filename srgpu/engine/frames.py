"""What an engine is handed and gives back, below the engines themselves: a plane's spec, a stream's
frame format, and the frame processor that runs frames through an engine (the base of the GPU's
overlapped one, srgpu.engine.overlap). Nothing here imports an engine, so the frame and image paths
built on it never import the engine base back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:
    from .base import Engine


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
