"""One image through an engine, band by band (rows with the halo the network needs), and the plane path
that serves as the image processor of engines that have none of their own (the CPU engine)."""

from __future__ import annotations
from pathlib import Path
from typing import TYPE_CHECKING, Callable
import numpy as np
from ..engine.bands import band_rows, bands, halo_rows
from ..color import quantize, rgb_to_ycbcr, ycbcr_to_rgb
from ..engine.base import Engine
from ..engine.frames import PlaneSpec
from ..cpus import cpu_cores
from ..engine.threads import run_all
from .files import ChannelOrder
from ..errors import ImageFileError

if TYPE_CHECKING:
    from ..engine.imageproc import ImageProcessor


_NO_ALPHA = frozenset({".jpg", ".jpeg"})
_EIGHT_BIT_ONLY = frozenset({".jpg", ".jpeg", ".webp", ".bmp"})
# ---------------------------------------------------------------- one image


# Image files larger than this are refused unless the user raises it (--max-megapixels): 256 MP is
# a 200 MP phone photo or a 16000x16000 scan; a 30000x30000 (900 MP) file would take the better
# part of half an hour, and a decompression bomb would take all memory.
DEFAULT_MAX_PIXELS = 256 * 10**6
BAND_OUTPUT_PIXELS = 4 * 2**20  # output pixels per band: the engine's float32 planes of a band, ~50 MB
CONVERT_PIXELS = 2**18  # output pixels taken back to RGB at a time: float64 temporaries of a few MB
RowsCallback = Callable[[int, int], None]


def band_halo(engine: Engine) -> int:
    """Input rows a band reads beyond its own on each side (srgpu.engine.bands.halo_rows)."""
    return halo_rows(engine.model.halo, engine.scale)


def upscale_image(image: np.ndarray, engine: Engine, progress: RowsCallback | None = None,
                  band_output_pixels: int | None = None) -> np.ndarray:
    """:func:`upscale_whole` in bands of input rows, each with :func:`band_halo` rows of context
    on either side, written straight into the output: a large photo needs memory for its output
    and one band, not for the whole image in float (a 6000x4000 photo at x2: 13 GB -> 0.65 GB;
    x4: 1.6 GB, of which 1.15 GB is the output itself; BENCHMARKS.md). On the CPU engine the
    result is bit-identical to the whole image (srgpu.engine.bands says why).
    ``progress(output_rows_done, output_rows)`` is called after each band."""
    _check_layout(image)
    h, w = image.shape[:2]
    scale = engine.scale
    out = _output_for(image, scale)
    for band in bands(h, band_rows(w, scale, band_output_pixels or BAND_OUTPUT_PIXELS), band_halo(engine)):
        _upscale_into(image[band.b0:band.b1], engine, out[band.k0 * scale:band.k1 * scale],
                      (band.k0 - band.b0) * scale)
        if progress is not None:
            progress(band.k1 * scale, h * scale)
    return out


def upscale_whole(image: np.ndarray, engine: Engine) -> np.ndarray:
    """Upscale a decoded image (uint8/uint16; gray, RGB or RGBA) by the engine's scale, same dtype
    and layout.

    Gray: the plane itself goes through SRCNN (as the authors' protocol treats gray images).
    RGB: BT.601 YCbCr in float; Y through SRCNN, Cb and Cr bicubic; back to RGB, rounded.
    Alpha: bicubic, in the image's own integer depth.
    """
    _check_layout(image)
    out = _output_for(image, engine.scale)
    _upscale_into(image, engine, out, 0)
    return out


def _check_layout(image: np.ndarray) -> None:
    if image.dtype not in (np.uint8, np.uint16):
        raise ImageFileError(f"unsupported sample type {image.dtype}")
    if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (3, 4)):
        raise ImageFileError(f"unsupported image layout {image.shape}")


def _output_for(image: np.ndarray, scale: int) -> np.ndarray:
    h, w = image.shape[:2]
    return np.empty((h * scale, w * scale) + image.shape[2:], image.dtype)


def _upscale_into(image: np.ndarray, engine: Engine, dst: np.ndarray, first: int) -> None:
    """Upscale ``image`` (see :func:`upscale_whole`) and write its output rows from ``first`` on
    into ``dst``."""
    top = int(np.iinfo(image.dtype).max)
    h, w = image.shape[:2]
    out_shape = (h * engine.scale, w * engine.scale)
    if image.ndim == 2:
        dst[...] = engine.srcnn_plane(image, out_shape, top)[first:first + len(dst)]
        return
    ycc = rgb_to_ycbcr(image[..., :3].astype(np.float64) / top)
    planes = [ycc[..., i].astype(np.float32) for i in range(3)]
    del ycc
    specs = [PlaneSpec(out_shape, True), PlaneSpec(out_shape, False), PlaneSpec(out_shape, False)]
    if image.shape[2] == 4:
        planes.append(np.ascontiguousarray(image[..., 3]))
        specs.append(PlaneSpec(out_shape, False))
    outs = engine.upscale_frame(planes, specs, top)
    del planes
    _to_samples(outs, dst, first, top)


def _to_samples(outs: list[np.ndarray], dst: np.ndarray, first: int, top: int) -> None:
    """YCbCr planes (and alpha) rows from ``first`` on -> ``dst``'s RGB(A) samples, rounded, a few
    full-width rows at a time (on the CPUs side by side): the float64 conversion of a whole band
    would be 0.5 GB at the peak, and every row goes through the same operations either way."""
    rows = max(1, CONVERT_PIXELS // max(1, dst.shape[1]))

    def convert(r0: int) -> None:
        r1 = min(len(dst), r0 + rows)
        src = slice(first + r0, first + r1)
        dst[r0:r1, :, :3] = quantize(ycbcr_to_rgb(np.stack([p[src] for p in outs[:3]], axis=-1)), dst.dtype, top)
        if len(outs) == 4:
            dst[r0:r1, :, 3] = outs[3][src]  # bicubic in the image's own depth already

    run_all(convert, range(0, len(dst), rows), cpu_cores())


def fit_to_format(image: np.ndarray, suffix: str, src: Path | None = None) -> np.ndarray:
    """Adapt an image to what the output format can hold: 8-bit formats get 16-bit data rounded to
    8 bits (asked for by --format); JPEG cannot store alpha, which is an error (nothing is dropped
    silently)."""
    suffix = suffix.lower()
    _check_alpha(image, suffix, src)
    if suffix in _EIGHT_BIT_ONLY and image.dtype == np.uint16:
        return quantize(image.astype(np.float64) / 65535.0, np.uint8)
    return image


def format_notes(image: np.ndarray, suffix: str) -> tuple[str, ...]:
    """What fit_to_format gives up of ``image`` for this output format, in words for the summary."""
    if suffix.lower() in _EIGHT_BIT_ONLY and image.dtype == np.uint16:
        return (f"its 16-bit samples are rounded to 8 bits: {suffix.lower()} files hold 8",)
    return ()


def _check_alpha(image: np.ndarray, suffix: str, src: Path | None) -> None:
    if suffix.lower() in _NO_ALPHA and image.ndim == 3 and image.shape[2] == 4:
        name = f"{src}: " if src else ""
        raise ImageFileError(f"{name}JPEG cannot store the alpha channel; use --format png or webp")


class _Ticket:
    """An image the plane path upscaled at submit (srgpu.engine.imageproc's tickets wait on the device)."""

    def __init__(self, pixels: np.ndarray) -> None:
        self._pixels = pixels

    def wait(self) -> np.ndarray:
        return self._pixels

    def ready(self) -> bool:
        return True


class _PlaneProcessor:
    """Images through ``upscale_image`` on the calling thread, RGB: the exact path, for engines
    with no image path of their own (the CPU engine)."""

    order: ChannelOrder = "rgb"
    in_flight = 0

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def submit(self, image: np.ndarray, progress: RowsCallback | None = None) -> _Ticket:
        return _Ticket(upscale_image(image, self.engine, progress))

    def close(self) -> None:
        """Nothing in flight."""

def image_processor_for(engine: Engine) -> ImageProcessor:
    """The engine's image path (a GPU engine's overlapped one), else the CPU engine's exact
    plane path: what run_batch uses, for a worker that takes one image at a time."""
    return engine.image_processor() or _PlaneProcessor(engine)

