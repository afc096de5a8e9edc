"""Transport streams whose timestamps jump (a spliced recording, a PCR reset): what srgpu does.

srgpu keeps the source's timestamps (-copyts), so a jump would reach the output as it is: after a
backwards jump the frames would be moved one tick apart (90 kHz ticks, which collapse into one
Matroska millisecond) and a forward jump of the clock would become a frozen gap of any length.
For an MPEG-TS or MPEG-PS source, ffmpeg's demuxer looks for such jumps (backwards by more than
0.1 s, forwards by more than 10 s: its dts_delta_threshold) in one demux pass; where it finds
any, the source is first remuxed (every stream, no re-encoding) into a temporary transport
stream with ffmpeg's own correction, which moves each stretch after a jump to follow the one
before at the stream's pace, every stream by the same amount (audio stays in sync), and that
copy is upscaled. The result says so in a note. Shorter forward gaps are kept: they may be real
time (a signal lost for a second).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .. import outputs
from . import ffmpeg
from .errors import VideoError
from .probe import MediaInfo

FORMATS = frozenset({"mpegts", "mpeg"})  # demuxers whose clock may jump (AVFMT_TS_DISCONT)
_JUMP = re.compile(r"timestamp discontinuity \(stream id=\d+\): (-?\d+), new offset= (-?\d+)")


@dataclass(frozen=True)
class Jumps:
    """The jumps of a source's clock, in seconds (negative: backwards), in file order."""

    seconds: tuple[float, ...]

    def note(self) -> str:
        back = [s for s in self.seconds if s < 0]
        ahead = [s for s in self.seconds if s > 0]
        said = ([f"{len(back)} backwards (by {', '.join(f'{-s:.3f}' for s in back[:3])} s)"] if back else []) + (
            [f"{len(ahead)} forwards (by {', '.join(f'{s:.3f}' for s in ahead[:3])} s)"] if ahead else [])
        return (f"the source's timestamps jump {' and '.join(said)}: each stretch after a jump was moved to follow "
                "the one before at the stream's pace, every stream alike (as ffmpeg does without -copyts)")


def find(src: Path, info: MediaInfo) -> Jumps | None:
    """The jumps ffmpeg's demuxer corrects in ``src`` (one demux pass, MPEG-TS/PS only), None
    where there are none."""
    if not set(info.format_names) & FORMATS:
        return None
    proc = ffmpeg.run(["-hide_banner", "-nostdin", "-loglevel", "level+warning", "-i", ffmpeg.file_arg(src), "-map", "0",
                       "-c", "copy", "-f", "null", "-"], timeout=3600)
    jumps = tuple(int(m.group(1)) / 1_000_000 for m in _JUMP.finditer(proc.stderr))
    return Jumps(jumps) if jumps else None


def continuous_copy(src: Path, dst: Path, jumps: Jumps) -> Path:
    """``src`` remuxed with ffmpeg's correction of its jumps into a temporary beside ``dst`` (a
    transport stream under srgpu's temporary name, removed by the caller, or as a stale one)."""
    tmp = outputs.temp_path(dst)
    proc = ffmpeg.run(["-hide_banner", "-nostdin", "-loglevel", "error", "-i", ffmpeg.file_arg(src), "-map", "0", "-c", "copy",
                       "-f", "mpegts", "-y", str(tmp)], timeout=3600)
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise VideoError(f"{src}: its timestamps jump ({len(jumps.seconds)} times) and making them continuous "
                         f"failed: {lines[-1] if lines else ffmpeg.describe_exit(proc.returncode)}")
    return tmp
