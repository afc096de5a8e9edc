#!/usr/bin/env python3
"""Where a fused tile's warps spend their time, by source function: ncu's per-instruction warp-state
samples joined with the cubin's line table.

On the GPU machine (one tile per ncu run; the tile is built with ``-lineinfo``, so it is a kernel of its
own, not the cached one):

    python3 dev/cuda/stall_profile.py run --tile fp16-fast:9-5-5:th=60,... --out DIR      # warm-up, cubin
    ncu --section WarpStateStats --section SourceCounters -k regex:^fused_tc$ -c 1 -o DIR/rep \
        python3 dev/cuda/stall_profile.py run --tile ... --out DIR --reps 1
    ncu -i DIR/rep.ncu-rep --page source --csv --print-source sass > DIR/sass.csv

Anywhere with nvdisasm (the report reads DIR/kernel.cubin, DIR/fused_tc.expanded.cu and DIR/sass.csv):

    python3 dev/cuda/stall_profile.py report DIR [--nvdisasm PATH]

The report prints, per phase (the function the kernel called, as inlined) and per innermost function, the
share of all warp samples and of the not-issued ones, and the phase's top stall reasons where ncu's CSV
has them per instruction.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

FUNC_DEF = re.compile(r"^(?:template\s*<.*>\s*)?(?:static\s+)?(?:__device__|__global__)(?:[^;(]*?__launch_bounds__\([^)]*\))?[^;(]*?\b([A-Za-z_]\w*)\s*\(")


def run(args: argparse.Namespace) -> int:
    import cupy as cp
    import numpy as np

    from ab_tiles import build_tile, image_like
    from srgpu.kernels import build

    build.COMPILE_OPTIONS = (*build.COMPILE_OPTIONS, "-lineinfo")  # a kernel of its own: the cache keys on options
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg, net = build_tile(args.tile)
    w, h = (int(v) for v in args.lr.lower().split("x"))
    lr = cp.asarray(image_like((h, w), seed=1))
    dst = cp.empty((2 * h, 2 * w), np.uint8)
    for _ in range(args.reps):
        net.run(lr, dst.shape, 255, out=dst)
    cp.cuda.Device().synchronize()
    code = build.load_source(cfg.source)
    (out / "fused_tc.expanded.cu").write_text(code)
    if cfg.arch:
        names = [cfg.kernel_name(net.model.f2), cfg.layout_name(net.model.f2)]
        path, lowered = build.compile_for_arch(code, cfg.source, names, cfg.arch)
        shutil.copyfile(path, out / "kernel.cubin")
        (out / "info.json").write_text(json.dumps({"tile": args.tile, "label": cfg.label, "kernel": lowered[names[0]]}))
    print(f"{cfg.label}: {args.reps} launches, registers {net.kernel.registers}")
    return 0


def function_of_lines(source: str) -> list[str]:
    """For each 1-based line, the name of the function whose definition precedes it."""
    names, current = ["?"], "?"
    for line in source.splitlines():
        m = FUNC_DEF.match(line.strip())
        if m:
            current = m.group(1)
        names.append(current)
    return names


def line_table(cubin: Path, nvdisasm: str, kernel: str | None) -> dict[int, list[int]]:
    """Instruction offset -> source lines, innermost first (the inline chain), of the kernel's function."""
    dumped = cubin.with_name("disasm.txt")  # nvdisasm -gi -c of the cubin, made beside the NVRTC that built it
    text = dumped.read_text() if dumped.is_file() else subprocess.run(
        [nvdisasm, "-gi", "-c", str(cubin)], check=True, capture_output=True, text=True).stdout
    table: dict[int, list[int]] = {}
    chain: list[int] = []
    pending: list[tuple[str, int]] = []
    in_kernel = kernel is None
    for line in text.splitlines():
        if line.startswith(".text."):
            in_kernel = kernel is None or line.strip().rstrip(":") == f".text.{kernel}"
            continue
        if "//##" in line:  # one record per frame, innermost first, before the instruction they describe
            m = re.search(r'File "([^"]+)", line (\d+)', line)
            if m:
                pending.append((m.group(1), int(m.group(2))))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/", line)
        if m:
            if pending:  # the kernel's own file is the outermost frame's; header frames are left out
                own = pending[-1][0]
                chain = [n for f, n in pending if f == own]
                pending = []
            if in_kernel:
                table[int(m.group(1), 16)] = list(chain)
    return table


def report(args: argparse.Namespace) -> int:
    d = Path(args.dir)
    info = json.loads((d / "info.json").read_text())
    lines = function_of_lines((d / "fused_tc.expanded.cu").read_text())
    table = line_table(d / "kernel.cubin", args.nvdisasm, info["kernel"])
    with open(d / "sass.csv", newline="") as f:
        rows = [r for r in csv.reader(f)]
    head_i = next(i for i, r in enumerate(rows) if any("Address" in c for c in r))
    head = rows[head_i]
    col = {name: i for i, name in enumerate(head)}
    addr_c = next(i for i, c in enumerate(head) if "Address" in c)
    all_c = next(i for i, c in enumerate(head) if "Warp Stall Sampling (All" in c)
    ni_c = next((i for i, c in enumerate(head) if "Not-issued" in c or "Not-Issued" in c), None)
    reason_cs = [i for i, c in enumerate(head) if c.startswith("stall_") and "(Not Issued)" not in c]
    src_c = next((i for i, c in enumerate(head) if c.strip() == "Source"), None)

    def num(s: str) -> float:
        try:
            return float(s.replace(",", ""))
        except ValueError:
            return 0.0

    by_phase: dict[str, float] = defaultdict(float)
    by_phase_ni: dict[str, float] = defaultdict(float)
    by_inner: dict[str, float] = defaultdict(float)
    by_line: dict[int, float] = defaultdict(float)
    reasons: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_op: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_role: dict[str, float] = defaultdict(float)  # the phase's own callee (a warp-specialised block's roles)
    role_reasons: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    total = total_ni = 0.0
    base: int | None = None
    unmapped = 0
    for r in rows[head_i + 1:]:
        if len(r) <= all_c:
            continue
        try:
            a = int(r[addr_c], 16) if r[addr_c].startswith("0x") else int(r[addr_c])
        except ValueError:
            continue
        if base is None:  # ncu lists absolute addresses, the kernel's first instruction first
            base = a
        a -= base
        s = num(r[all_c])
        ni = num(r[ni_c]) if ni_c is not None else 0.0
        total += s
        total_ni += ni
        chain = table.get(a)
        if not chain:
            unmapped += 1
            inner = phase = role = "?"
        else:
            inner = lines[chain[0]] if chain[0] < len(lines) else "?"
            outer = [lines[n] for n in chain if n < len(lines)]
            # the phase: the function the kernel called (the last frame before fused_tc itself)
            callers = [n for n in outer if n not in ("fused_tc",)]
            phase = callers[-1] if callers else "fused_tc"
            role = f"{phase} > {callers[-2]}" if len(callers) >= 2 else phase
        by_phase[phase] += s
        by_phase_ni[phase] += ni
        by_inner[inner] += s
        if chain:
            by_line[chain[0]] += s
        op = r[src_c].split()[0] if src_c is not None and r[src_c].split() else "?"
        if op.startswith("@"):
            op = r[src_c].split()[1] if len(r[src_c].split()) > 1 else op
        by_op[phase][op.split(".")[0]] += s
        by_role[role] += s
        for i in reason_cs:
            reasons[phase][head[i]] += num(r[i])
            role_reasons[role][head[i]] += num(r[i])
    print(f"{info['label']}: {total:.0f} samples ({total_ni:.0f} not issued), {unmapped} rows without a line")
    print(f"{'phase (function the kernel called)':40s} {'all %':>7s} {'not issued %':>13s}  top instructions / reasons")
    for ph, s in sorted(by_phase.items(), key=lambda kv: -kv[1]):
        ops = sorted(by_op[ph].items(), key=lambda kv: -kv[1])[:5]
        rs = sorted(reasons[ph].items(), key=lambda kv: -kv[1])[:4]
        print(f"{ph:40s} {100 * s / total:7.2f} {100 * by_phase_ni[ph] / max(total_ni, 1):13.2f}  "
              + " ".join(f"{o}:{100 * v / total:.1f}" for o, v in ops)
              + ("  | " + " ".join(f"{n.replace('stall_', '')}:{100 * v / total:.1f}" for n, v in rs) if rs else ""))
    print(f"\n{'role (the phase and its callee)':60s} {'all %':>7s}  top reasons")
    for ro, s in sorted(by_role.items(), key=lambda kv: -kv[1])[:12]:
        rs = sorted(role_reasons[ro].items(), key=lambda kv: -kv[1])[:6]
        print(f"{ro[:60]:60s} {100 * s / total:7.2f}  "
              + " ".join(f"{n.replace('stall_', '')}:{100 * v / total:.1f}" for n, v in rs))
    print(f"\n{'innermost function':40s} {'all %':>7s}")
    for fn, s in sorted(by_inner.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{fn:40s} {100 * s / total:7.2f}")
    src = (d / "fused_tc.expanded.cu").read_text().splitlines()
    print(f"\n{'source line (innermost)':>10s} {'all %':>7s}")
    for n, s in sorted(by_line.items(), key=lambda kv: -kv[1])[:args.lines]:
        print(f"{n:10d} {100 * s / total:7.2f}  [{lines[n]}] {src[n - 1].strip()[:90]}")
    if args.columns:
        print("\ncolumns:", head)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--tile", required=True, help="PRECISION:ARCH:k=v,...")
    r.add_argument("--out", required=True)
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--lr", default="1920x1080")
    p = sub.add_parser("report")
    p.add_argument("dir")
    p.add_argument("--nvdisasm", default="nvdisasm")
    p.add_argument("--columns", action="store_true", help="print the CSV's column names")
    p.add_argument("--lines", type=int, default=30, help="source lines to list")
    args = ap.parse_args()
    return run(args) if args.cmd == "run" else report(args)


if __name__ == "__main__":
    sys.exit(main())
