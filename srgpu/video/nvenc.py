"""NVENC, the hardware encoder of GeForce/RTX and most other NVIDIA cards: srgpu's settings in its
terms, the pixel formats it keeps, and its trial encode's failures in one line of srgpu's words.

Most people who upscale video own one such card and 8-16 cores: there x264 sets the pace (about
20 ms of a 16-core CPU per 4K frame against 0.38 ms of srgpu's kernels) while the card's encoder
sits idle. ffmpeg's h264_nvenc, hevc_nvenc and av1_nvenc (imageio-ffmpeg's ffmpeg has them) encode
on the GPU that upscaled the frames (``-gpu N``, the engine's CUDA device), so the CPU only decodes.

Mapping (README "Your own GPU"): ``--crf N`` is NVENC's constant quality, ``-rc vbr -cq N`` (the
same 0-51 scale as x264's CRF, 0-63 for AV1; 0 would mean "no target", so it is refused); ``--preset``
takes NVENC's p1 (fastest) to p7 (best), and x264's names mapped to the nearest. Everything here
is decided before any frame and tried on one frame of the output's size (:func:`check`).
"""

from __future__ import annotations

import re
from typing import Sequence

from . import ffmpeg
from .errors import VideoError
from .formats import PixelLayout

NVENC_ENCODERS = frozenset({"h264_nvenc", "hevc_nvenc", "av1_nvenc"})
SOFTWARE_ALTERNATIVE = {"h264_nvenc": "libx264", "hevc_nvenc": "libx265", "av1_nvenc": "libsvtav1"}

# Constant quality when --crf is not given: near srgpu's software defaults (libx264 18, libx265 20,
# libsvtav1 30), a step higher for H.264 and HEVC, whose NVENC encoders spend a little more per
# quality level than x264/x265 at their default presets. Chosen from NVIDIA's and encoder
# communities' published comparisons, not measured here (no NVENC on srgpu's test machines).
DEFAULT_CQ = {"h264_nvenc": 19, "hevc_nvenc": 21, "av1_nvenc": 30}
CQ_RANGE = {"h264_nvenc": (1, 51), "hevc_nvenc": (1, 51), "av1_nvenc": (1, 63)}  # ffmpeg's -cq, less 0 ("automatic")

NVENC_PRESETS = ("p1", "p2", "p3", "p4", "p5", "p6", "p7")  # fastest (lowest quality) to slowest (best)
DEFAULT_PRESET = "p5"  # NVENC's "slow (good quality)": what x264's default, medium, maps to
# x264's names, mapped by speed rank; "fast", "medium" and "slow" are also ffmpeg's legacy NVENC
# names (p1, p4 and p7 two-pass), but a user who types them means x264's, as for every other encoder
X264_PRESETS = {"ultrafast": "p1", "superfast": "p2", "veryfast": "p3", "faster": "p3", "fast": "p4",
                "medium": "p5", "slow": "p6", "slower": "p7", "veryslow": "p7", "placebo": "p7"}

# What each encoder keeps on every NVENC GPU from Turing (RTX 20) on: (family, bits) -> the pixel
# format ffmpeg hands it. 10 bits: HEVC Main10 and AV1 from p010le; 4:4:4 8/10 bits for H.264 and
# HEVC (yuv444p16le, which NVENC reads as 10 bits). AV1 NVENC is 4:2:0 only; 10-bit H.264 and
# 4:2:2 need an RTX 50 (Blackwell): --pix-fmt p010le / p210le / nv16 asks for them there.
FORMATS: dict[str, dict[tuple[str, int], str]] = {
    "h264_nvenc": {("420", 8): "yuv420p", ("444", 8): "yuv444p"},
    "hevc_nvenc": {("420", 8): "yuv420p", ("420", 10): "p010le", ("444", 8): "yuv444p", ("444", 10): "yuv444p16le"},
    "av1_nvenc": {("420", 8): "yuv420p", ("420", 10): "p010le"},
}

# Workers per GPU for chunked and folder runs with NVENC (srgpu.batch.pool.default_workers): the
# encoder does not load the CPU, so the CPU's core count says nothing; what bounds it is the card.
# Two: a GeForce has one NVENC engine (RTX 4070 Ti and up, 4080/4090: two; 5090: three) and a
# session keeps one busy, so a second session fills the engine while the other worker decodes and
# upscales, or uses the second engine; and two stay under every consumer driver's limit on
# concurrent sessions (2 in old drivers, then 3, 5, and 8 since 2024), leaving one for the desktop
# (OBS, a game's recorder) on current drivers.
SESSIONS_PER_GPU = 2


def is_nvenc(codec: str | None) -> bool:
    return codec in NVENC_ENCODERS


def preset(name: str | None) -> str:
    """NVENC's preset for ``--preset``: p1-p7 as they are, x264's names mapped (X264_PRESETS),
    None: DEFAULT_PRESET. VideoError for anything else (before ffmpeg, which would refuse it too)."""
    if name is None:
        return DEFAULT_PRESET
    if name in NVENC_PRESETS:
        return name
    if name in X264_PRESETS:
        return X264_PRESETS[name]
    raise VideoError(f"--preset {name!r} is not an NVENC preset: use p1 (fastest) to p7 (best quality), or an "
                     f"x264 name ({', '.join(X264_PRESETS)}), which maps to the nearest")


def encoder_options(codec: str, crf: int | None, preset_name: str | None) -> tuple[tuple[str, str], ...]:
    """The output options of an NVENC stream: constant quality (VBR with a CQ target and no bitrate
    cap: -b 0, which ffmpeg 9 also implies) and the preset, tuned for quality."""
    cq = crf if crf is not None else DEFAULT_CQ[codec]
    return (("-preset", preset(preset_name)), ("-tune", "hq"), ("-rc", "vbr"), ("-cq", str(cq)), ("-b", "0"))


def gpu_option(codec: str | None, gpu: int | None) -> tuple[tuple[str, str], ...]:
    """NVENC's device: the GPU that upscaled the frames (None, a CPU engine: ffmpeg's first NVENC GPU)."""
    return (("-gpu", str(gpu)),) if is_nvenc(codec) and gpu is not None else ()


def choose_format(pipe: PixelLayout, codec: str) -> tuple[str, str | None]:
    """The pixel format NVENC encodes a pipe of ``pipe`` in (FORMATS), with a note saying what is
    not kept (chroma family, bits beyond 10)."""
    table = FORMATS[codec]
    family = pipe.family if (pipe.family, 8) in table else "420"
    bits = 10 if pipe.bits > 8 and (family, 10) in table else 8
    name = table[(family, bits)]
    lost = []
    if family != pipe.family:
        lost.append("gray stored as 4:2:0 with neutral chroma" if pipe.gray
                    else f"{pipe.family} chroma reduced to 420")
    if bits < pipe.bits:
        lost.append(f"{pipe.bits} bits reduced to {bits}")
    if not lost:
        return name, None if name == pipe.name else f"{pipe.name} stored as {name} (nothing lost)"
    why = {"h264_nvenc": "h264_nvenc keeps 8-bit 4:2:0 and 4:4:4 (hevc_nvenc keeps 10 bits)",
           "hevc_nvenc": "hevc_nvenc keeps 4:2:0 and 4:4:4 at up to 10 bits",
           "av1_nvenc": "av1_nvenc keeps 4:2:0 at up to 10 bits (hevc_nvenc also keeps 4:4:4)"}[codec]
    return name, f"{pipe.name} encoded as {name} ({', '.join(lost)}): {why}"


def check(codec: str, options: Sequence[str], muxer: str, gpu: int | None, size: tuple[int, int]) -> None:
    """The trial encode of an NVENC stream: one frame of the output's ``size`` (NVENC refuses frames
    under 145 pixels, and H.264 over 4096), on ``gpu``, at ffmpeg's verbose level, which names the
    GPUs; VideoError in srgpu's words where the GPU or its driver refuses (:func:`explain`), else
    ffmpeg's (a bad option value, refused before any GPU is asked)."""
    try:
        ffmpeg.check_encoder(codec, tuple(options), muxer, size=size, loglevel="verbose")
    except ffmpeg.EncoderRefused as e:
        why = explain(codec, gpu, e.lines)
        if why is None:
            raise
        raise VideoError(why) from None


_GPU_LINE = re.compile(r"\[ GPU #(\d+) - < (.+?) > has Compute SM (\d+)\.(\d+) \]")


def _gpu_name(index: int) -> str | None:
    """The CUDA device's name (no CUDA context is made), None where CuPy cannot say."""
    try:
        from cupy.cuda import runtime

        name = runtime.getDeviceProperties(index)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no such device: the line goes without it
        return None


def explain(codec: str, gpu: int | None, lines: Sequence[tuple[str | None, str]]) -> str | None:
    """One line for an NVENC trial that failed for the GPU or its driver, not for an option: no
    driver, a driver without NVENC, a GPU without NVENC (H100, H200, A100: compute GPUs), an
    encoder the GPU lacks (AV1 before RTX 40), a session the driver refuses, a format or size the
    GPU does not encode. None: not one of these (ffmpeg's own words then)."""
    text = "\n".join(t for _, t in lines)
    names = {int(m.group(1)): m.group(2) for m in _GPU_LINE.finditer(text)}
    if gpu is not None and gpu not in names and (name := _gpu_name(gpu)):
        names[gpu] = name  # ffmpeg names the GPU only once NVENC's library loaded
    if gpu is not None:
        where = f"cuda:{gpu}" + (f" ({names[gpu]})" if gpu in names else "")
    else:
        where = ", ".join(f"cuda:{i} ({n})" for i, n in sorted(names.items())) or "this machine's GPU"
    software = SOFTWARE_ALTERNATIVE[codec]
    instead = f"choose a software encoder such as {software}"
    if "Cannot load libcuda" in text or "No CUDA capable devices found" in text:
        return f"{codec} needs an NVIDIA GPU: there is no NVIDIA driver with NVENC here; {instead}"
    if "Cannot load libnvidia-encode" in text:
        return (f"{codec}: the NVIDIA driver here has no NVENC library (libnvidia-encode.so.1; in a container, "
                f"NVIDIA_DRIVER_CAPABILITIES must include video); {instead}")
    m = re.search(r"Driver does not support the required nvenc API version.*", text)
    if m:
        return (f"{where}: {codec} cannot start: the NVIDIA driver is too old for this ffmpeg's NVENC "
                f"({m.group(0).strip()}): update the driver (if this GPU has NVENC at all: compute GPUs such as "
                f"the H100, H200 and A100 have none), or {instead}")
    m = re.search(r"Requested GPU (\d+), but only (\d+) GPUs are available", text)
    if m:
        return f"{codec}: ffmpeg sees {m.group(2)} GPU(s), not cuda:{m.group(1)}; {instead}"
    if re.search(r"OpenEncodeSessionEx failed: (out of memory|incompatible client key|encoder busy)", text):
        return (f"the NVIDIA driver refuses another NVENC session on {where}: consumer drivers limit how many "
                f"encode at once (other programs count: OBS, a game's recorder); use fewer --workers, close "
                f"them, or {instead}")
    if "Codec not supported" in text:
        need = " (AV1 encoding needs an RTX 40 or newer)" if codec == "av1_nvenc" else ""
        return f"{where} has no NVENC encoder for {codec}{need}: {instead}"
    if "10 bit encode not supported" in text:
        return (f"{where} cannot encode 10-bit {codec} (10-bit H.264 needs an RTX 50): use hevc_nvenc or "
                f"av1_nvenc, or --pix-fmt yuv420p")
    if "YUV444P not supported" in text:
        return f"{where} cannot encode 4:4:4 with {codec}: use --pix-fmt yuv420p"
    m = re.search(r"(Width|Height) (\d+) exceeds (\d+)", text)
    if m:
        return (f"{codec} on {where} cannot encode the output's size: its {m.group(1).lower()} {m.group(2)} "
                f"exceeds {m.group(3)} (hevc_nvenc and av1_nvenc take 8192); use another --codec or a smaller scale")
    if re.search(r"OpenEncodeSessionEx failed|No capable devices found|does not support NVENC"
                 r"|no encode device|unsupported device", text):
        return f"{where} has no NVENC encoder ({codec}): {instead}"
    return None
