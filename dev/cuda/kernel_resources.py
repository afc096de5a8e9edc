#!/usr/bin/env python3
"""Registers, spills and stack of every fused-kernel candidate (or any instantiation), compiled
offline by NVRTC with ptxas' report for a given GPU architecture: no GPU needed, so register
pressure and spills of a kernel edit can be checked before spending GPU time on it.

    python3 dev/cuda/kernel_resources.py [--arch 90] [--precision fp32 fp16 fp16-fast] [--f2 1 5]
    python3 dev/cuda/kernel_resources.py --source conv.cu --name "conv_v5<...>"
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from dev.cuda.fused_not_offered import not_offered_configs  # noqa: E402
from srgpu.kernels import fused  # noqa: E402
from srgpu.kernels.build import COMPILE_OPTIONS, load_source  # noqa: E402

_USED = re.compile(r"Used (\d+) registers")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def resources(source: str, name: str, arch: int | str, code: str | None = None) -> dict[str, int]:
    """ptxas' figures for one instantiation: registers, stack, spill stores and loads (bytes). ``code``: the text to
    build instead of srgpu's ``source`` (a patched copy, as dev/cuda/phase_ablation.py's)."""
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(load_source(source) if code is None else code, source, [], [])
    try:
        nvrtc.addNameExpression(prog, name)
        try:
            nvrtc.compileProgram(prog, [*COMPILE_OPTIONS, f"-arch=sm_{arch}", "-Xptxas=-v"])
        except nvrtc.NVRTCError:
            raise SystemExit(f"{name} ({source}) does not compile:\n{nvrtc.getProgramLog(prog)[:3000]}") from None
        lowered = nvrtc.getLoweredName(prog, name)
        log = nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)
    block = log[log.index(f"Function properties for {lowered}"):]  # this entry's lines, not the layout kernel's
    used, frame = _USED.search(block), _FRAME.search(block)
    if used is None or frame is None:
        raise SystemExit(f"no ptxas report for {name}:\n{log[:2000]}")
    return {"registers": int(used.group(1)), "stack": int(frame.group(1)), "spill_stores": int(frame.group(2)),
            "spill_loads": int(frame.group(3))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", type=int, default=90, help="sm_ARCH (90: H100/H200)")
    ap.add_argument("--precision", nargs="+", default=list(fused.ARITHMETICS))
    ap.add_argument("--f2", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--source", help="with --name: one instantiation of this .cu file instead")
    ap.add_argument("--name", help="a template instantiation, e.g. 'fused_fp32<1, 64, 64, 16, 256, 4>'")
    args = ap.parse_args()
    if args.name:
        jobs = [(args.source or "fused_fp32.cu", args.name, 0, args.arch)]
    else:  # a tile built for its own target (wgmma: sm_90a) keeps it
        jobs = [(cfg.source, cfg.kernel_name(f2), fused.shared_bytes(cfg, f2), cfg.arch[3:] if cfg.arch else args.arch)
                for p in args.precision for f2 in args.f2
                for cfg in fused.candidate_configs(p, f2) + not_offered_configs(p, f2)]
    print(f"{'kernel':<52} {'regs':>5} {'stack':>6} {'spill st':>9} {'spill ld':>9} {'shared KiB':>11}")
    for source, name, shared, arch in jobs:
        r = resources(source, name, arch)
        print(f"{name:<52} {r['registers']:>5} {r['stack']:>6} {r['spill_stores']:>9} {r['spill_loads']:>9} "
              f"{shared / 1024 if shared else float('nan'):>11.1f}")


if __name__ == "__main__":
    main()
