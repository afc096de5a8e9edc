"""What a batch will do, before any work: the jobs of one file or a folder tree (images and videos), their
output names and the checks on the request itself (BatchError); the outcomes and result a run gives back."""

from __future__ import annotations
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Literal
from types import ModuleType

import cv2
from .. import outputs
from ..images.files import IMAGE_EXTENSIONS
from .stages import StageTimes

if TYPE_CHECKING:
    from ..video.api import VideoResult

if importlib.util.find_spec("srgpu.video.api") is not None:
    from ..video import api as _video
else:  # pragma: no cover - only in a build without srgpu.video
    _video = None


OUTPUT_FORMATS = ("png", "jpg", "webp")
# used only to recognise a video (and say that video support is missing) when srgpu.video is absent
_FALLBACK_VIDEO_EXTENSIONS = frozenset({".mp4", ".mkv", ".mov", ".webm", ".avi", ".m4v", ".ts"})

Kind = Literal["image", "video", "unsupported"]
Status = Literal["done", "skipped", "failed"]


class BatchError(ValueError):
    """The request itself cannot be carried out (nothing was processed); the message says why."""


def video_support() -> bool:
    return _video is not None


def video_api() -> ModuleType | None:
    """srgpu.video.api, or None in a build without video support: the one place that decides."""
    return _video


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
class BatchPlan:
    """The files of one run (a file, or a folder tree) and where each output goes."""

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
    video: "VideoResult | None" = None  # a video done: what srgpu.video wrote and verified (frames, fps)


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
    folder when it lies inside the input) or hidden folders. Links to folders are followed, as links
    to files are (a folder of links to photos kept elsewhere is the user's folder, as ``cp -rL``
    copies it), except a link to a folder the walk is already inside (a loop)."""
    found: list[Path] = []
    excluded = exclude.resolve() if exclude is not None else None
    inside: dict[str, frozenset[Path]] = {str(folder): frozenset({folder.resolve()})}  # real folders above
    for root, dirs, files in os.walk(folder, followlinks=True):
        here = Path(root)
        above = inside.pop(root, frozenset())
        kept = []
        for d in sorted(d for d in dirs if not d.startswith(".")):
            real = (here / d).resolve()
            if real != excluded and real not in above:
                kept.append(d)
                inside[os.path.join(root, d)] = above | {real}
        dirs[:] = kept
        found.extend(here / f for f in sorted(files) if not f.startswith("."))
    return found


def plan_batch(input_path: Path, output_path: Path, fmt: str | None = None, overwrite: bool = False) -> BatchPlan:
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


def _plan_file(src: Path, out: Path, fmt: str | None, overwrite: bool) -> BatchPlan:
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
    return BatchPlan((Job(src, out, kind),), single=True, overwrite=overwrite, input_root=src.parent,
                output_root=out.parent)


def _plan_folder(src_dir: Path, out_dir: Path, fmt: str | None, overwrite: bool) -> BatchPlan:
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
    jobs = _folder_claims(jobs, out_dir)
    _check_writable(out_dir if out_dir.is_dir() else out_dir.parent)
    return BatchPlan(tuple(jobs), single=False, overwrite=overwrite, input_root=src_dir, output_root=out_dir)


def _folder_claims(jobs: list[Job], out_dir: Path) -> list[Job]:
    """A file whose output name is the folder another file's output goes into (d.jpg as d.png
    beside a folder d.png/ with --format png): that file fails alone, said now, instead of one of
    them finding the other's in its place midway."""
    folders: dict[Path, Path] = {}  # an output folder -> a source whose output goes into it
    for job in jobs:
        if job.kind != "unsupported":
            for parent in job.dst.parents:
                if parent == out_dir:
                    break
                folders.setdefault(parent, job.src)
    return [Job(j.src, j.dst, j.kind, f"{j.src}: its output {j.dst} is the folder that the output of "
                f"{folders[j.dst]} goes into") if j.problem is None and j.kind != "unsupported" and j.dst in folders
            else j for j in jobs]


# ---------------------------------------------------------------- the batch


FileCallback = Callable[[Job], None]
OutcomeCallback = Callable[[Outcome], None]
FramesCallback = Callable[[int, "int | None"], None]

