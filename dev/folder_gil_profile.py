#!/usr/bin/env python3
"""Who holds the GIL during a folder run: run_batch on FOLDER with the GPU engine, warm (a first run
chooses the plans, then --runs warm runs on the same engine), for py-spy to sample; and a summary of
py-spy's raw output.

    py-spy record --gil --threads -r 1000 -f raw -o gil.txt -- python3 dev/folder_gil_profile.py run /tmp/f/small --runs 30
    python3 dev/folder_gil_profile.py summary gil.txt --seconds S

``--gil`` samples only the thread holding the GIL, so the summary says how the GIL's time was
shared: per kind of thread (the engine's = run_batch's, readers, writers, others) and per function
(inclusive: on the stack; self: at its top). ``--seconds``: the warm runs' wall time (printed by
``run``), to say what share of it the GIL was held at all.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KINDS = (("reader", "_Readers._read"), ("writer", "_Writers._run"), ("engine", "run_batch"))


def run(args: argparse.Namespace) -> int:
    from srgpu.engine import GPUOptions, create_engine
    from srgpu.batch.local import ImageOptions, run_batch
    from srgpu.batch.plan import plan_batch
    from srgpu.model import resolve_model

    model, scale = resolve_model(args.model, args.scale), args.scale
    with tempfile.TemporaryDirectory(prefix="srgpu-gil-") as tmp:
        engine = create_engine("cuda", model, scale, GPUOptions(cache_dir=Path(tmp) / "plans"))
        images = ImageOptions(jobs=args.jobs)

        def once(out: Path) -> float:
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            result = run_batch(plan_batch(args.folder, out), engine, images=images)
            assert not result.failed, result.summary()
            return time.perf_counter() - t0

        first = once(Path(tmp) / "out")
        warm = [once(Path(tmp) / "out") for _ in range(args.runs)]
        print(f"first run {first:.3f} s; {args.runs} warm runs {sum(warm):.3f} s "
              f"(median {sorted(warm)[len(warm) // 2]:.3f} s)")
    return 0


def summary(args: argparse.Namespace) -> int:
    by_kind: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in args.raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [f.split(" (")[0] for f in stack.split(";")]
        total += n
        by_kind[next((k for k, marker in KINDS if any(marker in f for f in frames)), "other")] += n
        for f in set(frames):
            inclusive[f] += n
        own[frames[-1]] += n
    print(f"{total} samples holding the GIL" + (
        f" ({total / args.rate:.2f} s at {args.rate:.0f}/s, {total / args.rate / args.seconds * 100:.0f} % of "
        f"{args.seconds:.2f} s)" if args.seconds else ""))
    for kind, n in by_kind.most_common():
        print(f"  {kind:8s} {n / max(total, 1) * 100:5.1f} %")
    print("inclusive:")
    for f, n in inclusive.most_common(args.top):
        print(f"  {n / max(total, 1) * 100:5.1f} %  {f}")
    print("self:")
    for f, n in own.most_common(args.top):
        print(f"  {n / max(total, 1) * 100:5.1f} %  {f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("folder", type=Path)
    r.add_argument("--runs", type=int, default=20)
    r.add_argument("--jobs", type=int, default=None)
    r.add_argument("--model", default="9-1-5")
    r.add_argument("--scale", type=int, default=2)
    s = sub.add_parser("summary")
    s.add_argument("raw", type=Path)
    s.add_argument("--seconds", type=float, default=0.0)
    s.add_argument("--rate", type=float, default=1000.0)
    s.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    return run(args) if args.command == "run" else summary(args)


if __name__ == "__main__":
    sys.exit(main())
