"""Video upscaling, the public API: ``upscale_video(src, dst, engine, options)``.

The output is the source in every respect but resolution: the first default video stream is
decoded in its own planar YUV family (8/10/12/16 bits), its luma goes through SRCNN and its
chroma (and alpha) planes through bicubic, and it is encoded with each frame's own timestamp;
every other stream, the chapters and the metadata are mapped from the source (copied where the
container holds them, converted where it cannot, and then said in ``VideoResult.notes``).
Policy for more than one video stream: the default (else first) one is upscaled, the others are
copied unchanged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from .. import outputs
from ..engine.base import Engine
from ..engine.frames import PlaneSpec
from . import containers, deinterlace, discont, ffmpeg, nvenc, verify
from .verify import SourceTiming
from .errors import VideoError
from .formats import LAYOUTS, PixelLayout, choose_encoder_format, source_format
from .hdr import HDR_TRANSFERS, first_frame_hdr
from .handover import HandoverReader, TakeoverMismatch
from . import hwdecode
from .hwdecode import choose_decoder
from .options import EncodeOptions, VideoOptions
from .pipeline import run_pipeline
from .probe import MediaInfo, StreamInfo, container_duration, probe
from .reader import Reader, frame_at
from .writer import EncodePlan, OutputStream, Writer

__all__ = ["VIDEO_EXTENSIONS", "EncodeOptions", "VideoError", "VideoJob", "VideoOptions", "VideoResult",
           "engine_gpu", "is_video_file", "open_reader", "output_extension", "plan_video", "upscale_video"]

VIDEO_EXTENSIONS = frozenset({
    ".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".flv", ".f4v", ".wmv", ".asf", ".mpg", ".mpeg",
    ".m2v", ".ts", ".m2ts", ".mts", ".3gp", ".3g2", ".ogv", ".mxf", ".vob", ".y4m", ".nut", ".divx",
    ".rm", ".rmvb", ".dv", ".hevc", ".h264", ".264", ".265", ".ivf", ".obu",
})

# NVENC's --crf is its constant quality, -cq (srgpu.video.nvenc: the mapping and why these defaults)
DEFAULT_CRF = {"libx264": 18, "libx265": 20, "libsvtav1": 30, "libvpx-vp9": 31, "libaom-av1": 30, **nvenc.DEFAULT_CQ}
NO_CRF = {"ffv1": "ffv1 is lossless", "prores_ks": "ProRes has fixed-quality profiles (e.g. "
          "--encoder-arg=-profile:v --encoder-arg=3)", "prores_aw": "ProRes has fixed-quality profiles"}
# x264 and x265 clamp a CRF outside 0-51 silently and ffmpeg's -crf takes any number for them; the
# other encoders' ffmpeg options carry their own range, which the trial encode (plan_video) enforces
# NVENC's -cq takes 0, but as "no quality target" (a 2 Mb/s bitrate then): refused, not passed on
CRF_RANGE = {"libx264": (0, 51), "libx265": (0, 51), **nvenc.CQ_RANGE}
ODD_SIZES_OK = frozenset({"ffv1"})  # other encoders want subsampled chroma to cover whole pixels
_ALPHA_DECODERS = {"vp8": "libvpx", "vp9": "libvpx-vp9"}  # ffmpeg's native VP8/VP9 decoders drop alpha


def is_video_file(path: str | os.PathLike) -> bool:
    """True for a file name with a video extension (folders may mix videos and images)."""
    return Path(path).suffix.lower() in VIDEO_EXTENSIONS


def output_extension(src: str | os.PathLike) -> str:
    """The extension for a video's output when the user names only a folder: the source's own
    where srgpu can write that container, else .mkv (Matroska holds every stream it could have)."""
    suffix = Path(src).suffix.lower()
    return suffix if suffix in containers.CONTAINERS and suffix != ".mka" else ".mkv"


@dataclass(frozen=True)
class VideoResult:
    output: Path
    frames: int
    seconds: float
    fps: float
    input_size: tuple[int, int]  # (width, height)
    output_size: tuple[int, int]  # as encoded (odd sizes may be padded: see notes)
    codec: str
    pix_fmt: str
    notes: tuple[str, ...] = ()
    decoder: str = "software"  # what decoded the source: "software", an NVDEC decoder (h264_cuvid), or
    # "software, then h264_cuvid from frame N" where NVDEC took over (hwdec "auto")


@dataclass(frozen=True)
class VideoJob:
    """Every decision about one video, made before any frame is decoded."""

    src: Path
    dst: Path
    scale: int  # the upscale factor it was planned for; the engine that runs it must have the same
    info: MediaInfo
    stream: StreamInfo
    layout: PixelLayout
    specs: tuple[PlaneSpec, ...]
    reader_args: dict
    plan: EncodePlan
    codec: str
    pix_fmt: str
    total_frames: int | None
    notes: tuple[str, ...]
    decoder: str = "software"  # "software", or the NVDEC decoder that decodes the source
    takeover: tuple[str, tuple[str, ...]] | None = None  # an NVDEC decoder (and options) that may take
    # over from the software decoder once it has given the same frames (srgpu.video.handover)
    deinterlace: str | None = None  # "frame" or "field" where bwdif deinterlaces the source in the
    # decoder (srgpu.video.deinterlace), None where it is not
    gpu: int | None = None  # the CUDA device of the engine it was planned for (NVENC's and NVDEC's)
    hwdec: str = "no"  # the hwdec mode that applies (srgpu.video.hwdecode.decide, then the source's needs)


def open_reader(job: VideoJob) -> Reader | HandoverReader:
    """The job's decoder: a Reader, or, where NVDEC may take over, a HandoverReader of the software
    decoder and NVDEC."""
    # NVDEC reports no frame durations: its frames take the source's own (read in the background)
    nvdec = job.decoder != "software" or job.takeover is not None
    timing = SourceTiming(job.src, job.stream.index) if nvdec else None
    if job.takeover is None:
        return Reader(job.src, job.stream.index, job.layout, **job.reader_args, timing=timing)
    decoder, options = job.takeover
    args = {**job.reader_args, "decoder": decoder, "decoder_options": options}
    return HandoverReader(Reader(job.src, job.stream.index, job.layout, **job.reader_args),
                          Reader(job.src, job.stream.index, job.layout, **args, timing=timing), second_name=decoder,
                          timing=timing)


def decoded_by(job: VideoJob, reader: Reader | HandoverReader) -> str:
    """What decoded the video, for VideoResult.decoder."""
    if isinstance(reader, HandoverReader) and reader.handover_at is not None:
        return f"software, then {reader.second_name} from frame {reader.handover_at}"
    return job.decoder


def upscale_video(src: str | os.PathLike, dst: str | os.PathLike, engine: Engine,
                  options: VideoOptions = VideoOptions(), overwrite: bool = False,
                  progress: Callable[[int, int | None], None] | None = None,
                  planned: VideoJob | None = None) -> VideoResult:
    """Upscale ``src`` into ``dst`` by the engine's scale (written under a temporary name in dst's
    folder and renamed when complete), as ``options`` say (VideoOptions: the encoder's settings,
    the stream, NVDEC, strictness; with "auto" NVDEC takes over from the software decoder where it
    can, srgpu.video.handover). ``progress(frames_done_increment, total_or_None)`` is called from a
    worker thread after each frame is handed to the encoder. Raises VideoError (one line) for bad
    input or any failing stage; KeyboardInterrupt passes through after cleaning up. ``planned``:
    this video's job as the caller planned it already (srgpu.video.chunked.SinglePipeline's), so
    that it is probed and planned once (for_engine; planned again where it does not fit ``engine``)."""
    src, dst = Path(src), Path(dst)
    _check_paths(src, dst, overwrite)
    outputs.remove_stale_temps(dst)  # what a killed srgpu left for this output
    if planned is not None and (planned.src, planned.dst) != (src, dst):
        planned = None
    # a transport stream's clock jumps: upscale a continuous copy (planned on its own)
    jumps = discont.find(src, planned.info if planned is not None else probe(src))
    continuous = discont.continuous_copy(src, dst, jumps) if jumps is not None else None
    try:
        result = _upscale(continuous or src, dst, engine, options, overwrite, progress,
                          planned if continuous is None else None)
    finally:
        if continuous is not None:
            continuous.unlink(missing_ok=True)
    return result if jumps is None else replace(result, notes=(jumps.note(), *result.notes))


def _upscale(src: Path, dst: Path, engine: Engine, options: VideoOptions, overwrite: bool,
             progress: Callable[[int, int | None], None] | None, planned: VideoJob | None = None) -> VideoResult:
    job = for_engine(planned, options, engine) if planned is not None else None
    if job is None:
        job = plan_video(src, dst, engine.scale, options, overwrite=overwrite, gpu=engine_gpu(engine))
    counted = _Counted(progress)
    try:
        return encode(job, engine, overwrite, counted)
    except TakeoverMismatch as e:
        # NVDEC lost or moved a frame after taking over: the software decoder does it all again
        counted.rewind()
        again = replace(job, takeover=None, plan=replace(job.plan, tmp=outputs.temp_path(dst)))
        result = encode(again, engine, overwrite, counted)
        return replace(result, notes=result.notes + (f"{e}; decoded again on the CPU",))


class _Counted:
    """The caller's progress callback, able to take back what it was told (a second decoding)."""

    def __init__(self, progress: Callable[[int, int | None], None] | None) -> None:
        self.progress = progress
        self.frames = 0
        self.total: int | None = None

    def __call__(self, increment: int, total: int | None) -> None:
        self.frames += increment
        self.total = total
        if self.progress is not None:
            self.progress(increment, total)

    def rewind(self) -> None:
        if self.progress is not None and self.frames:
            self.progress(-self.frames, self.total)
        self.frames = 0


def encode(job: VideoJob, engine: Engine, overwrite: bool = False,
           progress: Callable[[int, int | None], None] | None = None) -> VideoResult:
    """Run a planned job: decode, upscale, encode under the job's temporary name, check the frames
    the file holds against the frames decoded (count and timestamps), then publish it under its
    final name. Nothing is left under either name when it fails."""
    check_engine_scale(job, engine)
    reader = open_reader(job)
    reader.duration, reader.fps = job.info.duration, job.stream.fps
    writer = Writer(job.plan)
    done = False
    try:
        stats = run_pipeline(reader, engine, job.specs, job.layout.max_value, writer, progress,
                             job.total_frames)
        if stats.frames == 0:
            raise VideoError(f"{job.src}: the video stream has no frames")
        if reader.frames_read != stats.frames:
            raise VideoError(f"{job.src}: {reader.frames_read} frames decoded but {stats.frames} encoded")
        _check_complete(job, reader)
        frames = verify.check_frames(job.plan.tmp, job.plan.video_index, writer.sent_pts,
                                     reader.time_base)  # type: ignore[arg-type]
        verify.check_layout(job.plan.tmp, planned_kinds(job), job.plan.video_index, job.plan.enc_size)
        outputs.publish(job.plan.tmp, job.dst, replace=overwrite)
        done = True
    finally:
        if not done:
            job.plan.tmp.unlink(missing_ok=True)
    notes = job.notes
    if isinstance(reader, HandoverReader) and reader.note:
        notes += (reader.note,)
    if reader.repaired:
        notes += (f"{reader.repaired} frame(s) whose source timestamp went backwards (a broken file) "
                  "were placed one tick after the previous frame",)
    notes += concealment_notes(reader)
    return VideoResult(output=job.dst, frames=frames, seconds=stats.seconds,
                       fps=stats.frames / stats.seconds if stats.seconds > 0 else 0.0,
                       input_size=(job.stream.width, job.stream.height),  # type: ignore[arg-type]
                       output_size=job.plan.enc_size, codec=job.codec, pix_fmt=job.pix_fmt, notes=notes,
                       decoder=decoded_by(job, reader))


def check_engine_scale(job: VideoJob, engine: Engine) -> None:
    """Where a planned job meets the engine that runs it (encode, a chunk's worker): the scale was
    decided once, when the job was planned; an engine of another scale would fill the planned frame
    size with a model meant for another factor, so it is refused here, in one line."""
    if engine.scale != job.scale:
        raise VideoError(f"{job.src}: planned for x{job.scale}, but the engine upscales x{engine.scale}")


def concealment_notes(reader: Reader | HandoverReader, shown: int = 3) -> tuple[str, ...]:
    """A note counting the frames whose damaged data the decoder concealed, naming the first few
    (found by the software decoder: the frames as ffmpeg conceals them are the ones upscaled)."""
    count = reader.concealed
    if not count:
        return ()
    found = (reader.first if isinstance(reader, HandoverReader) else reader).locate_concealed(shown)
    where = (": " + ", ".join(frame_at(i, t) for i, t in found)) if found else ""
    more = f" and {count - len(found)} more" if found and count > len(found) else ""
    return (f"{count} frame(s) with damaged data that the decoder concealed{where}{more} "
            "(strict mode refuses such a source)",)


def engine_gpu(engine: Engine) -> int | None:
    """The CUDA device of a GPU engine, None for any other (plan_video's ``gpu``)."""
    return getattr(engine, "device_index", None) if getattr(engine, "name", None) == "cuda" else None


def video_codec(dst: Path, encoder: EncodeOptions) -> str:
    """The encoder a video written to ``dst`` gets: the one named, else the container's first
    default this ffmpeg has (the single place this is decided; plan_video and the chunk workers'
    count, srgpu.batch.pool.default_workers, ask it)."""
    if encoder.codec is not None:
        return encoder.codec
    return containers.default_video_codec(containers.container_for(Path(dst).suffix), Path(dst).suffix,
                                          ffmpeg.video_codecs("encoders"))


def plan_video(src: str | os.PathLike, dst: str | os.PathLike, scale: int,
               options: VideoOptions = VideoOptions(), overwrite: bool = False,
               gpu: int | None = None) -> VideoJob:
    """Check the paths and options, probe the source and decide everything for an upscale by
    ``scale``; VideoError for anything that cannot work, before any work is done (the encoder
    settings are tried on one small frame). ``gpu``: the CUDA device of the engine the frames go
    to, None for a CPU engine: hwdec "auto" uses NVDEC only with a GPU engine (a CPU engine keeps
    the GPU out of it), on its device; "nvdec" uses ``gpu`` or device 0
    (srgpu.video.hwdecode.choose_decoder). ``strict``: a frame whose damaged data the decoder
    concealed is an error instead of a note; it decodes on the CPU, as NVDEC conceals damage
    without saying so. ``deinterlace`` (srgpu.video.deinterlace): a source that is deinterlaced
    decodes on the CPU, where bwdif runs (hwdec "auto": software, said in a note where NVDEC could
    have run; "nvdec": a VideoError)."""
    src, dst = Path(src), Path(dst)
    encoder, strict, video_stream = options.encode, options.strict, options.video_stream
    _check_paths(src, dst, overwrite)
    container = containers.container_for(dst.suffix)
    encoder = replace(encoder, codec=video_codec(dst, encoder))
    supported = ffmpeg.encoder_pix_fmts(encoder.codec)  # VideoError for an unknown codec
    containers.check_video_codec(container, dst.suffix, encoder.codec)
    _check_crf(encoder)
    if nvenc.is_nvenc(encoder.codec):
        nvenc.preset(encoder.preset)  # VideoError for a name NVENC has no preset for, before the source is read
    if scale < 1:
        raise VideoError(f"scale must be a positive integer, not {scale}")
    hwdec = hwdecode.decide(options.hwdec, strict, gpu)  # before the source is read: a refusal costs nothing

    info = probe(src)
    stream = info.main_video()
    if video_stream is not None:
        if not 0 <= video_stream < len(info.video_streams):
            raise VideoError(f"{src}: there is no video stream {video_stream} (it has "
                             f"{len(info.video_streams)}: 0 to {len(info.video_streams) - 1})")
        stream = info.video_streams[video_stream]
    if not stream.width or not stream.height:
        raise VideoError(f"{src}: cannot read the size of video stream #{stream.index}")
    notes: list[str] = []

    # pixel formats: the pipe carries the source's own family; alpha only where it can be kept
    # (VP8/VP9 keep theirs in a side stream that only libvpx decodes; ffv1, ProRes 4444 and the
    # like decode to a yuva format themselves; a gray+alpha source's alpha has no pipe layout)
    vp_alpha = stream.meta("alpha_mode") == "1" and stream.codec in _ALPHA_DECODERS
    native_alpha = bool(stream.pix_fmt) and stream.pix_fmt.startswith("yuva")  # type: ignore[union-attr]
    gray_alpha = bool(stream.pix_fmt) and stream.pix_fmt.startswith("ya")  # type: ignore[union-attr]
    wants_alpha = vp_alpha or native_alpha
    alpha_ok = any(LAYOUTS.get(f) is not None and LAYOUTS[f].alpha for f in supported)
    if encoder.pix_fmt:
        alpha_ok = encoder.pix_fmt in LAYOUTS and LAYOUTS[encoder.pix_fmt].alpha
    decoder = _ALPHA_DECODERS[stream.codec] if vp_alpha and alpha_ok else None
    keep_alpha = alpha_ok and (decoder is not None or native_alpha)
    deint, deint_note = deinterlace.choose(stream, options.deinterlace,
                                           lambda: deinterlace.first_frame_order(src, stream.index, decoder))
    if deint_note:
        notes.append(deint_note)
    hwdec, cpu_note = _source_hwdec(src, hwdec, deint is not None)
    if cpu_note:
        notes.append(cpu_note)
    rate = deint.rate if deint is not None else 1  # frames out per source frame
    if wants_alpha and not alpha_ok:
        notes.append(f"alpha channel left out: {encoder.codec}"
                     f"{' with ' + encoder.pix_fmt if encoder.pix_fmt else ''} cannot store it "
                     "(ffv1 and prores_ks can)")
    if gray_alpha:
        notes.append(f"alpha channel left out: srgpu carries a gray+alpha source ({stream.pix_fmt}) as gray")
    pix_fmt_in = ("yuva420p" if decoder else stream.pix_fmt) or "yuv420p"
    fmt = source_format(pix_fmt_in, keep_alpha=keep_alpha)
    layout = fmt.layout
    if fmt.note:
        notes.append(fmt.note)
    pipe_pix_fmt = pix_fmt_in if (pix_fmt_in.startswith("yuvj") and not fmt.note) else layout.name
    vf_extra = f"scale=out_color_matrix=bt709:out_range=tv,format={layout.name}" if fmt.rgb else None

    if encoder.pix_fmt:
        if supported and encoder.pix_fmt not in supported:
            raise VideoError(f"{encoder.codec} cannot encode pixel format {encoder.pix_fmt!r} "
                             f"(it takes: {' '.join(supported)})")
        enc_pix_fmt = encoder.pix_fmt
    else:
        enc_pix_fmt, note = (nvenc.choose_format(layout, encoder.codec) if nvenc.is_nvenc(encoder.codec)
                             else choose_encoder_format(layout, supported, encoder.codec))
        if note:
            notes.append(note)
    enc_layout = source_format(enc_pix_fmt).layout
    video_options = _video_options(encoder, container)
    device = nvenc.gpu_option(encoder.codec, gpu)  # NVENC encodes on the engine's GPU

    # sizes: SRCNN output, then padded to even where the encoder's chroma subsampling needs it
    out_w, out_h = stream.width * scale, stream.height * scale
    even_w, even_h = enc_layout.needs_even() if encoder.codec not in ODD_SIZES_OK else (False, False)
    enc_w = out_w + (out_w % 2 if even_w else 0)
    enc_h = out_h + (out_h % 2 if even_h else 0)
    if (enc_w, enc_h) != (out_w, out_h):
        notes.append(f"odd size {out_w}x{out_h} padded to {enc_w}x{enc_h} by repeating the last "
                     f"{'column' if enc_w != out_w else ''}{' and ' if enc_w != out_w and enc_h != out_h else ''}"
                     f"{'row' if enc_h != out_h else ''}: {enc_pix_fmt} needs even dimensions")
    specs = [PlaneSpec((h, w), srcnn=(i == 0)) for i, (h, w) in enumerate(layout.plane_shapes(out_w, out_h))]
    # every encoder setting (srgpu's and the user's), tried on one small frame: a bad one fails
    # now with ffmpeg's words, not after the first frames were upscaled; NVENC's on a frame of the
    # output's size on its GPU (it has size limits; a GPU or driver without it is said in srgpu's words)
    trial = (*_flat((("-pix_fmt", enc_pix_fmt), *video_options, *device)), *encoder.extra_args)
    if nvenc.is_nvenc(encoder.codec):
        nvenc.check(encoder.codec, trial, container.muxer, gpu, (enc_w, enc_h))
    else:
        ffmpeg.check_encoder(encoder.codec, trial, container.muxer)

    # colour tags, aspect ratio, field order
    filters = []
    colour = _colour_params(stream, fmt.full_range, fmt.rgb)
    if colour:
        filters.append("setparams=" + ":".join(f"{k}={v}" for k, v in colour))
    if stream.sar and stream.sar != (1, 1):
        filters.append(f"setsar={stream.sar[0]}/{stream.sar[1]}")
    if deint is not None:
        filters.append("setfield=prog")  # the output's frames are whole pictures: tagged progressive
    # HDR static metadata rides in the pipe's header: looked up only for PQ/HLG sources (one frame
    # decoded), which are the ones that carry it
    hdr_meta = first_frame_hdr(src, stream.index, decoder) if stream.color_trc in HDR_TRANSFERS else None
    if stream.color_trc in HDR_TRANSFERS and enc_layout.bits < min(layout.bits, 10):
        notes.append(f"HDR ({stream.color_trc}) video reduced from {layout.bits} to {enc_layout.bits} bits per "
                     f"sample ({enc_pix_fmt}): expect banding; a 10-bit format (e.g. --pix-fmt yuv420p10le) "
                     "keeps its gradations")
    if hdr_meta is not None and hdr_meta.dynamic:
        notes.append("the source's per-frame HDR metadata (HDR10+ or Dolby Vision) is not kept"
                     + ("; its static HDR metadata is" if hdr_meta.static else ""))

    # streams, in source order, the upscaled one in its own place
    out_streams: list[OutputStream] = []
    for s in info.streams:
        if s.index == stream.index:
            threads = threads_option(encoder.codec, encoder.extra_args, options.encoder_threads)
            out_streams.append(OutputStream(s.index, True, encoder.codec,
                                            (("-pix_fmt", enc_pix_fmt), *video_options, *threads, *device)))
            continue
        decision = containers.plan_stream(container, dst.suffix, s, chapters=info.chapters > 0)
        if decision.note:
            notes.append(decision.note)
        if decision.codec is not None:
            out_streams.append(OutputStream(s.index, False, decision.codec, decision.options))

    tmp = outputs.temp_path(dst)
    plan = EncodePlan(src=src, tmp=tmp, muxer=container.muxer, layout=layout, out_size=(out_w, out_h),
                      enc_size=(enc_w, enc_h), streams=tuple(out_streams), video_filters=tuple(filters),
                      rotation=stream.rotation, upscaled_default="default" in stream.dispositions,
                      source_start=info.start or 0.0,
                      extra_args=tuple(encoder.extra_args),
                      hdr=hdr_meta if hdr_meta is not None and hdr_meta.static else None,
                      frame_duration_ns=frame_duration_ns(stream.fps * rate if stream.fps else None),
                      muxer_args=_muxer_args(container, colour, info))
    reader_args = {"pipe_pix_fmt": pipe_pix_fmt, "decoder": decoder, "vf_extra": vf_extra,
                   "size": (stream.width, stream.height), "decoder_options": (), "strict": strict,
                   "vf_pre": deint.filter if deint is not None else None}
    estimated = info.estimated_frames(stream)
    job = VideoJob(src=src, dst=dst, scale=scale, info=info, stream=stream, layout=layout, specs=tuple(specs),
                   reader_args=reader_args, plan=plan, codec=encoder.codec, pix_fmt=enc_pix_fmt,
                   total_frames=estimated * rate if estimated is not None else None, notes=tuple(notes),
                   deinterlace=deint.mode if deint is not None else None, gpu=gpu)
    return _decoding(job, hwdec)


def _source_hwdec(src: Path, hwdec: str, deinterlaced: bool) -> tuple[str, str | None]:
    """The hwdec mode (srgpu.video.hwdecode.decide's) as the source needs it, and a note where
    that is not the one asked: bwdif runs in the software decoder's filters, so NVDEC's frames
    would reach the engine woven ("nvdec": a VideoError)."""
    if not deinterlaced or hwdec == "no":
        return hwdec, None
    if hwdec == "nvdec":
        raise VideoError(f"{src}: deinterlacing (bwdif) runs on the CPU decoder, not on NVDEC: use --hwdec "
                         "auto or no, or --deinterlace no")
    return "no", "decoded on the CPU, not NVDEC: bwdif deinterlaces in the CPU decoder's filters"


def _decoding(job: VideoJob, hwdec: str) -> VideoJob:
    """``job`` (planned for its software decoder) with its decoder chosen for the hwdec mode
    ``hwdec`` (as _source_hwdec left it)."""
    args = job.reader_args
    decoding = choose_decoder(job.src, job.stream.index, job.stream.codec, hwdec, job.gpu or 0,  # type: ignore[arg-type]
                              args["pipe_pix_fmt"], args["vf_extra"], software=args["decoder"])
    return replace(job, reader_args={**args, "decoder": decoding.decoder, "decoder_options": decoding.options},
                   decoder=decoding.decoder if decoding.nvdec else "software", takeover=decoding.takeover,
                   hwdec=hwdec)


def for_engine(job: VideoJob, options: VideoOptions, engine: Engine) -> VideoJob | None:
    """A job planned for software decoding (srgpu.video.chunked plans one to cut a video into chunks,
    and decides NVDEC per chunk) made the single pipeline's for ``engine`` and ``options``: only
    its decoder is decided again (hwdec, as plan_video decides it). None where it was planned for
    another engine's GPU (NVENC's device) or scale: then it is planned again."""
    gpu = engine_gpu(engine)
    if job.gpu != gpu or job.hwdec != "no" or job.scale != engine.scale:
        return None
    hwdec, cpu_note = _source_hwdec(job.src, hwdecode.decide(options.hwdec, options.strict, gpu),
                                    job.deinterlace is not None)
    if cpu_note:  # where plan_video says it: after the deinterlacing note, the first
        job = replace(job, notes=(*job.notes[:1], cpu_note, *job.notes[1:]))
    return _decoding(job, hwdec)


def threads_option(codec: str | None, extra_args: Sequence[str], threads: int | None) -> tuple[tuple[str, str], ...]:
    """x264's share of the cores where several encoders run at once (``threads``, from
    srgpu.batch.pool.encoder_threads), unless the user set -threads: the one place this is decided,
    for the single pipeline, a chunk's encoder and the line that says what a run does."""
    user_threads = any(a == "-threads" or a.startswith("-threads:") for a in extra_args)
    if threads and codec == "libx264" and not user_threads:
        return (("-threads", str(threads)),)
    return ()


def _check_complete(job: VideoJob, reader: Reader) -> None:
    check_complete(job, reader.frames_read, reader.last_time)


def planned_kinds(job: VideoJob) -> list[str]:
    """The kind of each stream the job's output holds, in output order (srgpu.video.verify.check_layout)."""
    kinds = {s.index: s.kind for s in job.info.streams}
    return [kinds.get(s.src_index, "video") for s in job.plan.streams]


def check_complete(job: VideoJob, frames: int, last_time: float | None) -> None:
    """A truncated source does not always make ffmpeg log an error (a race in its shutdown, seen
    about one run in twenty), but then every stream of the output stops early: compare the
    output's duration (all streams, audio included) with the source's, where the output holds every
    stream of the source that has a duration. ``frames`` and ``last_time`` (seconds) say how far
    decoding got, for the message."""
    expected = job.info.duration
    kept = {s.src_index for s in job.plan.streams}
    if any(s.index not in kept and not s.attached_pic for s in job.info.streams):
        return  # the source's duration may be a stream left out (a longer second video): nothing to compare
    if not expected:
        return
    got = container_duration(job.plan.tmp)
    slack = max(0.5, 3.0 / (job.stream.fps or 25.0))
    if got is not None and got < expected - slack:
        end = f" ({last_time:.3f} s of {expected:.3f} s)" if last_time is not None else ""
        raise VideoError(f"{job.src}: decoding failed after {frames} frames{end}: the file ends "
                         f"early (truncated?): the output would last {got:.3f} s")


def _check_paths(src: Path, dst: Path, overwrite: bool) -> None:
    if not src.is_file():
        raise VideoError(f"{src}: not a regular file (a pipe or a device: srgpu reads files it can seek in)"
                         if src.exists() and not src.is_dir() else f"{src}: no such file")
    if dst.exists() and (dst.resolve() == src.resolve() or os.path.samefile(src, dst)):
        raise VideoError(f"{dst}: the output would replace its input")
    if dst.resolve() == src.resolve():
        raise VideoError(f"{dst}: the output would replace its input")
    if dst.is_dir():
        raise VideoError(f"{dst}: is a folder, not an output file name")
    if (dst.exists() or dst.is_symlink()) and not overwrite:  # a dangling link too: publishing would find it
        raise VideoError(f"{dst}: exists (use --overwrite to replace it)")
    if not dst.parent.is_dir():
        raise VideoError(f"{dst.parent}: output directory does not exist")


def _muxer_args(container: containers.Container, colour: list[tuple[str, str]],
                info: MediaInfo) -> tuple[str, ...]:
    """MP4 gets a colr box where the source's range is known: x264 writes no range into the
    bitstream for limited range without colour tags (only full range or tags make it write one),
    and the muxer writes the box only for tagged colours, so "tv" was lost. (MOV's box, nclc, has
    no range.) MP4 and MOV get the mdta keys where the source has tags of reverse-DNS names
    (com.apple.quicktime.location.ISO6709, com.android.capture.fps): only those keys hold them,
    and the muxer writes them only when asked."""
    flags = []
    if container.muxer == "mp4" and any(k == "range" for k, _ in colour):
        flags.append("+write_colr")
    if container.muxer in ("mp4", "mov") and any("." in k for k, _ in info.metadata):
        flags.append("+use_metadata_tags")
    return ("-movflags", "".join(flags)) if flags else ()


def _colour_params(stream: StreamInfo, full_range: bool, rgb: bool) -> list[tuple[str, str]]:
    """setparams options that carry the source's colour tags onto the upscaled frames; an RGB
    source's frames are tagged as the reader's vf_extra made them, BT.709 limited range (its
    primaries and transfer stay the source's)."""
    known = lambda v: v is not None and v not in ("unknown", "reserved")  # noqa: E731
    params: list[tuple[str, str]] = []
    if rgb:
        params = [("range", "tv"), ("colorspace", "bt709")]
        if known(stream.color_primaries):
            params.append(("color_primaries", stream.color_primaries))  # type: ignore[arg-type]
        if known(stream.color_trc):
            params.append(("color_trc", stream.color_trc))  # type: ignore[arg-type]
        return params
    if known(stream.color_primaries):
        params.append(("color_primaries", stream.color_primaries))  # type: ignore[arg-type]
    if known(stream.color_trc):
        params.append(("color_trc", stream.color_trc))  # type: ignore[arg-type]
    if known(stream.color_space):
        params.append(("colorspace", stream.color_space))  # type: ignore[arg-type]
    if stream.color_range in ("tv", "pc"):
        params.append(("range", stream.color_range))
    elif full_range:
        params.append(("range", "pc"))
    return params


def frame_duration_ns(fps: float | None) -> int | None:
    """The frame duration the encoder is told (the pipe's DefaultDuration), from the source's
    frame rate as ffmpeg reports it (23.98 for 24000/1001): without it ffmpeg tells the encoder
    the pipe's clock, 10^9 frames a second, and x265's rate control then spends half the bits its
    CRF asks for (measured: 4.3 against 8.5 MB for the same 10 s, BENCHMARKS.md). The frames keep
    their own timestamps and durations; this is the rate the encoder plans with."""
    if not fps or fps <= 0:
        return None
    for exact in (round(fps * 1.001) / 1.001, float(round(fps))):  # NTSC rates, then whole ones
        if abs(exact - fps) < 0.006:
            fps = exact
            break
    return round(1_000_000_000 / fps)


def _check_crf(options: EncodeOptions) -> None:
    if options.crf is None:
        return
    if options.codec in NO_CRF:
        raise VideoError(f"--crf does not apply to {options.codec}: {NO_CRF[options.codec]}")
    low, high = CRF_RANGE.get(options.codec or "", (options.crf, options.crf))
    if not low <= options.crf <= high:
        what = " (NVENC's constant quality, -cq; 0 would mean no quality target)" if nvenc.is_nvenc(options.codec) else ""
        raise VideoError(f"--crf {options.crf} is out of range for {options.codec}: it takes {low} to {high}{what}")


def _flat(pairs: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    return tuple(x for pair in pairs for x in pair)


def _video_options(options: EncodeOptions, container: containers.Container) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    if nvenc.is_nvenc(options.codec):
        out += nvenc.encoder_options(options.codec, options.crf, options.preset)  # type: ignore[arg-type]
        if options.codec == "hevc_nvenc" and container.muxer in ("mp4", "mov"):
            out.append(("-tag", "hvc1"))  # as for libx265
        return tuple(out)
    crf = options.crf if options.crf is not None else DEFAULT_CRF.get(options.codec)
    if crf is not None and options.codec not in NO_CRF:
        out.append(("-crf", str(crf)))
        if options.codec == "libvpx-vp9":
            out.append(("-b", "0"))  # constant quality
    if options.preset:
        out.append(("-preset", options.preset))
    if options.codec == "libx265":
        out.append(("-x265-params", "log-level=error"))
        if container.muxer in ("mp4", "mov"):
            out.append(("-tag", "hvc1"))  # what Apple players expect for HEVC
    return tuple(out)
