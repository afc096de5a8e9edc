#!/usr/bin/env python3
"""Where a command's CPU time goes: runs COMMAND, samples /proc every --interval seconds, and
prints the CPU seconds (user + system) of every process that ran under it, summed by kind
(ffmpeg encoders, ffmpeg decoders, srgpu's Python processes, ...), with the wall time.

    python3 dev/cpu_by_process.py [--json OUT] -- COMMAND ...

The total (cpu_s) is exact: the rusage of every descendant that was waited for. The split by kind
is sampled: a process counts from its last sample before it exits (at most one interval lost per
process; one that lives less than an interval may be missed).
"""

from __future__ import annotations

import argparse
import resource
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "benchmarks"))
from bench_bighost import process_kind, snapshot as raw_snapshot  # noqa: E402


def snapshot() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, kind, cpu seconds) for every process now (bench_bighost's kinds)."""
    return {pid: (ppid, process_kind(cmd), cpu) for pid, (ppid, cmd, cpu) in raw_snapshot().items()}


def descendants(tree: dict[int, tuple[int, str, float]], root: int) -> set[int]:
    kids = defaultdict(list)
    for pid, (ppid, _, _) in tree.items():
        kids[ppid].append(pid)
    seen, todo = set(), [root]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(kids.get(p, []))
    return seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--json", type=Path)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    started = time.perf_counter()
    proc = subprocess.Popen(command)
    last: dict[int, tuple[str, float]] = {}  # every process seen under the command: its latest figure
    while proc.poll() is None:
        tree = snapshot()
        for pid in descendants(tree, proc.pid):
            if pid in tree:
                last[pid] = (tree[pid][1], tree[pid][2])
        time.sleep(args.interval)
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # every waited descendant, exactly
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for name, cpu in last.values():
        by_kind[name][0] += cpu
        by_kind[name][1] += 1
    total = sum(v[0] for v in by_kind.values())
    rows = sorted(((k, round(v[0], 1), v[1]) for k, v in by_kind.items()), key=lambda r: -r[1])
    exact = usage.ru_utime + usage.ru_stime
    report = {"command": command, "wall_s": round(wall, 2), "cpu_s": round(exact, 1),
              "user_s": round(usage.ru_utime, 1), "sys_s": round(usage.ru_stime, 1),
              "cores_busy": round(exact / wall, 2), "sampled_cpu_s": round(total, 1), "rc": proc.returncode,
              "by_kind": [{"kind": k, "cpu_s": c, "processes": n} for k, c, n in rows]}
    print(json.dumps(report, indent=1), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
