#!/usr/bin/env python3
"""srgpu's fused SRCNN kernels beside PyTorch + cuDNN, same weights, one GPU, one run.

Per architecture, 1920x1080 -> 3840x2160 (x2) by default:
- srgpu fused fp32 / fp16 (hi/lo split, meets the 8-bit bar) / fp16-fast: uint8 LR luma in,
  uint8 HR luma out, bicubic + 3 layers + quantisation in one launch (host transfers excluded);
- PyTorch conv stack with replicate padding on the bicubic plane (network only, as the anchor
  table of ../shared/DESIGN.md): fp32, tf32, fp16 channels_last replayed from a CUDA graph.
Prints ms/frame (median of CUDA-event timings after warm-up), achieved TFLOP/s (useful FLOPs:
2 x MACs per output pixel), the fraction of the device's peak (FFMA: SMs x 128 x 2 x max clock;
tensor cores: a measured 8192^3 fp16 matmul), GPU memory, and cuDNN-best / srgpu ratios.

    python3 scripts/benchmarks/bench_peers.py [--arch 9-1-5 --arch 9-5-5] [--json out.json] [--sweep] [--big]
    python3 scripts/benchmarks/bench_peers.py --only fp16:9-1-5 --reps 5   # one kernel, for ncu
PyTorch is a benchmark-only dependency; without it the peer rows are skipped.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dev.cuda.fused_not_offered import not_offered_configs  # noqa: E402
from srgpu.kernels import fused  # noqa: E402
from srgpu.model import SRCNNModel, random_model, resolve_model  # noqa: E402

def parse_params(text: str) -> dict:
    """'th=32,rw=48' -> {'th': 32, 'rw': 48}"""
    return {k: int(v) for k, v in (item.split("=") for item in text.split(",") if item)}


def image_like(shape: tuple[int, int], seed: int) -> np.ndarray:
    """Smooth gradient + noise, full 8-bit range, never constant (as tests/conftest.random_image)."""
    rng = np.random.default_rng(seed)
    h, w = shape
    base = np.add.outer(np.linspace(0, 0.6, h), np.linspace(0, 0.4, w))
    return np.round(np.clip(base * 0.8 + rng.random(shape) * 0.3, 0, 1) * 255).astype(np.uint8)


def time_cupy(fn, reps: int, warmup: int = 3) -> float:
    import cupy as cp

    for _ in range(warmup):
        fn()
    ev = [cp.cuda.Event() for _ in range(reps + 1)]
    ev[0].record()
    for i in range(reps):
        fn()
        ev[i + 1].record()
    ev[-1].synchronize()
    return float(statistics.median(cp.cuda.get_elapsed_time(a, b) for a, b in zip(ev, ev[1:])))


def time_torch(fn, reps: int, warmup: int = 3) -> float:
    import torch

    for _ in range(warmup):
        fn()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    ev[0].record()
    for i in range(reps):
        fn()
        ev[i + 1].record()
    ev[-1].synchronize()
    return float(statistics.median(a.elapsed_time(b) for a, b in zip(ev, ev[1:])))


def device_info() -> dict:
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    sms = int(props["multiProcessorCount"])
    clock_ghz = int(props["clockRate"]) / 1e6
    return {"name": name, "sms": sms, "max_clock_ghz": clock_ghz, "fp32_peak_tflops": sms * 128 * 2 * clock_ghz / 1e3,
            "cupy": cp.__version__, "cuda_runtime": cp.cuda.runtime.runtimeGetVersion()}


def tensor_peak_tflops(reps: int = 10) -> float | None:
    """Measured dense fp16 matmul rate (8192^3, random data) through PyTorch: the tensor-core ceiling."""
    try:
        import torch
    except ImportError:
        return None
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    ms = time_torch(lambda: torch.mm(a, b), reps)
    return 2 * n**3 / (ms * 1e-3) / 1e12


def srgpu_row(model: SRCNNModel, precision: str, lr_dev, out_shape, reps: int, params: dict | None = None) -> dict:
    import cupy as cp

    cfg = fused.config_for(precision, model.f2, **(params or {}))
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    cp.cuda.Device().synchronize()
    free0 = cp.cuda.runtime.memGetInfo()[0]
    t0 = time.perf_counter()
    net = fused.FusedSRCNN(model, precision, config=cfg)
    setup_s = time.perf_counter() - t0
    out = cp.empty(out_shape, np.uint8)
    net.run(lr_dev, out_shape, 255, out=out)
    cp.cuda.Device().synchronize()
    mem = free0 - cp.cuda.runtime.memGetInfo()[0]
    ms = time_cupy(lambda: net.run(lr_dev, out_shape, 255, out=out), reps)
    k = net.kernel
    return {"impl": f"srgpu fused {precision}", "config": cfg.label, "ms": ms, "flops": net.flops(out_shape),
            "mem_bytes": int(mem), "registers": k.registers, "local_bytes": k.local_bytes,
            "shared_bytes": net.layout.shared_bytes, "setup_s": setup_s, "tensor": precision != "fp32", "out": out}


def torch_rows(model: SRCNNModel, y_dev, reps: int) -> list[dict]:
    """PyTorch + cuDNN on the bicubic plane ``y_dev`` (cupy float32 (H, W)), network only."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    a = model.arrays(np.float32)
    f2 = model.f2

    def net() -> nn.Module:
        m = nn.Sequential(nn.Conv2d(1, 64, 9, padding=4, padding_mode="replicate"), nn.ReLU(inplace=True),
                          nn.Conv2d(64, 32, f2, padding=f2 // 2, padding_mode="replicate"), nn.ReLU(inplace=True),
                          nn.Conv2d(32, 1, 5, padding=2, padding_mode="replicate"))
        with torch.no_grad():
            for layer, i in zip((m[0], m[2], m[4]), (1, 2, 3)):
                layer.weight.copy_(torch.from_numpy(a[f"conv{i}_weight"]))
                layer.bias.copy_(torch.from_numpy(a[f"conv{i}_bias"]))
        return m.cuda().eval()

    torch.backends.cudnn.benchmark = True
    x32 = torch.as_tensor(y_dev, device="cuda")[None, None].contiguous()
    H, W = x32.shape[-2:]
    flops = 2.0 * model.macs_per_pixel * H * W
    halo = model.halo
    rows = []

    def add(label: str, fmt: str, peak: str, fn, out_fn) -> None:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        ms = time_torch(fn, reps)
        rows.append({"impl": label, "config": fmt, "ms": ms, "flops": flops, "peak": peak,
                     "mem_bytes": int(torch.cuda.max_memory_allocated() - base), "tensor": peak != "fp32",
                     "torch_out": out_fn()})

    with torch.no_grad():
        for mode in ("fp32", "tf32"):
            torch.backends.cudnn.allow_tf32 = mode == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
            m = net()
            add(f"PyTorch cuDNN {mode}", "NCHW, replicate per layer", mode, lambda: m(x32), lambda: m(x32)[0, 0].float())
            del m
        torch.backends.cudnn.allow_tf32 = True
        for exact in (True, False):
            m = net().half().to(memory_format=torch.channels_last)
            if not exact:  # pad the input once by the network's halo, valid convolutions: borders differ
                for layer in (m[0], m[2], m[4]):
                    layer.padding, layer.padding_mode = (0, 0), "zeros"
                x16 = F.pad(x32, (halo,) * 4, mode="replicate").half().to(memory_format=torch.channels_last)
            else:
                x16 = x32.half().to(memory_format=torch.channels_last)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    m(x16)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y16 = m(x16)
            label = "PyTorch cuDNN fp16 channels_last + CUDA graph" + ("" if exact else " (pad once, valid convs)")
            add(label, "NHWC, " + ("replicate per layer" if exact else "borders differ"), "fp16", g.replay,
                lambda: y16[0, 0].float())
            del m, g
        m = net()
        for layer in (m[0], m[2], m[4]):
            layer.padding, layer.padding_mode = (0, 0), "zeros"
        xp = F.pad(x32, (halo,) * 4, mode="replicate")
        add("PyTorch cuDNN tf32 (pad once, valid convs)", "NCHW, borders differ", "tf32", lambda: m(xp),
            lambda: m(xp)[0, 0].float())
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", action="append", help="9-1-5 and/or 9-5-5 (default both)")
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("--lr", default="1920x1080", help="LR frame WxH")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="also time the alternative tiles (fused.CANDIDATES)")
    ap.add_argument("--not-offered", action="store_true",
                    help="with --sweep, also time the tiles the tuner does not offer (dev/cuda/fused_not_offered.py)")
    ap.add_argument("--precision", action="append", choices=fused.ARITHMETICS,
                    help="only these kernel arithmetics (default all; fp32 gives the 8-bit = fp32 column)")
    ap.add_argument("--big", action="store_true", help="also time a 3840x2160 -> 7680x4320 frame")
    ap.add_argument("--only", help="PRECISION:ARCH[:k=v,...]: run just that fused kernel --reps times (for ncu)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    import cupy as cp

    w, h = (int(v) for v in args.lr.lower().split("x"))
    out_shape = (h * args.scale, w * args.scale)
    lr = image_like((h, w), seed=1)
    lr_dev = cp.asarray(lr)

    def model_for(arch: str) -> SRCNNModel:
        try:
            return resolve_model(arch, args.scale)  # the shipped weights when present
        except Exception:
            return random_model(arch, seed=0, scale=args.scale)

    if args.only:
        precision, arch, *rest = args.only.split(":")
        model = model_for(arch)
        net = fused.FusedSRCNN(model, precision, config=fused.config_for(precision, model.f2,
                                                                          **parse_params(rest[0] if rest else "")))
        out = cp.empty(out_shape, np.uint8)
        for _ in range(args.reps):
            net.run(lr_dev, out_shape, 255, out=out)
        cp.cuda.Device().synchronize()
        print(f"ran {net.name} {args.reps} times")
        return 0

    info = device_info()
    have_torch = not args.no_torch
    if have_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            have_torch = False
    tpeak = tensor_peak_tflops() if have_torch else None
    info["tensor_fp16_matmul_tflops"] = tpeak
    print(f"device: {info['name']}, {info['sms']} SMs, {info['max_clock_ghz']:.2f} GHz max; FFMA peak "
          f"{info['fp32_peak_tflops']:.1f} TFLOP/s; fp16 matmul measured {tpeak or float('nan'):.0f} TFLOP/s")
    print(f"frame: {w}x{h} -> {out_shape[1]}x{out_shape[0]} (x{args.scale}), uint8 luma; reps {args.reps}")
    results = {"device": info, "lr": [h, w], "out": list(out_shape), "archs": {}}
    for arch in args.arch or ["9-1-5", "9-5-5"]:
        model = model_for(arch)
        rows = []
        for p in args.precision or fused.ARITHMETICS:
            try:
                rows.append(srgpu_row(model, p, lr_dev, out_shape, args.reps))
            except Exception as e:  # e.g. fp16 split for 9-5-5: does not fit in shared memory
                print(f"  srgpu fused {p} {arch}: not available ({' '.join(str(e).split())[:160]})")
            default = fused.config_for(p, model.f2)  # the first row's (the first tile that runs everywhere)
            extra = [c for c in fused.candidate_configs(p, model.f2) if c != default] if args.sweep else []
            extra += not_offered_configs(p, model.f2) if args.sweep and args.not_offered else []
            for cfg in extra:
                params = dict(cfg.params)
                try:
                    rows.append(srgpu_row(model, p, lr_dev, out_shape, args.reps, params))
                except Exception as e:
                    print(f"  srgpu fused {p} {arch} {params}: failed ({' '.join(str(e).split())[:160]})")
        by_prec = {}
        for r in rows:
            if r["impl"] not in by_prec or r["ms"] < by_prec[r["impl"]]["ms"]:
                by_prec[r["impl"]] = r
        # agreement of the 8-bit outputs with fp32 (the accuracy bar)
        ref8 = by_prec.get("srgpu fused fp32", {}).get("out")
        if ref8 is not None:
            for r in rows:
                frac, worst = fused.agreement(r["out"].get(), ref8.get())
                r["equal_to_fp32"], r["max_level_diff"] = frac, worst
        if have_torch:
            import torch

            fp32net = fused.FusedSRCNN(model, "fp32")
            y = fp32net.run(lr_dev, out_shape, 255, out=cp.empty(out_shape, np.float32), bicubic_only=True)
            raw = fp32net.run(lr_dev, out_shape, 255, out=cp.empty(out_shape, np.float32), raw=True)
            trows = torch_rows(model, y, args.reps)
            for r in trows:
                diff = float((r.pop("torch_out") - torch.as_tensor(raw, device="cuda")).abs().max())
                r["max_abs_diff_vs_srgpu_fp32"] = diff
            rows += trows
            del y, raw
            torch.cuda.empty_cache()
        if args.big:
            big_lr = cp.asarray(image_like((h * 2, w * 2), seed=2))
            for p in ("fp32", "fp16", "fp16-fast"):
                try:
                    r = srgpu_row(model, p, big_lr, (out_shape[0] * 2, out_shape[1] * 2), max(3, args.reps // 3))
                    r["impl"] += f" ({out_shape[1] * 2}x{out_shape[0] * 2})"
                    rows.append(r)
                except Exception as e:
                    print(f"  {p} {arch} 8K: not available ({' '.join(str(e).split())[:120]})")
        cudnn = [r for r in rows if r["impl"].startswith("PyTorch")]
        best = min(cudnn, key=lambda r: r["ms"]) if cudnn else None
        print(f"\n{arch} ({model.name}), {model.macs_per_pixel} MAC/px")
        print("| implementation | tile | ms/frame | TFLOP/s | % of peak | cuDNN best / this | GPU MiB | 8-bit = fp32 |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            tfl = r["flops"] / (r["ms"] * 1e-3) / 1e12
            kind = r.get("peak", "fp16" if r["tensor"] else "fp32")
            peak = {"fp32": info["fp32_peak_tflops"], "tf32": (tpeak or float("nan")) / 2,
                    "fp16": tpeak or float("nan")}[kind]
            r["tflops"], r["peak_fraction"] = tfl, tfl / peak
            ratio = f"{best['ms'] / r['ms']:.1f}x" if best else "-"
            eq = f"{r['equal_to_fp32']:.4%} (max {r['max_level_diff']})" if "equal_to_fp32" in r else "-"
            print(f"| {r['impl']} | {r['config']} | {r['ms']:.3f} | {tfl:.1f} | {100 * r['peak_fraction']:.1f}% | "
                  f"{ratio} | {r['mem_bytes'] / 2**20:.0f} | {eq} |")
        for r in rows:
            r.pop("out", None)
        if best:
            print(f"cuDNN best: {best['impl']} {best['ms']:.3f} ms; exact border, fastest: "
                  f"{min((r for r in cudnn if 'differ' not in r['config']), key=lambda r: r['ms'])['ms']:.3f} ms")
        results["archs"][arch] = rows
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
