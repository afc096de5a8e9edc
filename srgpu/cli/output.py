"""What the CLI prints: one-line errors and notes on stderr, the outcome of each file of a batch and its summary."""

from __future__ import annotations
import sys
from typing import TYPE_CHECKING

from tqdm import tqdm
from ..batch.plan import BatchResult, Outcome

if TYPE_CHECKING:
    from .progress import _LogBar


def _error(message: str) -> None:
    tqdm.write(f"srgpu: error: {' '.join(str(message).split())}", file=sys.stderr)


def _info(message: str, quiet: bool) -> None:
    if not quiet:
        tqdm.write(f"srgpu: {message}", file=sys.stderr)


def _file_outcome(outcome: Outcome, quiet: bool, files: "tqdm | _LogBar | None", error: bool = True) -> None:
    """A file's outcome as it comes: its error (``error``), its notes, one more on the files bar."""
    if error and outcome.status == "failed":
        _error(outcome.message)
    for note in outcome.notes:
        _info(f"note: {outcome.job.src}: {note}", quiet)
    if files is not None:
        if outcome.status == "skipped" or not outcome.seconds:  # no work: not part of the rate
            files.initial += 1
        files.update(1)


def _report_batch(result: BatchResult, quiet: bool) -> None:
    if result.single:
        outcome = result.outcomes[0]
        if outcome.status == "failed":
            _error(outcome.message)
        elif not quiet:
            detail = f"{outcome.message}, " if outcome.message else ""
            print(f"wrote {outcome.job.dst} ({detail}{outcome.seconds:.1f} s)")
        return
    if not quiet:
        print(result.summary())
    if result.failed:
        _error(f"{len(result.failed)} of {len(result.outcomes)} files failed: "
               + ", ".join(str(o.job.src) for o in result.failed))


