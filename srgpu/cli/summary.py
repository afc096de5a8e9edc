"""The summary of an ``srgpu upscale`` run that scripts read (``--json``): one JSON object on
stdout at the end, whatever happened, with one entry per input and the run's totals and exit
status. Fields: docs/json.md.

:class:`RunSummary` (and the :class:`InputSummary` and :class:`Totals` it holds) are the data,
made from what the run already knows: a :class:`~srgpu.images.BatchResult` (one file, or a
folder in this process or on the workers) or a chunked video's
:class:`~srgpu.video.api.VideoResult`. Nothing is probed again: a video's ``output_frames`` is
the count srgpu.video read back from the finished file when it verified it.

:class:`JsonReport` collects them during a run and prints the object once: ``with
report.running():`` around the run sends everything else printed on stdout to stderr (the human
``wrote ...`` lines), and on the way out, however the run ends (done, files failed, a bad request,
Ctrl-C), prints the summary with the exit status the command is about to exit with.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, TextIO

from .. import __version__

if TYPE_CHECKING:
    from ..batch.plan import BatchPlan, BatchResult, Job, Outcome
    from ..video.api import VideoResult
    from ..video.options import EncodeOptions

Status = Literal["written", "redone", "skipped", "failed"]
SCHEMA = 1  # the summary's version: a field removed or changed in meaning raises it


@dataclass(frozen=True)
class Encoder:
    """What a video was encoded with: the encoder and pixel format srgpu chose or was given, the
    CRF it passed (the codec's srgpu default where none was given; None where the codec takes
    none), the preset and the extra ffmpeg arguments."""

    codec: str
    pix_fmt: str
    crf: int | None
    preset: str | None
    args: tuple[str, ...] = ()

    @classmethod
    def of(cls, result: "VideoResult", encode: "EncodeOptions | None") -> "Encoder":
        from ..video.api import DEFAULT_CRF, NO_CRF

        crf = encode.crf if encode is not None and encode.crf is not None else DEFAULT_CRF.get(result.codec)
        return cls(result.codec, result.pix_fmt, None if result.codec in NO_CRF else crf,
                   encode.preset if encode is not None else None,
                   tuple(encode.extra_args) if encode is not None else ())

    def to_dict(self) -> dict[str, Any]:
        return {"codec": self.codec, "pix_fmt": self.pix_fmt, "crf": self.crf, "preset": self.preset,
                "args": list(self.args)}


@dataclass(frozen=True)
class Chunks:
    """A video cut into chunks: how many, and how many of them (and their frames) an interrupted
    earlier run had made and verified, kept by this one."""

    count: int
    reused: int = 0
    reused_frames: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "reused": self.reused, "reused_frames": self.reused_frames}


@dataclass(frozen=True)
class RunSettings:
    """What every input of a run shares: the device(s) as srgpu describes them, the model, the
    scale, the GPU arithmetic asked for (``fp32`` on the CPU, which is always exact) and the
    encoder settings asked for (a video's own entry has what it was encoded with)."""

    device: str | None = None
    model: str | None = None
    arch: str | None = None
    scale: int | None = None
    precision: str | None = None
    encode: "EncodeOptions | None" = None

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "model": self.model, "arch": self.arch, "scale": self.scale,
                "precision": self.precision}


@dataclass(frozen=True)
class InputSummary:
    """One input of the run: what became of it and why, and what was made."""

    input: str
    output: str
    kind: str  # image | video | unsupported
    status: Status
    reason: str | None  # why skipped, redone or failed (None: written)
    frames: int | None  # upscaled by this run (an image: 1); None where nothing was
    output_frames: int | None  # what the output holds as srgpu verified it (an image: 1); None: not written
    seconds: float
    fps: float | None  # a video's frames upscaled per second; None for an image, or nothing done
    settings: RunSettings
    encoder: Encoder | None = None  # a video written
    decoder: str | None = None  # a video written: what decoded it (software, an NVDEC decoder)
    output_size: tuple[int, int] | None = None  # a video written: (width, height) as encoded
    chunks: Chunks | None = None  # a video cut into chunks
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": self.input, "output": self.output, "kind": self.kind, "status": self.status,
            "reason": self.reason, "frames": self.frames, "output_frames": self.output_frames,
            "seconds": round(self.seconds, 3), "fps": None if self.fps is None else round(self.fps, 2),
            **self.settings.to_dict(),
            "encoder": None if self.encoder is None else self.encoder.to_dict(),
            "decoder": self.decoder,
            "output_size": None if self.output_size is None else list(self.output_size),
            "chunks": None if self.chunks is None else self.chunks.to_dict(),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Totals:
    inputs: int
    written: int
    redone: int
    skipped: int
    failed: int
    frames: int  # upscaled by this run, images counted as 1
    output_frames: int  # in the outputs written by this run
    seconds: float  # the whole run

    @classmethod
    def of(cls, inputs: tuple[InputSummary, ...], seconds: float) -> "Totals":
        def count(status: str) -> int:
            return sum(i.status == status for i in inputs)

        return cls(len(inputs), count("written"), count("redone"), count("skipped"), count("failed"),
                   sum(i.frames or 0 for i in inputs), sum(i.output_frames or 0 for i in inputs), seconds)

    def to_dict(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "written": self.written, "redone": self.redone, "skipped": self.skipped,
                "failed": self.failed, "frames": self.frames, "output_frames": self.output_frames,
                "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class RunSummary:
    """The whole run: the inputs, the totals and the exit status; ``error``, the one-line error of
    a run that failed as a whole (a bad request, an interrupt), the words srgpu printed on stderr."""

    input: str
    output: str
    settings: RunSettings
    inputs: tuple[InputSummary, ...]
    totals: Totals
    exit_status: int
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"srgpu": __version__, "schema": SCHEMA, "command": "upscale", "input": self.input,
                "output": self.output, **self.settings.to_dict(),
                "inputs": [i.to_dict() for i in self.inputs], "totals": self.totals.to_dict(),
                "exit_status": self.exit_status, "error": self.error}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


# ---------------------------------------------------------------- from what a run knows


def _redone_reason(notes: tuple[str, ...]) -> str | None:
    for note in notes:
        if note.startswith("redone: "):
            return note[len("redone: "):]
    return None


def from_outcome(outcome: "Outcome", settings: RunSettings) -> InputSummary:
    """One file's outcome (srgpu.images.Outcome) as a summary entry."""
    job = outcome.job
    base = dict(input=str(job.src), output=str(job.dst), kind=job.kind, seconds=outcome.seconds,
                settings=settings, notes=tuple(outcome.notes))
    if outcome.status != "done":
        return InputSummary(status=outcome.status, reason=outcome.message or None, frames=None, output_frames=None,
                            fps=None, **base)  # type: ignore[arg-type]
    status: Status = "redone" if outcome.redone else "written"
    reason = _redone_reason(outcome.notes) if outcome.redone else None
    video = outcome.video
    if video is None:  # an image
        return InputSummary(status=status, reason=reason, frames=1, output_frames=1, fps=None, **base)  # type: ignore[arg-type]
    return InputSummary(status=status, reason=reason, frames=video.frames, output_frames=video.frames,
                        fps=video.fps, encoder=Encoder.of(video, settings.encode), decoder=video.decoder,
                        output_size=tuple(video.output_size), **base)  # type: ignore[arg-type]


def from_chunked(job: "Job", result: "VideoResult", settings: RunSettings, chunks: Chunks,
                 seconds: float) -> InputSummary:
    """A video cut into chunks (srgpu.video.chunked): ``result.frames`` is the count read back
    from the joined file; the frames upscaled by this run leave out the chunks it reused."""
    return InputSummary(input=str(job.src), output=str(job.dst), kind="video", status="written", reason=None,
                        frames=result.frames - chunks.reused_frames, output_frames=result.frames, seconds=seconds,
                        fps=result.fps, settings=settings, encoder=Encoder.of(result, settings.encode),
                        decoder=result.decoder, output_size=tuple(result.output_size),  # type: ignore[arg-type]
                        chunks=chunks, notes=tuple(result.notes))


# ---------------------------------------------------------------- collected during a run


def one_line(message: object) -> str:
    return " ".join(str(message).split())


def exit_status_of(error: BaseException | None) -> tuple[int, str | None]:
    """The exit status the command exits with after ``error`` (None: it ends normally), and the
    error's one line (None where there is none to say: a plain exit with a status)."""
    if error is None:
        return 0, None
    if isinstance(error, KeyboardInterrupt):  # Ctrl-C, or SIGTERM/SIGHUP raised as one (srgpu.cli)
        signum = getattr(error, "signum", signal.SIGINT)
        return 128 + signum, ("interrupted" if signum == signal.SIGINT
                              else f"terminated ({signal.Signals(signum).name})")
    if isinstance(error, SystemExit):
        code = error.code
        return (code if isinstance(code, int) else 0 if code is None else 1), None
    code = getattr(error, "exit_code", None)  # click's Exit (no message) and usage errors (status 2)
    if isinstance(code, int):
        format_message = getattr(error, "format_message", None)
        return code, one_line(format_message()) if callable(format_message) else None
    return 1, one_line(error)


@dataclass
class JsonReport:
    """Collects an ``upscale`` run's results and prints its RunSummary once, at the end."""

    input: Path
    output: Path
    out: TextIO = field(default_factory=lambda: sys.stdout)  # where the JSON goes (stdout when made)
    settings: RunSettings = field(default_factory=RunSettings)
    entries: list[InputSummary] = field(default_factory=list)
    enabled: bool = True  # False: collects nothing, prints nothing (a run without --json)
    plan: "BatchPlan | None" = None
    seen: list[InputSummary] = field(default_factory=list)  # outcomes as they came (a run stopped midway)
    printed: bool = False

    def set(self, **changes: Any) -> None:
        """Settings as they become known (device, model, scale, precision, encode)."""
        self.settings = replace(self.settings, **changes)

    def engine(self, engine: Any, description: str) -> None:
        """The device of a run in this process (srgpu.engine.Engine): its description, and the
        arithmetic (the CPU is always fp32)."""
        gpu = getattr(engine, "name", "cpu") != "cpu"
        self.set(device=description, precision=str(getattr(engine, "precision", self.settings.precision))
                 if gpu else "fp32")

    def workers(self, description: str, gpu: bool) -> None:
        self.set(device=description, precision=self.settings.precision if gpu else "fp32")

    def watch(self, on_done: "Callable[[Outcome], None]") -> "Callable[[Outcome], None]":
        """``on_done`` for run_batch that also keeps each outcome as it comes: a run stopped midway
        (Ctrl-C, an engine error) still lists the files it completed."""
        if not self.enabled:
            return on_done

        def both(outcome: "Outcome") -> None:
            self.seen.append(from_outcome(outcome, self.settings))
            on_done(outcome)
        return both

    def batch(self, result: "BatchResult") -> None:
        self.entries = [from_outcome(o, self.settings) for o in result.outcomes]

    def chunked(self, job: "Job", result: "VideoResult", chunks: Chunks, seconds: float) -> None:
        self.entries = [from_chunked(job, result, self.settings, chunks, seconds)]

    def summary(self, error: BaseException | None, seconds: float) -> RunSummary:
        status, message = exit_status_of(error)
        entries = list(self.entries or self.seen)
        if not entries and message and self.plan is not None and self.plan.single:
            job = self.plan.jobs[0]  # the one input, failed as a whole (a chunked video, an interrupt)
            entries = [InputSummary(str(job.src), str(job.dst), job.kind, "failed", message, None, None, seconds,
                                    None, self.settings)]
        inputs = tuple(replace(e, settings=self.settings) for e in entries)
        return RunSummary(str(self.input), str(self.output), self.settings, inputs, Totals.of(inputs, seconds),
                          status, message)

    @contextlib.contextmanager
    def running(self) -> Iterator["JsonReport"]:
        """Around the run: stdout goes to stderr meanwhile (the human lines), and the summary is
        printed on the way out, with the exit status of however the run ended; the error passes on."""
        import time

        if not self.enabled:
            yield self
            return
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            with contextlib.redirect_stdout(sys.stderr):
                yield self
        except BaseException as e:
            error = e
            raise
        finally:
            if not self.printed:
                self.printed = True
                self.out.write(self.summary(error, time.perf_counter() - started).to_json() + "\n")
                self.out.flush()
