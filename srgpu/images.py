"""Batch upscaling of one image or a folder tree (which may also hold videos), as a library.

The CLI plans a batch with :func:`plan_batch`, runs it with :func:`run_batch` and prints the
:class:`BatchResult`. Per-file problems (a corrupt image, a video that fails) are collected in the
result and the rest of the batch goes on; problems with the request itself (missing input, missing
or unwritable output directory, output equal to input, output exists) raise :class:`BatchError`
before any work. A folder run resumes from the manifest it keeps in the output folder
(srgpu.manifest; what it skips, redoes or leaves alone: ``Resume``), and never replaces an input.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import stat
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Literal

import cv2
import numpy as np

from . import outputs
from .bands import band_rows, bands, halo_rows
from .color import quantize, rgb_to_ycbcr, ycbcr_to_rgb
from .engine.base import Engine, PlaneSpec
from .cpus import cpu_cores
from .engine.workers import run_all
from .imagefile import (IMAGE_EXTENSIONS, PNG_LEVELS, ChannelOrder, ImageData, ImageFileError, read_image_data,
                        write_image_atomic)
from .manifest import Fingerprint, Manifest, Record, Settings, weights_hash
from .model import SRCNNModel
from .outputs import OutputExistsError
from .batch_stages import Budget, InOrder, StageClock, StageTimes, default_budget
from .video.options import VideoOptions  # configuration only, no ffmpeg: there in every build

# Video support (srgpu.video.api and the ffmpeg stages below it) is its own part; images work in a
# build without it. Only a missing module counts as "no video support": an import error inside it
# is a bug and surfaces as one.
if importlib.util.find_spec(f"{__package__}.video.api") is not None:
    from .video import api as _video
else:  # pragma: no cover - only in a build without srgpu.video
    _video = None

if TYPE_CHECKING:
    from .engine.imageproc import ImageProcessor

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


def unsupported(path: Path) -> str:
    """Why ``path`` is not upscaled, in one line naming it: what it is where srgpu can tell (a GIF,
    still or animated), else its extension."""
    if path.suffix.lower() == ".gif":
        try:
            frames = cv2.imcount(str(path))
        except cv2.error:
            frames = 0
        if frames > 1:
            return (f"{path}: an animated GIF of {frames} frames: srgpu does not read GIF (an animation would "
                    f"lose its timing and all but one frame); convert it to a video first "
                    f"(ffmpeg -i {path.name} {path.stem}.mp4) and upscale that")
        return f"{path}: a GIF image: srgpu does not read GIF (256 colours at most); convert it to PNG first"
    return f"{path}: not an image or video file (unknown extension {path.suffix or '(none)'!r})"


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
    notes: tuple[str, ...] = ()  # what was done differently from the source, and why
    redone: bool = False  # done, replacing an output srgpu had made before (a note says why)
    unrecorded: bool = False  # skipped: the output exists and srgpu has no record of making it
    video: "_video.VideoResult | None" = None  # a video done: what srgpu.video wrote and verified (frames, fps)


@dataclass(frozen=True)
class BatchResult:
    outcomes: tuple[Outcome, ...]
    seconds: float
    single: bool = False
    stages: StageTimes | None = None  # where the images' time went (srgpu bench FOLDER)

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
        redone = sum(o.redone for o in self.done)
        unrecorded = sum(o.unrecorded for o in self.skipped)
        done = f"{len(self.done)} upscaled" + (f" ({redone} redone)" if redone else "")
        skipped = f"{len(self.skipped)} skipped (output exists" + (
            f"; {unrecorded} not recorded as made by srgpu, left as they are: --overwrite replaces them"
            if unrecorded else "") + ")"
        return ", ".join([done, skipped, f"{len(self.failed)} failed"]) + f" in {self.seconds:.1f} s"


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
    ``output_path`` (created if its parent exists; a name that looks like a file must be an existing
    folder); files that are neither images nor videos are reported as failures, and run_batch
    decides what becomes of outputs that exist. The folder written into is checked to be writable
    here (a temporary created and removed), so that a run never computes what it cannot write.
    """
    input_path, output_path = Path(input_path), Path(output_path)
    _check_format(fmt)
    fmt = fmt.lower().lstrip(".") if fmt is not None else None  # ".PNG" as "png" everywhere below
    if not input_path.exists():
        raise BatchError(f"{input_path}: no such file or directory")
    if input_path.is_dir():
        return _plan_folder(input_path, output_path, fmt, overwrite)
    return _plan_file(input_path, output_path, fmt, overwrite)


def _check_writable(folder: Path) -> None:
    """One look before any work (instead of one error per file after each was computed): create and
    remove a temporary of srgpu's own naming in ``folder``."""
    try:
        tmp, fd = outputs.create_temp(folder / ".srgpu-write-check")
        os.close(fd)
        tmp.unlink()
    except OSError as e:
        raise BatchError(f"{folder}: cannot write there ({e.strerror or e})") from None


def _looks_like_a_file(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_EXTENSIONS or is_video(path)


def _plan_file(src: Path, out: Path, fmt: str | None, overwrite: bool) -> Plan:
    kind = media_kind(src)
    if kind == "unsupported":
        raise BatchError(unsupported(src))
    if out.is_dir():
        out = out / (src.stem + (_output_suffix(src, fmt) if kind == "image" else _video_suffix(src)))
    elif not out.parent.is_dir():
        raise BatchError(f"{out.parent}: output directory does not exist")
    if out.is_dir():  # the name the output would take inside the folder given
        raise BatchError(f"{out}: is a folder, so the output cannot be written under that name")
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
    _check_writable(out.parent)
    return Plan((Job(src, out, kind),), single=True, overwrite=overwrite, input_root=src.parent,
                output_root=out.parent)


def _plan_folder(src_dir: Path, out_dir: Path, fmt: str | None, overwrite: bool) -> Plan:
    if _same(src_dir, out_dir):
        raise BatchError(f"{out_dir}: output folder is the input folder")
    if out_dir.exists() and not out_dir.is_dir():
        raise BatchError(f"{out_dir}: output for a folder must be a folder, and this is a file")
    if not out_dir.exists():
        if _looks_like_a_file(out_dir):  # e.g. -o seq.mp4: never a folder named like a file
            raise BatchError(f"{out_dir}: a folder input needs an output folder, and this names a file "
                             "(create the folder first to use that name)")
        if not out_dir.parent.is_dir():
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
    _check_writable(out_dir if out_dir.is_dir() else out_dir.parent)
    return Plan(tuple(jobs), single=False, overwrite=overwrite, input_root=src_dir, output_root=out_dir)


# ---------------------------------------------------------------- one image


# Image files larger than this are refused unless the user raises it (--max-megapixels): 256 MP is
# a 200 MP phone photo or a 16000x16000 scan; a 30000x30000 (900 MP) file would take the better
# part of half an hour, and a decompression bomb would take all memory.
DEFAULT_MAX_PIXELS = 256 * 10**6
BAND_OUTPUT_PIXELS = 4 * 2**20  # output pixels per band: the engine's float32 planes of a band, ~50 MB
CONVERT_PIXELS = 2**18  # output pixels taken back to RGB at a time: float64 temporaries of a few MB
RowsCallback = Callable[[int, int], None]


def band_halo(engine: Engine) -> int:
    """Input rows a band reads beyond its own on each side (srgpu.bands.halo_rows)."""
    return halo_rows(engine.model.halo, engine.scale)


def upscale_image(image: np.ndarray, engine: Engine, progress: RowsCallback | None = None,
                  band_output_pixels: int | None = None) -> np.ndarray:
    """:func:`upscale_whole` in bands of input rows, each with :func:`band_halo` rows of context
    on either side, written straight into the output: a large photo needs memory for its output
    and one band, not for the whole image in float (a 6000x4000 photo at x2: 13 GB -> 0.65 GB;
    x4: 1.6 GB, of which 1.15 GB is the output itself; BENCHMARKS.md). On the CPU engine the
    result is bit-identical to the whole image (srgpu.bands says why).
    ``progress(output_rows_done, output_rows)`` is called after each band."""
    _check_layout(image)
    h, w = image.shape[:2]
    scale = engine.scale
    out = _output_for(image, scale)
    for band in bands(h, band_rows(w, scale, band_output_pixels or BAND_OUTPUT_PIXELS), band_halo(engine)):
        _upscale_into(image[band.b0:band.b1], engine, out[band.k0 * scale:band.k1 * scale],
                      (band.k0 - band.b0) * scale)
        if progress is not None:
            progress(band.k1 * scale, h * scale)
    return out


def upscale_whole(image: np.ndarray, engine: Engine) -> np.ndarray:
    """Upscale a decoded image (uint8/uint16; gray, RGB or RGBA) by the engine's scale, same dtype
    and layout.

    Gray: the plane itself goes through SRCNN (as the authors' protocol treats gray images).
    RGB: BT.601 YCbCr in float; Y through SRCNN, Cb and Cr bicubic; back to RGB, rounded.
    Alpha: bicubic, in the image's own integer depth.
    """
    _check_layout(image)
    out = _output_for(image, engine.scale)
    _upscale_into(image, engine, out, 0)
    return out


def _check_layout(image: np.ndarray) -> None:
    if image.dtype not in (np.uint8, np.uint16):
        raise ImageFileError(f"unsupported sample type {image.dtype}")
    if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (3, 4)):
        raise ImageFileError(f"unsupported image layout {image.shape}")


def _output_for(image: np.ndarray, scale: int) -> np.ndarray:
    h, w = image.shape[:2]
    return np.empty((h * scale, w * scale) + image.shape[2:], image.dtype)


def _upscale_into(image: np.ndarray, engine: Engine, dst: np.ndarray, first: int) -> None:
    """Upscale ``image`` (see :func:`upscale_whole`) and write its output rows from ``first`` on
    into ``dst``."""
    top = int(np.iinfo(image.dtype).max)
    h, w = image.shape[:2]
    out_shape = (h * engine.scale, w * engine.scale)
    if image.ndim == 2:
        dst[...] = engine.srcnn_plane(image, out_shape, top)[first:first + len(dst)]
        return
    ycc = rgb_to_ycbcr(image[..., :3].astype(np.float64) / top)
    planes = [ycc[..., i].astype(np.float32) for i in range(3)]
    del ycc
    specs = [PlaneSpec(out_shape, True), PlaneSpec(out_shape, False), PlaneSpec(out_shape, False)]
    if image.shape[2] == 4:
        planes.append(np.ascontiguousarray(image[..., 3]))
        specs.append(PlaneSpec(out_shape, False))
    outs = engine.upscale_frame(planes, specs, top)
    del planes
    _to_samples(outs, dst, first, top)


def _to_samples(outs: list[np.ndarray], dst: np.ndarray, first: int, top: int) -> None:
    """YCbCr planes (and alpha) rows from ``first`` on -> ``dst``'s RGB(A) samples, rounded, a few
    full-width rows at a time (on the CPUs side by side): the float64 conversion of a whole band
    would be 0.5 GB at the peak, and every row goes through the same operations either way."""
    rows = max(1, CONVERT_PIXELS // max(1, dst.shape[1]))

    def convert(r0: int) -> None:
        r1 = min(len(dst), r0 + rows)
        src = slice(first + r0, first + r1)
        dst[r0:r1, :, :3] = quantize(ycbcr_to_rgb(np.stack([p[src] for p in outs[:3]], axis=-1)), dst.dtype, top)
        if len(outs) == 4:
            dst[r0:r1, :, 3] = outs[3][src]  # bicubic in the image's own depth already

    run_all(convert, range(0, len(dst), rows), cpu_cores())


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


# ---------------------------------------------------------------- the batch


FileCallback = Callable[[Job], None]
OutcomeCallback = Callable[[Outcome], None]
FramesCallback = Callable[[int, "int | None"], None]

# Raise when srgpu's image processing changes what the same source, model and scale give, so that
# a resumed folder run redoes the outputs made before. Device and precision are not part of a
# run's settings: every engine meets the accuracy bar (within one level of fp32 at the output's
# depth), and a resume should not redo a folder because it runs on another machine.
IMAGE_PIPELINE = 1
_VIDEO_KEYS = ("codec", "crf", "preset", "pix_fmt", "encoder_args", "video_stream")


@dataclass(frozen=True)
class Go:
    """A job that is to run: whether publishing its output may replace what is at its name, the
    source as it was before it was read, and why an existing output is made again ('' if not)."""

    replace: bool
    source: Fingerprint | None = None
    redo: str = ""

    @property
    def notes(self) -> tuple[str, ...]:
        return (f"redone: {self.redo}",) if self.redo else ()


def _image_settings(model: SRCNNModel, scale: int) -> Settings:
    return Settings.of({"scale": scale, "arch": model.arch, "weights": weights_hash(model.arrays()),
                        "pipeline": IMAGE_PIPELINE}, label=model.name)


def _video_settings(image: Settings, video: VideoOptions) -> Settings:
    enc = video.encode
    encoder = {"codec": enc.codec, "crf": enc.crf, "preset": enc.preset, "pix_fmt": enc.pix_fmt,
               "encoder_args": list(enc.extra_args), "video_stream": video.video_stream}
    return Settings.of({**dict(image.values), **encoder}, label=image.label)


def _differences(old: dict, new: Settings) -> str:
    """How the settings an output was made with differ from this run's, in words."""
    values = old.get("values")
    if not isinstance(values, dict):
        return "with settings srgpu has no record of"
    now = json.loads(json.dumps(dict(new.values)))  # as they would read back from the manifest
    changed = [k for k in sorted(set(values) | set(now)) if values.get(k) != now.get(k)]
    words = []
    if "scale" in changed:
        words.append(f"with scale {values.get('scale')} (now {now['scale']})")
    if "arch" in changed or "weights" in changed:
        words.append(f"with another model ({old.get('label') or values.get('arch')}; now {new.label or now['arch']})")
    if "pipeline" in changed:
        words.append("by another version of srgpu's image processing")
    words += [f"with {k} {values.get(k)} (now {now.get(k)})" for k in _VIDEO_KEYS if k in changed]
    return ", ".join(words) or "with other settings"


@dataclass(frozen=True)
class Looked:
    """One look at a job's source and output (os.stat each, or why not; ``output`` None: nothing
    there), taken once and shared by every decision about the job: a folder of small images pays
    for each system call, and each one gives the GIL to the reader and writer threads."""

    source: os.stat_result | OSError
    output: os.stat_result | OSError | None

    @classmethod
    def at(cls, job: Job) -> "Looked":
        output = _stat(job.dst)
        return cls(_stat(job.src), None if isinstance(output, FileNotFoundError) else output)

    @property
    def source_bytes(self) -> int:
        return self.source.st_size if isinstance(self.source, os.stat_result) else 0


def _stat(path: Path) -> os.stat_result | OSError:
    try:
        return os.stat(path)
    except OSError as e:
        return e


def _file_ids(paths: Iterable[Path]) -> frozenset[tuple[int, int]]:
    ids = set()
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        ids.add((st.st_dev, st.st_ino))
    return frozenset(ids)


class Resume:
    """What becomes of a folder job whose output exists, decided from the output folder's manifest
    (srgpu.manifest), and the manifest kept up to date as outputs are written.

    - An input file (any file the walk found, however reached: link, hard link) is never an
      output, with or without --overwrite: failed. Where the output folder lies inside the input
      folder, an existing file there that srgpu has no record of making is the user's (part of the
      input tree): failed likewise.
    - An output srgpu recorded, made with this run's settings from the unchanged source, and
      still of the size it was written: skipped (done before), unless --overwrite.
    - An output srgpu recorded but that is stale (other settings, a changed or other source, an
      incomplete or changed file, a run killed while writing it): redone, and a note says why.
    - Any other existing file: left as it is (skipped) unless --overwrite, whatever it holds:
      srgpu never replaces a file it did not make unless told to.
    """

    def __init__(self, plan: Plan, model: SRCNNModel, scale: int, video: VideoOptions) -> None:
        self.plan = plan
        self.manifest = Manifest.load(plan.output_root)
        self.image = _image_settings(model, scale)
        self.video = _video_settings(self.image, video)
        self.inputs = _file_ids(job.src for job in plan.jobs)

    def decide(self, job: Job, looked: Looked | None = None) -> Outcome | Go:
        looked = looked or Looked.at(job)
        if isinstance(looked.source, OSError):
            e = looked.source
            return Outcome(job, "failed", f"{job.src}: cannot read ({e.strerror or e})")
        source = Fingerprint(looked.source.st_size, looked.source.st_mtime_ns)
        st = looked.output
        if st is None:
            return Go(self.plan.overwrite, source)
        if isinstance(st, OSError):
            return Outcome(job, "failed", f"{job.dst}: cannot look at the output ({st.strerror or st})")
        if (st.st_dev, st.st_ino) in self.inputs:
            return Outcome(job, "failed", f"{job.dst}: is one of the input files; an input is never replaced, "
                                          "even with --overwrite")
        rel = self._rel(job.dst, self.plan.output_root)
        record = self.manifest.records.get(rel) if rel else None
        interrupted = rel in self.manifest.pending
        if record is None and not interrupted:
            return self._unrecorded(job, source)
        why = ("an earlier run was stopped while writing it" if interrupted
               else self._stale(job, record, st.st_size, source))  # type: ignore[arg-type]
        if not why and not self.plan.overwrite:
            return Outcome(job, "skipped", f"{job.dst}: done by an earlier run with the same settings")
        return Go(True, source, why)

    def _unrecorded(self, job: Job, source: Fingerprint) -> Outcome | Go:
        if _inside(job.dst, self.plan.input_root):
            return Outcome(job, "failed", f"{job.dst}: is a file of the input folder {self.plan.input_root} that "
                                          "srgpu did not make; an input is never replaced, even with --overwrite")
        if self.plan.overwrite:
            return Go(True, source)
        return Outcome(job, "skipped", f"{job.dst}: exists, and srgpu has no record of making it; left as it is "
                                       "(--overwrite replaces it)", unrecorded=True)

    def _stale(self, job: Job, record: Record, size: int, source: Fingerprint) -> str:
        if size != record.size:
            return f"the output is incomplete or was changed ({size} bytes, srgpu wrote {record.size})"
        if record.source != self._rel(job.src, self.plan.input_root):
            return f"the output was made from another source ({record.source})"
        if record.fingerprint != source:
            return "the source changed since the output was made"
        settings = self._settings(job)
        if record.settings != settings.key:
            return "the output was made " + _differences(self.manifest.settings.get(record.settings, {}), settings)
        return ""

    def _settings(self, job: Job) -> Settings:
        return self.video if job.kind == "video" else self.image

    @staticmethod
    def _rel(path: Path, root: Path) -> str | None:
        # by string where it can (a job's path is its root joined with the rest): pathlib's
        # relative_to costs tens of microseconds a call, several per file, under the GIL
        p, r = str(path), str(root)
        if len(p) > len(r) + 1 and p.startswith(r) and p[len(r)] == os.sep and r != os.sep:
            return p[len(r) + 1:].replace(os.sep, "/")
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            return None

    def begin(self, job: Job) -> None:
        if (rel := self._rel(job.dst, self.plan.output_root)) is not None:
            self.manifest.begin(rel)

    def finish(self, job: Job, go: Go, size: int) -> None:
        rel, src = self._rel(job.dst, self.plan.output_root), self._rel(job.src, self.plan.input_root)
        if rel is None or src is None or go.source is None:
            return
        settings = self._settings(job)
        self.manifest.finish(rel, Record(src, go.source.size, go.source.mtime_ns, size, settings.key), settings)

    def abandon(self, job: Job) -> None:
        if (rel := self._rel(job.dst, self.plan.output_root)) is not None:
            self.manifest.abandon(rel)

    def close(self) -> None:
        self.manifest.close()


@dataclass(frozen=True)
class ImageOptions:
    """How a batch's image files are read and written (configuration only; the pixels do not
    depend on it, so it is not part of the settings a resumed run compares).

    jobs: image files decoded at once, and as many encoded at once, on threads (OpenCV's codecs
        release the GIL); None: one of each per CPU core this process may use.
    png_compression: zlib level 0-9 of PNG outputs; None: OpenCV's fast default
        (srgpu.imagefile.encode_params; BENCHMARKS.md has the trade-off).
    memory_bytes: about how much decoded images read ahead and upscaled images waiting for a
        writer may hold (srgpu.batch_stages.Budget); None: a quarter of the machine's memory, at most
        4 GiB. One image always goes through, however large.
    max_pixels: an image file whose header declares more pixels fails alone, before it is decoded
        (a decompression bomb, or a scan that would take many minutes: --max-megapixels); None:
        only OpenCV's own limit.
    """

    jobs: int | None = None
    png_compression: int | None = None
    memory_bytes: int | None = None
    max_pixels: int | None = DEFAULT_MAX_PIXELS

    def __post_init__(self) -> None:
        if self.jobs is not None and self.jobs < 1:
            raise BatchError(f"--jobs {self.jobs}: at least 1 file at a time")
        if self.png_compression is not None and self.png_compression not in PNG_LEVELS:
            raise BatchError(f"--png-compression {self.png_compression}: choose a zlib level from 0 to 9")
        if self.memory_bytes is not None and self.memory_bytes < 1:
            raise BatchError("the memory budget must be at least one byte")
        if self.max_pixels is not None and self.max_pixels < 1:
            raise BatchError("--max-megapixels must be more than 0")

    @property
    def workers(self) -> int:
        return self.jobs if self.jobs is not None else cpu_cores()


READ_AHEAD_PER_WORKER = 2  # images being decoded or waiting for the engine, per reader thread
FIRST_RATIO = 8.0  # decoded bytes per file byte assumed before any image was read (JPEG ~10, PNG ~2)


class _Ticket:
    """An image the plane path upscaled at submit (srgpu.engine.imageproc's tickets wait on the device)."""

    def __init__(self, pixels: np.ndarray) -> None:
        self._pixels = pixels

    def wait(self) -> np.ndarray:
        return self._pixels

    def ready(self) -> bool:
        return True


class _PlaneProcessor:
    """Images through ``upscale_image`` on the calling thread, RGB: the exact path, for engines
    with no image path of their own (the CPU engine)."""

    order: ChannelOrder = "rgb"
    in_flight = 0

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def submit(self, image: np.ndarray, progress: RowsCallback | None = None) -> _Ticket:
        return _Ticket(upscale_image(image, self.engine, progress))

    def close(self) -> None:
        """Nothing in flight."""


@dataclass
class _Ahead:
    """A job whose preparation is done: its outcome if it does not run, else how it runs and (an
    image) its read on a reader thread, with the bytes the budget holds for it."""

    index: int
    job: Job
    started: float
    go: Outcome | Go
    read: Future | None = None
    held: int = 0
    source_bytes: int = 0  # the file's size when it was looked at


@dataclass
class _InFlight:
    index: int
    job: Job
    started: float
    go: Go
    data: ImageData
    ticket: object
    held: int


class _Readers:
    """Images decoded on ``workers`` threads ahead of the engine, as far as the count and the
    memory budget let (srgpu.batch_stages.Budget: only while there is room, never blocking)."""

    def __init__(self, workers: int, order: ChannelOrder, budget: Budget, clock: StageClock,
                 max_pixels: int | None = DEFAULT_MAX_PIXELS) -> None:
        self.order = order
        self.max_pixels = max_pixels
        self.budget = budget
        self.clock = clock
        self.limit = READ_AHEAD_PER_WORKER * workers
        self.ratio = FIRST_RATIO  # decoded bytes per file byte, the largest seen so far
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="srgpu-image-reader")

    def estimate(self, source_bytes: int) -> int:
        """Decoded bytes expected of a file of ``source_bytes`` (0 for one that cannot be looked at:
        its read will say what is wrong)."""
        return int(source_bytes * self.ratio)

    def start(self, job: Job) -> Future:
        return self._pool.submit(self._read, job)

    def _read(self, job: Job) -> ImageData:
        t0 = time.perf_counter()
        try:
            data = read_image_data(job.src, self.order, self.max_pixels)
            _check_alpha(data.pixels, job.dst.suffix, job.src)  # before the upscale: it would be for nothing
            return data
        finally:
            self.clock.add("read", time.perf_counter() - t0)

    def result(self, ahead: _Ahead) -> ImageData | Outcome:
        """The decoded image (the budget now holds its real size), or the job's failure."""
        t0 = time.perf_counter()
        try:
            data = ahead.read.result()  # type: ignore[union-attr]
        except ImageFileError as e:
            return Outcome(ahead.job, "failed", naming(ahead.job.src, str(e)))
        except (OSError, MemoryError) as e:
            return Outcome(ahead.job, "failed", f"{ahead.job.src}: {type(e).__name__}: {e}")
        finally:
            self.clock.add("wait_read", time.perf_counter() - t0)
            self.budget.give_read(ahead.held)
            ahead.held = 0
        ahead.held = data.pixels.nbytes
        self.budget.take_read(ahead.held)
        if ahead.source_bytes:
            self.ratio = max(self.ratio, data.pixels.nbytes / ahead.source_bytes)
        return data

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)  # a decode under way ends by itself


class _Writers:
    """Encodes and writes upscaled images on ``workers`` threads while the calling thread reads
    and upscales the next ones; each outcome goes into ``outcomes`` under its job's index. An
    exception that is not a per-file failure (a bug, or KeyboardInterrupt raised inside a write)
    stops the writing and is raised again in the calling thread."""

    def __init__(self, workers: int, resume: Resume | None, budget: Budget, outcomes: InOrder[Outcome],
                 clock: StageClock, png_compression: int | None) -> None:
        self.resume = resume
        self.budget = budget
        self.outcomes = outcomes
        self.clock = clock
        self.png_compression = png_compression
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="srgpu-image-writer")
        self._futures: set[Future] = set()
        self._error: BaseException | None = None
        self._stop = False  # set on a fatal error or an interrupt: queued writes are not started

    def submit(self, index: int, job: Job, data: ImageData, go: Go, started: float) -> None:
        self.raise_error()
        nbytes = data.pixels.nbytes
        t0 = time.perf_counter()
        self.budget.take_write(nbytes)
        self.clock.add("wait_write", time.perf_counter() - t0)
        future = self._pool.submit(self._run, index, job, data, go, started, nbytes)
        self._futures.add(future)
        future.add_done_callback(self._futures.discard)

    def _run(self, index: int, job: Job, data: ImageData, go: Go, started: float, nbytes: int) -> None:
        try:
            if self._stop:
                return  # stopping: nothing more is written (the job gets no outcome)
            t0 = time.perf_counter()
            try:
                outcome = self._write(job, data, go)
            except BaseException as e:  # noqa: BLE001 - handed to the calling thread
                self._error = self._error or e  # (its 'begin' stays in the journal: the next run redoes it)
                self._stop = True
                return
            finally:
                self.clock.add("write", time.perf_counter() - t0)
            self.outcomes.put(index, replace(outcome, seconds=time.perf_counter() - started))
        finally:
            self.budget.give_write(nbytes)

    def _write(self, job: Job, data: ImageData, go: Go) -> Outcome:
        if self.resume:
            self.resume.begin(job)
        try:
            pixels = fit_to_format(data.pixels, job.dst.suffix, job.src)
            written = write_image_atomic(job.dst, pixels, replace=go.replace, icc=data.icc, order=data.order,
                                         png_compression=self.png_compression, scratch=True,
                                         gray_alpha=data.gray_alpha)
        except OutputExistsError as e:  # a file appeared at dst meanwhile: kept, and said so
            failed = Outcome(job, "failed", str(e))
        except ImageFileError as e:
            failed = Outcome(job, "failed", naming(job.src, str(e)))
        except (OSError, MemoryError) as e:
            failed = Outcome(job, "failed", f"{job.src}: {type(e).__name__}: {e}")
        else:
            if self.resume:
                self.resume.finish(job, go, written.size)
            return Outcome(job, "done", notes=go.notes + written.notes, redone=bool(go.redo))
        if self.resume:
            self.resume.abandon(job)
        return failed

    def raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def drain(self) -> None:
        """Wait for every write handed over so far."""
        for future in list(self._futures):
            future.exception()  # waits; _run keeps its own exceptions
        self.raise_error()

    def close(self, finish_queued: bool = True, raise_errors: bool = True) -> None:
        """Wait for the writes under way, and for the queued ones unless ``finish_queued`` is
        False (an interrupt: what is being written completes whole, nothing more starts)."""
        if not finish_queued:
            self._stop = True
        self._pool.shutdown(wait=True)
        if raise_errors:
            self.raise_error()
        self._error = None


def run_batch(plan: Plan, engine: Engine, video: VideoOptions = VideoOptions(),
              on_start: FileCallback | None = None, on_done: OutcomeCallback | None = None,
              on_frames: FramesCallback | None = None, on_rows: RowsCallback | None = None,
              images: ImageOptions = ImageOptions()) -> BatchResult:
    """Process every job of ``plan``, by the engine's scale; videos as ``video`` says
    (srgpu.video.options.VideoOptions), image files as ``images`` says (ImageOptions). Per-file
    errors (unreadable, corrupt, unsupported files; a failing video) become 'failed' outcomes and
    the batch goes on; engine errors and Ctrl-C stop it (no partial file is left under a final
    name either way; on an engine error the images already upscaled are written first).

    Images go through three stages at once: reader threads decode the next images, the engine
    upscales them in job order on this thread (a GPU engine with a few in flight:
    Engine.image_processor), writer threads encode and publish them; memory in flight is bounded
    (ImageOptions.memory_bytes). A video runs alone, after the images before it are written.
    ``on_start(job)`` comes as a job reaches the engine and ``on_done(outcome)`` once its file is
    complete, both in job order, on this thread. ``on_rows(done, total)``: output rows of the
    image being upscaled, after each band of a large one (upscale_image).

    A folder run keeps a manifest in the output folder (srgpu.manifest) and resumes from it: see
    ``Resume`` for what becomes of outputs that exist. No output ever replaces a file that
    appeared at its name during the run, unless ``plan.overwrite``."""
    started = time.perf_counter()
    reported: list[Outcome] = []
    outcomes: InOrder[Outcome] = InOrder()
    clock = StageClock()
    workers = images.workers
    budget = Budget(images.memory_bytes or default_budget())
    folders = OutputFolders()
    resume = None if plan.single else Resume(plan, engine.model, engine.scale, video)
    processor = (engine.image_processor() if any(j.kind == "image" for j in plan.jobs) else None) \
        or _PlaneProcessor(engine)
    readers = _Readers(workers, processor.order, budget, clock, images.max_pixels)
    writers = _Writers(workers, resume, budget, outcomes, clock, images.png_compression)
    ahead: deque[_Ahead] = deque()
    in_flight: deque[_InFlight] = deque()
    planned = 0
    looked_at: tuple[int, Looked] | None = None

    def report() -> None:
        for outcome in outcomes.ready():
            reported.append(outcome)
            if on_done:
                on_done(outcome)

    def look_ahead() -> None:
        """Prepare the next jobs and start their reads, while count and memory allow."""
        nonlocal planned, looked_at
        while planned < len(plan.jobs) and len(ahead) < readers.limit:
            job = plan.jobs[planned]
            if looked_at is None or looked_at[0] != planned:  # once per job, however often its turn is put off
                looked_at = (planned, Looked.at(job))
            looked = looked_at[1]
            estimate = readers.estimate(looked.source_bytes) if job.kind == "image" else 0
            if ahead and estimate and not readers.budget.room_for_read(estimate):
                return  # the engine works on what is read meanwhile, freeing room
            entry = _Ahead(planned, job, time.perf_counter(), prepare_job(job, plan, folders, resume, looked),
                           source_bytes=looked.source_bytes)
            if job.kind == "image" and isinstance(entry.go, Go):
                entry.held = estimate
                budget.take_read(estimate)
                entry.read = readers.start(job)
            ahead.append(entry)
            planned += 1

    def hand_on(item: _InFlight) -> None:
        """The oldest image on the engine, waited for and handed to a writer."""
        t0 = time.perf_counter()
        try:
            pixels = item.ticket.wait()  # type: ignore[attr-defined]
        except (ImageFileError, OSError, MemoryError) as e:
            outcomes.put(item.index, _failure(item.job, e, time.perf_counter() - item.started))
            return
        finally:
            clock.add("process", time.perf_counter() - t0)
            budget.give_read(item.held)
        clock.add("output_pixels", 0.0, pixels.shape[0] * pixels.shape[1])
        writers.submit(item.index, item.job, replace(item.data, pixels=pixels), item.go, item.started)

    def run_image(entry: _Ahead) -> None:
        data = readers.result(entry)
        if isinstance(data, Outcome):
            outcomes.put(entry.index, replace(data, seconds=time.perf_counter() - entry.started))
            return
        t0 = time.perf_counter()
        try:
            ticket = processor.submit(data.pixels, on_rows)
        except (ImageFileError, OSError, MemoryError) as e:
            budget.give_read(entry.held)
            outcomes.put(entry.index, _failure(entry.job, e, time.perf_counter() - entry.started))
            return
        finally:
            clock.add("process", time.perf_counter() - t0)
        clock.add("process", 0.0, 1)  # one more image on the engine
        clock.add("input_pixels", 0.0, data.pixels.shape[0] * data.pixels.shape[1])
        in_flight.append(_InFlight(entry.index, entry.job, entry.started, entry.go, data, ticket,  # type: ignore[arg-type]
                                   entry.held))
        # the oldest is waited for once enough are queued; before that, whatever is done already
        # goes on to the writers at once (they would otherwise idle while groups fill)
        while in_flight and (len(in_flight) > processor.in_flight or _ready(in_flight[0].ticket)):
            hand_on(in_flight.popleft())

    def finish_in_flight() -> None:
        while in_flight:
            hand_on(in_flight.popleft())

    try:
        while planned < len(plan.jobs) or ahead:
            look_ahead()
            entry = ahead.popleft()
            report()
            if on_start:
                on_start(entry.job)
            if isinstance(entry.go, Outcome):
                outcomes.put(entry.index, entry.go)
            elif entry.job.kind == "image":
                run_image(entry)
            else:  # a video runs alone: the images before it are written first
                finish_in_flight()
                writers.drain()
                report()
                outcome = _video_job(entry.job, entry.go, engine, video, on_frames, resume)
                outcomes.put(entry.index, replace(outcome, seconds=time.perf_counter() - entry.started))
            writers.raise_error()
        finish_in_flight()
        writers.close()
        report()
    except BaseException as e:
        # what is being written completes whole, never half, and is still reported; after an
        # engine error the images it already upscaled are written too, after an interrupt no more
        in_flight.clear()
        with contextlib.suppress(Exception):  # the error under way is the one to report
            processor.close()
        readers.close()
        writers.close(finish_queued=not isinstance(e, KeyboardInterrupt), raise_errors=False)
        report()
        raise
    finally:
        readers.close()
        processor.close()
        if resume is not None:
            resume.close()  # after the writers: every output they published is in the journal
    return BatchResult(tuple(reported), time.perf_counter() - started, plan.single, StageTimes.of(clock, workers))


def _ready(ticket: object) -> bool:
    """Whether a ticket's result is there without waiting (a ticket that cannot say: no)."""
    ready = getattr(ticket, "ready", None)
    return bool(ready()) if ready is not None else False


def image_processor_for(engine: Engine) -> ImageProcessor:
    """The engine's image path (a GPU engine's overlapped one), else the CPU engine's exact
    plane path: what run_batch uses, for a worker that takes one image at a time."""
    return engine.image_processor() or _PlaneProcessor(engine)


def upscale_image_file(job: Job, replace_output: bool, processor: ImageProcessor,
                       png_compression: int | None = None, on_rows: RowsCallback | None = None,
                       max_pixels: int | None = None) -> tuple[Outcome, int | None]:
    """One image file, read, upscaled and published, one stage after another (a worker's share of
    a folder, srgpu.filetasks; run_batch overlaps the same stages over many files): its outcome
    and, when done, the size written. Per-file problems are a failed outcome, as in run_batch."""
    started = time.perf_counter()
    try:
        data = read_image_data(job.src, processor.order, max_pixels)  # type: ignore[arg-type]
        _check_alpha(data.pixels, job.dst.suffix, job.src)  # before the upscale: it would be for nothing
        pixels = processor.submit(data.pixels, on_rows).wait()
        pixels = fit_to_format(pixels, job.dst.suffix, job.src)
        written = write_image_atomic(job.dst, pixels, replace=replace_output, icc=data.icc, order=data.order,
                                     png_compression=png_compression, scratch=True, gray_alpha=data.gray_alpha)
    except OutputExistsError as e:  # a file appeared at dst meanwhile: kept, and said so
        return Outcome(job, "failed", str(e), time.perf_counter() - started), None
    except (ImageFileError, OSError, MemoryError) as e:
        return _failure(job, e, time.perf_counter() - started), None
    return Outcome(job, "done", seconds=time.perf_counter() - started, notes=written.notes), written.size


def _failure(job: Job, error: BaseException, seconds: float) -> Outcome:
    if isinstance(error, ImageFileError):
        return Outcome(job, "failed", naming(job.src, str(error)), seconds)
    return Outcome(job, "failed", f"{job.src}: {type(error).__name__}: {error}", seconds)


class OutputFolders:
    """The folders a batch writes into, each made ready once: created, and cleared of the
    temporaries that killed srgpu runs left there (srgpu.outputs: only srgpu's own names, only where
    their process is gone), with one look at each folder however many files go into it."""

    def __init__(self) -> None:
        self._ready: set[Path] = set()

    def prepare(self, folder: Path) -> None:
        if folder in self._ready:
            return
        folder.mkdir(parents=True, exist_ok=True)
        outputs.remove(outputs.stale_temps_in(folder))
        self._ready.add(folder)

    def sweep(self) -> None:
        """Remove the temporaries whose process is gone from every folder made ready: what a worker
        killed mid-file left (srgpu.batch_workers), before the next run would."""
        for folder in self._ready:
            outputs.remove(outputs.stale_temps_in(folder))


def prepare_job(job: Job, plan: Plan, folders: OutputFolders, resume: Resume | None,
                looked: Looked | None = None) -> Outcome | Go:
    """The job's outcome if it cannot or need not run; else how it runs (its output folder made
    ready). ``looked``: the job's source and output as already looked at (else looked at here)."""
    if job.kind == "unsupported":
        return Outcome(job, "failed", unsupported(job.src))
    if job.problem:
        return Outcome(job, "failed", job.problem)
    looked = looked or Looked.at(job)
    output = looked.output if isinstance(looked.output, os.stat_result) else None
    # (a folder run's Resume refuses an output that is one of the inputs, by file identity)
    if resume is None and _same(job.src, job.dst):
        return Outcome(job, "failed", f"{job.dst}: output would replace its input")
    if output is not None and stat.S_ISDIR(output.st_mode):
        return Outcome(job, "failed", f"{job.dst}: is a folder, so the output cannot be written under that name")
    if resume is not None:
        go = resume.decide(job, looked)
    elif output is not None and not plan.overwrite:  # one file: planning refused this, unless it appeared since
        go = Outcome(job, "failed", f"{job.dst}: output exists (use --overwrite to replace it)")
    else:
        go = Go(plan.overwrite)
    if isinstance(go, Outcome):
        return go
    try:
        folders.prepare(job.dst.parent)
    except OSError as e:
        return Outcome(job, "failed", f"{job.dst.parent}: cannot create folder ({e.strerror or e})")
    return go


def _video_job(job: Job, go: Go, engine: Engine, video: VideoOptions,
               on_frames: FramesCallback | None, resume: Resume | None) -> Outcome:
    if resume:
        resume.begin(job)
    outcome = run_video(job, go.replace, engine, video, on_frames)
    if resume and outcome.status == "done":
        try:
            resume.finish(job, go, job.dst.stat().st_size)
        except OSError:
            pass  # gone already: nothing to record
    elif resume:
        resume.abandon(job)
    if outcome.status != "done" or not go.redo:
        return outcome
    return replace(outcome, notes=go.notes + outcome.notes, redone=True)


def run_video(job: Job, overwrite: bool, engine: Engine, video: VideoOptions,
               on_frames: FramesCallback | None) -> Outcome:
    if _video is None:
        return Outcome(job, "failed", f"{job.src}: video support is not available in this installation")
    try:
        result = _video.upscale_video(job.src, job.dst, engine, video, overwrite=overwrite, progress=on_frames)
    except _video.VideoError as e:
        return Outcome(job, "failed", naming(job.src, str(e)))
    except OutputExistsError as e:  # srgpu.video publishes with outputs.publish: the file that appeared is kept
        return Outcome(job, "failed", str(e))
    w, h = result.output_size
    detail = f"{result.frames} frames, {w}x{h}, {result.codec} {result.pix_fmt}, {result.fps:.1f} fps"
    if result.decoder != "software":  # NVDEC decoded some or all of it
        detail += f", decoded by {result.decoder}"
    return Outcome(job, "done", detail, notes=tuple(result.notes), video=result)


def naming(src: Path, message: str) -> str:
    """Make sure a per-file message names the file it is about."""
    return message if str(src) in message else f"{src}: {message}"
