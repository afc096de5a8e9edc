"""The ``srgpu`` command: thin Typer commands over the library. One function per command; the
progress bars are srgpu.cli.progress's, the printing srgpu.cli.output's. Expected errors print one line
``srgpu: error: ...`` on stderr and exit non-zero, without a traceback."""


from __future__ import annotations
import contextlib
import json
import platform
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional
import typer
from .. import __version__
from ..engine import Engine, EngineError, GPUOptions, create_engine
from ..errors import ImageFileError
from ..images.upscale import DEFAULT_MAX_PIXELS
from ..batch.plan import BatchError, BatchPlan, BatchResult, Outcome, plan_batch
from ..batch.local import ImageOptions, run_batch
from ..batch.route import (Callbacks, UpscaleOptions, describe_engine, folder_encoder, make_engine,
                           upscale as route_upscale)
from ..model import DEFAULT_ARCH, ModelError, SRCNNModel, builtin_models, resolve_model
from .summary import Chunks, JsonReport
from ..video.options import DEINTERLACE_MODES, HWDEC_MODES, EncodeOptions, UnknownDeinterlace, UnknownHwdec, VideoOptions
from .progress import _ChunkBar, _FilesProgress, _Progress
from .output import _error, _info, _report_batch


app = typer.Typer(
    name="srgpu",
    help="SRCNN super-resolution for videos and image folders, on the GPU (CuPy/CUDA) or the CPU.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,  # unexpected errors keep a plain traceback (they are bugs)
    rich_markup_mode=None,  # plain click messages: usage errors stay short
)


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Errors that are the user's input or environment, reported in one line."""
    from ..tools.degrade import DegradeError
    from ..tools.demo import DemoError
    from ..batch.plan import video_api

    from ..batch.pool import WorkerError

    from ..manifest import ManifestError

    errors: list[type[BaseException]] = [ModelError, ImageFileError, EngineError, BatchError, DemoError, WorkerError,
                                         DegradeError, ManifestError]
    video = video_api()
    if video is not None:
        errors.append(video.VideoError)
    return tuple(errors)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread: every layer cleans up as after Ctrl-C (children
    ended, temporaries removed), and the exit status is 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, frame: object) -> None:
    for s in (signal.SIGTERM, signal.SIGHUP):  # one is enough: let the clean-up run to its end
        signal.signal(s, signal.SIG_IGN)
    raise Terminated(signum)


@contextlib.contextmanager
def _reported() -> Iterator[None]:
    """Turn expected errors into one line on stderr and exit status 1; Ctrl-C, SIGTERM and SIGHUP
    into 128 + the signal's number (130, 143, 129)."""
    try:
        yield
    except _expected_errors() as e:
        _error(str(e))
        raise typer.Exit(1) from None
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        _error("interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})")
        raise typer.Exit(128 + signum) from None


PRECISION_HELP = ("GPU arithmetic: auto (default: the fastest plan that meets the accuracy bar for the output's "
                  "bit depth: every sample within one level of fp32, mean Y-PSNR within 0.005 dB), fp16 (the "
                  "fastest tensor-core plan that meets it; fp32 where none does) or fp32 (exact). The CPU is "
                  "always fp32.")
MODEL_HELP = ("9-1-5 (default), 9-5-5 (slower, sharper), 9-1-5-real or 9-5-5-real (trained on JPEG/H.264-"
              "compressed inputs: for real photos and videos), or an .npz/.mat file.")
HWDEC_HELP = ("Decode videos on the GPU's NVDEC: auto (default: with a GPU engine, the CPU decodes the first "
              "frames while NVDEC starts, and NVDEC takes over once it has given exactly the same frames, freeing "
              "CPU for the encoder), no (the CPU decodes) or nvdec (insist from the first frame, or fail saying why).")


JOBS_HELP = ("Image files decoded at once, and as many encoded at once, on threads (default: one of each per "
             "CPU core); the engine upscales on its own meanwhile.")
PNG_HELP = ("PNG outputs' zlib level, 0 (none, fastest) to 9 (smallest); default: OpenCV's fast setting "
            "(level 1, run-length), about twice as fast as level 1 proper for files 5-10 % larger.")

MAX_MP_HELP = ("Image files whose header declares more megapixels fail alone, before they are decoded (a "
               "decompression bomb, or a scan that would take many minutes); default 256, 0: no limit but "
               "OpenCV's own.")


def _max_pixels(megapixels: float) -> int | None:
    if not 0 <= megapixels < float("inf"):  # (nan fails this too)
        raise typer.BadParameter("must be 0 (no limit) or a number of megapixels", param_hint="--max-megapixels")
    return max(1, int(megapixels * 1e6)) if megapixels else None  # a tiny limit is a limit, not none


def _video_options(encode: EncodeOptions, hwdec: str, video_stream: int | None = None,
                   strict: bool = False, deinterlace: str = "auto") -> VideoOptions:
    """VideoOptions, which check --hwdec and --deinterlace; a bad value is a usage error."""
    try:
        return VideoOptions(encode, video_stream, hwdec, strict, deinterlace=deinterlace)  # type: ignore[arg-type]
    except UnknownHwdec as e:
        raise typer.BadParameter(f"unknown value {e.mode!r}: use {', '.join(HWDEC_MODES)}",
                                 param_hint="--hwdec") from None
    except UnknownDeinterlace as e:
        raise typer.BadParameter(f"unknown value {e.mode!r}: use {', '.join(DEINTERLACE_MODES)}",
                                 param_hint="--deinterlace") from None


def _make_engine(device: str, model: SRCNNModel, scale: int, quiet: bool, precision: str = "auto") -> Engine:
    """srgpu.batch.route.make_engine, saying which device runs (and why not the GPU, when 'auto' falls back)."""
    return make_engine(device, model, scale, precision, None if quiet else (lambda s: _info(s, False)))


_describe_engine = describe_engine
_folder_encoder = folder_encoder  # (tests/batch/test_folder_workers.py names it here)


class _Shown(Callbacks):
    """srgpu.batch.route's callbacks for the command: its lines on stderr (unless --quiet), its
    progress bars, and the --json report."""

    def __init__(self, report: JsonReport, quiet: bool, options: UpscaleOptions) -> None:
        self.report, self.quiet, self.options = report, quiet, options
        self.plan: BatchPlan | None = None
        self.outcomes: list[Outcome] = []  # a folder's files as they end, for the summary of a run stopped midway
        self.started = time.monotonic()

    def _tally(self, on_done: Callable[[Outcome], None]) -> Callable[[Outcome], None]:
        def both(outcome: Outcome) -> None:
            self.outcomes.append(outcome)
            on_done(outcome)
        return both

    def interrupted(self) -> None:
        """A folder's summary line when Ctrl-C or a signal stops it: what was done, what was not."""
        if self.plan is None or self.plan.single or self.quiet:
            return
        made = BatchResult(tuple(self.outcomes), time.monotonic() - self.started)
        left = len(self.plan.jobs) - len(self.outcomes)
        _info(f"stopped: {made.summary()}; {left} of {len(self.plan.jobs)} files not done (the same command "
              "goes on with them)", False)

    def say(self, message: str) -> None:
        _info(message, self.quiet)

    def planned(self, plan: BatchPlan) -> None:
        self.report.plan = self.plan = plan

    def model(self, model: SRCNNModel) -> None:
        o = self.options
        self.report.set(model=model.name, arch=model.arch, scale=o.scale, precision=o.precision, encode=o.video.encode)

    def engine(self, engine: Engine, description: str) -> None:
        self.report.engine(engine, description)

    def workers(self, description: str, gpu: bool) -> None:
        self.report.workers(description, gpu=gpu)

    def batch_progress(self, plan: BatchPlan) -> _Progress:
        progress = _Progress(plan, self.quiet)
        progress.done = self._tally(self.report.watch(progress.done))  # type: ignore[method-assign]
        return progress

    def chunk_progress(self, name: str) -> _ChunkBar:
        return _ChunkBar(name, self.quiet)

    def files_progress(self, plan: BatchPlan) -> _FilesProgress:
        progress = _FilesProgress(plan, self.quiet)
        progress.done = self._tally(self.report.watch(progress.done))  # type: ignore[method-assign]
        return progress


# ---------------------------------------------------------------- upscale


@app.command()
def upscale(
    input: Path = typer.Argument(..., metavar="INPUT", help="An image, a video, or a folder (recursive; may mix both)."),
    output: Path = typer.Option(..., "-o", "--output", metavar="OUTPUT", help="Output file, or folder for a folder input."),
    scale: int = typer.Option(2, "--scale", "-s", metavar="2|3|4", help="Upscale factor: 2, 3 or 4."),
    model: str = typer.Option(DEFAULT_ARCH, "--model", "-m", metavar="MODEL", help=MODEL_HELP),
    device: str = typer.Option("auto", "--device", "-d", metavar="auto|cpu|cuda[:N]", help="auto, cpu, cuda or cuda:N."),
    precision: str = typer.Option("auto", "--precision", metavar="fp32|fp16|auto", help=PRECISION_HELP),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace outputs that exist."),
    format: Optional[str] = typer.Option(None, "--format", "-f", metavar="png|jpg|webp", help="Image output format: png, jpg or webp "
                                         "(default: keep each image's format)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars or messages, errors only."),
    codec: Optional[str] = typer.Option(None, "--codec", metavar="NAME", help="Video encoder (libx264, libx265, ffv1, "
                                        "...; default: follows the container: libx264, libvpx-vp9 for .webm)."),
    crf: Optional[int] = typer.Option(None, "--crf", metavar="N", help="Video encoder quality (CRF)."),
    preset: Optional[str] = typer.Option(None, "--preset", metavar="NAME", help="Video encoder preset."),
    pix_fmt: Optional[str] = typer.Option(None, "--pix-fmt", metavar="FMT", help="Video output pixel format."),
    encoder_arg: List[str] = typer.Option([], "--encoder-arg", metavar="ARG", help="Extra ffmpeg encoder argument "
                                          "(repeatable, e.g. --encoder-arg=-tune --encoder-arg=film)."),
    video_stream: Optional[int] = typer.Option(None, "--video-stream", metavar="N", min=0,
                                               help="Which video stream to upscale, counting from 0 (default: the "
                                                    "default stream, else the first); the others are copied."),
    hwdec: str = typer.Option("auto", "--hwdec", metavar="auto|no|nvdec", help=HWDEC_HELP),
    strict: bool = typer.Option(False, "--strict", help="Fail a video whose damaged data the decoder concealed "
                                "(default: upscale it and name the frames in a note); decodes on the CPU."),
    deinterlace: str = typer.Option("auto", "--deinterlace", metavar="auto|no|field|frame", help="Interlaced "
                                    "video: auto deinterlaces sources flagged interlaced (bwdif, on the CPU, one "
                                    "frame per frame); frame or field deinterlaces every video (field: one frame per "
                                    "field, twice the rate); no upscales the fields woven together."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", metavar="N", help=JOBS_HELP),
    png_compression: Optional[int] = typer.Option(None, "--png-compression", metavar="0-9", help=PNG_HELP),
    max_megapixels: float = typer.Option(DEFAULT_MAX_PIXELS / 1e6, "--max-megapixels", metavar="MP",
                                         help=MAX_MP_HELP),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", metavar="N", min=1,
                                          help="Workers for a long video's chunks and a folder's files (default: "
                                               "about one per 4 CPU cores, at least one per GPU, at most 4 with libx264; a folder uses "
                                               "them by default when it holds two videos or more)."),
    gpus: Optional[str] = typer.Option(None, "--gpus", metavar="all|0,1", help="GPUs the workers use "
                                       "(default: every usable GPU with --device auto, the one --device names)."),
    chunk_seconds: Optional[float] = typer.Option(None, "--chunk-seconds", metavar="S", min=0.0,
                                                  help="Cut a video into chunks of about S seconds (at keyframes), "
                                                       "0: never (default: a cost model; short videos stay whole)."),
    cluster: Optional[str] = typer.Option(None, "--cluster", metavar="ADDRESS", help="Send a long video's chunks, or "
                                          "a folder's files, to a running Dask cluster (tcp://scheduler:8786; needs "
                                          "srgpu[cluster])."),
    json_out: bool = typer.Option(False, "--json", help="At the end, one JSON object on stdout (docs/json.md): "
                                  "each input's output, status, frames, seconds, fps, device, model, encoder and "
                                  "notes, the totals and the exit status; the human lines go to stderr."),
) -> None:
    """Upscale an image, a video, or a folder of them with SRCNN."""
    report = JsonReport(input, output, enabled=json_out)
    with _reported(), report.running():
        video = _video_options(encode=EncodeOptions(codec=codec, crf=crf, preset=preset, pix_fmt=pix_fmt,
                                                    extra_args=tuple(encoder_arg)),
                               video_stream=video_stream, hwdec=hwdec, strict=strict, deinterlace=deinterlace)
        options = UpscaleOptions(input, output, scale=scale, model=model, device=device, precision=precision,
                                 overwrite=overwrite, format=format, video=video,
                                 images=ImageOptions(jobs=jobs, png_compression=png_compression,
                                                     max_pixels=_max_pixels(max_megapixels)),
                                 workers=workers, gpus=gpus, chunk_seconds=chunk_seconds, cluster=cluster)
        shown = _Shown(report, quiet, options)
        try:
            result = route_upscale(options, shown)
        except KeyboardInterrupt:
            shown.interrupted()
            raise
        if result.batch is None:  # a video cut into chunks
            job = result.plan.jobs[0]
            report.chunked(job, result.video, Chunks(result.chunks, result.reused_chunks, result.reused_frames),
                           result.video.seconds)
            if not quiet:
                print(f"wrote {result.video.output} ({result.video.frames} frames, {result.chunks} chunks, "
                      f"{result.seconds:.1f} s)")
            return
        report.batch(result.batch)
        _report_batch(result.batch, quiet)
        if result.exit_code:
            raise typer.Exit(result.exit_code)


# ---------------------------------------------------------------- compare


@app.command("compare")
def compare_command(
    input: Path = typer.Argument(..., metavar="INPUT", help="An image, or a video."),
    output: Path = typer.Option(..., "-o", "--output", metavar="OUTPUT.png", help="The comparison picture (PNG)."),
    at: Optional[str] = typer.Option(None, "--at", metavar="TIME", help="A video's frame at TIME: seconds (12.5) or "
                                     "HH:MM:SS(.ms) (default: the middle of the video); an error for an image."),
    crop: Optional[str] = typer.Option(None, "--crop", metavar="WxH+X+Y", help="The window of the source to show, in "
                                       "source pixels; WxH: that size where the detail is (default: 256/scale "
                                       "pixels square, where the detail is: the highest gradient energy)."),
    model: List[str] = typer.Option([], "--model", "-m", metavar="MODEL", help="A model to show (repeatable; "
                                    "default 9-1-5): " + MODEL_HELP),
    scale: int = typer.Option(2, "--scale", "-s", metavar="2|3|4", help="Upscale factor: 2, 3 or 4."),
    device: str = typer.Option("auto", "--device", "-d", metavar="auto|cpu|cuda[:N]", help="auto, cpu, cuda or cuda:N."),
    precision: str = typer.Option("auto", "--precision", metavar="fp32|fp16|auto", help=PRECISION_HELP),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace OUTPUT.png if it exists."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No messages, errors only."),
) -> None:
    """One PNG with the same crop side by side at the output scale: the source enlarged by nearest
    neighbour and by bicubic, and by srgpu with each --model, labelled."""
    from ..tools import compare as comparing

    with _reported():
        when = comparing.parse_time(at) if at is not None else None
        window = comparing.Crop.parse(crop) if crop is not None else None
        comparing.check_output(output, input, overwrite)
        models = [(comparing.model_label(spec), resolve_model(spec, scale)) for spec in model or [DEFAULT_ARCH]]
        with contextlib.ExitStack() as stack:
            engines = [(label, stack.enter_context(_make_engine(device, srcnn, scale, quiet, precision)))
                       for label, srcnn in models]
            result = comparing.compare(input, engines, window, when)
        comparing.write(result, output, overwrite)
        if not quiet:
            print(f"wrote {output} ({result.describe()})")


# ---------------------------------------------------------------- eval


def eval_report(results: list, scale: int, model: SRCNNModel, degradation: object = None) -> dict:
    """The ``eval --json`` object (schema in README.md); ``degradation`` (--degrade) is recorded
    only where given, so a clean evaluation's object is what it always was."""
    from ..tools.evaluate import mean_scores

    def scores(s: object) -> dict:
        return {"psnr": float(s.psnr), "ssim": float(s.ssim)}  # type: ignore[attr-defined]

    bic, sr = mean_scores(results)
    report = {
        "scale": scale,
        "model": model.name,
        "images": [{"name": r.name, "bicubic": scores(r.bicubic), "srcnn": scores(r.srcnn)} for r in results],
        "mean": {"bicubic": scores(bic), "srcnn": scores(sr)},
    }
    if degradation is not None:
        report["degradation"] = str(degradation)
    return report


@app.command("eval")
def eval_command(
    folder: Path = typer.Argument(..., metavar="DIR", help="Folder of HR images (e.g. Set5)."),
    scale: int = typer.Option(..., "--scale", "-s", metavar="2|3|4", help="2, 3 or 4."),
    model: str = typer.Option(DEFAULT_ARCH, "--model", "-m", metavar="MODEL", help=MODEL_HELP),
    degrade: Optional[str] = typer.Option(None, "--degrade", metavar="CODEC:Q",
                                          help="Compress each LR image before upscaling, as real inputs are: "
                                               "jpeg:QUALITY (OpenCV), h264:CRF or hevc:CRF (all-intra "
                                               "libx264/libx265, yuv420p), e.g. jpeg:75, h264:23."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Y-PSNR and SSIM of bicubic and SRCNN on a folder, by the authors' protocol (CPU, float64);
    with --degrade, on compressed LR inputs."""
    from ..tools.degrade import parse_degradation
    from ..tools.evaluate import evaluate_folder, image_files

    with _reported():
        degradation = None
        if degrade is not None:
            degradation = parse_degradation(degrade)
            degradation.check_single()
        if not folder.is_dir():
            raise BatchError(f"{folder}: not a folder")
        if not image_files(folder):
            raise BatchError(f"{folder}: no images to evaluate")
        srcnn = resolve_model(model, scale)
        results = []
        if not as_json:
            print(f"{srcnn.describe()}, x{scale}, {folder}" + (f", LR compressed {degradation}" if degradation else ""))
            print(f"{'image':<24} {'bicubic PSNR':>12} {'SSIM':>7} {'SRCNN PSNR':>11} {'SSIM':>7}")
        for r in evaluate_folder(folder, srcnn, scale, degradation=degradation):
            results.append(r)
            if not as_json:
                print(f"{r.name:<24} {r.bicubic.psnr:12.2f} {r.bicubic.ssim:7.4f} {r.srcnn.psnr:11.2f} {r.srcnn.ssim:7.4f}")
        report = eval_report(results, scale, srcnn, degradation)
        if as_json:
            print(json.dumps(report, indent=2))
        else:
            m = report["mean"]
            print(f"{'mean':<24} {m['bicubic']['psnr']:12.2f} {m['bicubic']['ssim']:7.4f} "
                  f"{m['srcnn']['psnr']:11.2f} {m['srcnn']['ssim']:7.4f}")


# ---------------------------------------------------------------- info


def _ffmpeg_version() -> str:
    try:
        import imageio_ffmpeg

        exe = imageio_ffmpeg.get_ffmpeg_exe()
        first = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=20).stdout.splitlines()
        return f"{first[0] if first else 'unknown version'} ({exe})"
    except Exception as e:  # reporting only: say what is wrong, never fail `info`
        return f"not available ({type(e).__name__}: {e})"


def _reporting(fn: Callable[[], str]) -> str:
    try:
        return fn()
    except Exception as e:  # reporting only: say what is wrong, never fail `info`
        return f"unknown ({type(e).__name__}: {e})"


def _module_version(name: str) -> str:
    try:
        module = __import__(name)
        return str(getattr(module, "__version__", "installed"))
    except Exception as e:
        return f"not importable ({type(e).__name__})"


@app.command()
def info() -> None:
    """Versions, CUDA devices (or why none is usable) and the models available."""
    from ..engine.gpuinfo import cuda_status
    from ..batch.plan import video_support

    print(f"srgpu {__version__} (python {platform.python_version()}, {platform.machine()})")
    for name in ("numpy", "cv2", "cupy", "typer", "tqdm", "imageio_ffmpeg"):
        print(f"  {name:<15} {_module_version(name)}")
    print(f"  {'ffmpeg':<15} {_ffmpeg_version()}")
    print(f"  {'video support':<15} {'yes' if video_support() else 'no (srgpu.video is not available)'}")
    if video_support():
        from ..video.hwdecode import nvdec_status

        print(f"  {'NVDEC':<15} {_reporting(nvdec_status)}")
    status = cuda_status(free_memory=True)
    print(f"CUDA: runtime {status.cuda_runtime or '-'}, driver {status.driver or '-'}, cupy {status.cupy_version or '-'}, "
          f"nvrtc {status.nvrtc or '-'}")
    if status.usable:
        for d in status.devices:
            print(f"  cuda:{d.index} {d.name}, compute {d.compute_capability}, {d.multiprocessors} SMs, "
                  f"{(d.free_memory or 0) / 2**30:.1f} of {d.total_memory / 2**30:.1f} GiB free")
            print("\n".join(_cached_plan_lines(d.name, d.compute_capability)))
    else:
        print(f"  no usable CUDA device: {status.reason}; the CPU engine is used")
    models = builtin_models()
    print("models:" if models else "models: none built in (use --model FILE.npz or FILE.mat)")
    for arch, s, path in models:
        default = " (default)" if arch == DEFAULT_ARCH and s == 2 else ""
        print(f"  {arch} x{s}{default}  {_set5_note(path)}{path}")


def _set5_note(path: Path) -> str:
    """'Set5 36.20 dB (bicubic 33.66)  ' from a trained file's provenance, or '' (never fails)."""
    try:
        from ..model import load_npz

        meta = load_npz(path).metadata
        return f"Set5 {float(meta['set5_psnr']):.2f} dB (bicubic {float(meta['set5_bicubic_psnr']):.2f})  "
    except Exception:  # noqa: BLE001 - info lists what it can
        return ""


# ---------------------------------------------------------------- demo


@app.command()
def demo(
    folder: Path = typer.Option(Path("srgpu-demo"), "--dir", metavar="DIR", help="Where to put the sample and its upscale."),
    seconds: float = typer.Option(2.0, "--seconds", metavar="S", help="Length of the sample clip."),
    device: str = typer.Option("auto", "--device", "-d", metavar="auto|cpu|cuda[:N]", help="auto, cpu, cuda or cuda:N."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars or messages, errors only."),
) -> None:
    """Render a short clip from ffmpeg's test source and upscale it x2 with the default model."""
    from ..tools.demo import ClipSpec, DemoError, render_clip
    from ..batch.plan import video_support

    with _reported():
        if not video_support():
            raise DemoError("video support (srgpu.video) is not available in this installation")
        if seconds <= 0:
            raise DemoError("--seconds must be positive")
        srcnn = resolve_model(DEFAULT_ARCH, 2)  # before anything is written: a missing model fails at once
        if not folder.parent.is_dir():
            raise BatchError(f"{folder.parent}: output directory does not exist")
        if folder.exists() and not folder.is_dir():
            raise BatchError(f"{folder}: --dir must be a folder, and this is a file")
        folder.mkdir(exist_ok=True)
        spec = ClipSpec(seconds=seconds)
        src = render_clip(folder / "testsrc2_320x180.mp4", spec)
        _info(f"rendered {src} ({spec.width}x{spec.height}, {spec.fps} fps, {spec.seconds:g} s, "
              f"ffmpeg {spec.source} + 440 Hz tone)", quiet)
        plan = plan_batch(src, folder / "testsrc2_640x360_srcnn_x2.mp4", overwrite=True)
        with _make_engine(device, srcnn, 2, quiet) as engine:
            progress = _Progress(plan, quiet)
            try:
                result = run_batch(plan, engine, on_start=progress.start, on_done=progress.done,
                                   on_frames=progress.frames_done)
            finally:
                progress.close()
        _report_batch(result, quiet)
        if result.exit_code:
            raise typer.Exit(result.exit_code)
        print(f"source: {src.resolve()}")
        print(f"output: {plan.jobs[0].dst.resolve()}")


# ---------------------------------------------------------------- tune, bench (GPU kernels)


def _frame_size(size: str) -> tuple[int, int]:
    """'WIDTHxHEIGHT' -> (height, width)."""
    parts = size.lower().split("x")
    if len(parts) == 2 and all(p.isdigit() and int(p) > 0 for p in parts):
        return int(parts[1]), int(parts[0])
    raise typer.BadParameter(f"{size!r} is not WIDTHxHEIGHT", param_hint="--size")


def _cuda_index(device: str) -> int:
    from ..engine.select import parse_device

    kind, index = parse_device(device)
    if kind != "cuda":
        raise EngineError(f"--device {device}: tuning and kernel benchmarks run on a GPU (cuda or cuda:N)")
    return index


@app.command("tune")
def tune_command(
    size: str = typer.Option("1920x1080", "--size", metavar="WxH", help="Input (low-resolution) frame size."),
    scale: int = typer.Option(2, "--scale", help="Upscale factor."),
    model: Optional[str] = typer.Option(None, "--model", metavar="MODEL", help=MODEL_HELP),
    device: str = typer.Option("cuda", "--device", metavar="cuda[:N]", help="The GPU to tune for."),
    precision: str = typer.Option("auto", "--precision", metavar="fp32|fp16|auto", help=PRECISION_HELP),
    bits: int = typer.Option(8, "--bits", metavar="8|10|12|16", help="Output bit depth to tune for (which kernel "
                             "arithmetics meet the accuracy bar depends on it)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the chosen plan."),
) -> None:
    """Time every kernel variant and launch shape on this GPU for one frame size; cache the fastest plan."""
    from ..tools import bench as tuning

    lr_shape = _frame_size(size)
    with _reported():
        index = _cuda_index(device)
        srcnn = resolve_model(model, scale)
        if bits not in (8, 10, 12, 16):
            raise typer.BadParameter(f"--bits {bits}: use 8, 10, 12 or 16")
        result = tuning.tune(srcnn, scale, lr_shape, index, GPUOptions(precision=precision), bits,
                             log=None if quiet else lambda s: _info(s, False))
        print(f"plan for {size} x{scale} {bits}-bit on {result.key.gpu}: {result.plan.kind}: {result.plan.describe()}")
        if result.cache_path:
            print(f"cached in {result.cache_path}")


@app.command("bench")
def bench_command(
    video: Optional[Path] = typer.Argument(None, metavar="[VIDEO|FOLDER]",
                                           help="Measure each stage of upscaling this video (pipeline bench), or "
                                                "this folder of images against the codec floor (folder bench)."),
    pipeline: bool = typer.Option(False, "--pipeline",
                                  help="Pipeline bench on a synthetic clip of --size (no VIDEO needed)."),
    frames: int = typer.Option(240, "--frames", min=1, help="Frames of the synthetic clip."),
    size: str = typer.Option("1920x1080", "--size", metavar="WxH", help="Input (low-resolution) frame size."),
    scale: int = typer.Option(2, "--scale", help="Upscale factor."),
    model: Optional[str] = typer.Option(None, "--model", metavar="MODEL",
                                        help="9-1-5 (default), 9-5-5 (random weights of that architecture "
                                             "when not built in), 9-1-5-real, 9-5-5-real or an .npz/.mat file."),
    device: str = typer.Option("cuda", "--device", metavar="cuda[:N]", help="The GPU to measure (pipeline "
                                                                             "and folder bench: also cpu or auto)."),
    precision: str = typer.Option("auto", "--precision", metavar="fp32|fp16|auto",
                                  help="Pipeline bench: " + PRECISION_HELP),
    codec: str = typer.Option("libx264", "--codec", help="Pipeline bench: video encoder."),
    crf: Optional[int] = typer.Option(None, "--crf", help="Pipeline bench: encoder CRF."),
    preset: Optional[str] = typer.Option(None, "--preset", help="Pipeline bench: encoder preset."),
    hwdec: str = typer.Option("auto", "--hwdec", metavar="auto|no|nvdec", help="Pipeline bench: " + HWDEC_HELP),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", metavar="N", help="Folder bench: " + JOBS_HELP),
    png_compression: Optional[int] = typer.Option(None, "--png-compression", metavar="0-9",
                                                  help="Folder bench: " + PNG_HELP),
    format: Optional[str] = typer.Option(None, "--format", "-f", metavar="png|jpg|webp",
                                         help="Folder bench: image output format (default: each image's own)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
) -> None:
    """Kernel benchmark (ms per frame of each layer x variant, the chosen plan and the whole network),
    with VIDEO / --pipeline: fps of each stage of a video upscale and the bottleneck, or with FOLDER:
    srgpu on a folder of images against the codec floor (read + cv2.resize + write), with its own
    split into read, engine and write."""
    from ..model import BUILTIN_ARCHS

    lr_shape = _frame_size(size)
    log = None if quiet or json_out else (lambda s: _info(s, False))
    if video is not None and video.is_dir():
        _bench_folder(video, scale, model, device, precision, jobs, png_compression, format, json_out, log)
        return
    if video is not None or pipeline:
        _bench_pipeline(video, frames, lr_shape, scale, model, device, precision, codec, crf, preset, hwdec,
                        json_out, log)
        return
    from ..tools import bench as benchmark

    with _reported():
        index = _cuda_index(device)
        spec = model or DEFAULT_ARCH
        srcnn = None if spec in BUILTIN_ARCHS else resolve_model(spec, scale)
        report = benchmark.bench(srcnn, arch=spec if srcnn is None else srcnn.arch, scale=scale, lr_shape=lr_shape,
                                 device_index=index, log=log)
        print(json.dumps(report.to_dict(), indent=2) if json_out else benchmark.format_report(report))


def _bench_pipeline(video: Optional[Path], frames: int, lr_shape: tuple[int, int], scale: int, model: Optional[str],
                    device: str, precision: str, codec: str, crf: Optional[int], preset: Optional[str], hwdec: str,
                    json_out: bool, log: Optional[Callable[[str], None]]) -> None:
    import tempfile

    from ..tools import bench_video

    options = _video_options(encode=EncodeOptions(codec=codec, crf=crf, preset=preset), hwdec=hwdec)
    with _reported(), tempfile.TemporaryDirectory(prefix="srgpu-bench-") as tmp:
        srcnn = resolve_model(model, scale)
        # _make_engine: a CPU fallback is said in one line (not a Python warning), and the engine is closed
        with _make_engine(device, srcnn, scale, log is None, precision) as engine:
            if video is None:
                if log:
                    log(f"making a synthetic {lr_shape[1]}x{lr_shape[0]} clip of {frames} frames ...")
                video = bench_video.synthetic_source(Path(tmp), (lr_shape[1], lr_shape[0]), frames)
            report = bench_video.bench_video(video, engine, options, log=log)
        print(json.dumps(report.to_dict(), indent=2) if json_out else bench_video.format_report(report))


def _bench_folder(folder: Path, scale: int, model: Optional[str], device: str, precision: str, jobs: Optional[int],
                  png_compression: Optional[int], fmt: Optional[str], json_out: bool,
                  log: Optional[Callable[[str], None]]) -> None:
    from ..tools import bench_folder
    from ..engine.select import parse_device

    with _reported():
        images = ImageOptions(jobs=jobs, png_compression=png_compression)
        srcnn = resolve_model(model, scale)
        probe = _make_engine(device, srcnn, scale, log is None, precision)  # says which device, once
        gpu = probe.name == "cuda"
        probe.close()
        index = parse_device(device)[1]

        def make_engine(cache: Optional[Path]) -> Engine:
            if not gpu:
                return create_engine("cpu", srcnn, scale)
            return create_engine(f"cuda:{index}", srcnn, scale, GPUOptions(precision=precision, cache_dir=cache,
                                                                            notify=log))

        report = bench_folder.bench_folder(folder, make_engine, gpu, fmt, images, log)
        print(json.dumps(report.to_dict(), indent=2) if json_out else bench_folder.format_report(report))


def _cached_plan_lines(name: str, compute_capability: str) -> list[str]:
    from ..kernels.launch import gpu_key
    from ..engine.plans import cached_plans

    lines = []
    for key, plan in cached_plans(gpu_key(name, compute_capability)):
        (h, w), (oh, ow) = key.lr_shape, key.hr_shape
        lines.append(f"    plan {key.arch} {w}x{h} -> {ow}x{oh} {key.precision} {key.bits}-bit: {plan.describe()}")
    return lines or ["    no tuned plan cached (srgpu tune)"]


def _quiet_opencv() -> None:
    """OpenCV logs its own failures to stderr; srgpu reports them as one-line errors instead."""
    with contextlib.suppress(Exception):
        import cv2

        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)


def main() -> None:
    _quiet_opencv()
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _on_signal)
    app(prog_name="srgpu")


