"""A picture to judge by (``srgpu compare``): one PNG with the same crop of an image, or of a
video's frame at a given time, side by side at the output scale: the source enlarged by nearest
neighbour (its pixels as they are), by bicubic, and by srgpu with each model given, each labelled.

- The srgpu panels are what ``srgpu upscale`` makes. An image's crop is upscaled with the context
  an upscale of the whole image gives it (srgpu.engine.bands.halo_rows on every side), so on the CPU
  engine its pixels are the whole upscale's, bit for bit. A video's frame goes through srgpu.video
  itself (the frame cut losslessly to a one-frame FFV1 clip, upscaled, decoded), so it is
  processed as ``upscale`` processes the video: its own luma plane through SRCNN, its chroma bicubic.
- The crop (:class:`Crop`, in source pixels) is given, or placed where the detail is: the window of
  the source with the highest mean gradient energy (Sobel, summed over windows through an integral
  image: one pass, whatever the size), :func:`detail_crop`.
- The picture is 8-bit RGB (16-bit sources rounded, gray shown as gray, alpha over a checkerboard)
  and written under a temporary name, then renamed (srgpu.imagefile.write_image_atomic).
"""

from __future__ import annotations

import math
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from ..engine.bands import halo_rows
from ..engine.base import Engine
from ..images.files import IMAGE_EXTENSIONS, read_image_data, write_image_atomic
from ..batch.plan import BatchError, is_video
from ..images.upscale import upscale_whole
from ..resize import imresize

PANEL = 256  # the default crop's side at the output scale
BAND = 30  # the label band's height above each panel
GAP = 8  # between panels, and around them
BACKGROUND = (32, 32, 32)


class CompareError(BatchError):
    """The comparison cannot be made as asked (one line saying why)."""


@dataclass(frozen=True)
class Crop:
    """A window of the source, in source pixels; ``x``/``y`` None: placed where the detail is."""

    width: int
    height: int
    x: int | None = None
    y: int | None = None

    @classmethod
    def parse(cls, text: str) -> "Crop":
        """'WxH+X+Y' (a window) or 'WxH' (its size, placed where the detail is)."""
        m = re.fullmatch(r"\s*(\d+)x(\d+)(?:\+(\d+)\+(\d+))?\s*", text.lower())
        if not m or int(m.group(1)) == 0 or int(m.group(2)) == 0:
            raise CompareError(f"--crop {text!r}: use WxH+X+Y in source pixels (e.g. 128x128+40+60), or WxH")
        x, y = m.group(3), m.group(4)
        return cls(int(m.group(1)), int(m.group(2)), None if x is None else int(x), None if y is None else int(y))

    @property
    def placed(self) -> bool:
        return self.x is not None and self.y is not None

    def describe(self) -> str:
        return f"{self.width}x{self.height}+{self.x}+{self.y}"


def parse_time(text: str) -> float:
    """'12.5' (seconds), 'MM:SS(.ms)' or 'HH:MM:SS(.ms)' -> seconds."""
    parts = text.strip().split(":")
    try:
        if not 1 <= len(parts) <= 3 or any(p == "" for p in parts):
            raise ValueError
        values = [float(p) for p in parts]
        if any(v < 0 or not math.isfinite(v) for v in values) or any(v >= 60 for v in values[1:]):
            raise ValueError
    except ValueError:
        raise CompareError(f"--at {text!r}: use seconds (12.5) or HH:MM:SS(.ms) (00:01:02.5)") from None
    seconds = 0.0
    for v in values:
        seconds = seconds * 60 + v
    return seconds


@dataclass(frozen=True)
class Panel:
    label: str
    pixels: np.ndarray  # 8-bit RGB, the crop at the output scale


@dataclass(frozen=True)
class Comparison:
    """What was compared: the source's size, the crop (placed), the frame's time (a video), the
    scale, the panels and the picture made of them."""

    source_size: tuple[int, int]  # (width, height)
    crop: Crop
    scale: int
    at: float | None
    panels: tuple[Panel, ...]
    picture: np.ndarray  # 8-bit RGB

    def describe(self) -> str:
        w, h = self.source_size
        frame = f", the frame at {self.at:.3f} s" if self.at is not None else ""
        return (f"crop {self.crop.describe()} of the {w}x{h} source{frame}, x{self.scale}: "
                + ", ".join(p.label for p in self.panels))


# ---------------------------------------------------------------- the source


def is_image(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_EXTENSIONS


def _file_arg(path: Path) -> str:
    from ..video.ffmpeg import file_arg

    return file_arg(path)


def _ffmpeg(args: Sequence[str], what: str) -> bytes:
    from ..video.ffmpeg import ffmpeg_exe

    proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-v", "error", *args], capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=600)
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines()
        raise CompareError(f"{what}: ffmpeg failed ({lines[-1] if lines else f'exit status {proc.returncode}'})")
    return proc.stdout


def _decode_rgb(path: Path) -> np.ndarray:
    """The first frame of a video file as 8-bit RGB, through ffmpeg (its colour matrix, as players)."""
    data = _ffmpeg(["-i", _file_arg(path), "-map", "0:v:0", "-frames:v", "1", "-f", "image2pipe", "-c:v", "png",
                    "-pix_fmt", "rgb24", "-"], str(path))
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) if data else None
    if image is None:
        raise CompareError(f"{path}: no frame could be decoded")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def frame_clip(src: Path, at: float | None, folder: Path) -> tuple[Path, float]:
    """The frame of ``src`` shown at ``at`` seconds (None: the middle of the video), cut to a
    one-frame lossless FFV1 clip in ``folder`` in the source's own pixel format; and its time."""
    from ..video.probe import probe
    from ..video.verify import stream_packets

    info = probe(src)
    stream = info.main_video()
    duration = info.duration
    if duration is not None and at is not None and at >= duration:
        raise CompareError(f"--at {at:g} s is past the end of {src} ({duration:.3f} s long)")
    # the video's own frames, from the file's start (its audio may last longer than its picture)
    times = [float(t) - (info.start or 0.0) for t in stream_packets(src, stream.index).times()]
    if not times:
        raise CompareError(f"{src}: its video stream holds no frame")
    if at is None:  # the middle of the file, or of its picture where that ends first
        at = duration / 2 if duration and duration / 2 <= times[-1] else max(0.0, (times[0] + times[-1]) / 2)
    elif at > times[-1]:
        raise CompareError(f"--at {at:g} s is past the last frame of {src} (at {times[-1]:.3f} s)")
    clip = folder / "frame.mkv"
    _ffmpeg(["-ss", f"{at:.6f}", "-i", _file_arg(src), "-map", f"0:{stream.index}", "-frames:v", "1", "-an", "-sn",
             "-dn", "-c:v", "ffv1", str(clip)], f"{src} at {at:g} s")
    if not clip.is_file() or clip.stat().st_size == 0:
        raise CompareError(f"{src}: no frame at {at:g} s")
    return clip, at


# ---------------------------------------------------------------- crops and panels


def to_display(image: np.ndarray) -> np.ndarray:
    """8-bit RGB for the picture: 16-bit rounded, gray as gray, alpha over a checkerboard."""
    if image.dtype == np.uint16:
        image = ((image.astype(np.uint32) + 128) // 257).astype(np.uint8)
    if image.ndim == 2:
        return np.repeat(image[..., None], 3, axis=2)
    if image.shape[2] == 4:
        h, w = image.shape[:2]
        yy, xx = np.mgrid[0:h, 0:w]
        board = np.where(((yy // 8 + xx // 8) % 2)[..., None] == 0, 200, 150).astype(np.float32)
        alpha = image[..., 3:4].astype(np.float32) / 255
        return np.round(image[..., :3] * alpha + board * (1 - alpha)).astype(np.uint8)
    return np.ascontiguousarray(image[..., :3])


def default_size(scale: int, width: int, height: int) -> tuple[int, int]:
    side = -(-PANEL // scale)
    return min(side, width), min(side, height)


def detail_crop(image: np.ndarray, width: int, height: int) -> Crop:
    """The ``width`` x ``height`` window of ``image`` with the highest mean gradient energy (the
    squared Sobel magnitude of its luma); the first of equals, top-left first."""
    h, w = image.shape[:2]
    gray = to_display(image)
    luma = cv2.cvtColor(gray, cv2.COLOR_RGB2GRAY).astype(np.float32)
    gx = cv2.Sobel(luma, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(luma, cv2.CV_32F, 0, 1, ksize=3)
    sums = cv2.integral(gx * gx + gy * gy, sdepth=cv2.CV_64F)
    windows = sums[height:, width:] - sums[:h - height + 1, width:] - sums[height:, :w - width + 1] \
        + sums[:h - height + 1, :w - width + 1]
    y, x = np.unravel_index(int(np.argmax(windows)), windows.shape)
    return Crop(width, height, int(x), int(y))


def place(crop: Crop | None, image: np.ndarray, scale: int) -> Crop:
    """The crop as it will be shown: the default size where none is given, placed where the detail
    is where no position is given; a window past the source's edges is an error."""
    h, w = image.shape[:2]
    if crop is None:
        return detail_crop(image, *default_size(scale, w, h))
    if crop.width > w or crop.height > h:
        raise CompareError(f"--crop {crop.width}x{crop.height} is larger than the {w}x{h} source")
    if not crop.placed:
        return detail_crop(image, crop.width, crop.height)
    if crop.x + crop.width > w or crop.y + crop.height > h:  # type: ignore[operator]
        raise CompareError(f"--crop {crop.describe()} goes past the edge of the {w}x{h} source")
    return crop


def _window(image: np.ndarray, crop: Crop, margin: int) -> tuple[np.ndarray, int, int]:
    """The crop with up to ``margin`` source pixels of context on every side (fewer at the image's
    edges, as an upscale of the whole image has), and where the crop starts inside it."""
    h, w = image.shape[:2]
    x0, y0 = max(0, crop.x - margin), max(0, crop.y - margin)  # type: ignore[operator]
    x1, y1 = min(w, crop.x + crop.width + margin), min(h, crop.y + crop.height + margin)  # type: ignore[operator]
    return image[y0:y1, x0:x1], crop.x - x0, crop.y - y0  # type: ignore[operator]


def _cut(upscaled: np.ndarray, dx: int, dy: int, crop: Crop, scale: int) -> np.ndarray:
    return upscaled[dy * scale:(dy + crop.height) * scale, dx * scale:(dx + crop.width) * scale]


def nearest(image: np.ndarray, crop: Crop, scale: int) -> np.ndarray:
    part = image[crop.y:crop.y + crop.height, crop.x:crop.x + crop.width]  # type: ignore[operator]
    return np.repeat(np.repeat(part, scale, axis=0), scale, axis=1)


def bicubic(image: np.ndarray, crop: Crop, scale: int) -> np.ndarray:
    """srgpu's bicubic (MATLAB's imresize, the first step of SRCNN) of the crop, rounded."""
    window, dx, dy = _window(image, crop, 4)
    top = np.iinfo(image.dtype).max
    big = imresize(window.astype(np.float32), output_shape=(window.shape[0] * scale, window.shape[1] * scale))
    return np.clip(np.round(_cut(big, dx, dy, crop, scale)), 0, top).astype(image.dtype)


def srgpu_image(image: np.ndarray, crop: Crop, engine: Engine) -> np.ndarray:
    """The crop as ``srgpu upscale`` makes it from the whole image (the context it needs included)."""
    window, dx, dy = _window(image, crop, halo_rows(engine.model.halo, engine.scale) + 1)
    return _cut(upscale_whole(np.ascontiguousarray(window), engine), dx, dy, crop, engine.scale)


def srgpu_frame(clip: Path, engine: Engine, folder: Path, index: int) -> np.ndarray:
    """The one-frame clip upscaled by srgpu.video (FFV1, lossless), decoded to RGB."""
    from ..video.api import upscale_video
    from ..video.errors import VideoError
    from ..video.options import EncodeOptions, VideoOptions

    out = folder / f"srgpu-{index}.mkv"
    try:
        upscale_video(clip, out, engine, VideoOptions(EncodeOptions(codec="ffv1"), hwdec="no"), overwrite=True)
    except VideoError as e:
        raise CompareError(str(e)) from None
    return _decode_rgb(out)


# ---------------------------------------------------------------- the picture


def _label(band: np.ndarray, text: str) -> None:
    width = band.shape[1] - 6
    size = 0.6
    while size > 0.3 and cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, size, 1)[0][0] > width:
        size -= 0.05
    (tw, th), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, size, 1)
    cv2.putText(band, text, (3, (BAND + th) // 2), cv2.FONT_HERSHEY_SIMPLEX, size, (235, 235, 235), 1, cv2.LINE_AA)


def compose(panels: Sequence[Panel]) -> np.ndarray:
    """The panels side by side, each under its label's band, on a dark background."""
    h = max(p.pixels.shape[0] for p in panels)
    w = sum(p.pixels.shape[1] for p in panels) + GAP * (len(panels) + 1)
    picture = np.empty((h + BAND + 2 * GAP, w, 3), np.uint8)
    picture[:] = BACKGROUND
    x = GAP
    for p in panels:
        ph, pw = p.pixels.shape[:2]
        band = picture[GAP:GAP + BAND, x:x + pw]
        band[:] = (60, 60, 60)
        _label(band, p.label)
        picture[GAP + BAND:GAP + BAND + ph, x:x + pw] = p.pixels
        x += pw + GAP
    return picture


def compare(src: Path, engines: Sequence[tuple[str, Engine]], crop: Crop | None = None,
            at: float | None = None) -> Comparison:
    """The comparison of ``src`` (an image, or a video's frame at ``at`` seconds: None, its middle)
    for each (label, engine) of ``engines`` (all of one scale). CompareError (one line) for a bad
    request, ImageFileError / VideoError for a source that cannot be read."""
    if not engines:
        raise CompareError("no model to compare")
    scale = engines[0][1].scale
    # the crop, the nearest and bicubic panels and every srgpu panel are cut at one output scale:
    # engines of another scale (a library caller's) are refused, not cut at the first one's
    if any(engine.scale != scale for _, engine in engines):
        scales = ", ".join(sorted({f"x{engine.scale}" for _, engine in engines}))
        raise CompareError(f"the engines upscale by different factors ({scales}); a comparison is at one scale")
    if not src.is_file():
        raise CompareError(f"{src}: no such file" if not src.exists() else f"{src}: not a file")
    if is_image(src):
        if at is not None:
            raise CompareError(f"--at applies to a video, and {src} is an image")
        image = read_image_data(src).pixels
        shown = place(crop, image, scale)
        made = [srgpu_image(image, shown, engine) for _, engine in engines]
    elif is_video(src):
        with tempfile.TemporaryDirectory(prefix="srgpu-compare-") as tmp:
            clip, at = frame_clip(src, at, Path(tmp))
            image = _decode_rgb(clip)
            shown = place(crop, image, scale)
            made = []
            for i, (_, engine) in enumerate(engines):
                frame = srgpu_frame(clip, engine, Path(tmp), i)
                made.append(frame[shown.y * scale:(shown.y + shown.height) * scale,  # type: ignore[operator]
                                  shown.x * scale:(shown.x + shown.width) * scale])  # type: ignore[operator]
    else:
        raise CompareError(f"{src}: not an image or video file (unknown extension {src.suffix or '(none)'!r})")
    panels = [Panel(f"nearest x{scale}", to_display(nearest(image, shown, scale))),
              Panel(f"bicubic x{scale}", to_display(bicubic(image, shown, scale)))]
    panels += [Panel(label, to_display(pixels)) for (label, _), pixels in zip(engines, made)]
    h, w = image.shape[:2]
    return Comparison((w, h), shown, scale, at, tuple(panels), compose(panels))


def model_label(spec: str) -> str:
    """A panel's label for a --model value: 'srgpu 9-5-5', or the file's name."""
    return f"srgpu {Path(spec).name if ('/' in spec or '.' in spec) else spec}"


def check_output(output: Path, src: Path, overwrite: bool) -> None:
    """Before any work: a PNG name, in a folder that exists, not the input, not an existing file
    unless ``overwrite``."""
    if output.suffix.lower() != ".png":
        raise CompareError(f"{output}: the comparison is a PNG: name it .png")
    if not output.parent.is_dir():
        raise CompareError(f"{output.parent}: output folder does not exist")
    if output.exists():
        if output.resolve() == src.resolve():
            raise CompareError(f"{output}: is the input; it is never replaced")
        if output.is_dir():
            raise CompareError(f"{output}: is a folder")
        if not overwrite:
            raise CompareError(f"{output}: output exists (use --overwrite to replace it)")


def write(comparison: Comparison, output: Path, overwrite: bool) -> None:
    """The picture, under a temporary name then renamed (never half a file under ``output``)."""
    write_image_atomic(output, comparison.picture, replace=overwrite)
