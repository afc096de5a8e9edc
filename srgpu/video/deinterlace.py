"""Interlaced sources (``--deinterlace``): deinterlaced by ffmpeg's ``bwdif`` in the software
decoder's filter graph, before the frames reach the engine, so that SRCNN upscales whole pictures
instead of two fields woven together (which it would turn into wider combing).

- "auto" (default): a source whose video stream is flagged interlaced (ffmpeg's field order: top
  first, bottom first, or either coded the other way round) is deinterlaced one frame per frame
  (``bwdif=mode=send_frame``), only its frames the decoder flags interlaced (``deint=interlaced``:
  a progressive stretch of a mixed stream passes untouched); any other source is not touched.
- "frame": every source, flagged or not, one frame per frame (``deint=all``).
- "field": every source, one frame per field (``send_field``): twice the frames, at twice the
  rate; every field becomes a frame, progressive ones included (``deint=all``), so that the count
  is exactly twice the source's.
- "no": the fields are upscaled woven together as progressive frames, with a note.

The field order comes from each frame's flags (``parity=auto``) where the stream is flagged;
a source not flagged interlaced that is deinterlaced because it was asked for is taken as top
field first (said in the note). bwdif gives its output half the source's time base, and in
field mode timestamps and durations of the fields: the reader takes the timing from showinfo
after bwdif (srgpu.video.reader), so the encoder's clock, the frame rate it is told and the check
of the output's frames all follow the filter's output, not the source's packets.

Deinterlacing runs on the CPU decoder: a video that is deinterlaced is not decoded by NVDEC
(hwdec "auto" decodes it in software; "nvdec" is refused), and is not cut into chunks: bwdif
looks at the frame before and after each one, so a chunk's first frame would differ from the
single pipeline's (checked: it does).
"""

from __future__ import annotations

from dataclasses import dataclass

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


def choose(stream: StreamInfo, mode: str) -> tuple[Deinterlacing | None, str | None]:
    """(how the stream is deinterlaced, or None; a note where there is something to say)."""
    flagged = flagged_interlaced(stream)
    if mode == "no" or (mode == "auto" and not flagged):
        note = (f"interlaced source ({stream.field_order}) upscaled frame by frame as progressive video "
                "(--deinterlace auto deinterlaces it)") if flagged else None
        return None, note
    how = "frame" if mode == "auto" else mode
    bwdif = ("bwdif=mode=" + ("send_field" if how == "field" else "send_frame")
             + (":parity=auto:deint=interlaced" if mode == "auto" else
                ":parity=auto:deint=all" if flagged else ":parity=tff:deint=all"))
    rate = f"one frame per field ({stream.fps * 2:g} fps)" if how == "field" and stream.fps else \
        "one frame per field (twice the frame rate)" if how == "field" else "one frame per frame"
    if flagged:
        note = f"interlaced source ({stream.field_order}) deinterlaced by bwdif before the upscale: {rate}"
    else:
        note = (f"source not flagged interlaced ({stream.field_order or 'no field order'}) deinterlaced by "
                f"bwdif as asked (top field first assumed): {rate}")
    return Deinterlacing(how, bwdif, note), note
