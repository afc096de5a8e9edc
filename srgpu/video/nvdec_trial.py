"""NVDEC's check for a chunked run, off the run's critical path.

Before a chunk is decoded on NVDEC, NVDEC must have given the source's first frames exactly as the
CPU's decoder gives them (srgpu.video.hwdecode.decodes_like_software: about 0.9 s, most of it
NVDEC's start). The coordinator used to run that trial before handing out any chunk, while the
workers' first chunks, which start on the CPU's decoder anyway (srgpu.video.handover), could
already have begun (BENCHMARKS.md, sessions 32-33). So the trial runs in a thread of the
coordinator beside the first chunks, and its verdict is a file in the work folder, which any
worker of this machine reads (only a GPU engine of this machine decodes on NVDEC):

- an engine's first chunk starts on the CPU's decoder and hands over to NVDEC as before, unless
  the verdict already says no;
- any later chunk waits for the verdict (it comes seconds before a first chunk ends), then uses
  NVDEC from its first frame or not at all;
- a chunk that NVDEC decoded any frame of is published only under a verdict that says yes:
  where the trial said no (or never answered), the chunk is decoded again on the CPU.

So every frame NVDEC gives the output is, as before, under a trial that passed, and the chunk's
own checks (timestamps, and for a handover its first frames compared) on top.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..manifest import read_json, write_json

VERDICT_NAME = "nvdec.json"
FORMAT, VERSION = "srgpu-nvdec-verdict", 1
# the trial's two decodes are bounded by ffmpeg.run's 60 s each; a verdict later than this counts as no
WAIT_S = 150.0
_POLL_S = 0.02


@dataclass(frozen=True)
class Verdict:
    """The trial's outcome: ``same`` True where NVDEC gave the CPU decoder's frames, else why not."""

    same: bool
    why: str = ""


def verdict_path(work: Path) -> Path:
    return work / VERDICT_NAME


def read(path: Path, key: str) -> Verdict | None:
    """The verdict for job ``key`` at ``path``, or None while there is none (or one of another job)."""
    data = read_json(path, FORMAT, VERSION)
    if data is None or data.get("key") != key or not isinstance(data.get("same"), bool):
        return None
    return Verdict(data["same"], str(data.get("why", "")))


def wait(path: Path, key: str, seconds: float = WAIT_S) -> Verdict:
    """The verdict for job ``key``, waited for up to ``seconds``; none by then: no (NVDEC unchecked)."""
    deadline = time.monotonic() + seconds
    while True:
        found = read(path, key)
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            return Verdict(False, f"NVDEC's check gave no verdict within {seconds:.0f} s")
        time.sleep(_POLL_S)


class Trial:
    """The coordinator's side: ``check`` (returning (True, "") where NVDEC gives the CPU decoder's
    frames, else (False or None, why)) runs in a thread; its verdict is written for job ``key`` at
    ``path``, replacing none of an earlier run (removed before the thread starts, so that a worker
    never reads a stale one)."""

    def __init__(self, path: Path, key: str, check: Callable[[], tuple[bool | None, str]]) -> None:
        self.path, self.key, self._check = path, key, check
        self._verdict: Verdict | None = None
        self._thread = threading.Thread(target=self._run, name="srgpu-nvdec-trial", daemon=True)

    def start(self) -> "Trial":
        self.path.unlink(missing_ok=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            same, why = self._check()
            verdict = (Verdict(True) if same is True
                       else Verdict(False, why or "the source's first frames do not decode cleanly"))
        except Exception as e:  # noqa: BLE001 - a trial that breaks is a no, said
            verdict = Verdict(False, f"NVDEC's check failed: {e}")
        self._verdict = verdict
        try:
            write_json(self.path, {"format": FORMAT, "version": VERSION, "key": self.key,
                                   "same": verdict.same, "why": verdict.why})
        except OSError:
            pass  # the work folder went: the run is failing anyway; workers waiting take no for an answer

    def result(self) -> Verdict:
        """The verdict, once the trial has ended."""
        self._thread.join()
        assert self._verdict is not None
        return self._verdict
