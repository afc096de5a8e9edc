#!/usr/bin/env python3
"""How often the engine's thread gives up the CPU in a folder run, and what that costs: warm
run_batch on FOLDER (GPU engine), the calling thread's voluntary and involuntary context switches
(Linux /proc) per run, beside its wall time and engine stage; and the same images through the
engine alone (no codec threads), for the switches that are the engine's own.

Each voluntary switch is a wait: for the GIL after a call that released it (a CUDA call, a large
NumPy copy, a contended lock), or for the device. With 32 codec threads wanting the GIL, a thread
that lets it go may queue behind several of them before it gets it back.

    python3 dev/folder_engine_switches.py /tmp/f/small --rounds 5 [--hold-gil-copy]

``--hold-gil-copy``: images under 4 MiB copied into the slot's pinned buffer by memoryview (the
GIL held, ~50 us for a small photo) instead of np.copyto (which lets the GIL go for large arrays).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SMALL_COPY = 4 * 2**20


def switches() -> tuple[int, int]:
    """(voluntary, involuntary) context switches of the calling thread so far."""
    got = {}
    for line in Path(f"/proc/self/task/{threading.get_native_id()}/status").read_text().splitlines():
        if line.endswith("ctxt_switches") or "ctxt_switches" in line:
            k, v = line.split(":")
            got[k.strip()] = int(v)
    return got["voluntary_ctxt_switches"], got["nonvoluntary_ctxt_switches"]


class Breakdown:
    """Switches and seconds of the engine's thread inside named calls (getrusage(RUSAGE_THREAD),
    which does not let the GIL go). Nested calls count in both."""

    def __init__(self) -> None:
        self.main = threading.get_ident()
        self.counts: dict[str, list[float]] = {}

    def wrap(self, owner: object, name: str, label: str) -> None:
        import functools
        import resource

        inner = getattr(owner, name)
        counts = self.counts.setdefault(label, [0, 0.0, 0])

        @functools.wraps(inner)
        def timed(*a, **k):
            if threading.get_ident() != self.main:
                return inner(*a, **k)
            s0, t0 = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw, time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                counts[0] += resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - s0
                counts[1] += time.perf_counter() - t0
                counts[2] += 1

        setattr(owner, name, timed)

    def report(self, runs: int) -> str:
        return "\n".join(f"    {label:34s} {c[0] / runs:7.1f} switches {c[1] / runs * 1e3:7.1f} ms {c[2] / runs:6.0f} calls"
                         for label, c in sorted(self.counts.items(), key=lambda kv: -kv[1][0]))


def hold_gil_copyto(dst: np.ndarray, src: np.ndarray) -> None:
    if src.nbytes <= SMALL_COPY and src.flags.c_contiguous and dst.flags.c_contiguous and src.dtype == dst.dtype \
            and src.shape == dst.shape:
        memoryview(dst).cast("B")[:] = memoryview(src).cast("B")
    else:
        np.copyto(dst, src)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--hold-gil-copy", action="store_true")
    ap.add_argument("--breakdown", action="store_true", help="switches per call on the engine's thread")
    args = ap.parse_args()

    import cv2

    import srgpu.engine.imageproc as imageproc
    from dev.profile_folder_engine import one_pass
    from srgpu.engine import GPUOptions, create_engine
    from srgpu.batch.plan import plan_batch
    from srgpu.batch.local import run_batch
    from srgpu.model import resolve_model

    if args.hold_gil_copy:
        class _NP:  # imageproc's np with copyto replaced
            def __getattr__(self, name: str):
                return hold_gil_copyto if name == "copyto" else getattr(np, name)
        imageproc.np = _NP()  # type: ignore[assignment]

    breakdown = None
    if args.breakdown:
        import srgpu.batch.local as im
        import srgpu.engine.overlap as ov

        breakdown = Breakdown()
        for owner, name, label in (
                (im, "prepare_job", "prepare_job (look_ahead)"), (im.JobStat, "at", "JobStat.at (look_ahead)"),
                (im._Readers, "start", "readers.start"), (im._Readers, "result", "readers.result"),
                (im._Writers, "submit", "writers.submit"), (im.InOrder, "ready", "outcomes.ready (report)"),
                (imageproc.OverlappedImages, "submit", "OverlappedImages.submit"),
                (imageproc.OverlappedImages, "_prepare", "  _prepare (copy into pinned)"),
                (ov.SlotPipeline, "_queue", "  _queue (copies, launches, events)"),
                (imageproc.OverlappedImages, "_result", "OverlappedImages._result (wait)"),
                (imageproc._Ticket, "ready", "ticket.ready")):
            breakdown.wrap(owner, name, label)
    with tempfile.TemporaryDirectory(prefix="srgpu-switches-") as tmp:
        root = Path(tmp)
        engine = create_engine("cuda", resolve_model("9-1-5", 2), 2, GPUOptions(cache_dir=root / "plans"))
        run_batch(plan_batch(args.folder, root / "first"), engine)  # plans chosen, kernels loaded
        if breakdown is not None:
            for c in breakdown.counts.values():
                c[:] = [0, 0.0, 0]
        rows = []
        for _ in range(args.rounds):
            out = root / "out"
            shutil.rmtree(out, ignore_errors=True)
            v0, i0 = switches()
            t0 = time.perf_counter()
            result = run_batch(plan_batch(args.folder, out), engine)
            wall = time.perf_counter() - t0
            v1, i1 = switches()
            assert not result.failed, result.summary()
            rows.append((wall, result.stages.process, v1 - v0, i1 - i0))
        if breakdown is not None:  # the warm runs only
            breakdown.counts = {k: list(v) for k, v in breakdown.counts.items()}
        images = [cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(args.folder.iterdir())]
        processor = engine.image_processor()
        alone = []
        for _ in range(args.rounds):
            v0, i0 = switches()
            took = one_pass(processor, images)
            v1, i1 = switches()
            alone.append((took, v1 - v0, i1 - i0))
        processor.close()
        engine.close()
    if breakdown is not None:
        print(f"{args.folder.name}: per warm run, on the engine's thread:")
        print(breakdown.report(args.rounds))
    med = statistics.median
    print(f"{args.folder.name} ({len(images)} images){' hold-gil-copy' if args.hold_gil_copy else ''}: "
          f"run wall {med(r[0] for r in rows):.3f} s, engine stage {med(r[1] for r in rows):.3f} s, "
          f"engine thread switches {med(r[2] for r in rows):.0f} voluntary / {med(r[3] for r in rows):.0f} "
          f"involuntary; engine alone {med(a[0] for a in alone):.3f} s, {med(a[1] for a in alone):.0f} / "
          f"{med(a[2] for a in alone):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
