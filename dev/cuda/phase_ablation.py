#!/usr/bin/env python3
"""Where a fused tensor-core kernel's time goes: the offered 9-1-5 and 9-5-5 fp16-fast tiles (or any
tile given) built again with one phase removed at compile time (an ABLATE template argument and
its ABL_* bits, patched into a copy of srgpu's kernel sources by dev/cuda/ablate_patch.py), each
timed on one frame with CUDA events, as bench_peers.py times the offered kernels (1920x1080 ->
3840x2160, uint8 luma in and out).

    python3 dev/cuda/phase_ablation.py [--arch 9-1-5 --arch 9-5-5] [--reps 20] [--json out.json]
    python3 dev/cuda/phase_ablation.py --tile fp16-fast:9-5-5:th=64,rw=32,r=16,nt=256,mb1=2,mb2=4,stream=1,spart=1
    python3 dev/cuda/phase_ablation.py --offline      # no GPU: registers, spills, shared memory (NVRTC)

Outputs of the ablated kernels are garbage: they are built for timing only, and only from here
(srgpu's sources have no ABLATE, FusedConfig no field for it). The MMA phases, the input stage and
the weight stream are skipped at run time behind a test the compiler cannot evaluate (the patched
tc_skip), so each variant keeps the full kernel's code, registers and schedule and only the work
goes; the conv3 sum, the store and the barriers are removed at compile time. The deltas are not
additive: a latency-bound kernel hides one phase under another, so "full - no X" is what X costs
beyond what overlaps it.

Sources: --offline compiles the patched text in this process. On the GPU the engine's runner
compiles from the package's files, so the tool writes a copy of the tree with the patched sources
(--copy DIR, else a temporary folder) and runs itself again there, as dev/cuda/ws_ablation.py's
copies are run.

Compiling: one NVRTC build per variant (CuPy caches them on disk). With --jobs N (default: the
cores, at most the variants) worker processes build them in parallel first, each in its own CUDA
context, so the timing process finds them in CuPy's cache.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from dev.cuda.ablate_patch import ABL, ablated_code, ablated_sources  # noqa: E402
from dev.cuda.ws_ablation import write_copy  # noqa: E402
from srgpu.kernels import fused  # noqa: E402
from srgpu.kernels.build import KERNEL_DIR  # noqa: E402
from srgpu.kernels.fused.tiles import FusedConfig  # noqa: E402

# what the GPU run reads from the tree: the package, this tool, bench_peers.py, the shipped weights
COPIED = ("srgpu", "dev", "scripts", "weights")


def bits(*names: str) -> int:
    return sum(ABL[n] for n in names)


# (label, bits, which tiles): "all"; "room": tiles whose register cap (65536 / (nt * minb)) is above
# 128 (at 128, as the offered 9-1-5 fold tile, ptxas spills when conv1's or conv2's MMAs are
# predicated or branched away: NVRTC 12.9 sm_90, 24-132 spill bytes; such a variant would time the
# spills); "ring": f2 > 1 with room (a whole MMA phase branched away); "stream": conv2's weights
# streamed. One phase each, then combinations that leave one part standing.
VARIANTS: list[tuple[str, int, str]] = [
    ("full (ABLATE 0: the tile as srgpu builds it)", 0, "all"),
    ("no input stage (bicubic / LR tile load)", bits("INPUT"), "all"),
    ("conv1 MMAs off (fragment loads kept)", bits("CONV1"), "room"),
    ("conv2 MMAs off (fragment loads kept)", bits("CONV2"), "room"),
    ("conv3 Z GEMM MMAs off (loads kept)", bits("ZGEMM"), "all"),
    ("every MMA off (loads kept)", bits("CONV1", "CONV2", "ZGEMM"), "room"),
    ("conv1 phase branched away (loads too)", bits("CONV1", "PHASE"), "ring"),
    ("conv2 phase branched away (loads too)", bits("CONV2", "PHASE"), "ring"),
    ("no conv3 shifted sum (+ store)", bits("SUM"), "all"),
    ("no global store (sum kept)", bits("STORE"), "all"),
    ("no chunk barriers (races)", bits("SYNC"), "all"),
    ("no conv2 weight copies (stream)", bits("STREAM"), "stream"),
    ("MMA phases only: no input, no sum", bits("INPUT", "SUM"), "all"),
    # "room": at the 9-1-5 fold tile's 128-register cap it spills since 872b253 (ReLU in the conversion)
    ("MMA phases only, no chunk barriers", bits("INPUT", "SUM", "SYNC"), "room"),
    ("MMA phases only, no barriers, no stream", bits("INPUT", "SUM", "SYNC", "STREAM"), "stream"),
    ("skeleton: no input, MMAs off, no sum", bits("INPUT", "CONV1", "CONV2", "ZGEMM", "SUM"), "room"),
]

# the offered fp16-fast tiles of issue 17 (tiles.CANDIDATES' first; BENCHMARKS.md): 0.589 / 3.88 ms on the H100
DEFAULT_TILES = ["fp16-fast:9-1-5", "fp16-fast:9-5-5"]


@dataclass(frozen=True)
class AblatedConfig(FusedConfig):
    """A tensor-core tile with the patched fused_tc's ABLATE argument set (dev only: srgpu has none)."""

    ablate: int = 0

    @property
    def _tc_extra(self) -> str:
        """ABLATE after SPART, before WG and WS (ablate_patch.py puts it there); ABLATE 0 without WG: srgpu's own
        name (the argument's default)."""
        if not self.ablate and not self.wg:
            return super()._tc_extra
        return f", {self.minb}, {self.spart}, {self.ablate}" + (", true" if self.wg else "") + (", true" if self.ws else "")

    @property
    def label(self) -> str:
        return super().label + (f" ablate={self.ablate}" if self.ablate else "")


def parse_tile(text: str) -> tuple[str, str, dict[str, int]]:
    """'fp16-fast:9-5-5[:k=v,...]' -> (arithmetic, arch, params)"""
    precision, arch, *rest = text.split(":")
    params = {k: int(v) for k, v in (item.split("=") for item in (rest[0] if rest else "").split(",") if item)}
    return precision, arch, params


def f2_of(arch: str) -> int:
    return int(arch.split("-")[1])


def variants_for(precision: str, arch: str, params: dict[str, int]) -> list[tuple[str, AblatedConfig]]:
    """(label, config) of every variant of a tile (the streamed-conv2 ones only for a streamed tile)."""
    base = fused.config_for(precision, f2_of(arch), **params)
    if base.kernel != "tc" or base.rows:
        raise SystemExit(f"{precision} {base.label}: the ablation is built into fused_tc only")
    fields = {k: getattr(base, k) for k in FusedConfig.__dataclass_fields__}
    f2 = f2_of(arch)
    room = 65536 // (base.nt * base.minb) > 128
    keep = {"all": True, "room": room, "ring": f2 > 1 and room, "stream": base.stream}
    return [(label, AblatedConfig(**fields, ablate=b)) for label, b, which in VARIANTS if keep[which]]


def all_variants(tiles: list[str]) -> list[tuple[str, str, str, AblatedConfig]]:
    """(tile text, arch, variant label, config) for every tile and variant."""
    out = []
    for t in tiles:
        precision, arch, params = parse_tile(t)
        out += [(t, arch, label, cfg) for label, cfg in variants_for(precision, arch, params)]
    return out


# ---------------------------------------------------------------- the patched sources

def guarded() -> bool:
    """Whether the srgpu imported here carries the guards already (a copy written by run_in_copy)."""
    return "int ABLATE = 0" in (KERNEL_DIR / "fused_tc.cu").read_text()


def kernel_code(source: str) -> str:
    """What NVRTC builds for ``source``: the imported srgpu's text when it is a patched copy, else srgpu's patched."""
    from srgpu.kernels.build import load_source

    return load_source(source) if guarded() else ablated_code(source)


def write_tree(dst: Path) -> None:
    """dst (replaced): the tree's COPIED parts with the patched kernel sources."""
    write_copy(ROOT, dst, ablated_sources(), COPIED)


def run_in_copy(argv: list[str], copy: Path | None) -> int:
    """This tool with ``argv`` in a patched copy of the tree (``copy``, kept; else a temporary folder)."""
    with tempfile.TemporaryDirectory(prefix="srgpu-ablation-") as tmp:
        dst = copy.resolve() if copy else Path(tmp) / "tree"
        write_tree(dst)
        env = {**os.environ, "PYTHONPATH": str(dst)}
        return subprocess.run([sys.executable, str(dst / "dev" / "cuda" / Path(__file__).name), *argv], env=env).returncode


# ---------------------------------------------------------------- offline: NVRTC's ptxas report

def _offline_one(job: tuple[str, str, int, str]) -> dict[str, int]:
    from dev.cuda.kernel_resources import resources

    source, name, arch, code = job
    return resources(source, name, arch, code=code)


def offline(tiles: list[str], arch_sm: int, jobs: int) -> int:
    rows = all_variants(tiles)
    code = {cfg.source: kernel_code(cfg.source) for _, _, _, cfg in rows}
    work = [(cfg.source, cfg.kernel_name(f2_of(arch)), arch_sm, code[cfg.source]) for _, arch, _, cfg in rows]
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
        res = list(ex.map(_offline_one, work))
    print(f"NVRTC, -arch=sm_{arch_sm} -Xptxas=-v (no GPU; the GPU's own build may differ by a few registers)")
    print("| tile | variant | ABLATE | regs | stack / spill st / spill ld | shared KiB |")
    print("|---|---|---|---|---|---|")
    bad = 0
    for (tile, arch, label, cfg), r in zip(rows, res):
        spill = r["stack"] + r["spill_stores"] + r["spill_loads"]
        bad += spill > 0
        print(f"| {arch} {cfg.arithmetic} {FusedConfig.label.fget(cfg)} | {label} | {cfg.ablate} | {r['registers']} | "
              f"{r['stack']} / {r['spill_stores']} / {r['spill_loads']} | {fused.shared_bytes(cfg, f2_of(arch)) / 1024:.1f} |")
    return 1 if bad else 0


# ---------------------------------------------------------------- on the GPU

def _bench_peers():
    spec = importlib.util.spec_from_file_location("bench_peers", ROOT / "scripts" / "benchmarks" / "bench_peers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _model_for(arch: str, scale: int):
    from srgpu.model import random_model, resolve_model

    try:
        return resolve_model(arch, scale)  # the shipped weights when present (as bench_peers)
    except Exception:
        return random_model(arch, seed=0, scale=scale)


def _compile_one(job: tuple[str, list[str]]) -> str:
    """Worker: build one variant's module (CuPy writes it to its disk cache)."""
    from srgpu.kernels.build import compile_kernels, device_limits

    source, names = job
    compile_kernels(source, names, 0, device_limits(0))
    return names[0]


def on_gpu(tiles: list[str], reps: int, lr_size: str, scale: int, jobs: int, json_path: Path | None) -> int:
    import cupy as cp
    import numpy as np

    bp = _bench_peers()
    rows = all_variants(tiles)
    if jobs > 1:
        work = [(cfg.source, [cfg.kernel_name(f2_of(arch)), cfg.layout_name(f2_of(arch))]) for _, arch, _, cfg in rows]
        import multiprocessing

        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as ex:
            list(ex.map(_compile_one, work))
    w, h = (int(v) for v in lr_size.lower().split("x"))
    out_shape = (h * scale, w * scale)
    lr_dev = cp.asarray(bp.image_like((h, w), seed=1))
    info = bp.device_info()
    print(f"device: {info['name']}, {info['sms']} SMs; frame {w}x{h} -> {out_shape[1]}x{out_shape[0]}, uint8; "
          f"median of {reps} CUDA-event timings per variant")
    results, full_ms, current = [], None, None
    for tile, arch, label, cfg in rows:
        if tile != current:
            current, full_ms = tile, None
            model = _model_for(arch, scale)
            print(f"\n{arch} {cfg.arithmetic} {FusedConfig.label.fget(cfg)} ({tile})")
            print("| variant | ABLATE | ms/frame | delta from full | regs | local B | shared KiB |")
            print("|---|---|---|---|---|---|---|")
        net = fused.FusedSRCNN(model, cfg.arithmetic, config=cfg)
        out = cp.empty(out_shape, np.uint8)
        ms = bp.time_cupy(lambda: net.run(lr_dev, out_shape, 255, out=out), reps)
        if cfg.ablate == 0:
            full_ms = ms
        delta = f"{ms - full_ms:+.3f} ms ({(ms - full_ms) / full_ms:+.1%})" if full_ms else "-"
        k = net.kernel
        print(f"| {label} | {cfg.ablate} | {ms:.3f} | {delta} | {k.registers} | {k.local_bytes} | "
              f"{net.layout.shared_bytes / 1024:.1f} |", flush=True)
        results.append({"tile": tile, "arch": arch, "variant": label, "ablate": cfg.ablate, "ms": ms,
                        "full_ms": full_ms, "registers": k.registers, "local_bytes": k.local_bytes,
                        "shared_bytes": net.layout.shared_bytes, "kernel": cfg.kernel_name(f2_of(arch))})
        del net, out
    if json_path:
        json_path.write_text(json.dumps({"device": info, "results": results}, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", action="append", help="9-1-5 and/or 9-5-5: the offered fp16-fast tile (default both)")
    ap.add_argument("--tile", action="append", help="PRECISION:ARCH[:k=v,...] (tensor-core tiles), instead of --arch")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--lr", default="1920x1080", help="LR frame WxH")
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1), help="parallel builds first (1: none)")
    ap.add_argument("--offline", action="store_true", help="no GPU: registers / spills by NVRTC, shared memory")
    ap.add_argument("--sm", type=int, default=90, help="with --offline: sm_SM")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--copy", type=Path, help="on the GPU: write the patched copy of the tree here (kept), not to a "
                                              "temporary folder")
    args = ap.parse_args()
    tiles = args.tile or ([f"fp16-fast:{a}" for a in args.arch] if args.arch else DEFAULT_TILES)
    if args.offline:
        return offline(tiles, args.sm, args.jobs)
    if not guarded():  # the runner compiles the package's files: run where they carry the guards
        return run_in_copy(sys.argv[1:], args.copy)
    return on_gpu(tiles, args.reps, args.lr, args.scale, args.jobs, args.json)


if __name__ == "__main__":
    sys.exit(main())
