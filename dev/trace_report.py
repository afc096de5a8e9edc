#!/usr/bin/env python3
"""Print the timeline dev/trace_site/sitecustomize.py wrote: every process's events in time order,
seconds from the first process's start, spans (B..E) shown with their length.

    python3 dev/trace_report.py TRACE_FOLDER [--min 0.01]
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path)
    ap.add_argument("--min", type=float, default=0.0, help="hide spans shorter than this (seconds)")
    a = ap.parse_args()
    events = []
    for f in a.folder.glob("*.log"):
        for ln in f.read_text().splitlines():
            t, pid, rest = ln.split(" ", 2)
            name, kind = rest.rsplit(" ", 1)
            events.append((float(t), int(pid), name, kind))
    events.sort()
    t0 = events[0][0]
    pids = sorted({e[1] for e in events}, key=lambda p: min(e[0] for e in events if e[1] == p))
    label = {p: f"p{i}" for i, p in enumerate(pids)}
    open_: dict[tuple[int, str], list[float]] = {}
    rows = []
    cpu: dict[tuple[str, str], list[float]] = {}
    for t, pid, name, kind in events:
        if name.startswith("thread-cpu "):  # "thread-cpu NAME SECONDS [process SECONDS]"
            words = name.split()
            thread = words[1].rstrip("0123456789_")  # a pool's threads together
            cpu.setdefault((label[pid], thread), []).append(float(words[2]))
            if "process" in words:
                cpu.setdefault((label[pid], "(whole process)"), []).append(float(words[-1]))
            continue
        if kind == "B":
            open_.setdefault((pid, name), []).append(t)
        elif kind == "E":
            begun = open_[(pid, name)].pop()
            rows.append((begun, pid, name, t - begun))
        else:
            rows.append((t, pid, name, None))
    for t, pid, name, span in sorted(rows):
        if span is not None and span < a.min:
            continue
        lasting = f"{span:7.3f} s" if span is not None else "        "
        print(f"{t - t0:8.3f}  {label[pid]:>4}  {lasting}  {name}")
    print("\nCPU seconds by thread (threads of one name summed; count)")
    for (who, thread), seconds in sorted(cpu.items()):
        print(f"  {who:>4}  {thread:32s} {sum(seconds):9.3f}  ({len(seconds)})")


if __name__ == "__main__":
    main()
