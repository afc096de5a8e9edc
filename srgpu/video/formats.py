"""Planar YUV layouts for the raw pipes, and which source pixel format travels as which layout.

Frames always travel in the source's own family (4:2:0 / 4:2:2 / 4:4:4 / gray, 8 bits or 16-bit
little-endian samples carrying 10/12/16 bits), never as RGB: SRCNN works on luma and the chroma
planes are only resized, so no colour conversion happens for a YUV source. An RGB source is the
one exception: it is converted once to YUV 4:4:4 at its own depth (BT.709, limited range).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PixelLayout:
    """One planar raw format: ffmpeg's name, chroma subsampling (log2), bits, alpha, and the
    raw fourcc by which ffmpeg's Matroska demuxer recognises it."""

    name: str
    log2_chroma_w: int
    log2_chroma_h: int
    bits: int
    gray: bool
    alpha: bool
    fourcc: bytes

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.uint8) if self.bits == 8 else np.dtype("<u2")

    @property
    def max_value(self) -> int:
        return (1 << self.bits) - 1

    @property
    def family(self) -> str:
        if self.gray:
            return "gray"
        return {(1, 1): "420", (1, 0): "422", (0, 0): "444"}[(self.log2_chroma_w, self.log2_chroma_h)]

    def plane_shapes(self, width: int, height: int) -> list[tuple[int, int]]:
        """(rows, cols) of each plane in ffmpeg's order: Y [, U, V] [, A]; chroma sizes round up
        (ffmpeg's -(-w >> s)), so odd sizes work."""
        shapes = [(height, width)]
        if not self.gray:
            ch = (height + (1 << self.log2_chroma_h) - 1) >> self.log2_chroma_h
            cw = (width + (1 << self.log2_chroma_w) - 1) >> self.log2_chroma_w
            shapes += [(ch, cw), (ch, cw)]
        if self.alpha:
            shapes.append((height, width))
        return shapes

    def frame_bytes(self, width: int, height: int) -> int:
        return sum(h * w for h, w in self.plane_shapes(width, height)) * self.dtype.itemsize

    def needs_even(self) -> tuple[bool, bool]:
        """(width, height) must be even for an encoder working in this layout."""
        return self.log2_chroma_w > 0, self.log2_chroma_h > 0


def _y3(sub: int, bits: int, planes: str = "Y3") -> bytes:
    return planes.encode() + bytes([sub, bits])


_LAYOUTS = [
    PixelLayout("yuv420p", 1, 1, 8, False, False, b"I420"),
    PixelLayout("yuv422p", 1, 0, 8, False, False, b"Y42B"),
    PixelLayout("yuv444p", 0, 0, 8, False, False, b"444P"),
    PixelLayout("gray", 0, 0, 8, True, False, b"Y800"),
    PixelLayout("yuva420p", 1, 1, 8, False, True, _y3(11, 8, "Y4")),
    PixelLayout("yuva422p", 1, 0, 8, False, True, _y3(10, 8, "Y4")),
    PixelLayout("yuva444p", 0, 0, 8, False, True, _y3(0, 8, "Y4")),
]
for _bits in (10, 12, 16):
    _LAYOUTS += [
        PixelLayout(f"yuv420p{_bits}le", 1, 1, _bits, False, False, _y3(11, _bits)),
        PixelLayout(f"yuv422p{_bits}le", 1, 0, _bits, False, False, _y3(10, _bits)),
        PixelLayout(f"yuv444p{_bits}le", 0, 0, _bits, False, False, _y3(0, _bits)),
        PixelLayout(f"gray{_bits}le", 0, 0, _bits, True, False, _y3(0, _bits, "Y1")),
    ]
for _bits in (10, 16):
    _LAYOUTS += [
        PixelLayout(f"yuva420p{_bits}le", 1, 1, _bits, False, True, _y3(11, _bits, "Y4")),
        PixelLayout(f"yuva422p{_bits}le", 1, 0, _bits, False, True, _y3(10, _bits, "Y4")),
        PixelLayout(f"yuva444p{_bits}le", 0, 0, _bits, False, True, _y3(0, _bits, "Y4")),
    ]
LAYOUTS: dict[str, PixelLayout] = {layout.name: layout for layout in _LAYOUTS}


def layout(family: str, bits: int, alpha: bool = False) -> PixelLayout:
    """The pipe layout for a family ('420', '422', '444', 'gray') and a bit depth (rounded up to
    8, 10, 12 or 16; alpha only at 8, 10 or 16 bits)."""
    depth = next(b for b in (8, 10, 12, 16) if bits <= b)
    if alpha and family != "gray":
        depth = next(b for b in (8, 10, 16) if depth <= b)
        name = f"yuva{family}p" + ("" if depth == 8 else f"{depth}le")
    elif family == "gray":
        name = "gray" + ("" if depth == 8 else f"{depth}le")
    else:
        name = f"yuv{family}p" + ("" if depth == 8 else f"{depth}le")
    return LAYOUTS[name]


@dataclass(frozen=True)
class SourceFormat:
    """What a decoded pixel format means for the pipe: the layout, whether it is full range
    (yuvj*), and a note when the pipe cannot carry it as it is."""

    layout: PixelLayout
    full_range: bool = False
    rgb: bool = False
    note: str | None = None


_SEMI_PLANAR = {"nv12": "420", "nv21": "420", "nv16": "422", "nv61": "422", "nv24": "444", "nv42": "444",
                "yuyv422": "422", "uyvy422": "422", "yvyu422": "422"}
_HIGH_SEMI = re.compile(r"^(p0|p2|p4)(10|12|16)(le|be)$")  # p010le, p210le, p416le ...
_PLANAR = re.compile(r"^yuv(a?)(j?)(420|422|444|440|411|410)p(\d+)?(le|be)?$")
_GRAY = re.compile(r"^(gray|ya)(\d+)?(le|be)?$")
_RGB = re.compile(r"^(gbra?p|rgb|bgr|argb|abgr|0rgb|0bgr|x2rgb|x2bgr|pal8|monob|monow|bayer_)")
_RGB_ALPHA = re.compile(r"^(gbrap|rgba|bgra|argb|abgr)")


def source_format(pix_fmt: str, keep_alpha: bool = True) -> SourceFormat:
    """Which pipe layout carries frames decoded as ``pix_fmt`` (ffmpeg's name)."""
    m = _PLANAR.match(pix_fmt)
    if m:
        alpha, j, sub, bits, _ = m.groups()
        bits_i = int(bits) if bits else 8
        note = None
        family = sub
        if sub in ("440", "411", "410"):  # rare subsamplings: carried in the nearest family that loses nothing
            family = {"440": "444", "411": "422", "410": "420"}[sub]
            note = f"{pix_fmt} carried as {family} chroma (chroma upsampled, nothing lost)"
        lay = layout(family, bits_i, bool(alpha) and keep_alpha)
        return SourceFormat(lay, full_range=bool(j), note=note)
    m = _GRAY.match(pix_fmt)
    if m:
        bits_i = int(m.group(2)) if m.group(2) else 8
        return SourceFormat(layout("gray", bits_i))
    if pix_fmt in _SEMI_PLANAR:
        return SourceFormat(layout(_SEMI_PLANAR[pix_fmt], 8))
    m = _HIGH_SEMI.match(pix_fmt)
    if m:
        family = {"p0": "420", "p2": "422", "p4": "444"}[m.group(1)]
        return SourceFormat(layout(family, int(m.group(2))))
    if _RGB.match(pix_fmt):
        # the depth as ffmpeg states it (rgb48le is 16 bits, x2rgb10le 10, gbrpf32le float: 16 here)
        from .ffmpeg import pix_fmt_depths

        bits = min(max(pix_fmt_depths().get(pix_fmt, 8), 8), 16)
        alpha = ", its alpha channel left out" if _RGB_ALPHA.match(pix_fmt) else ""
        return SourceFormat(layout("444", bits), rgb=True,
                            note=f"RGB source ({pix_fmt}) converted to YUV 4:4:4 at {bits} bits (BT.709, limited "
                                 f"range) so that SRCNN works on luma{alpha}")
    return SourceFormat(layout("420", 8), note=f"unusual pixel format {pix_fmt} converted to yuv420p")


def choose_encoder_format(pipe: PixelLayout, supported: tuple[str, ...],
                          encoder: str = "the encoder") -> tuple[str, str | None]:
    """The encoder pixel format closest to the pipe's that loses nothing (same or finer chroma,
    same or more bits), else the best lossy one (as many bits as the encoder takes, then the
    finest chroma), with a note saying what is lost."""
    if not supported or pipe.name in supported:
        return pipe.name, None
    candidates = []
    for name in supported:
        cand = LAYOUTS.get(name)
        if cand is None or cand.gray != pipe.gray:
            continue
        finer = cand.log2_chroma_w <= pipe.log2_chroma_w and cand.log2_chroma_h <= pipe.log2_chroma_h
        deeper = cand.bits >= pipe.bits
        alpha_ok = cand.alpha or not pipe.alpha
        lossless = finer and deeper and alpha_ok
        # rank: lossless first, then the smallest step up; lossy: keep bits, then chroma
        # bits: the smallest step up, else the smallest step down (12-bit into 10, not 8)
        cost = (0 if lossless else 1, 0 if alpha_ok else 1,
                cand.bits - pipe.bits if deeper else 100 + pipe.bits - cand.bits,
                (pipe.log2_chroma_w - cand.log2_chroma_w) + (pipe.log2_chroma_h - cand.log2_chroma_h)
                if finer else 100, cand.alpha != pipe.alpha)
        candidates.append((cost, name, lossless))
    if not candidates:
        # e.g. a gray source and an encoder without gray: let ffmpeg convert to its first format
        return supported[0], f"{pipe.name} encoded as {supported[0]} (the encoder has no {pipe.family} format)"
    cost, name, lossless = min(candidates)
    if lossless:
        return name, f"{pipe.name} stored as {name}, the encoder's nearest format (nothing lost)"
    bits = LAYOUTS[name].bits
    depth = f" ({pipe.bits} bits reduced to {bits})" if bits < pipe.bits else ""
    return name, f"{pipe.name} encoded as {name}{depth}: {encoder} cannot store {pipe.name}"
