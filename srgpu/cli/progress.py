"""The progress the CLI draws: a bar on a terminal (tqdm), a line every few seconds in a log; over
images and video frames, the chunks of a long video, the files of a folder on workers."""

from __future__ import annotations
import sys
import time
from tqdm import tqdm
from ..batch.plan import BatchPlan, Job, Outcome
from .output import _file_outcome, _info


LOG_PROGRESS_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal
# No rate is shown before this much time or before any work of this run is counted (files skipped
# at once, as in a resumed folder, are not: they read as thousands a second).
MIN_RATE_SECONDS = 0.1


def _rate(done: int, seconds: float) -> float | None:
    """Work per second over the real elapsed time, or None while it would mean nothing."""
    return done / seconds if done > 0 and seconds >= MIN_RATE_SECONDS else None


class _TermBar(tqdm):
    """tqdm with _LogBar's rate: this run's work over real elapsed time (no smoothing of bursts),
    and '?' until it means something."""

    @property
    def format_dict(self) -> dict:  # type: ignore[override]
        d = super().format_dict
        d["rate"] = _rate(d["n"] - d["initial"], d["elapsed"]) or 0  # 0: tqdm shows '?' (and no ETA)
        return d


class _LogBar:
    """Progress for a log (stderr not a terminal): a plain line every LOG_PROGRESS_EVERY seconds and
    one at the end, instead of a bar redrawn with carriage returns and escape codes. The part of
    tqdm's interface that _Progress uses."""

    def __init__(self, total: int | None, unit: str, desc: str, started: float | None = None) -> None:
        self.total, self.unit, self.desc = total, unit, desc
        self.n = 0
        self.initial = 0  # done before this run (a resumed job): not part of the rate
        self._start = started if started is not None else time.monotonic()
        self._last = time.monotonic()
        self._printed = -1  # the count last printed
        self._closed = False

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.monotonic() - self._last >= LOG_PROGRESS_EVERY:
            self._line()

    def refresh(self) -> None:
        """Nothing to redraw."""

    def close(self) -> None:
        if not self._closed and self.n and self.n != self._printed:
            self._line()
        self._closed = True

    def _line(self) -> None:
        self._last = now = time.monotonic()
        self._printed = self.n
        rate = _rate(self.n - self.initial, now - self._start)
        done = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        speed = "" if not rate else f", {rate:.1f} {self.unit}/s" if rate >= 0.1 else f", {1 / rate:.0f} s/{self.unit}"
        eta = f", ETA {_clock((self.total - self.n) / rate)}" if self.total and rate and self.n < self.total else ""
        things = {"img": "images", "frame": "frames", "file": "files", "row": "rows"}.get(self.unit, self.unit)
        print(f"srgpu: {self.desc}: {done} {things}{speed}{eta}", file=sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


def _bar(total: int | None, unit: str, desc: str, leave: bool = True, started: float | None = None) -> tqdm | _LogBar:
    """A progress bar on a terminal, plain lines in a log; ``started`` (time.monotonic()): when the
    work it counts began, if before the bar (its rate and ETA count from then)."""
    if not sys.stderr.isatty():
        return _LogBar(total, unit, desc, started)
    bar = _TermBar(total=total, unit=unit, desc=desc, file=sys.stderr, dynamic_ncols=True, leave=leave, smoothing=0)
    if started is not None:
        bar.start_t -= time.monotonic() - started
    return bar


class _Progress:
    """Progress for a batch: files (images/s, ETA) and, inside a video, frames (fps, ETA); bars on a
    terminal, plain periodic lines in a log."""

    def __init__(self, plan: BatchPlan, quiet: bool) -> None:
        self.quiet = quiet
        self.single = plan.single
        self.files: tqdm | _LogBar | None = None
        self.frames: tqdm | _LogBar | None = None
        self.rows: tqdm | _LogBar | None = None
        self.job: Job | None = None
        self.job_started = time.monotonic()
        all_images = not plan.has_video
        if not quiet and (not plan.single or all_images):
            self.files = _bar(len(plan.jobs), "img" if all_images else "file", "upscale")

    def start(self, job: Job) -> None:
        self.job, self.job_started = job, time.monotonic()
        if job.kind == "video" and not self.quiet:
            self.frames = _bar(None, "frame", job.src.name, leave=self.single)

    def rows_done(self, done: int, total: int) -> None:
        """Inside a large image (upscaled in bands): output rows, so that the bar moves."""
        if self.quiet:
            return
        if self.rows is None and done < total:
            self.rows = _bar(total, "row", self.job.src.name, leave=False, started=self.job_started)
        if self.rows is not None:
            self.rows.update(done - self.rows.n)
            if done >= total:
                self.rows.close()
                self.rows = None

    def frames_done(self, increment: int, total: int | None) -> None:
        if self.frames is None:
            return
        if total and self.frames.total != total:
            self.frames.total = total
            self.frames.refresh()
        self.frames.update(increment)

    def done(self, outcome: Outcome) -> None:
        if self.frames is not None:
            self.frames.close()
            self.frames = None
        _file_outcome(outcome, self.quiet, self.files, error=not self.single)  # one file's error: in the summary

    def close(self) -> None:
        for bar in (self.rows, self.frames, self.files):
            if bar is not None:
                bar.close()


class _ChunkBar:
    """Progress of a video cut into chunks: one bar (or log line) over the whole job's frames, with
    the chunks done in its description; frames already made by an interrupted run count as done
    from the start (the rate and ETA count only this run's work)."""

    def __init__(self, name: str, quiet: bool) -> None:
        self.name, self.quiet = name, quiet
        self.bar: tqdm | _LogBar | None = None
        self.done = self.total = self.reused = self.reused_frames = 0

    def begin(self, frames: int, chunks: int, frames_done: int, chunks_done: int) -> None:
        self.done, self.total = chunks_done, chunks
        self.reused, self.reused_frames = chunks_done, frames_done  # made by an interrupted run (--json)
        if self.quiet:
            return
        if chunks_done:
            _info(f"resuming: {chunks_done} of {chunks} chunks ({frames_done} frames) already made", False)
        self.bar = _bar(frames, "frame", self._desc())
        if isinstance(self.bar, _LogBar):
            self.bar.initial = self.bar.n = frames_done
        elif frames_done:
            self.bar.initial = self.bar.n = self.bar.last_print_n = frames_done
            self.bar.refresh()

    def _desc(self, what: str | None = None) -> str:
        return f"{self.name} [{what or f'{self.done}/{self.total} chunks'}]"

    def _describe(self, desc: str) -> None:
        if isinstance(self.bar, _LogBar):
            self.bar.desc = desc
        elif self.bar is not None:
            self.bar.set_description(desc, refresh=True)

    def frames(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def chunk_done(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        self._describe(self._desc())

    def joining(self) -> None:
        self._describe(self._desc("joining"))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class _FilesProgress:
    """Progress of a folder on workers: one bar over the files (images/s, ETA) and, where the
    folder holds videos, one over the frames every worker makes (a worker that dies takes its
    frames back); a failed file's error and every note as each file's outcome comes."""

    def __init__(self, plan: BatchPlan, quiet: bool) -> None:
        self.quiet = quiet
        self.files: tqdm | _LogBar | None = None
        self.frames_bar: tqdm | _LogBar | None = None
        if not quiet:
            self.files = _bar(len(plan.jobs), "file" if plan.has_video else "img", "upscale")
            if plan.has_video:
                self.frames_bar = _bar(None, "frame", "video frames")

    def frames(self, n: int) -> None:
        if self.frames_bar is not None:
            self.frames_bar.update(n)

    def done(self, outcome: Outcome) -> None:
        _file_outcome(outcome, self.quiet, self.files)

    def close(self) -> None:
        for bar in (self.frames_bar, self.files):
            if bar is not None:
                bar.close()


