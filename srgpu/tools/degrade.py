"""Compression degradations of 8-bit LR images, as real inputs have them: JPEG (OpenCV, the codec
srgpu reads and writes images with) and all-intra H.264 / HEVC (libx264 / libx265 through the
ffmpeg srgpu runs, yuv420p at a CRF).

A spec is ``CODEC:QUALITY`` (``jpeg:75``, ``h264:23``, ``hevc:28``) or, for training, a range
``CODEC:LOW-HIGH`` (``jpeg:60-95``) from which a quality is drawn. Used by ``srgpu eval --degrade``
and by scripts/training/train.py --degrade.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

# codec -> (lowest, highest quality value, what the value is); JPEG: higher is better, CRF: lower is
CODECS: dict[str, tuple[int, int, str]] = {"jpeg": (1, 100, "quality"), "h264": (0, 51, "CRF"),
                                           "hevc": (0, 51, "CRF")}
ENCODERS = {"h264": "libx264", "hevc": "libx265"}
MAX_FRAMES_PER_CALL = 256  # frames of one ffmpeg call: bounds the pipe buffers' memory
_SPEC = re.compile(r"^([a-z0-9]+):(\d+)(?:-(\d+))?$")


class DegradeError(ValueError):
    """A degradation spec that cannot be used, or a codec that failed; the message says why."""


@dataclass(frozen=True)
class Degradation:
    """One codec at one quality (``low == high``) or a range of qualities to draw from."""

    codec: str
    low: int
    high: int

    def __post_init__(self) -> None:
        if self.codec not in CODECS:
            raise DegradeError(f"unknown codec {self.codec!r} in degradation {self}: use {', '.join(CODECS)}")
        lo, hi, what = CODECS[self.codec]
        if not (lo <= self.low <= self.high <= hi):
            raise DegradeError(f"degradation {self}: {self.codec} {what} must be within {lo}-{hi}, low before high")

    def __str__(self) -> str:
        return f"{self.codec}:{self.low}" if self.low == self.high else f"{self.codec}:{self.low}-{self.high}"

    @property
    def is_range(self) -> bool:
        return self.low != self.high

    def draw(self, rng: np.random.Generator) -> int:
        """A quality drawn uniformly from the range (integers, both ends included)."""
        return int(rng.integers(self.low, self.high + 1))

    def check_single(self) -> None:
        """Evaluation compresses at one quality: refuse a range."""
        if self.is_range:
            raise DegradeError(f"degradation {self} is a range: give one quality, e.g. {self.codec}:{self.low}")

    def apply(self, image: np.ndarray) -> np.ndarray:
        """Compress and decompress one uint8 image at this (single) quality."""
        self.check_single()
        return compress(image, self.codec, self.low)


def parse_degradation(text: str) -> Degradation:
    """``jpeg:75``, ``h264:23``, ``hevc:28`` or a range ``jpeg:60-95``."""
    m = _SPEC.match(text.strip().lower())
    if not m:
        raise DegradeError(f"bad degradation {text!r}: expected CODEC:QUALITY or CODEC:LOW-HIGH with CODEC one of "
                           f"{', '.join(CODECS)} (e.g. jpeg:75, h264:23, jpeg:60-95)")
    codec, low, high = m.group(1), int(m.group(2)), int(m.group(3) or m.group(2))
    if codec not in CODECS:
        raise DegradeError(f"bad degradation {text!r}: unknown codec {codec!r}, use {', '.join(CODECS)}")
    return Degradation(codec, low, high)


def compress(image: np.ndarray, codec: str, quality: int) -> np.ndarray:
    """Compress and decompress one uint8 image: a plane (H, W), or for JPEG also RGB (H, W, 3)."""
    if codec == "jpeg":
        return _jpeg(image, quality)
    return compress_batch([image], codec, quality)[0]


def compress_batch(planes: Sequence[np.ndarray], codec: str, quality: int) -> np.ndarray:
    """Compress and decompress same-size uint8 planes (N of (H, W)) -> (N, H, W), each as it would
    come out alone: JPEG one by one, H.264/HEVC as one all-intra clip per ffmpeg call (every frame
    an IDR, coded on its own)."""
    if not len(planes):
        return np.empty((0, 0, 0), np.uint8)
    shapes = {p.shape for p in planes}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise DegradeError(f"compress_batch needs planes of one size, (H, W) each; got {sorted(shapes)}")
    if any(p.dtype != np.uint8 for p in planes):
        raise DegradeError("compress_batch needs uint8 planes")
    if codec == "jpeg":
        return np.stack([_jpeg(p, quality) for p in planes])
    if codec not in ENCODERS:
        raise DegradeError(f"unknown codec {codec!r}: use {', '.join(CODECS)}")
    out = [_video_intra(np.stack(planes[i:i + MAX_FRAMES_PER_CALL]), codec, quality)
           for i in range(0, len(planes), MAX_FRAMES_PER_CALL)]
    return np.concatenate(out)


def _jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    if image.dtype != np.uint8 or image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] != 3):
        raise DegradeError(f"JPEG degradation needs a uint8 plane or RGB image, got {image.dtype} {image.shape}")
    bgr = image if image.ndim == 2 else np.ascontiguousarray(image[..., ::-1])
    ok, data = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise DegradeError(f"OpenCV could not encode a {image.shape} image as JPEG")
    out = cv2.imdecode(data, cv2.IMREAD_GRAYSCALE if image.ndim == 2 else cv2.IMREAD_COLOR)
    return out if image.ndim == 2 else np.ascontiguousarray(out[..., ::-1])


def ffmpeg_exe() -> str:
    """The ffmpeg srgpu runs everywhere (srgpu.video.ffmpeg.ffmpeg_exe: imageio-ffmpeg's, or
    $IMAGEIO_FFMPEG_EXE)."""
    from ..video import ffmpeg
    from ..video.errors import VideoError

    try:
        return ffmpeg.ffmpeg_exe()
    except VideoError as e:
        raise DegradeError(f"ffmpeg is not available for H.264/HEVC degradation ({e})") from None


def encoder_args(codec: str, crf: int) -> list[str]:
    """All-intra, CRF, one thread: the same bits on every machine (x264/x265 output depends on
    their thread count), and training spreads work over processes instead."""
    if codec == "h264":
        return ["-c:v", "libx264", "-preset", "medium", "-crf", str(crf), "-g", "1", "-bf", "0", "-threads", "1"]
    return ["-c:v", "libx265", "-preset", "medium", "-crf", str(crf), "-g", "1", "-bf", "0",
            "-x265-params", "pools=none:frame-threads=1:log-level=error"]


def _video_intra(frames: np.ndarray, codec: str, crf: int) -> np.ndarray:
    """(N, H, W) uint8 luma -> the same planes after an all-intra encode and decode at ``crf``.

    The planes go in as the Y of yuv420p frames (neutral chroma), so no range or colour
    conversion touches them; odd sizes are padded by edge replication to even, then cropped.
    Each frame is encoded by an encoder of its own (one ffmpeg output per frame): x264's and
    x265's CRF rate control carries a blurred complexity from frame to frame, so frames of one
    stream would not come out as they do alone. The streams, each an IDR with its parameter
    sets, are concatenated and decoded in one call."""
    n, h, w = frames.shape
    ph, pw = h + h % 2, w + w % 2
    y = np.pad(frames, ((0, 0), (0, ph - h), (0, pw - w)), mode="edge")
    chroma = np.full((n, ph // 2 * pw // 2 * 2), 128, np.uint8)
    raw = np.concatenate([y.reshape(n, -1), chroma], axis=1).tobytes()
    exe = ffmpeg_exe()
    quiet = ["-nostdin", "-hide_banner", "-loglevel", "error"]
    split = f"[0:v]split={n}" + "".join(f"[s{i}]" for i in range(n)) if n > 1 else "[0:v]null[s0]"
    graph = ";".join([split] + [f"[s{i}]select=eq(n\\,{i})[o{i}]" for i in range(n)])
    with tempfile.TemporaryDirectory(prefix="srgpu-degrade-") as tmp:
        names = [os.path.join(tmp, f"{i}.{codec}") for i in range(n)]
        outputs = [a for i, name in enumerate(names)
                   for a in ("-map", f"[o{i}]", *encoder_args(codec, crf), "-fps_mode", "passthrough", "-f", codec, name)]
        _run([exe, *quiet, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", f"{pw}x{ph}", "-framerate", "25",
              "-i", "pipe:0", "-filter_complex", graph, *outputs], raw, f"{ENCODERS[codec]} encode")
        bitstream = b"".join(Path(name).read_bytes() for name in names)
    decode = [exe, *quiet, "-f", codec, "-i", "pipe:0", "-fps_mode", "passthrough", "-f", "rawvideo",
              "-pix_fmt", "yuv420p", "pipe:1"]
    decoded = _run(decode, bitstream, f"{codec} decode")
    frame_bytes = ph * pw * 3 // 2
    if len(decoded) != n * frame_bytes:  # a dropped or duplicated frame would shift every later one
        raise DegradeError(f"{codec} degradation: {n} frames in, {len(decoded) / frame_bytes:g} out")
    out = np.frombuffer(decoded, np.uint8).reshape(n, frame_bytes)[:, : ph * pw].reshape(n, ph, pw)
    return np.ascontiguousarray(out[:, :h, :w])


def _run(cmd: list[str], data: bytes, what: str) -> bytes:
    try:
        r = subprocess.run(cmd, input=data, capture_output=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise DegradeError(f"ffmpeg {what} did not finish within 600 s") from None
    if r.returncode != 0:
        last = (r.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        raise DegradeError(f"ffmpeg {what} failed (exit {r.returncode}): {last}")
    return r.stdout
