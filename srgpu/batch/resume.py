"""A folder run's resume: what it skips, redoes or leaves alone, from the manifest kept in the output folder
(srgpu.manifest) and the settings of this run."""

from __future__ import annotations
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping
from ..manifest import (Fingerprint, Manifest, Record, Settings, VideoSettings, json_form, recorded_values,
                        settings_fingerprint)
from ..video.options import VideoOptions
from .plan import BatchPlan, Job, Outcome, _inside, video_api


_VIDEO_KEYS = ("codec", "crf", "preset", "pix_fmt", "encoder_args", "video_stream", "deinterlace")


@dataclass(frozen=True)
class ToRun:
    """A job that is to run: whether publishing its output may replace what is at its name, the
    source as it was before it was read, and why an existing output is made again ('' if not)."""

    replace: bool
    source: Fingerprint | None = None
    redo: str = ""

    @property
    def notes(self) -> tuple[str, ...]:
        return (f"redone: {self.redo}",) if self.redo else ()


def folder_video_settings(video: VideoOptions, codec: str | None) -> VideoSettings:
    """A folder video's settings for its fingerprint (srgpu.manifest.settings_fingerprint): the
    codec resolved for its output (``codec``), the rest as the options say (the folder decides
    before it reads the source; the source's fingerprint is beside them in its record)."""
    enc = video.encode
    # deinterlace absent for the default: a folder made before --deinterlace still resumes
    return VideoSettings(codec, enc.crf, enc.preset, enc.pix_fmt, tuple(enc.extra_args), video.video_stream,
                         video.deinterlace if video.deinterlace != "auto" else None)


def output_codec(dst: Path, video: VideoOptions) -> str | None:
    """The encoder a video written to ``dst`` gets (srgpu.video.api.video_codec); None where that
    cannot be decided (no video support, no such container or encoder: the video fails alone when
    it runs, with its own error)."""
    api = video_api()
    if api is None:
        return video.encode.codec
    try:
        return api.video_codec(dst, video.encode)
    except api.VideoError:
        return None


def _differences(old: dict, values: dict | None, new: Settings) -> str:
    """How the settings an output was made with (``old`` as recorded, ``values`` in today's form:
    srgpu.manifest.recorded_values) differ from this run's, in words."""
    if not isinstance(values, dict):
        return "with settings srgpu has no record of"
    now = json_form(new)  # as they would read back from the manifest
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
class JobStat:
    """One look at a job's source and output (os.stat each, or why not; ``output`` None: nothing
    there), taken once and shared by every decision about the job: a folder of small images pays
    for each system call, and each one gives the GIL to the reader and writer threads."""

    source: os.stat_result | OSError
    output: os.stat_result | OSError | None

    @classmethod
    def at(cls, job: Job) -> "JobStat":
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

    def __init__(self, plan: BatchPlan, identity: Mapping[str, Any], video: VideoOptions) -> None:
        """``identity``: what of the engines decides the outputs (srgpu.manifest.model_identity of
        the engine's model and scale), taken from the engines that make them."""
        self.plan = plan
        self.manifest = Manifest.load(plan.output_root)
        self.identity = dict(identity)
        self.image = settings_fingerprint(self.identity)
        self.video_options = video
        self._videos: dict[str, Settings] = {}  # by output extension: the codec follows the container
        self.inputs = _file_ids(job.src for job in plan.jobs)

    def decide(self, job: Job, looked: JobStat | None = None) -> Outcome | ToRun:
        looked = looked or JobStat.at(job)
        if isinstance(looked.source, OSError):
            e = looked.source
            return Outcome(job, "failed", f"{job.src}: cannot read ({e.strerror or e})")
        source = Fingerprint(looked.source.st_size, looked.source.st_mtime_ns)
        st = looked.output
        if st is None:
            return ToRun(self.plan.overwrite, source)
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
        return ToRun(True, source, why)

    def _unrecorded(self, job: Job, source: Fingerprint) -> Outcome | ToRun:
        if _inside(job.dst, self.plan.input_root):
            return Outcome(job, "failed", f"{job.dst}: is a file of the input folder {self.plan.input_root} that "
                                          "srgpu did not make; an input is never replaced, even with --overwrite")
        if self.plan.overwrite:
            return ToRun(True, source)
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
        if record.settings == settings.key:
            return ""
        # another key: a record of an earlier srgpu's form that means these same settings resumes
        old = self.manifest.settings.get(record.settings, {})
        # (a codec None there was the container's default: what the output's name gives with none named)
        values = recorded_values(old, lambda: output_codec(job.dst, VideoOptions()))
        if values == json_form(settings):
            return ""
        return "the output was made " + _differences(old, values, settings)

    def _settings(self, job: Job) -> Settings:
        if job.kind != "video":
            return self.image
        suffix = job.dst.suffix.lower()
        settings = self._videos.get(suffix)
        if settings is None:  # once per extension, and only for a folder that holds videos
            codec = output_codec(job.dst, self.video_options)
            settings = settings_fingerprint(self.identity, folder_video_settings(self.video_options, codec))
            self._videos[suffix] = settings
        return settings

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

    def finish(self, job: Job, go: ToRun, size: int) -> None:
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


