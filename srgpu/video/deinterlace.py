"""Interlaced sources (``--deinterlace``): deinterlaced by ffmpeg's ``bwdif`` in the software
decoder's filter graph, before the frames reach the engine, so that SRCNN upscales whole pictures
instead of two fields woven together (which it would turn into wider combing).

- "auto" (default): a source whose video stream is flagged interlaced (ffmpeg's field order: top
  first, bottom first, or either coded the other way round; where the stream gives no field order
  at all, as DV or MPEG-4 in AVI, its first frame's flags as the decoder sets them: one frame
  decoded) is deinterlaced one frame per frame
  (``bwdif=mode=send_frame``), only its frames the decoder flags interlaced (``deint=interlaced``:
  a progressive stretch of a mixed stream passes untouched); any other source is not touched.
- "frame": every source, flagged or not, one frame per frame (``deint=all``).
- "field": every source, one frame per field (``send_field``): twice the frames, at twice the
  rate; every field becomes a frame, progressive ones included (``deint=all``), so that the count
  is exactly twice the source's.
- "no": the fields are upscaled woven together as progressive frames, with a note.

The field order comes from each frame's flags (``parity=auto``); a frame not flagged interlaced
that is deinterlaced because it was asked for is taken as top field first (bwdif's rule, said in
the note). bwdif gives its output half the source's time base, and in
field mode timestamps and durations of the fields: the reader takes the timing from showinfo
after bwdif (srgpu.video.reader), so the encoder's clock, the frame rate it is told and the check
of the output's frames all follow the filter's output, not the source's packets.

Deinterlacing runs on the CPU decoder: a video that is deinterlaced is not decoded by NVDEC
(hwdec "auto" decodes it in software; "nvdec" is refused), and is not cut into chunks: bwdif
looks at the frame before and after each one, so a chunk's first frame would differ from the
single pipeline's (checked: it does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import ffmpeg
from .probe import StreamInfo

# ffmpeg's words for an interlaced stream's field order (srgpu.video.probe._FIELD_ORDERS)
INTERLACED_ORDERS = frozenset({"top first", "bottom first", "top coded first (swapped)",
                               "bottom coded first (swapped)"})


@dataclass(frozen=True)
class Deinterlacing:
    """How a source is deinterlaced: ``mode`` "frame" or "field", the decoder's ``filter`` and the
    frames made of each source frame (``rate``: 1, or 2 for fields)."""

    mode: str
    filter: str
    note: str

    @property
    def rate(self) -> int:
        return 2 if self.mode == "field" else 1


def flagged_interlaced(stream: StreamInfo) -> bool:
    """Whether the stream says it is interlaced (its field order is one of the interlaced ones)."""
    return stream.field_order in INTERLACED_ORDERS


_FRAME_FLAG = re.compile(r"\bi:([PTB])\b")  # showinfo: progressive, top or bottom field first


def first_frame_order(src: Path, stream_index: int, decoder: str | None = None) -> str | None:
    """"top first" or "bottom first" where the stream's first frame, decoded, is flagged interlaced
    (for a stream whose header gives no field order); None otherwise, or where it cannot be decoded
    (the reader then says why)."""
    proc = ffmpeg.run(["-hide_banner", "-nostdin", "-loglevel", "info", *ffmpeg.decoder_args(stream_index, decoder),
                       "-i", ffmpeg.file_arg(src), "-map", f"0:{stream_index}", "-frames:v", "1", "-vf", "showinfo=checksum=0",
                       "-f", "null", "-"])
    m = _FRAME_FLAG.search(proc.stderr)
    return {"T": "top first", "B": "bottom first"}.get(m.group(1)) if m else None


def choose(stream: StreamInfo, mode: str,
           frame_order: Callable[[], str | None] = lambda: None) -> tuple[Deinterlacing | None, str | None]:
    """(how the stream is deinterlaced, or None; a note where there is something to say).
    ``frame_order``: the first frame's field order (first_frame_order), asked only in "auto" mode
    for a stream whose header gives none."""
    order = stream.field_order
    flagged = flagged_interlaced(stream)
    if not flagged and order is None and mode == "auto":
        found = frame_order()
        if found is not None:
            flagged, order = True, f"{found}, flagged on its frames"
    if mode == "no" or (mode == "auto" and not flagged):
        note = (f"interlaced source ({order}) upscaled frame by frame as progressive video "
                "(--deinterlace auto deinterlaces it)") if flagged else None
        return None, note
    how = "frame" if mode == "auto" else mode
    # parity from each frame's flags (a frame not flagged interlaced: top field first, bwdif's rule)
    bwdif = ("bwdif=mode=" + ("send_field" if how == "field" else "send_frame")
             + ":parity=auto:deint=" + ("interlaced" if mode == "auto" else "all"))
    rate = f"one frame per field ({stream.fps * 2:g} fps)" if how == "field" and stream.fps else \
        "one frame per field (twice the frame rate)" if how == "field" else "one frame per frame"
    if flagged:
        note = f"interlaced source ({order}) deinterlaced by bwdif before the upscale: {rate}"
    else:
        note = (f"source not flagged interlaced ({order or 'no field order'}) deinterlaced by bwdif as asked "
                f"(field order from its frames' flags, else top field first): {rate}")
    return Deinterlacing(how, bwdif, note), note
