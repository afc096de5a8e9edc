"""Output containers: which muxer an extension means, which codecs each can hold, and what
happens to every source stream (copied, converted, or left out), each decision with its reason.

The tables are deliberately conservative: they list what the ffmpeg builds imageio-ffmpeg ships
(7.0 and 9.0) accept, checked by muxing each pair; a codec outside a table is still tried where
the container is permissive (Matroska), so a new codec is not refused for lack of an entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import VideoError
from .probe import StreamInfo

TEXT_SUBTITLES = frozenset({"mov_text", "subrip", "srt", "ass", "ssa", "webvtt", "text", "microdvd", "sami",
                            "realtext", "subviewer", "subviewer1", "jacosub", "mpl2", "pjs", "stl", "vplayer"})


@dataclass(frozen=True)
class Container:
    muxer: str
    video_codecs: frozenset[str] | None  # encoders whose output it holds; None: any
    audio_copy: frozenset[str] | None  # audio codecs it holds as they are; None: any
    audio_fallback: str  # the encoder for audio it cannot hold
    subtitle_copy: frozenset[str]
    text_subtitle_codec: str | None  # what text subtitles are converted to, None: dropped
    copies_video: frozenset[str] | None  # codecs of other video streams it holds as they are
    attachments: bool
    # the video encoder when none is named: the first of these that this ffmpeg has
    default_codecs: tuple[str, ...] = ("libx264", "libx265", "libsvtav1", "ffv1")
    # why ffmpeg cannot write cover art (an 'attached pic' stream) into it; None: kept as cover art
    cover_art_lost: str | None = None


_MP4_AUDIO = frozenset({"aac", "mp3", "mp2", "ac3", "eac3", "alac", "opus", "flac"})
_MOV_AUDIO = frozenset({"aac", "mp3", "mp2", "ac3", "eac3", "alac", "pcm_s16le", "pcm_s16be", "pcm_s24le",
                        "pcm_s24be", "pcm_s32le", "pcm_s32be", "pcm_f32le", "pcm_f32be", "pcm_u8"})
_MP4_VIDEO_COPY = frozenset({"h264", "hevc", "av1", "vp9", "mpeg4", "mjpeg", "png"})
# NVENC's bitstreams are the ones libx264, libx265 and libsvtav1 write (H.264, HEVC, AV1), so they
# go where those go: .mp4 and .mkv all three, .mov H.264 and HEVC, .webm AV1 (srgpu.video.nvenc)
_NVENC_MP4 = frozenset({"h264_nvenc", "hevc_nvenc", "av1_nvenc"})
_NVENC_MOV = frozenset({"h264_nvenc", "hevc_nvenc"})

CONTAINERS: dict[str, Container] = {
    ".mp4": Container("mp4", frozenset({"libx264", "libx265", "libsvtav1", "libaom-av1", "libvpx-vp9"}) | _NVENC_MP4,
                      _MP4_AUDIO, "aac", frozenset({"mov_text", "dvd_subtitle"}), "mov_text",
                      _MP4_VIDEO_COPY, False),
    ".mov": Container("mov", frozenset({"libx264", "libx265", "prores_ks", "prores_aw", "ffv1"}) | _NVENC_MOV,
                      _MOV_AUDIO, "aac", frozenset({"mov_text"}), "mov_text",
                      frozenset({"h264", "hevc", "prores", "mjpeg", "png", "ffv1", "mpeg4"}), False,
                      cover_art_lost="ffmpeg's mov muxer drops cover art"),  # (checked with ffmpeg 9.0)
    ".mkv": Container("matroska", None, None, "flac",
                      frozenset({"subrip", "ass", "ssa", "webvtt", "dvd_subtitle", "hdmv_pgs_subtitle",
                                 "dvb_subtitle", "text"}), "srt", None, True,
                      # Matroska's cover art is an attachment; given the stream, the muxer makes it an
                      # ordinary one-frame video track instead (checked with ffmpeg 9.0, even from a .mkv)
                      cover_art_lost="ffmpeg's Matroska muxer would make it an ordinary video track"),
    # VP9 first: it keeps what a WebM source can hold (alpha, 4:4:4, 10/12 bits) where SVT-AV1
    # takes 4:2:0 only, and every player of WebM plays it
    ".webm": Container("webm", frozenset({"libsvtav1", "libvpx-vp9", "libvpx", "libaom-av1", "av1_nvenc"}),
                       frozenset({"opus", "vorbis"}), "libopus", frozenset({"webvtt"}), "webvtt",
                       frozenset({"vp8", "vp9", "av1"}), False,
                       default_codecs=("libvpx-vp9", "libsvtav1", "libaom-av1"),
                       cover_art_lost="a .webm file cannot hold cover art"),
}
CONTAINERS[".m4v"] = CONTAINERS[".mp4"]  # the mp4 muxer (ffmpeg's guess for .m4v, 'ipod', holds less)
CONTAINERS[".mka"] = CONTAINERS[".mkv"]


def container_for(suffix: str) -> Container:
    c = CONTAINERS.get(suffix.lower())
    if c is None:
        raise VideoError(f"unsupported output container {suffix or '(no extension)'!r}: "
                         f"use one of {', '.join(sorted(k for k in CONTAINERS if k != '.mka'))}")
    return c


def default_video_codec(container: Container, suffix: str, available: frozenset[str]) -> str:
    """The encoder for a container when the user names none: its first default this ffmpeg has."""
    for codec in container.default_codecs:
        if codec in available:
            return codec
    raise VideoError(f"this ffmpeg has none of the encoders srgpu uses for a {suffix} file "
                     f"({', '.join(container.default_codecs)}): name one with --codec")


def check_video_codec(container: Container, suffix: str, codec: str) -> None:
    if container.video_codecs is not None and codec not in container.video_codecs:
        raise VideoError(f"a {suffix} file cannot hold {codec} video (it holds: "
                         f"{', '.join(sorted(container.video_codecs))}); choose another --codec or "
                         f"another output extension (.mkv holds them all)")


@dataclass(frozen=True)
class StreamPlan:
    """One source stream's fate in the output: "copy", an encoder (with options, e.g. a
    bitrate), or None when it is left out; and a note whenever it is not a plain copy."""

    stream: StreamInfo
    codec: str | None
    options: tuple[tuple[str, str], ...] = ()
    note: str | None = None


def plan_stream(container: Container, suffix: str, s: StreamInfo, chapters: bool = False) -> StreamPlan:
    """What happens to a source stream that is not the upscaled one. ``chapters``: the source
    has chapters (they are mapped on their own, and every container here keeps them)."""
    name = f"stream #{s.index} ({s.kind} {s.codec})"
    if s.kind == "audio":
        if container.audio_copy is None or s.codec in container.audio_copy:
            return StreamPlan(s, "copy")
        encoder = container.audio_fallback
        options = () if encoder == "flac" else (("-b", "192k"),)
        return StreamPlan(s, encoder, options, f"{name} re-encoded to {encoder}: a {suffix} file "
                                               f"cannot hold {s.codec}")
    if s.kind == "subtitle":
        if s.codec in container.subtitle_copy:
            return StreamPlan(s, "copy")
        if s.codec in TEXT_SUBTITLES and container.text_subtitle_codec:
            return StreamPlan(s, container.text_subtitle_codec, (),
                              f"{name} converted to {container.text_subtitle_codec}: a {suffix} file "
                              f"cannot hold {s.codec}")
        return StreamPlan(s, None, (), f"{name} left out: a {suffix} file cannot hold it")
    if s.kind == "video" and s.attached_pic:
        return _plan_cover_art(container, suffix, s, name)
    if s.kind == "video":  # a second video stream: copied unchanged
        if container.copies_video is None or s.codec in container.copies_video:
            return StreamPlan(s, "copy", (), f"{name} copied unchanged (second video stream: srgpu "
                                             "upscales one video stream)")
        return StreamPlan(s, None, (), f"{name} left out: a {suffix} file cannot hold it")
    if s.kind == "attachment":
        if container.attachments:
            return StreamPlan(s, "copy")
        return StreamPlan(s, None, (), f"{name} left out: a {suffix} file cannot hold attachments")
    if chapters and s.chapter_text:
        # the chapters' own track: the muxer writes it again from the chapters (MP4, MOV), or
        # holds the chapters as chapters (Matroska, WebM), so nothing is lost
        return StreamPlan(s, None)
    return StreamPlan(s, None, (), f"{name} left out ({s.kind} streams are not copied)")


def _plan_cover_art(container: Container, suffix: str, s: StreamInfo, name: str) -> StreamPlan:
    """Cover art is copied only where it stays cover art, never as an ordinary video track."""
    if container.cover_art_lost:
        return StreamPlan(s, None, (), f"{name}, the cover art, left out: {container.cover_art_lost}")
    if container.copies_video is None or s.codec in container.copies_video:
        return StreamPlan(s, "copy")
    return StreamPlan(s, None, (), f"{name}, the cover art, left out: a {suffix} file cannot hold {s.codec}")
