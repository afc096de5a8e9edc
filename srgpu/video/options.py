"""How a video is upscaled, as configuration: the encoder's settings (:class:`EncodeOptions`) and
how the job runs (:class:`VideoOptions`). No ffmpeg here: images.py imports it in a build without
the rest of srgpu.video, and hwdec is checked once, where the options are made."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from .errors import VideoError

HwDec = Literal["auto", "nvdec", "no"]
HWDEC_MODES: tuple[str, ...] = get_args(HwDec)
Deinterlace = Literal["auto", "no", "field", "frame"]
DEINTERLACE_MODES: tuple[str, ...] = get_args(Deinterlace)


class UnknownHwdec(VideoError):
    """An hwdec mode that is not one of HWDEC_MODES (the CLI words it as a --hwdec usage error)."""

    def __init__(self, mode: object) -> None:
        super().__init__(f"unknown hwdec mode {mode!r}: use {', '.join(HWDEC_MODES)}")
        self.mode = mode


class UnknownDeinterlace(VideoError):
    """A deinterlace mode that is not one of DEINTERLACE_MODES (the CLI words it as a --deinterlace
    usage error)."""

    def __init__(self, mode: object) -> None:
        super().__init__(f"unknown deinterlace mode {mode!r}: use {', '.join(DEINTERLACE_MODES)}")
        self.mode = mode


class BadEncoderArg(VideoError):
    """An --encoder-arg srgpu refuses before anything runs (check_encoder_args)."""


# what the encoder's extra arguments may not say, and why: srgpu decides these itself (its own
# options set them, and its done line and --json report them) or keeps every stream of the source
_OWN_OPTIONS = {"-crf": "--crf", "-preset": "--preset", "-pix_fmt": "--pix-fmt", "-vcodec": "--codec"}
_STREAM_SELECTION = frozenset({"-map", "-an", "-vn", "-sn", "-dn"})
_NOT_VIDEO = ("a", "s", "d", "t")  # stream specifiers of audio, subtitle, data, attachment streams


def check_encoder_args(args: tuple[str, ...]) -> None:
    """Refuse, in one line, extra encoder arguments that would make srgpu's output other than it
    says: a word that is neither an option nor the value after one (ffmpeg takes it for one more
    output file, and writes it), the video codec (``-c:v``: --codec), CRF, preset or pixel format
    (their own options), and stream selection (srgpu keeps every stream of the source). What
    changes the frames or the picture's size is caught when the file is read back."""
    after_option = False
    for arg in args:
        if not arg.startswith("-") or arg == "-":
            if not after_option:
                raise BadEncoderArg(f"--encoder-arg {arg!r}: not an option or an option's value (ffmpeg would "
                                    "take it for another output file and write it)")
            after_option = False
            continue
        name, _, spec = arg.partition(":")
        if name in _OWN_OPTIONS:
            raise BadEncoderArg(f"--encoder-arg {arg}: srgpu sets it itself; use {_OWN_OPTIONS[name]}")
        if name in ("-c", "-codec") and not spec.startswith(_NOT_VIDEO):
            raise BadEncoderArg(f"--encoder-arg {arg}: srgpu sets the video codec itself; use --codec")
        if name in _STREAM_SELECTION:
            raise BadEncoderArg(f"--encoder-arg {arg}: srgpu keeps every stream of the source (leave streams out "
                                "of the source first, with ffmpeg -map)")
        after_option = True


@dataclass(frozen=True)
class EncodeOptions:
    """Encoder settings. ``codec`` None: follows the output container (libx264 for .mp4, .mov
    and .mkv; libvpx-vp9 for .webm, else libsvtav1 or libaom-av1, whichever this ffmpeg has);
    ``crf`` None: the codec's srgpu default (libx264 18, libx265 20, libsvtav1 30, libvpx-vp9 31);
    ``pix_fmt`` None: the source's own format where the encoder has it, else the nearest (as many
    bits as it takes); ``extra_args``: passed to ffmpeg as they are, after srgpu's own output
    options (check_encoder_args refuses what would make the output other than srgpu says). All
    of them are tried on a one-frame encode before any frame is decoded."""

    codec: str | None = None
    crf: int | None = None
    preset: str | None = None
    pix_fmt: str | None = None
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_encoder_args(tuple(self.extra_args))


@dataclass(frozen=True)
class VideoOptions:
    """How a video is upscaled: ``encode``, the encoder's settings; ``video_stream``, which video
    stream (0-based among the video streams, cover art excluded; None: the first marked default,
    else the first); ``hwdec``, whether NVDEC decodes the source: "auto" (with a GPU engine, the
    software decoder starts and NVDEC takes over once it has given the same frames; with a CPU
    engine, never), "nvdec" (from the first frame, or fail saying why) or "no"; ``strict``, damaged
    data that the decoder concealed fails the video (else a note names the frames);
    ``encoder_threads``, the x264 encoder's threads where several videos are encoded at once (a
    folder on several workers: srgpu.batch.pool.encoder_threads shares the cores out), None: its own
    choice. Like the machine's core count (x264's own default), they may change the encoded bits
    a little (frame threads), not what the video is: not a setting a resumed folder compares.
    ``deinterlace``: "auto" (a source whose stream is flagged interlaced is deinterlaced by ffmpeg's
    bwdif before the upscale, one frame per frame; any other is untouched), "frame" or "field"
    (every source is deinterlaced, flagged or not: one frame per frame, or one per field at twice
    the frame rate), "no" (the fields are upscaled woven together, as progressive frames, with a
    note); srgpu.video.deinterlace."""

    encode: EncodeOptions = field(default_factory=EncodeOptions)
    video_stream: int | None = None
    hwdec: HwDec = "auto"
    strict: bool = False
    encoder_threads: int | None = None
    deinterlace: Deinterlace = "auto"

    def __post_init__(self) -> None:
        if self.hwdec not in HWDEC_MODES:
            raise UnknownHwdec(self.hwdec)
        if self.deinterlace not in DEINTERLACE_MODES:
            raise UnknownDeinterlace(self.deinterlace)
