#!/usr/bin/env python3
"""Binary convolution (binary.cu, issue 20) against the fp32 and fp16 kernels of the same layer, on
a 1080p -> 4K x2 frame's activations (3840x2160), one GPU.

Per SRCNN conv2 (5x5 of 9-5-5 and 1x1 of 9-1-5, 64 -> 32, ReLU):
- binary: packing conv1's output (fp32 and fp16) to bits; every binary candidate (b0 direct, b1
  two-level blocked) with the float32 and float16 epilogues (and the vote, for the record);
- fp32: every srgpu layer-wise candidate (conv.cu) of the same layer;
- fp16: srgpu has fp16 only inside its fused whole-network kernels, so the fp16 kernel of the
  layer alone is cuDNN's (PyTorch, NHWC, on a pre-padded input), beside cuDNN fp32 and TF32;
- whole networks (bicubic plane in, SR plane out, network only): conv1 -> pack -> binary conv2
  -> conv3 with srgpu's layer-wise kernels (each layer's fastest candidate) against the same
  chain with the fp32 conv2; and srgpu's fused fp32 / fp16 / fp16-fast networks (uint8 LR in,
  uint8 HR out, bicubic and quantisation included) where they fit.
Every binary kernel timed is first checked bit for bit against the NumPy reference on an awkward
size. Times: median of CUDA-event timings after warm-up (srgpu.kernels.timing), random data.

    python3 dev/binary/bench_binary.py [--json out.json] [--layers 5 1] [--no-torch] [--no-fused]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dev.binary import kernels as binary  # noqa: E402
from dev.binary.kernels import BinaryLayer, Epilogue  # noqa: E402
from dev.binary.model import random_binary_model  # noqa: E402
from srgpu.kernels import conv  # noqa: E402
from srgpu.kernels.conv import ConvLayer  # noqa: E402
from srgpu.model import random_model  # noqa: E402

H, W = 2160, 3840


def device_info() -> dict:
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {"name": name, "sms": int(props["multiProcessorCount"]), "max_clock_ghz": int(props["clockRate"]) / 1e6,
            "cupy": cp.__version__, "cuda_runtime": cp.cuda.runtime.runtimeGetVersion()}


def timed(fn: Callable[[], None], stream: Any) -> float:
    from srgpu.kernels.timing import time_ms

    return time_ms(fn, stream, warmup=3, min_reps=10, max_reps=100, target_ms=300.0)


def binary_rows(k: int, stream: Any, limits: Any, h1: Any, h1_16: Any, rows: list[dict]) -> dict[str, Any]:
    """Packing and every binary candidate of conv2 k x k; returns the fastest float32 kernel and its data."""
    import cupy as cp

    layer = BinaryLayer("conv2", 64, 32, k)
    eps = [Epilogue("float32", True), Epilogue("float16", True), Epilogue("vote", False)]
    pairs = [(c, e) for e in eps for c in binary.candidates(layer, e)]
    configs = list(dict.fromkeys(c for c, _ in pairs))
    diffs = binary.check_configs(layer, configs, eps, (67, 131), seed=k)  # bit-exact first
    if any(diffs.values()):
        raise SystemExit(f"binary conv2 {k}x{k} differs from the reference: {diffs}")
    kernels = binary.compile_configs(layer, pairs, 0, limits)
    rng = np.random.default_rng(k)
    data = binary.random_layer(layer, (1, 1), seed=k)
    t = cp.asarray(data.threshold)
    bits = cp.empty((1, H, W), cp.uint64)
    for name, x in (("fp32", h1), ("fp16", h1_16)):
        ms = timed(lambda: binary.run_pack(kernels, limits, x, t, bits, stream), stream)
        rows.append({"layer": f"conv2 {k}x{k}", "impl": f"binary pack {name} -> bits", "config": "", "ms": ms})
    wbits = cp.asarray(binary.pack_weights(rng.standard_normal((32, 64, k, k))))
    alpha, beta = cp.asarray(data.alpha), cp.asarray(data.beta)
    vote = cp.asarray(binary.vote_array(*data.vote))
    outs = {"float32": cp.empty((32, H, W), cp.float32), "float16": cp.empty((32, H, W), cp.float16),
            "vote": cp.empty((1, H, W), cp.uint64)}
    best: dict[str, Any] = {}
    for cfg, ep in pairs:
        kern = kernels[cfg.kernel_name(layer, ep)]
        ms = timed(lambda: binary.run_conv(kern, layer, cfg, ep, bits, wbits, alpha, beta, vote, outs[ep.out], stream),
                   stream)
        ops = layer.word_ops_per_pixel * H * W
        rows.append({"layer": f"conv2 {k}x{k}", "impl": f"binary conv {ep.label}", "config": cfg.label, "ms": ms,
                     "registers": kern.registers, "tera_word_ops_per_s": ops / (ms * 1e-3) / 1e12,
                     "equivalent_tmac_per_s": 64 * 32 * k * k * H * W / (ms * 1e-3) / 1e12})
        if ep.out == "float32" and ms < best.get("ms", float("inf")):
            best = {"ms": ms, "cfg": cfg, "kernel": kern, "layer": layer, "ep": ep, "wbits": wbits, "alpha": alpha,
                    "beta": beta, "vote": vote, "t": t, "kernels": kernels}
    del outs
    return best


def fp32_rows(k: int, stream: Any, limits: Any, h1: Any, rows: list[dict]) -> tuple[float, Any, Any]:
    """Every srgpu fp32 layer-wise candidate of conv2 k x k; returns the fastest (ms, cfg, kernel)."""
    import cupy as cp

    layer = ConvLayer("conv2", 64, 32, k, True)
    cands = conv.candidates(layer)
    kernels = conv.compile_configs([(layer, c) for c in cands], 0, limits)
    rng = np.random.default_rng(k)
    wt = cp.asarray(conv.transpose_weights(rng.standard_normal((32, 64, k, k)).astype(np.float32) * 0.05))
    bias = cp.asarray(rng.standard_normal(32).astype(np.float32) * 0.05)
    y = cp.empty((32, H, W), cp.float32)
    best = (float("inf"), None, None)
    for cfg in cands:
        kern = kernels[cfg.kernel_name(layer)]
        ms = timed(lambda: conv.run(kern, layer, cfg, h1, wt, bias, y, stream), stream)
        rows.append({"layer": f"conv2 {k}x{k}", "impl": "srgpu conv.cu fp32", "config": cfg.label, "ms": ms,
                     "tflops": 2 * layer.macs_per_pixel * H * W / (ms * 1e-3) / 1e12})
        if ms < best[0]:
            best = (ms, cfg, kern)
    return best


def torch_rows(k: int, rows: list[dict]) -> None:
    """cuDNN's conv2 alone (input pre-padded, 'valid' convolution): fp32, TF32, fp16 NHWC."""
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    r = k // 2
    x = torch.rand(1, 64, H + 2 * r, W + 2 * r, device="cuda")
    w = torch.randn(32, 64, k, k, device="cuda") * 0.05
    b = torch.randn(32, device="cuda") * 0.05
    for mode in ("fp32", "tf32", "fp16"):
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
        if mode == "fp16":
            xx, ww, bb = (x.half().to(memory_format=torch.channels_last), w.half().to(memory_format=torch.channels_last),
                          b.half())
        else:
            xx, ww, bb = x, w, b
        fn = lambda: F.relu(F.conv2d(xx, ww, bb), inplace=True)  # noqa: E731
        with torch.no_grad():
            for _ in range(3):
                fn()
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(31)]
            ev[0].record()
            for i in range(30):
                fn()
                ev[i + 1].record()
            ev[-1].synchronize()
        ms = float(statistics.median(a.elapsed_time(c) for a, c in zip(ev, ev[1:])))
        rows.append({"layer": f"conv2 {k}x{k}", "impl": f"PyTorch cuDNN {mode}" + (" NHWC" if mode == "fp16" else ""),
                     "config": "conv + ReLU, pre-padded input", "ms": ms,
                     "tflops": 2 * 64 * 32 * k * k * H * W / (ms * 1e-3) / 1e12})
    del x, xx
    torch.cuda.empty_cache()


def network_rows(k: int, stream: Any, limits: Any, best_bin: dict, best_fp32: tuple, rows: list[dict]) -> None:
    """conv1 -> conv2 -> conv3 on a 4K bicubic plane with srgpu's layer-wise kernels: binary conv2
    (pack + the fastest binary kernel) against the fastest fp32 conv2; conv1, conv3: the fastest
    of each layer's candidates."""
    import cupy as cp

    arch = f"9-{k}-5"
    fp, bm = random_model(arch, seed=1), random_binary_model(arch, seed=1)
    l1, l3 = ConvLayer("conv1", 1, 64, 9, True), ConvLayer("conv3", 32, 1, 5, False)
    c1, c3 = conv.candidates(l1), conv.candidates(l3)
    kern = conv.compile_configs([(l1, c) for c in c1] + [(l3, c) for c in c3], 0, limits)
    y = cp.asarray(np.random.default_rng(0).random((H, W), dtype=np.float32))
    h1 = cp.empty((64, H, W), cp.float32)
    h2 = cp.empty((32, H, W), cp.float32)
    out = cp.empty((1, H, W), cp.float32)
    w1, b1 = cp.asarray(conv.transpose_weights(fp.conv1_weight)), cp.asarray(fp.conv1_bias)
    w3, b3 = cp.asarray(conv.transpose_weights(fp.conv3_weight)), cp.asarray(fp.conv3_bias)

    def fastest(layer: ConvLayer, cands: list, x: Any, wt: Any, b: Any, dst: Any) -> Callable[[], None]:
        timings = [(timed(lambda c=c: conv.run(kern[c.kernel_name(layer)], layer, c, x, wt, b, dst, stream), stream), c)
                   for c in cands]
        c = min(timings, key=lambda t: t[0])[1]
        return lambda: conv.run(kern[c.kernel_name(layer)], layer, c, x, wt, b, dst, stream)

    run1 = fastest(l1, c1, y, w1, b1, h1)
    run3 = fastest(l3, c3, h2, w3, b3, out)
    bits = cp.empty((1, H, W), cp.uint64)
    bb = best_bin
    t = cp.asarray(bm.conv2_threshold)

    def binary_net() -> None:
        run1()
        binary.run_pack(bb["kernels"], limits, h1, t, bits, stream)
        binary.run_conv(bb["kernel"], bb["layer"], bb["cfg"], bb["ep"], bits, bb["wbits"], bb["alpha"], bb["beta"],
                        bb["vote"], h2, stream)
        run3()

    _, cfg2, k2 = best_fp32
    l2 = ConvLayer("conv2", 64, 32, k, True)
    w2, b2 = cp.asarray(conv.transpose_weights(fp.conv2_weight)), cp.asarray(fp.conv2_bias)

    def fp32_net() -> None:
        run1()
        conv.run(k2, l2, cfg2, h1, w2, b2, h2, stream)
        run3()

    for label, fn in (("srgpu layer-wise, binary conv2", binary_net), ("srgpu layer-wise fp32", fp32_net)):
        rows.append({"layer": f"network {arch}", "impl": label, "config": "conv1 -> conv2 -> conv3, network only",
                     "ms": timed(fn, stream)})


def fused_rows(k: int, rows: list[dict]) -> None:
    """srgpu's fused networks (uint8 1920x1080 in, uint8 3840x2160 out) where a tile fits."""
    import cupy as cp

    from srgpu.kernels import fused

    arch = f"9-{k}-5"
    model = random_model(arch, seed=1)
    lr = cp.asarray(np.random.default_rng(0).integers(0, 256, (H // 2, W // 2)).astype(np.uint8))
    out = cp.empty((H, W), cp.uint8)
    for precision in ("fp32", "fp16", "fp16-fast"):
        try:
            net = fused.FusedSRCNN(model, precision)
        except Exception as e:  # noqa: BLE001 - a precision with no tile for this model: say so
            rows.append({"layer": f"network {arch}", "impl": f"srgpu fused {precision}", "config": f"unavailable: {e}",
                         "ms": None})
            continue
        stream = cp.cuda.get_current_stream()
        rows.append({"layer": f"network {arch}", "impl": f"srgpu fused {precision}", "config": net.config.label,
                     "ms": timed(lambda: net.run(lr, (H, W), 255, out=out, stream=stream), stream)})
        del net


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, nargs="+", default=[5, 1], help="conv2 filter sizes (5: 9-5-5, 1: 9-1-5)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-fused", action="store_true")
    args = ap.parse_args()

    import cupy as cp

    from srgpu.kernels.build import device_limits

    limits = device_limits(0)
    rows: list[dict] = []
    stream = cp.cuda.Stream(non_blocking=True)
    for k in args.layers:
        with stream:
            cp.random.seed(k)
            h1 = cp.maximum(cp.random.standard_normal((64, H, W), dtype=cp.float32), 0)  # a ReLU output
            h1_16 = h1.astype(cp.float16)
            best_bin = binary_rows(k, stream, limits, h1, h1_16, rows)
            del h1_16
            best_fp32 = fp32_rows(k, stream, limits, h1, rows)
            del h1
            cp.get_default_memory_pool().free_all_blocks()
            network_rows(k, stream, limits, best_bin, best_fp32, rows)
            cp.get_default_memory_pool().free_all_blocks()
        if not args.no_torch:
            try:
                import torch

                if torch.cuda.is_available():
                    torch_rows(k, rows)
            except ImportError:
                print("PyTorch not installed: no cuDNN rows", file=sys.stderr)
        if not args.no_fused:
            fused_rows(k, rows)
            cp.get_default_memory_pool().free_all_blocks()
        for r in rows:
            if r.get("_printed"):
                continue
            r["_printed"] = True
            ms = f"{r['ms']:9.3f}" if r["ms"] is not None else "        —"
            extra = "".join(f" {key} {r[key]:.1f}" for key in ("tera_word_ops_per_s", "equivalent_tmac_per_s", "tflops")
                            if key in r)
            print(f"{r['layer']:14s} {ms} ms  {r['impl']:44s} {r['config']}{extra}", flush=True)
    report = {"device": device_info(), "date": datetime.date.today().isoformat(), "frame": f"{W}x{H}",
              "command": " ".join(sys.argv), "rows": [{k: v for k, v in r.items() if k != "_printed"} for r in rows]}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
