"""Batch upscaling of one image or a folder tree (which may also hold videos), as a library.

The CLI plans a batch with :func:`plan_batch`, runs it with :func:`run_batch` and prints the
:class:`BatchResult`. Per-file problems (a corrupt image, a video that fails) are collected in the
result and the rest of the batch goes on; problems with the request itself (missing input, missing
output directory, output equal to input, output exists) raise :class:`BatchError` before any work.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

import numpy as np

from .color import quantize, rgb_to_ycbcr, ycbcr_to_rgb
from .engine.base import Engine, PlaneSpec
from .imagefile import IMAGE_EXTENSIONS, ImageFileError, read_image, write_image_atomic

# Video support is its own package; images work in a build without it. Only a missing module
# counts as "no video support": an import error inside it is a bug and surfaces as one.
if importlib.util.find_spec(f"{__package__}.video.api") is not None:
    from .video import api as _video
else:  # pragma: no cover - only in a build without srgpu.video
    _video = None

OUTPUT_FORMATS = ("png", "jpg", "webp")
_NO_ALPHA = frozenset({".jpg", ".jpeg"})
_EIGHT_BIT_ONLY = frozenset({".jpg", ".jpeg", ".webp", ".bmp"})
# used only to recognise a video (and say that video support is missing) when srgpu.video is absent
_FALLBACK_VIDEO_EXTENSIONS = frozenset({".mp4", ".mkv", ".mov", ".webm", ".avi", ".m4v", ".ts"})

Kind = Literal["image", "video", "unsupported"]
Status = Literal["done", "skipped", "failed"]


class BatchError(ValueError):
    """The request itself cannot be carried out (nothing was processed); the message says why."""


def video_support() -> bool:
    return _video is not None


def is_video(path: Path) -> bool:
    if _video is not None:
        return bool(_video.is_video_file(path))
    return path.suffix.lower() in _FALLBACK_VIDEO_EXTENSIONS


def media_kind(path: Path) -> Kind:
    if path.suffix.lower() in IMAGE_EXTENSIONS:
        return "image"
    if is_video(path):
        return "video"
    return "unsupported"


@dataclass(frozen=True)
class Job:
    src: Path
    dst: Path
    kind: Kind
    problem: str | None = None  # known before running (e.g. two inputs map to one output)


@dataclass(frozen=True)
class Plan:
    jobs: tuple[Job, ...]
    single: bool  # one file given on the command line (errors are the run's errors, no summary)
    overwrite: bool
    input_root: Path
    output_root: Path

    @property
    def has_video(self) -> bool:
        return any(j.kind == "video" for j in self.jobs)


@dataclass(frozen=True)
class Outcome:
    job: Job
    status: Status
    message: str = ""  # why it was skipped or what failed; for a video done, what was written
    seconds: float = 0.0
    notes: tuple[str, ...] = ()  # what was done differently from the source, and why (videos)


@dataclass(frozen=True)
class BatchResult:
    outcomes: tuple[Outcome, ...]
    seconds: float
    single: bool = False

    def _with(self, status: Status) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.status == status)

    @property
    def done(self) -> tuple[Outcome, ...]:
        return self._with("done")

    @property
    def skipped(self) -> tuple[Outcome, ...]:
        return self._with("skipped")

    @property
    def failed(self) -> tuple[Outcome, ...]:
        return self._with("failed")

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def summary(self) -> str:
        parts = [f"{len(self.done)} upscaled", f"{len(self.skipped)} skipped (output exists)",
                 f"{len(self.failed)} failed"]
        return ", ".join(parts) + f" in {self.seconds:.1f} s"


@dataclass(frozen=True)
class VideoSettings:
    """Encoder settings passed through to srgpu.video for video jobs."""

    codec: str | None = None  # None: follows the container (libx264; libvpx-vp9 for .webm)
    crf: int | None = None
    preset: str | None = None
    pix_fmt: str | None = None
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    video_stream: int | None = None  # which video stream to upscale (default: the default one, else the first)
    hwdec: str = "no"  # decode on NVDEC: no, auto (where exact, with a GPU engine) or nvdec
    strict: bool = False  # damaged data the decoder concealed fails the video (else: a note)


# ---------------------------------------------------------------- planning


def _output_suffix(src: Path, fmt: str | None) -> str:
    if fmt is None:
        return src.suffix
    return "." + fmt.lower().lstrip(".")


def _video_suffix(src: Path) -> str:
    """A video keeps its container where srgpu can write it (.avi, .ts, ... become .mkv)."""
    return _video.output_extension(src) if _video is not None else src.suffix


def _check_format(fmt: str | None) -> None:
    if fmt is not None and fmt.lower().lstrip(".") not in OUTPUT_FORMATS:
        raise BatchError(f"unsupported --format {fmt!r}: choose one of {', '.join(OUTPUT_FORMATS)}")


def _same(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def walk(folder: Path, exclude: Path | None = None) -> list[Path]:
    """Every non-hidden file under ``folder``, sorted, not descending into ``exclude`` (the output
    folder when it lies inside the input) or hidden folders, not following directory links."""
    found: list[Path] = []
    excluded = exclude.resolve() if exclude is not None else None
    for root, dirs, files in os.walk(folder, followlinks=False):
        here = Path(root)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and (excluded is None or (here / d).resolve() != excluded))
        found.extend(here / f for f in sorted(files) if not f.startswith("."))
    return found


def plan_batch(input_path: Path, output_path: Path, fmt: str | None = None, overwrite: bool = False) -> Plan:
    """Decide every (source, destination) pair, or raise BatchError for a request that cannot work.

    One file: ``output_path`` is the output file, or an existing folder to put it in; its folder must
    exist; an existing output needs ``overwrite``. A folder: the tree is mirrored under
    ``output_path`` (created if its parent exists); outputs that exist are skipped unless
    ``overwrite``; files that are neither images nor videos are reported as failures.
    """
    input_path, output_path = Path(input_path), Path(output_path)
    _check_format(fmt)
    fmt = fmt.lower().lstrip(".") if fmt is not None else None  # ".PNG" as "png" everywhere below
    if not input_path.exists():
        raise BatchError(f"{input_path}: no such file or directory")
    if input_path.is_dir():
        return _plan_folder(input_path, output_path, fmt, overwrite)
    return _plan_file(input_path, output_path, fmt, overwrite)


def _plan_file(src: Path, out: Path, fmt: str | None, overwrite: bool) -> Plan:
    kind = media_kind(src)
    if kind == "unsupported":
        raise BatchError(f"{src}: not an image or video file (unknown extension {src.suffix or '(none)'!r})")
    if out.is_dir():
        out = out / (src.stem + (_output_suffix(src, fmt) if kind == "image" else _video_suffix(src)))
    elif not out.parent.is_dir():
        raise BatchError(f"{out.parent}: output directory does not exist")
    if kind == "image":
        if out.suffix.lower() not in IMAGE_EXTENSIONS:
            raise BatchError(f"{out}: cannot write an image with extension {out.suffix or '(none)'!r}")
        if fmt is not None and out.suffix.lower().lstrip(".") != fmt.lower() and not (
                fmt.lower() == "jpg" and out.suffix.lower() == ".jpeg"):
            raise BatchError(f"{out}: extension does not match --format {fmt}")
    elif fmt is not None:
        raise BatchError("--format applies to images, not to a video input")
    if _same(src, out):
        raise BatchError(f"{out}: output is the input file")
    if out.exists() and not overwrite:
        raise BatchError(f"{out}: output exists (use --overwrite to replace it)")
    return Plan((Job(src, out, kind),), single=True, overwrite=overwrite, input_root=src.parent,
                output_root=out.parent)


def _plan_folder(src_dir: Path, out_dir: Path, fmt: str | None, overwrite: bool) -> Plan:
    if _same(src_dir, out_dir):
        raise BatchError(f"{out_dir}: output folder is the input folder")
    if out_dir.exists() and not out_dir.is_dir():
        raise BatchError(f"{out_dir}: output for a folder must be a folder, and this is a file")
    if not out_dir.exists() and not out_dir.parent.is_dir():
        raise BatchError(f"{out_dir.parent}: output directory does not exist")
    exclude = out_dir if _inside(out_dir, src_dir) else None
    jobs = []
    claimed: dict[Path, Path] = {}
    for src in walk(src_dir, exclude):
        rel = src.relative_to(src_dir)
        kind = media_kind(src)
        dst = out_dir / rel
        if kind == "image":
            dst = dst.with_suffix(_output_suffix(src, fmt))
        elif kind == "video":
            dst = dst.with_suffix(_video_suffix(src))
        problem = None
        if kind != "unsupported":
            if dst in claimed:  # e.g. a.png and a.jpg with --format webp: never let one replace the other
                problem = f"{src}: its output {dst} is already the output of {claimed[dst]}"
            claimed.setdefault(dst, src)
        jobs.append(Job(src, dst, kind, problem))
    if not jobs:
        raise BatchError(f"{src_dir}: no files to upscale")
    return Plan(tuple(jobs), single=False, overwrite=overwrite, input_root=src_dir, output_root=out_dir)


# ---------------------------------------------------------------- one image


def upscale_image(image: np.ndarray, engine: Engine, scale: int) -> np.ndarray:
    """Upscale a decoded image (uint8/uint16; gray, RGB or RGBA) by ``scale``, same dtype and layout.

    Gray: the plane itself goes through SRCNN (as the authors' protocol treats gray images).
    RGB: BT.601 YCbCr in float; Y through SRCNN, Cb and Cr bicubic; back to RGB, rounded.
    Alpha: bicubic, in the image's own integer depth.
    """
    if image.dtype not in (np.uint8, np.uint16):
        raise ImageFileError(f"unsupported sample type {image.dtype}")
    top = int(np.iinfo(image.dtype).max)
    h, w = image.shape[:2]
    out_shape = (h * scale, w * scale)
    if image.ndim == 2:
        return engine.srcnn_plane(image, out_shape, top)
    if image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ImageFileError(f"unsupported image layout {image.shape}")
    ycc = rgb_to_ycbcr(image[..., :3].astype(np.float64) / top)
    planes = [ycc[..., i].astype(np.float32) for i in range(3)]
    specs = [PlaneSpec(out_shape, True), PlaneSpec(out_shape, False), PlaneSpec(out_shape, False)]
    if image.shape[2] == 4:
        planes.append(np.ascontiguousarray(image[..., 3]))
        specs.append(PlaneSpec(out_shape, False))
    outs = engine.upscale_frame(planes, specs, top)
    rgb = quantize(ycbcr_to_rgb(np.stack(outs[:3], axis=-1)), image.dtype, top)
    if image.shape[2] == 4:
        return np.concatenate([rgb, outs[3][..., None].astype(image.dtype)], axis=-1)
    return rgb


def fit_to_format(image: np.ndarray, suffix: str, src: Path | None = None) -> np.ndarray:
    """Adapt an image to what the output format can hold: 8-bit formats get 16-bit data rounded to
    8 bits (asked for by --format); JPEG cannot store alpha, which is an error (nothing is dropped
    silently)."""
    suffix = suffix.lower()
    _check_alpha(image, suffix, src)
    if suffix in _EIGHT_BIT_ONLY and image.dtype == np.uint16:
        return quantize(image.astype(np.float64) / 65535.0, np.uint8)
    return image


def _check_alpha(image: np.ndarray, suffix: str, src: Path | None) -> None:
    if suffix.lower() in _NO_ALPHA and image.ndim == 3 and image.shape[2] == 4:
        name = f"{src}: " if src else ""
        raise ImageFileError(f"{name}JPEG cannot store the alpha channel; use --format png or webp")


def upscale_image_file(src: Path, dst: Path, engine: Engine, scale: int) -> None:
    write_image_atomic(dst, _upscaled_for(src, dst, engine, scale))


def _upscaled_for(src: Path, dst: Path, engine: Engine, scale: int) -> np.ndarray:
    """``src`` read and upscaled, ready to be written to ``dst``'s format."""
    image = read_image(src)
    _check_alpha(image, dst.suffix, src)  # before the upscale: a large image would be upscaled for nothing
    return fit_to_format(upscale_image(image, engine, scale), dst.suffix, src)


# ---------------------------------------------------------------- the batch


FileCallback = Callable[[Job], None]
OutcomeCallback = Callable[[Outcome], None]
FramesCallback = Callable[[int, "int | None"], None]


class _WriteBehind:
    """Encodes and writes upscaled images on one background thread while the caller reads and
    upscales the next (encoding a large PNG costs more than a GPU upscale). Every outcome goes
    through it, ready-made ones included, so they come back in job order. An exception that is
    not a per-file failure (e.g. KeyboardInterrupt) is raised again in the caller."""

    def __init__(self) -> None:
        self._todo: queue.Queue = queue.Queue(maxsize=1)  # bounds the images held in memory
        self._done: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="srgpu-image-writer", daemon=True)
        self._thread.start()

    def put(self, item: tuple[Job, np.ndarray, float] | Outcome) -> None:
        self._todo.put(item)
        self._raise()

    def ready(self) -> list[Outcome]:
        """Outcomes finished so far, in order."""
        out = []
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                self._raise()
                return out

    def close(self, raise_errors: bool = True) -> list[Outcome]:
        """Wait for everything queued; the remaining outcomes, in order."""
        self._todo.put(None)
        self._thread.join()
        if not raise_errors:
            self._error = None  # the caller is already raising its own
        return self.ready()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        while (item := self._todo.get()) is not None:
            if self._error is not None:
                continue  # stopping: nothing more is written
            if isinstance(item, Outcome):
                self._done.put(item)
                continue
            job, image, started = item
            try:
                write_image_atomic(job.dst, image)
                outcome = Outcome(job, "done")
            except ImageFileError as e:
                outcome = Outcome(job, "failed", _naming(job.src, str(e)))
            except (OSError, MemoryError) as e:
                outcome = Outcome(job, "failed", f"{job.src}: {type(e).__name__}: {e}")
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                self._error = e
                continue
            self._done.put(Outcome(job, outcome.status, outcome.message, time.perf_counter() - started))


def run_batch(plan: Plan, engine: Engine, scale: int, video: VideoSettings | None = None,
              on_start: FileCallback | None = None, on_done: OutcomeCallback | None = None,
              on_frames: FramesCallback | None = None) -> BatchResult:
    """Process every job of ``plan`` in order. Per-file errors (unreadable, corrupt, unsupported
    files; a failing video) become 'failed' outcomes and the batch goes on; engine errors and
    Ctrl-C stop it (no partial file is left under a final name either way). Images are written
    on a background thread while the next one is upscaled; outcomes are reported in order."""
    video = video or VideoSettings()
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    writer = _WriteBehind()

    def report(done: list[Outcome]) -> None:
        for outcome in done:
            outcomes.append(outcome)
            if on_done:
                on_done(outcome)

    try:
        for job in plan.jobs:
            report(writer.ready())
            if on_start:
                on_start(job)
            t0 = time.perf_counter()
            outcome = _prepare(job, plan)
            if outcome is not None:
                writer.put(outcome)
            elif job.kind == "image":
                try:
                    writer.put((job, _upscaled_for(job.src, job.dst, engine, scale), t0))
                except ImageFileError as e:
                    writer.put(Outcome(job, "failed", _naming(job.src, str(e)), time.perf_counter() - t0))
                except (OSError, MemoryError) as e:
                    writer.put(Outcome(job, "failed", f"{job.src}: {type(e).__name__}: {e}", time.perf_counter() - t0))
            else:  # a video runs alone: the images before it are written first
                report(writer.close())
                writer = _WriteBehind()
                result = _run_video(job, plan, engine, scale, video, on_frames)
                report([Outcome(job, result.status, result.message, time.perf_counter() - t0, result.notes)])
    except BaseException:
        # what is being written completes or fails whole, never half, and is still reported
        report(writer.close(raise_errors=False))
        raise
    report(writer.close())
    return BatchResult(tuple(outcomes), time.perf_counter() - started, plan.single)


def _prepare(job: Job, plan: Plan) -> Outcome | None:
    """The job's outcome if it cannot or need not run (after creating its output folder)."""
    if job.kind == "unsupported":
        return Outcome(job, "failed", f"{job.src}: not an image or video file")
    if job.problem:
        return Outcome(job, "failed", job.problem)
    if _same(job.src, job.dst):  # e.g. an input tree that contains the output tree's files
        return Outcome(job, "failed", f"{job.dst}: output would replace its input")
    if job.dst.exists() and not plan.overwrite:
        return Outcome(job, "skipped", f"{job.dst}: exists")
    try:
        job.dst.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return Outcome(job, "failed", f"{job.dst.parent}: cannot create folder ({e.strerror or e})")
    return None


def _run_video(job: Job, plan: Plan, engine: Engine, scale: int, video: VideoSettings,
               on_frames: FramesCallback | None) -> Outcome:
    if _video is None:
        return Outcome(job, "failed", f"{job.src}: video support is not available in this installation")
    options = _video.EncodeOptions(codec=video.codec, crf=video.crf, preset=video.preset,
                                   pix_fmt=video.pix_fmt, extra_args=tuple(video.extra_args))
    try:
        result = _video.upscale_video(job.src, job.dst, engine, scale, options, overwrite=plan.overwrite,
                                      progress=on_frames, video_stream=video.video_stream, hwdec=video.hwdec,
                                      strict=video.strict)
    except _video.VideoError as e:
        return Outcome(job, "failed", _naming(job.src, str(e)))
    w, h = result.output_size
    detail = f"{result.frames} frames, {w}x{h}, {result.codec} {result.pix_fmt}, {result.fps:.1f} fps"
    if result.decoder != "software":  # NVDEC decoded some or all of it
        detail += f", decoded by {result.decoder}"
    return Outcome(job, "done", detail, notes=tuple(result.notes))


def _naming(src: Path, message: str) -> str:
    """Make sure a per-file message names the file it is about."""
    return message if str(src) in message else f"{src}: {message}"
