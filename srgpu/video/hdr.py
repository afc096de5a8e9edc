"""HDR static metadata (mastering display colour volume, content light level) of a source, so the
upscaled video carries it too.

The frames reach the encoder as raw pixels through a pipe, which would drop it. So it is read
once from the source's first decoded frame (ffmpeg's showinfo prints the frame side data, which
covers metadata from the bitstream, HEVC SEI or AV1 OBUs, and from the container alike) and
written into the pipe's Matroska Colour element; ffmpeg then hands it to the encoder and the
output muxer as it would in a plain transcode. Per-frame dynamic metadata (HDR10+, Dolby Vision)
is not carried; plan_video says so when a source has it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from . import ffmpeg

HDR_TRANSFERS = ("smpte2084", "arib-std-b67")  # PQ and HLG: the sources worth the extra look
_NUM = r"(-?[\d.]+)"
_PAIR = rf"\(\s*{_NUM}\s*[, ]\s*{_NUM}\s*\)"  # showinfo prints 'r(0.6800,0.3200)' and 'b(0.1500 0.0600)'
_MASTERING = re.compile(rf"has_primaries:(\d) has_luminance:(\d) r{_PAIR} g{_PAIR} b{_PAIR} wp{_PAIR}"
                        rf" min_luminance={_NUM}, max_luminance={_NUM}")
_LIGHT = re.compile(r"MaxCLL=(\d+), MaxFALL=(\d+)")
_DYNAMIC = ("HDR10+", "SMPTE2094", "Dolby Vision", "DOVI")


@dataclass(frozen=True)
class MasteringDisplay:
    """CIE 1931 xy chromaticities of the mastering display's primaries (red, green, blue) and white
    point, and its luminance range in cd/m²; None where the source does not give them."""

    primaries: tuple[tuple[float, float], tuple[float, float], tuple[float, float]] | None
    white_point: tuple[float, float] | None
    min_luminance: float | None
    max_luminance: float | None


@dataclass(frozen=True)
class HdrMetadata:
    mastering: MasteringDisplay | None = None
    max_cll: int | None = None  # maximum content light level, cd/m²
    max_fall: int | None = None  # maximum frame-average light level, cd/m²
    dynamic: bool = False  # the source also has per-frame metadata, which is not carried

    @property
    def static(self) -> bool:
        return self.mastering is not None or self.max_cll is not None


def parse_side_data(lines: Iterable[str]) -> HdrMetadata | None:
    """HdrMetadata from showinfo's 'side data - ...' lines of one frame; None if there is none."""
    mastering = None
    cll = fall = None
    dynamic = False
    for line in lines:
        if "side data - " not in line:
            continue
        text = line.split("side data - ", 1)[1]
        if text.lower().startswith("mastering display metadata") and (m := _MASTERING.search(text)):
            has_primaries, has_luminance = m.group(1) == "1", m.group(2) == "1"
            v = [float(x) for x in m.groups()[2:]]
            mastering = MasteringDisplay(
                primaries=((v[0], v[1]), (v[2], v[3]), (v[4], v[5])) if has_primaries else None,
                white_point=(v[6], v[7]) if has_primaries else None,
                min_luminance=v[8] if has_luminance else None, max_luminance=v[9] if has_luminance else None)
        elif text.lower().startswith("content light level metadata") and (m := _LIGHT.search(text)):
            cll, fall = int(m.group(1)), int(m.group(2))
        elif any(k.lower() in text.lower() for k in _DYNAMIC):
            dynamic = True
    if mastering is None and cll is None and not dynamic:
        return None
    return HdrMetadata(mastering, cll, fall, dynamic)


def first_frame_hdr(src: Path, stream_index: int, decoder: str | None = None) -> HdrMetadata | None:
    """Decode the first frame of stream ``stream_index`` and read its HDR side data (None if it
    has none). Costs one frame's decoding."""
    args = ["-hide_banner", "-nostdin", "-loglevel", "info", *ffmpeg.decoder_args(stream_index, decoder),
            "-i", ffmpeg.file_arg(src), "-map", f"0:{stream_index}", "-frames:v", "1", "-vf", "showinfo=checksum=0",
            "-f", "null", "-"]
    proc = ffmpeg.run(args)
    if proc.returncode != 0:
        return None  # the reader will report the decoding failure itself, in its own words
    return parse_side_data(proc.stderr.splitlines())
