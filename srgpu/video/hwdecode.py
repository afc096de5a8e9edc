"""Decoding the source on the GPU's NVDEC engines (``--hwdec``), only where it gives exactly the
software decoder's frames.

On the H100 machine, decoding the 1080p H.264 bench clip costs ffmpeg's software decoder 11 ms of
CPU per frame, and h264_cuvid 3.3 ms: CPU the encoder can use. ffmpeg's ``*_cuvid`` decoders
decode on NVDEC and hand the frames back in host memory, in the same pipe format, so the rest of
the pipeline is unchanged. But they take ffmpeg about 0.6 s longer to start (a CUDA context),
which a short clip never earns back (BENCHMARKS.md). So "auto" starts both: the software decoder
gives the first frames and NVDEC takes over once it has caught up and given frames identical to
the software decoder's (srgpu.video.handover). "nvdec" insists: it checks the first frames
decoded both ways before anything else runs, and fails if they differ.

These codecs are specified bit-exactly, but a hardware decoder can still differ in practice
(cropping, a profile or bit depth NVDEC lacks, a driver without libnvcuvid), so a source goes to
NVDEC only after frames decoded both ways came out identical in every sample and timestamp;
otherwise the software decoder, which is always right, decodes it. The per-frame
duration is not compared: NVDEC (ffmpeg 9's *_cuvid) reports 0 for every frame, and an encoder
left to guess the durations can end an MP4 edit list before the last frame (seen on the H100: 279
of 280 frames shown), so NVDEC's frames take the container's own durations, read from the
source's packets (srgpu.video.verify.SourceTiming), as the software decoder reports them. One
more difference: the software decoder
logs damaged data, and srgpu then stops with an error, where NVDEC may conceal the damage and go
on; only a stream that ends early is still caught (the output's duration is checked).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from . import ffmpeg
from .errors import VideoError
from .options import HwDec
from .reader import decode_args

# the source codec (ffprobe's name) -> ffmpeg's NVDEC decoder
CUVID_DECODERS = {"h264": "h264_cuvid", "hevc": "hevc_cuvid", "av1": "av1_cuvid", "vp9": "vp9_cuvid",
                  "vp8": "vp8_cuvid", "mpeg2video": "mpeg2_cuvid", "mpeg4": "mpeg4_cuvid", "vc1": "vc1_cuvid"}
TRIAL_FRAMES = 12  # enough for a few groups of B-frames; decoding is deterministic, so a decoder
# that differs at all (cropping, range, depth) differs from the first frames on


@dataclass(frozen=True)
class DecoderChoice:
    """How the reader decodes: ``decoder`` for ffmpeg's -c:v (None: ffmpeg's own choice, in
    software) with ``options`` before -i; ``nvdec`` says which kind it is.
    ``takeover``: an NVDEC decoder and its options that may take over from ``decoder`` once it has
    proved exact (srgpu.video.handover)."""

    decoder: str | None = None
    options: tuple[str, ...] = ()
    nvdec: bool = False
    takeover: tuple[str, tuple[str, ...]] | None = None


@functools.lru_cache(maxsize=1)
def nvcuvid_loadable() -> bool:
    """Whether the driver's NVDEC library, which every *_cuvid decoder loads, can be loaded here."""
    import ctypes

    try:
        ctypes.CDLL("libnvcuvid.so.1")
    except OSError:
        return False
    return True


def nvdec_status() -> str:
    """One line for ``srgpu info``: which NVDEC decoders this ffmpeg has and whether the driver's
    libnvcuvid, which they load, can be loaded here."""
    have = [d for d in CUVID_DECODERS.values() if d in ffmpeg.video_codecs("decoders")]
    if not have:
        return "this ffmpeg has no NVDEC decoders (imageio-ffmpeg 0.8 or later has them)"
    lib = ("libnvcuvid found" if nvcuvid_loadable()
           else "libnvcuvid not found (no NVIDIA driver, or one without video decoding)")
    return f"{' '.join(sorted(have))}; {lib}"


def trial_args(src: Path, stream_index: int, pipe_pix_fmt: str, vf_extra: str | None,
               decoder: str | None, options: tuple[str, ...], frames: int = TRIAL_FRAMES) -> list[str]:
    """ffmpeg arguments that decode the first ``frames`` frames as the reader would and print each
    one's timestamp, duration, size and checksum (framemd5)."""
    return ["-hide_banner", "-nostdin", "-loglevel", "error",
            *decode_args(src, stream_index, decoder, options, vf_extra),
            "-frames:v", str(frames), "-f", "framemd5", "-pix_fmt", pipe_pix_fmt, "-"]


def _frames(proc_stdout: str) -> list[tuple[str, ...]]:
    """framemd5 lines "stream, dts, pts, duration, size, hash" -> (pts, size, hash) per frame."""
    out = []
    for ln in proc_stdout.splitlines():
        if ln.strip() and not ln.startswith("#"):
            f = [x.strip() for x in ln.split(",")]
            out.append((f[2], f[4], f[5]) if len(f) >= 6 else tuple(f))
    return out


def decodes_like_software(src: Path, stream_index: int, pipe_pix_fmt: str, vf_extra: str | None,
                          decoder: str, options: tuple[str, ...] = (),
                          frames: int = TRIAL_FRAMES) -> tuple[bool | None, str]:
    """Decode the first ``frames`` frames with ``decoder`` (and ``options``) and with ffmpeg's
    default software decoder: (True, "") if every frame's samples and timestamp came out identical,
    (False, what differs), or (None, why) if ``decoder`` could not decode them cleanly: any error
    it logs counts, as the reader fails on any. If the software decoder fails, the source itself
    is at fault: (None, "") then, and the reader reports the source's own error."""
    try:
        hw = ffmpeg.run(trial_args(src, stream_index, pipe_pix_fmt, vf_extra, decoder, options, frames))
    except VideoError as e:  # it hung: ffmpeg.run gave up on it
        return None, f"{decoder} failed: {e}"
    hw_frames = _frames(hw.stdout)
    if hw.returncode != 0 or not hw_frames or hw.stderr.strip():
        # the first line says why (e.g. "Cannot load libnvcuvid.so.1"); the last ones only that
        # the output could not be opened
        first = (hw.stderr.strip().splitlines() or ["no frames"])[0]
        return None, f"{decoder} failed: " + " ".join(re.sub(r" @ 0x[0-9a-f]+\]", "]", first).split())
    sw = ffmpeg.run(trial_args(src, stream_index, pipe_pix_fmt, vf_extra, None, (), frames))
    if sw.returncode != 0 or sw.stderr.strip():
        return None, ""
    sw_frames = _frames(sw.stdout)
    if hw_frames == sw_frames:
        return True, ""
    if len(hw_frames) != len(sw_frames):
        return False, f"{decoder} gives {len(hw_frames)} of the first {len(sw_frames)} frames"
    first = next(i for i, (a, b) in enumerate(zip(hw_frames, sw_frames)) if a != b)
    if hw_frames[first][1:] == sw_frames[first][1:]:
        return False, f"{decoder} gives frame {first} a different timestamp from the software decoder's"
    return False, f"{decoder} decodes frame {first} differently from the software decoder"


def decide(mode: HwDec, strict: bool, gpu: int | None) -> HwDec:
    """The hwdec mode that applies to a video whose frames go to an engine on CUDA device ``gpu``
    (None: a CPU engine), from the options (``mode`` was checked where they were made,
    srgpu.video.options.VideoOptions): the one place this is decided. "auto" uses NVDEC only
    with a GPU engine (a CPU engine keeps the GPU out of it); ``strict`` decodes on the CPU, as
    NVDEC conceals damaged data without saying so ("nvdec" with it: a VideoError). What the source
    itself asks (bwdif, an alpha decoder) is decided once the source is read, by plan_video."""
    if strict and mode == "nvdec":
        raise VideoError("strict mode decodes on the CPU: NVDEC conceals damaged data without saying so "
                         "(use --hwdec auto or no)")
    if strict or (mode == "auto" and gpu is None):
        return "no"
    return mode


def choose_decoder(src: Path, stream_index: int, codec: str | None, mode: HwDec, gpu: int,
                   pipe_pix_fmt: str, vf_extra: str | None,
                   software: str | None = None) -> DecoderChoice:
    """The decoder for stream ``stream_index`` of ``src``. ``mode``: "no" (software), "nvdec"
    (NVDEC, checked on the first frames now, or a VideoError saying why not) or "auto" (software,
    with NVDEC to take over where it can run: ``takeover``, checked while the video decodes).
    ``software``: a software decoder the stream needs (e.g. libvpx for VP8/VP9 with alpha, which
    NVDEC would drop); ``gpu``: the CUDA device for NVDEC. ``mode`` was checked where the options
    were made (srgpu.video.options.VideoOptions)."""
    plain = DecoderChoice(software)
    if mode == "no":
        return plain
    strict = mode == "nvdec"

    def refuse(why: str) -> DecoderChoice:
        if strict:
            raise VideoError(f"{src}: cannot decode on NVDEC: {why}")
        return plain

    if software is not None:
        return refuse(f"the stream needs the {software} decoder (for its alpha channel)")
    cuvid = CUVID_DECODERS.get(codec or "")
    if cuvid is None:
        return refuse(f"NVDEC has no decoder for {codec or 'this codec'}")
    if cuvid not in ffmpeg.video_codecs("decoders"):
        return refuse(f"this ffmpeg has no {cuvid} decoder (imageio-ffmpeg 0.8 or later has it)")
    options = (f"-gpu:{stream_index}", str(gpu))
    if not strict:
        return DecoderChoice(software, takeover=(cuvid, options)) if nvcuvid_loadable() else plain
    same, why = decodes_like_software(src, stream_index, pipe_pix_fmt, vf_extra, cuvid, options)
    if same is None and not why:
        return plain  # the source is at fault, and the reader says so
    if not same:
        raise VideoError(f"{src}: cannot decode on NVDEC: {why}")
    return DecoderChoice(cuvid, options, nvdec=True)
