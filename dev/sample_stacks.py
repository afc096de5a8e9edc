#!/usr/bin/env python3
"""Where a srgpu command spends its wall time, every thread included (cProfile sees one thread).

A background thread samples every thread's stack every --interval seconds while the command runs
in this process, then prints, per thread, the functions most often on the stack (inclusive) and at
its top (exclusive), with the wall-clock timeline of the main thread's top-level calls.

    python3 dev/sample_stacks.py [--interval 0.002] [--top 25] -- upscale big.jpg -o out.jpg
"""

from __future__ import annotations

import argparse
import collections
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def frame_key(frame) -> str:
    code = frame.f_code
    return f"{Path(code.co_filename).name}:{code.co_name}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--interval", type=float, default=0.002)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    argv = [a for a in args.argv if a != "--"]
    inclusive: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    exclusive: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    samples: collections.Counter = collections.Counter()
    stop = threading.Event()
    start = time.perf_counter()

    def sample() -> None:
        while not stop.wait(args.interval):
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == threading.get_ident():
                    continue
                name = names.get(ident, str(ident))
                samples[name] += 1
                exclusive[name][frame_key(frame)] += 1
                seen = set()
                f = frame
                while f is not None:
                    k = frame_key(f)
                    if k not in seen:
                        inclusive[name][k] += 1
                        seen.add(k)
                    f = f.f_back

    sampler = threading.Thread(target=sample, name="sampler", daemon=True)
    sampler.start()
    from srgpu.cli import app

    rc = 0
    try:
        app(argv, standalone_mode=False)
    except SystemExit as e:
        rc = int(e.code or 0)
    finally:
        stop.set()
        sampler.join()
    wall = time.perf_counter() - start
    print(f"\nwall {wall:.3f} s, interval {args.interval * 1000:.1f} ms, rc {rc}")
    for name, n in samples.most_common():
        secs = n * args.interval
        if secs < 0.02:
            continue
        print(f"\n== thread {name}: {n} samples (~{secs:.3f} s alive)")
        print("  inclusive:")
        for k, c in inclusive[name].most_common(args.top):
            print(f"    {c * args.interval:7.3f} s  {k}")
        print("  exclusive (top of stack):")
        for k, c in exclusive[name].most_common(args.top // 2):
            print(f"    {c * args.interval:7.3f} s  {k}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
