"""What a media file holds, read from ``ffmpeg -hide_banner -i FILE`` (imageio-ffmpeg ships no
ffprobe). Only what srgpu needs is parsed, leniently: the line layout differs a little between
ffmpeg versions (indentation, 'Display Matrix' vs 'displaymatrix'), the fields do not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from . import ffmpeg
from .errors import VideoError

_INPUT = re.compile(r"^Input #0, (.+?), from ")
_DURATION = re.compile(r"^\s*Duration: (?:(\d+):(\d+):(\d+(?:\.\d+)?)|N/A)(?:, start: (-?\d+(?:\.\d+)?))?")
_STREAM = re.compile(r"^\s*Stream #0:(\d+)(?:\[[^\]]*\])?(?:\(([^)]*)\))?: (\w+): (.*)$")
_CHAPTER = re.compile(r"^\s*Chapter #0:\d+")
_DISPOSITION = re.compile(r"\s*\(([a-z][a-z ]*)\)$")
_DISPOSITIONS = {"default", "dub", "original", "comment", "lyrics", "karaoke", "forced", "hearing impaired",
                 "visual impaired", "clean effects", "attached pic", "timed thumbnails", "non-diegetic",
                 "captions", "descriptions", "metadata", "dependent", "still image", "multilayer"}
_CODEC_TAG = re.compile(r"\((\S{1,4}) / 0x[0-9A-Fa-f]{8}\)")
_ROTATION = re.compile(r"rotation of (-?\d+(?:\.\d+)?) degrees", re.I)
_KEY_VALUE = re.compile(r"^\s+(\S[^:]*?)\s*: (.*)$")
_FIELD_ORDERS = ("progressive", "top first", "bottom first", "top coded first (swapped)",
                 "bottom coded first (swapped)")


@dataclass(frozen=True)
class StreamInfo:
    index: int
    kind: str  # video, audio, subtitle, data, attachment
    codec: str
    language: str | None = None
    codec_tag: str | None = None  # the container's fourcc, where ffmpeg shows one ("text" in "(text / 0x74786574)")
    dispositions: tuple[str, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()
    # video
    pix_fmt: str | None = None
    width: int | None = None
    height: int | None = None
    sar: tuple[int, int] | None = None
    fps: float | None = None
    color_range: str | None = None  # tv / pc
    color_space: str | None = None
    color_primaries: str | None = None
    color_trc: str | None = None
    field_order: str | None = None
    rotation: float = 0.0  # as ffmpeg reports the display matrix ("rotation of -180.00 degrees")
    # audio
    sample_rate: int | None = None
    channels: str | None = None

    @property
    def attached_pic(self) -> bool:
        return "attached pic" in self.dispositions

    @property
    def chapter_text(self) -> bool:
        """An MP4/QuickTime chapter track as the mov demuxer shows it (a data stream of 'text'
        samples): the chapters' titles again, which a muxer writes anew from the chapters."""
        return self.kind == "data" and self.codec == "bin_data" and self.codec_tag == "text"

    def meta(self, key: str) -> str | None:
        return next((v for k, v in self.metadata if k.lower() == key.lower()), None)


@dataclass(frozen=True)
class MediaInfo:
    path: Path
    format_names: tuple[str, ...]
    duration: float | None
    start: float | None
    streams: tuple[StreamInfo, ...]
    chapters: int = 0
    metadata: tuple[tuple[str, str], ...] = ()  # the file's own tags (title, com.apple.quicktime.make, ...)

    @property
    def video_streams(self) -> tuple[StreamInfo, ...]:
        """Real video streams (cover art 'attached pic' streams excluded)."""
        return tuple(s for s in self.streams if s.kind == "video" and not s.attached_pic)

    def main_video(self) -> StreamInfo:
        """The stream srgpu upscales: the first video stream marked default, else the first one."""
        videos = self.video_streams
        if not videos:
            held = ", ".join(f"{s.kind} {s.codec}" for s in self.streams)
            raise VideoError(f"{self.path}: not a video: no video stream "
                             f"({'it holds ' + held if held else 'it holds no streams'})")
        return next((s for s in videos if "default" in s.dispositions), videos[0])

    def estimated_frames(self, stream: StreamInfo) -> int | None:
        if self.duration and stream.fps:
            return max(1, round(self.duration * stream.fps))
        return None


def probe(path: Path) -> MediaInfo:
    """Probe ``path``; VideoError when ffmpeg cannot open it as media."""
    proc = ffmpeg.run(["-hide_banner", "-nostdin", "-i", ffmpeg.file_arg(path)])
    if proc.returncode < 0:  # e.g. the static ffmpeg 7.0.2 of imageio-ffmpeg 0.6.0 on any MPEG-TS file
        raise VideoError(f"{path}: ffmpeg {ffmpeg.describe_exit(proc.returncode)} while reading it: this "
                         f"ffmpeg build ({ffmpeg.ffmpeg_exe()}) cannot read this file")
    info = parse(proc.stderr, path)
    if info is None:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        reason = next((ln.split(": ", 1)[-1] for ln in lines if "Error opening input:" in ln), None)
        reason = reason or (lines[-1] if lines else "ffmpeg printed nothing")
        raise VideoError(f"{path}: not a readable video file ({reason})")
    return info


def container_duration(path: Path) -> float | None:
    """The duration the container's header gives (all streams), read without probing the streams
    (-probesize 32: ~15 ms instead of ~110 ms for a 4K output, where probing decodes frames);
    None if the header has none or ffmpeg cannot open the file."""
    proc = ffmpeg.run(["-hide_banner", "-nostdin", "-probesize", "32", "-analyzeduration", "0", "-i", ffmpeg.file_arg(path)])
    for line in proc.stderr.splitlines():
        m = _DURATION.match(line)
        if m and m.group(1) is not None:
            return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    return None


def parse(text: str, path: Path) -> MediaInfo | None:
    """Parse ffmpeg's input dump; None when it holds no 'Input #0' (ffmpeg could not open it)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if _INPUT.match(ln)), None)
    if start is None:
        return None
    formats = tuple(_INPUT.match(lines[start]).group(1).split(","))  # type: ignore[union-attr]
    if not lines[start].endswith("':"):  # a file name with a newline in it: the dump starts after it
        start = next((i for i in range(start + 1, len(lines)) if lines[i].endswith("':")), start)
    duration = begin = None
    tags: list[tuple[str, str]] = []  # the file's own metadata (before its Duration line)
    chapters = 0
    streams: list[dict] = []
    block = None  # which "Metadata:" / "Side data:" block the indented lines belong to
    for line in lines[start + 1:]:
        if not line.startswith(" "):
            break  # the dump is over (Stream mapping, errors, "At least one output file ...")
        stripped = line.strip()
        m = _DURATION.match(line)
        if m:
            if m.group(1) is not None:
                duration = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
            begin = float(m.group(4)) if m.group(4) else None
            block = None
            continue
        m = _STREAM.match(line)
        if m:
            streams.append(_parse_stream(m))
            block = None
            continue
        if _CHAPTER.match(line):
            chapters += 1
            block = "chapter"
            continue
        if stripped in ("Metadata:", "Side data:"):
            block = stripped
            continue
        if not streams:
            kv = _KEY_VALUE.match(line)
            if kv and block == "Metadata:" and duration is None and begin is None:
                tags.append((kv.group(1), kv.group(2).strip()))
            continue
        rot = _ROTATION.search(stripped)
        if rot and block == "Side data:":
            streams[-1]["rotation"] = float(rot.group(1))
            continue
        kv = _KEY_VALUE.match(line)
        if kv and block == "Metadata:":
            streams[-1].setdefault("metadata", []).append((kv.group(1), kv.group(2).strip()))
    if duration is not None and begin is not None and begin > 0 and {"matroska", "webm"} & set(formats):
        # Matroska's Duration runs from 0, where the others' span their streams: a file whose first
        # timestamp is 5 s and whose streams last 3 s says 8 s; srgpu's outputs start at 0
        duration = max(0.0, duration - begin)
    return MediaInfo(path=path, format_names=formats, duration=duration, start=begin, metadata=tuple(tags),
                     streams=tuple(StreamInfo(**{k: tuple(v) if k == "metadata" else v for k, v in s.items()})
                                   for s in streams), chapters=chapters)


def split_fields(text: str) -> list[str]:
    """Split on commas that are not inside parentheses or brackets."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur).strip())
    return out


def _parse_stream(m: re.Match) -> dict:
    index, language, kind, rest = int(m.group(1)), m.group(2), m.group(3).lower(), m.group(4)
    dispositions: list[str] = []
    while True:
        d = _DISPOSITION.search(rest)
        if not d or d.group(1) not in _DISPOSITIONS:
            break
        dispositions.insert(0, d.group(1))
        rest = rest[:d.start()]
    fields = split_fields(rest)
    s: dict = {"index": index, "kind": kind, "codec": fields[0].split()[0] if fields and fields[0] else "none",
               "language": language if language and language != "und" else None,
               "dispositions": tuple(dispositions)}
    tag = _CODEC_TAG.search(fields[0]) if fields else None
    if tag:
        s["codec_tag"] = tag.group(1)
    if kind == "video":
        _parse_video(fields[1:], s)
    elif kind == "audio":
        for f in fields[1:]:
            hz = re.fullmatch(r"(\d+) Hz", f)
            if hz:
                s["sample_rate"] = int(hz.group(1))
            elif s.get("sample_rate") and "channels" not in s:
                s["channels"] = f
    return s


def _parse_video(fields: list[str], s: dict) -> None:
    for i, f in enumerate(fields):
        size = re.match(r"^(\d+)x(\d+)", f)
        if size and "width" not in s:
            s["width"], s["height"] = int(size.group(1)), int(size.group(2))
        sar = re.search(r"SAR (\d+):(\d+)", f)
        if sar and int(sar.group(1)) > 0 and int(sar.group(2)) > 0:
            s["sar"] = (int(sar.group(1)), int(sar.group(2)))
        fps = re.fullmatch(r"(\d+(?:\.\d+)?)(k?) fps", f)
        if fps:
            s["fps"] = float(fps.group(1)) * (1000 if fps.group(2) else 1)
        if i == 0 and not size:
            pf = re.match(r"^([a-z0-9_]+)(?:\((.*)\))?$", f)
            if pf:
                s["pix_fmt"] = pf.group(1)
                _parse_colour(pf.group(2) or "", s)


def _parse_colour(inner: str, s: dict) -> None:
    """'tv, bt709, progressive' or 'pc, bt470bg/bt709/bt709' -> range, space, primaries, trc."""
    for item in (x.strip() for x in inner.split(",")):
        if item in ("tv", "pc"):
            s["color_range"] = item
        elif item in _FIELD_ORDERS:
            s["field_order"] = item
        elif item.count("/") == 2:
            s["color_space"], s["color_primaries"], s["color_trc"] = item.split("/")
        elif re.fullmatch(r"[a-z0-9\-]+", item) and not item.endswith("bpc") and "color_space" not in s:
            # one name: space, primaries and transfer are all the same
            if item in ("bt709", "bt470bg", "smpte170m", "smpte240m", "unknown", "reserved"):
                s["color_space"] = s["color_primaries"] = s["color_trc"] = item
