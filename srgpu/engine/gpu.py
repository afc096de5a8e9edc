"""The GPU engine: every step between host planes in and host planes out on one CUDA device.

Per plane: upload, bicubic (two separable passes, srgpu.kernels.bicubic), the three SRCNN layers
(srgpu.kernels.conv, one variant + launch shape per layer as the plan says) or a fused kernel,
conversion back to the plane's sample type (srgpu.kernels.quantize), download. Everything is
queued on one CUDA stream with no host round trip between steps; device buffers are kept per
frame size and reused, so a video allocates nothing per frame.

A frame whose 64- and 32-channel intermediates do not fit the memory budget runs in horizontal
strips that overlap by the network's halo (f1//2 + f2//2 + f3//2 rows; srgpu.engine.bands.bands_within);
the rows a strip's false border affects are discarded, so the result equals the untiled one exactly.

The plan for a frame size and output bit depth (srgpu.engine.plans) is the given one, else the cached one
(per GPU model, model architecture, frame size, precision and depth), else the one this engine
chose for another size at that depth, else a cached one of another size, else one chosen by the
planner the engine was handed (srgpu.engine.tune.Tuner), else the default. The depth enters here, from
the output plane (srgpu.engine.plans.output_bits): which kernel arithmetics meet the accuracy bar
depends on it. Any compile or launch failure raises EngineError naming the kernel.
"""

from __future__ import annotations

import contextlib
import math
import time
from concurrent.futures import ThreadPoolExecutor
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np

from ..errors import EngineError
from ..kernels.timing import time_ms
from ..model import SRCNNModel
from ..kernels.conv import ConvConfig
from .plans import (ACCURACY_BAR, FLOAT_BITS, FUSED_BACKENDS, FusedChoice, KernelPlan, Precision, arithmetics_for, default_plan, load_cached, nearest_cached, output_bits, plan_key)
from .bands import bands_within
from .base import Engine
from .frames import FrameFormat, FrameProcessor, PlaneSpec
from .gpuinfo import require_gpu  # noqa: F401  (moved to srgpu.engine.gpuinfo; imported from here by tools and scripts)
from .options import GPUOptions

SUPPORTED_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.float32))
MEMORY_FRACTION = 0.6  # of free device memory the strip buffers may take when no budget is given
MIN_KEPT_ROWS = 16  # rows a strip must keep besides its halos, or the frame is refused
CACHED_SHAPES = 4  # frame sizes whose buffers are kept


class Planner(Protocol):
    """Chooses a plan for a frame size and output depth on ``engine`` and caches it (srgpu.engine.tune.Tuner)."""

    def measure(self, engine: "GPUEngine", lr_shape: tuple[int, int], hr_shape: tuple[int, int], bits: int) -> KernelPlan: ...


@dataclass
class _Work:
    tmp: Any  # bicubic intermediate, float32
    y: Any  # bicubic output = SRCNN input, float32 (H, W)


class GPUEngine(Engine):
    """SRCNN on ``cuda:device_index`` as ``options`` ask (GPUOptions, checked when made).

    planner: when the first frame size of an output depth without a cached plan comes (for this
        or another size), it chooses one (and caches it); later sizes of that depth reuse it.
        Without a planner the default plan runs until ``srgpu tune`` caches one.
    """

    name = "cuda"

    def __init__(self, model: SRCNNModel, scale: int, device_index: int = 0, options: GPUOptions = GPUOptions(),
                 planner: Planner | None = None) -> None:
        super().__init__(model, scale)
        from ..kernels.conv import srcnn_layers

        try:
            import cupy as cp

            from ..kernels.build import device_limits

            self._cp = cp
            self.device = cp.cuda.Device(device_index)
            with self.device:
                self.limits = device_limits(device_index)
                self.stream = cp.cuda.Stream(non_blocking=True)
        except EngineError:
            raise
        except Exception as e:
            raise EngineError(f"cuda:{device_index} cannot be used ({' '.join(str(e).split())})") from None
        self.device_index = device_index
        self.description = f"GPU cuda:{device_index} ({self.limits.name})"
        self.options = options
        self.planner = planner
        self.layers = srcnn_layers(model)
        self._chosen: dict[int, KernelPlan] = {}  # per output depth: the plan chosen first, reused for other sizes
        self._plans: dict[tuple[tuple[int, int], tuple[int, int], int], KernelPlan] = {}
        self._conv_kernels: dict[str, Any] = {}
        self._fused_runners: dict[FusedChoice, Callable[..., None]] = {}
        self._io: OrderedDict[Any, tuple[Any, Any]] = OrderedDict()
        self._work: OrderedDict[Any, _Work] = OrderedDict()
        self._strips: OrderedDict[Any, tuple[Any, Any, Any]] = OrderedDict()
        self._strip_rows: dict[tuple[int, int], int] = {}
        self._scratch_buf: Any = None
        with self._on_device(), self._guard("initialising the GPU engine"):
            from ..kernels.bicubic import Bicubic
            from ..kernels.conv import transpose_weights
            from ..kernels.quantize import Quantize

            a = model.arrays(np.float32)
            self._weights = [(cp.asarray(transpose_weights(a[f"conv{i}_weight"])), cp.asarray(a[f"conv{i}_bias"]))
                             for i in (1, 2, 3)]
            # compiled side by side (NVRTC gives up the GIL): a fresh machine's start-up waits for one
            with ThreadPoolExecutor(1, thread_name_prefix="srgpu-compile") as pool:
                quantize = pool.submit(Quantize, device_index, self.limits)
                self.bicubic = Bicubic(device_index, self.limits)
                self.quantize = quantize.result()
            self._checked: set[tuple[Any, int]] = set()  # (plan identity, depth) that passed check_plan
            if options.plan is not None:  # a given plan that cannot run fails here, before any work
                self._ready(options.plan, 8)

    @property
    def precision(self) -> Precision:
        return self.options.precision

    # ------------------------------------------------------------ host API (Engine)

    def srcnn_plane(self, plane: np.ndarray, out_shape: tuple[int, int], max_value: float) -> np.ndarray:
        return self.upscale_frame([plane], [PlaneSpec(tuple(out_shape), True)], max_value)[0]

    def bicubic_plane(self, plane: np.ndarray, out_shape: tuple[int, int], max_value: float) -> np.ndarray:
        return self.upscale_frame([plane], [PlaneSpec(tuple(out_shape), False)], max_value)[0]

    def upscale_frame(self, planes: Sequence[np.ndarray], specs: Sequence[PlaneSpec], max_value: float) -> list[np.ndarray]:
        """All planes uploaded, processed and downloaded on one stream; one wait at the end."""
        if len(planes) != len(specs):
            raise ValueError(f"{len(planes)} planes but {len(specs)} plane specs")
        prepared = [_as_supported(p) for p in planes]
        results = []
        with self._on_device(), self._guard("processing a frame"):
            outs = []
            for slot, ((plane, back), spec) in enumerate(zip(prepared, specs)):
                src, out = self._io_buffers(slot, plane.shape, plane.dtype, tuple(spec.out_shape))
                src.set(plane, stream=self.stream)
                self.plane_device(src, out, spec, max_value)
                outs.append(out)
            for out, (_, back) in zip(outs, prepared):
                host = out.get(stream=self.stream, blocking=False)
                results.append((host, back))
            self.stream.synchronize()
        return [host if back is None else host.astype(back) for host, back in results]

    def frame_processor(self, fmt: FrameFormat, slots: int | None = None) -> FrameProcessor:
        """Overlapped upload / compute / download with pinned buffers (srgpu.engine.overlap)."""
        from .overlap import OverlappedGPU

        return OverlappedGPU(self, fmt, slots)

    def close(self) -> None:
        self._io.clear()
        self._work.clear()
        self._strips.clear()
        self._scratch_buf = None

    # ------------------------------------------------------------ device API (for pipelines)

    def plane_device(self, src: Any, out: Any, spec: PlaneSpec, max_value: float) -> None:
        """Queue ``spec``'s path for device plane ``src`` into ``out``: SRCNN or bicubic only."""
        if spec.srcnn:
            self.srcnn_device(src, out, max_value)
        else:
            self.bicubic_device(src, out, max_value)

    def srcnn_device(self, src: Any, out: Any, max_value: float, bits: int | None = None) -> None:
        """Queue bicubic + SRCNN + conversion of device plane ``src`` (h, w) into ``out`` (H, W)
        (dtype uint8/uint16/float32) on ``self.stream``; or of a batch of planes of one size,
        (N, h, w) into (N, H, W), C-contiguous: one launch where the plan is fused. ``bits``: the
        depth of the output this plane ends up in (srgpu.engine.plans.output_bits; default ``out``'s own:
        a float luma plane of an 8-bit image says 8). Work buffers are reused by the next call on
        this engine, which is ordered after this one by the stream."""
        in_shape, out_shape = tuple(src.shape[-2:]), tuple(out.shape[-2:])
        bits = output_bits(out.dtype, max_value) if bits is None else bits
        with self._on_device():
            plan = self.plan_for(in_shape, out_shape, bits)
            if src.ndim == 3 and plan.kind != "fused":  # the layer-wise path takes a plane at a time
                for one, into in zip(src, out):
                    self._run_plan(plan, one, into, max_value)
            else:
                self._run_plan(plan, src, out, max_value)

    def bicubic_device(self, src: Any, out: Any, max_value: float) -> None:
        """Queue the bicubic upscale of ``src`` (h, w) into ``out`` (H, W), or of a batch of planes
        of one size (N, h, w) into (N, H, W) (C-contiguous), on ``self.stream``."""
        from ..kernels.bicubic import intermediate_shape

        with self._on_device():
            if src.ndim == 3:
                tmp = self._scratch((src.shape[0],) + intermediate_shape(tuple(src.shape[1:]), tuple(out.shape[1:])))
            else:
                tmp = self._work_buffers(tuple(src.shape), tuple(out.shape)).tmp
            self.bicubic.resize(src, out, tmp, max_value, True, self.stream)

    # ------------------------------------------------------------ plans

    def plan_for(self, in_shape: tuple[int, int], out_shape: tuple[int, int], bits: int) -> KernelPlan:
        """The plan for this frame size and output depth (``bits``, srgpu.engine.plans.output_bits)."""
        key = (tuple(in_shape), tuple(out_shape), bits)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._choose(tuple(in_shape), tuple(out_shape), bits)
        return plan

    def ready_for(self, in_shape: tuple[int, int], out_shape: tuple[int, int], bits: int) -> None:
        """Choose (compile, check) the plan for this size and depth now, on this engine's stream, as
        ``srcnn_device`` would at its first call: a pipeline that has other kernels compiling on
        threads of their own calls it before it waits for them. A known size costs a lookup (no
        device switch: this is on a folder's path per group)."""
        if (tuple(in_shape), tuple(out_shape), bits) not in self._plans:
            with self._on_device():
                self.plan_for(in_shape, out_shape, bits)

    def _choose(self, in_shape: tuple[int, int], out_shape: tuple[int, int], bits: int) -> KernelPlan:
        if self.options.plan is not None:
            return self._ready(self.options.plan, bits)
        notify = self.options.notify or (lambda s: None)
        key = plan_key(self.limits.key, self.model.arch, in_shape, out_shape, self.precision, bits)
        # a folder of many sizes must not stall per size: the fused kernels are tiled, so the
        # plan chosen for one size (here or cached) serves the others
        for found in (lambda: load_cached(key, self.options.cache_dir, self.layers), lambda: self._chosen.get(bits),
                      lambda: nearest_cached(key, self.options.cache_dir, self.layers)):
            plan = found()
            if plan is not None:
                try:
                    self._ready(plan, bits)
                except EngineError as e:  # e.g. a cache written by another driver: choose again
                    notify(f"cached plan not used: {e}")
                    continue
                self._chosen.setdefault(bits, plan)
                return plan
        if self.planner is not None:
            if self.precision == "fp16" and arithmetics_for(self.precision, bits) == ("fp32",):
                notify(f"fp16 does not meet the accuracy bar for {bits}-bit output; running fp32")
            notify(f"choosing kernels for {in_shape[1]}x{in_shape[0]} -> {out_shape[1]}x{out_shape[0]} "
                   f"{_depth_name(bits)} on this GPU (once; the choice is cached) ...")
            started = time.perf_counter()
            plan = self._ready(self.planner.measure(self, in_shape, out_shape, bits), bits)
            notify(f"chose {plan.describe()} in {time.perf_counter() - started:.1f} s")
        else:
            plan = self._ready(default_plan(self.model), bits)
        self._chosen.setdefault(bits, plan)
        return plan

    def _ready(self, plan: KernelPlan, bits: int) -> KernelPlan:
        """``plan`` compiled and, unless the options say not to, self-checked at output depth
        ``bits`` (once per plan and depth)."""
        if self.options.self_check:
            if (_identity(plan), _check_depth(plan, bits)) not in self._checked:
                self.check_plan(plan, bits)
        else:
            self._prepare(plan)
        return plan

    def _prepare(self, plan: KernelPlan) -> None:
        """Compile what ``plan`` runs (EngineError naming the kernel on failure)."""
        if plan.kind == "layerwise":
            try:
                plan.check(self.layers)
            except ValueError as e:
                raise EngineError(str(e)) from None
            self._compile_pairs([(i, c.config) for i, c in enumerate(plan.layers)])
        elif plan.kind == "fused":
            self._fused_runner(plan.fused)
        else:
            raise EngineError(f"unknown plan kind {plan.kind!r}")

    def check_plan(self, plan: KernelPlan, bits: int = 8, seed: int = 0) -> None:
        """Run ``plan`` on a small random frame against the CPU reference in float64: a layer-wise
        plan's float32 output within 1e-4; a fused plan's output at ``bits`` within the accuracy
        bar's level difference of the reference rounded to that depth (srgpu.engine.plans.ACCURACY_BAR,
        condition (1); the reference stands for the fp32 kernel, which is within ~1e-6 of it).
        The reference comes from disk when an earlier process computed it (check_reference.py);
        a plan fails only against one computed now. EngineError if it fails."""
        frame = _CheckFrame.of(plan, bits, seed, self.scale)
        # a first run computes the reference (NumPy, float64) while the kernel compiles or loads
        with ThreadPoolExecutor(1, thread_name_prefix="srgpu-check-reference") as pool:
            stored = pool.submit(self._reference, frame, False)
            self._prepare(plan)
            failure = self._check_against_reference(plan, frame, stored.result())
        if failure is not None:
            failure = self._check_against_reference(plan, frame, self._reference(frame, True))
        if failure is not None:
            raise EngineError(failure)
        self._checked.add((_identity(plan), _check_depth(plan, bits)))

    def _reference(self, frame: "_CheckFrame", fresh: bool) -> np.ndarray:
        from .check_reference import reference_dir, srcnn_reference

        return srcnn_reference(self.model, frame.upscaled, reference_dir(self.options.cache_dir), fresh)

    def _check_against_reference(self, plan: KernelPlan, frame: "_CheckFrame", expect: np.ndarray) -> str | None:
        """What is wrong with ``plan``'s output on the check frame, or None."""
        cp = self._cp
        lr, out_shape = frame.lr, frame.upscaled.shape
        with self._on_device(), self._guard(f"checking plan {plan.describe()}"):
            if plan.kind == "layerwise":
                net = self._poisoned(out_shape, np.float32)
                work = self._work_buffers(lr.shape, out_shape)
                self.bicubic.resize(cp.asarray(lr), work.y, work.tmp, 1.0, False, self.stream)
                self._layers(plan, work.y, net, None)
                got = net.get(stream=self.stream)
                err = float(np.max(np.abs(got - expect))) if not np.isnan(got).any() else float("nan")
                limit = 1e-4 * max(1.0, float(np.max(np.abs(expect))))
                if not err <= limit:
                    return f"plan {plan.describe()} failed its self-check: max error {err:.3g} > {limit:.3g}"
            else:
                out = self._poisoned(out_shape, lr.dtype)
                self._run_plan(plan, cp.asarray(lr), out, frame.top)
                got = out.get(stream=self.stream)
                ref = np.floor(np.clip(expect, 0, 1) * frame.top + 0.5)
                worst = int(np.abs(got.astype(np.int64) - ref.astype(np.int64)).max())
                if not ACCURACY_BAR.met(worst):
                    return (f"plan {plan.describe()} failed its self-check at {frame.depth} bits: output up to {worst} "
                            f"levels from the reference (the bar: {ACCURACY_BAR.max_level_difference})")
        return None

    def _poisoned(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A device array the kernel under test must overwrite entirely: every byte 0xFF (float32:
        NaN) or 0xAB (integer samples), set by a memset on the engine's stream. (CuPy's ``full``
        would load its fill kernel, ~20 ms of a new process's first run.)"""
        a = self._cp.empty(shape, dtype=dtype)
        a.data.memset_async(0xFF if np.dtype(dtype).kind == "f" else 0xAB, a.nbytes, self.stream)
        return a

    # ------------------------------------------------------------ running a plan

    def _run_plan(self, plan: KernelPlan, src: Any, out: Any, max_value: float) -> None:
        in_shape, out_shape = tuple(src.shape), tuple(out.shape)
        if plan.kind == "fused":  # the kernel reads the samples and writes the converted output itself
            try:
                self._fused_runner(plan.fused)(src, out, max_value, self.stream)
            except EngineError:
                raise
            except Exception as e:
                raise EngineError(f"fused kernel {plan.fused.label} failed: {' '.join(str(e).split())}") from None
            return
        work = self._work_buffers(in_shape, out_shape)
        self.bicubic.resize(src, work.y, work.tmp, max_value, False, self.stream)
        self._layers(plan, work.y, out, max_value)

    def _layers(self, plan: KernelPlan, y: Any, out: Any, max_value: float | None) -> None:
        """The three layers on ``y`` (H, W) in strips; ``out`` gets the converted result (or the
        raw float output when ``max_value`` is None)."""
        H, W = y.shape
        rows = self.strip_rows(H, W)
        for s in bands_within(H, rows, self.model.halo):  # the rows a strip's false border reaches are not kept
            h1, h2, o = self.layer_buffers(s.b1 - s.b0, W, capacity=rows)
            self.run_layer(0, plan.layers[0].config, y[s.b0:s.b1], h1)
            self.run_layer(1, plan.layers[1].config, h1, h2)
            self.run_layer(2, plan.layers[2].config, h2, o)
            part = o[0, s.k0 - s.b0:s.k1 - s.b0]
            if max_value is None:
                self._cp.copyto(out[s.k0:s.k1], part)  # raw float (self-checks)
            else:
                self.quantize.from_unit(part, out[s.k0:s.k1], max_value, self.stream)

    def run_layer(self, index: int, cfg: ConvConfig, x: Any, y: Any) -> None:
        from ..kernels import conv

        layer = self.layers[index]
        kernel = self._conv_kernels.get(cfg.kernel_name(layer))
        if kernel is None:
            self._compile_pairs([(index, cfg)])
            kernel = self._conv_kernels[cfg.kernel_name(layer)]
        wt, b = self._weights[index]
        conv.run(kernel, layer, cfg, x, wt, b, y, self.stream)

    def compile_layer_configs(self, index: int, configs: Sequence[ConvConfig]) -> None:
        self._compile_pairs([(index, c) for c in configs])

    def _compile_pairs(self, pairs: Sequence[tuple[int, ConvConfig]]) -> None:
        from ..kernels.conv import compile_configs

        todo = [(self.layers[i], c) for i, c in pairs if c.kernel_name(self.layers[i]) not in self._conv_kernels]
        if todo:
            with self.device:
                self._conv_kernels.update(compile_configs(todo, self.device_index, self.limits))

    def _fused_runner(self, choice: FusedChoice | None) -> Callable[..., None]:
        import importlib

        if choice is None or choice.backend not in FUSED_BACKENDS:
            raise EngineError(f"unknown fused backend {getattr(choice, 'backend', None)!r}")
        runner = self._fused_runners.get(choice)
        if runner is None:
            try:
                backend = importlib.import_module(choice.backend)
            except ImportError as e:
                raise EngineError(f"fused backend {choice.backend} is not available ({e})") from None
            with self.device:
                runner = backend.fused_runner(choice.arithmetic, dict(choice.params), self.model, self.device_index,
                                              self.limits, axis_tables=self.bicubic)
            self._fused_runners[choice] = runner
        return runner

    # ------------------------------------------------------------ memory

    def strip_rows(self, H: int, W: int) -> int:
        """Rows per strip of the layer intermediates (H when the whole frame fits the budget)."""
        key = (H, W)
        if key not in self._strip_rows:
            row_bytes = 4 * W * (self.model.n1 + self.model.n2 + 1)
            budget = self.options.tile_budget_bytes
            if budget is None:
                cp = self._cp
                with self.device:
                    free, _ = cp.cuda.runtime.memGetInfo()
                budget = int(MEMORY_FRACTION * (free + cp.get_default_memory_pool().free_bytes()))
            rows = budget // row_bytes
            if rows < H:
                need = 2 * self.model.halo + MIN_KEPT_ROWS
                if rows < need:
                    raise EngineError(f"a {W}x{H} frame needs at least {need * row_bytes / 2**20:.0f} MiB of GPU "
                                      f"memory for its layer intermediates; {budget / 2**20:.0f} MiB available")
            self._strip_rows[key] = int(min(rows, H))
        return self._strip_rows[key]

    def layer_buffers(self, rows: int, W: int, capacity: int | None = None) -> tuple[Any, Any, Any]:
        """(n1, rows, W), (n2, rows, W), (1, rows, W) float32 views of buffers sized for
        ``capacity`` rows, allocated once per (capacity, W)."""
        cp = self._cp
        capacity = max(rows, capacity or rows)
        key = (capacity, W)
        bufs = self._strips.get(key)
        if bufs is None:
            with self._on_device():
                bufs = tuple(cp.empty(c * capacity * W, dtype=np.float32) for c in (self.model.n1, self.model.n2, 1))
            _remember(self._strips, key, bufs)
        n1, n2 = self.model.n1, self.model.n2
        return (bufs[0][:n1 * rows * W].reshape(n1, rows, W), bufs[1][:n2 * rows * W].reshape(n2, rows, W),
                bufs[2][:rows * W].reshape(1, rows, W))

    def _work_buffers(self, in_shape: tuple[int, int], out_shape: tuple[int, int]) -> _Work:
        from ..kernels.bicubic import intermediate_shape

        cp = self._cp
        key = (in_shape, out_shape)
        work = self._work.get(key)
        if work is None:
            with self._on_device():
                work = _Work(cp.empty(intermediate_shape(in_shape, out_shape), dtype=np.float32),
                             cp.empty(out_shape, dtype=np.float32))
            _remember(self._work, key, work)
        return work

    def _scratch(self, shape: tuple[int, ...]) -> Any:
        """A float32 array of ``shape``, a view of one buffer grown as needed: the stream orders
        every use after the last, as with the work buffers."""
        n = math.prod(shape)
        if self._scratch_buf is None or self._scratch_buf.size < n:
            self._scratch_buf = None
            self._scratch_buf = self._cp.empty(max(n, 1 << max(n - 1, 0).bit_length()), dtype=np.float32)
        return self._scratch_buf[:n].reshape(shape)

    def _io_buffers(self, slot: int, in_shape: tuple[int, int], dtype: np.dtype,
                    out_shape: tuple[int, int]) -> tuple[Any, Any]:
        cp = self._cp
        key = (slot, tuple(in_shape), np.dtype(dtype), tuple(out_shape))
        bufs = self._io.get(key)
        if bufs is None:
            with self._on_device():
                bufs = (cp.empty(in_shape, dtype=dtype), cp.empty(out_shape, dtype=dtype))
            _remember(self._io, key, bufs, limit=CACHED_SHAPES * 4)
        return bufs

    # ------------------------------------------------------------ timing (srgpu.engine.tune, srgpu.tools.bench)

    def time_network(self, plan: KernelPlan, lr_shape: tuple[int, int], hr_shape: tuple[int, int], bits: int = 8,
                     seed: int = 1) -> tuple[float, dict[str, float]]:
        """(ms per frame of the whole device-side network for ``plan`` on a random frame of
        ``bits``, ms of each stage run alone)."""
        cp = self._cp
        rng = np.random.default_rng(seed)
        self._prepare(plan)
        top = 2**min(bits, 16) - 1
        dtype = np.uint8 if bits <= 8 else np.uint16
        with self._on_device(), self._guard(f"timing plan {plan.describe()}"):
            src = cp.asarray(rng.integers(0, top + 1, lr_shape).astype(dtype))
            out = cp.empty(hr_shape, dtype=dtype)
            total = time_ms(lambda: self._run_plan(plan, src, out, top), self.stream)
            stages: dict[str, float] = {}
            if plan.kind == "layerwise":
                work = self._work_buffers(tuple(lr_shape), tuple(hr_shape))
                stages["bicubic"] = time_ms(lambda: self.bicubic.resize(src, work.y, work.tmp, top, False, self.stream),
                                            self.stream)
                H, W = hr_shape
                rows = self.strip_rows(H, W)
                h1, h2, o = self.layer_buffers(rows, W, capacity=rows)
                ins, outs = [work.y[:rows], h1, h2], [h1, h2, o]
                for i, choice in enumerate(plan.layers):
                    stages[choice.layer] = time_ms(lambda: self.run_layer(i, choice.config, ins[i], outs[i]), self.stream)
                stages["quantize"] = time_ms(lambda: self.quantize.from_unit(work.y, out, top, self.stream), self.stream)
            return total, stages

    # ------------------------------------------------------------ context and errors

    @contextlib.contextmanager
    def _on_device(self) -> Iterator[None]:
        """This engine's device and stream current: every CuPy copy, allocation and launch inside
        is ordered on ``self.stream`` (which does not synchronise with the legacy default stream)."""
        with self.device, self.stream:
            yield

    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """CUDA errors (often reported at the next synchronisation) -> EngineError saying what ran."""
        try:
            yield
        except (EngineError, ValueError, TypeError):
            raise
        except Exception as e:
            if type(e).__module__.startswith(("cupy", "cupy_backends")) or "CUDA" in type(e).__name__:
                raise EngineError(f"GPU error while {what}: {' '.join(str(e).split())}") from None
            raise


def _identity(plan: KernelPlan) -> tuple[Any, ...]:
    """What a plan runs (not when or how it was measured)."""
    return plan.kind, tuple(c.config for c in plan.layers), plan.fused


@dataclass(frozen=True)
class _CheckFrame:
    """The self-check's input: a seeded random LR frame (float32 in [0, 1] for a layer-wise plan,
    samples of the check depth for a fused one) and its bicubic upscale in float64, which the
    reference network takes."""

    lr: np.ndarray
    upscaled: np.ndarray
    depth: int
    top: int

    @classmethod
    def of(cls, plan: KernelPlan, bits: int, seed: int, scale: int) -> "_CheckFrame":
        from ..resize import imresize

        rng = np.random.default_rng(seed)
        lr_shape = (40, 36) if plan.kind == "layerwise" else (72, 64)
        out_shape = (lr_shape[0] * scale, lr_shape[1] * scale)
        if plan.kind == "layerwise":
            lr = rng.random(lr_shape, dtype=np.float32)
            return cls(lr, imresize(lr.astype(np.float64), output_shape=out_shape), FLOAT_BITS, 1)
        depth = _check_depth(plan, bits)
        top = 2**depth - 1
        lr = rng.integers(0, top + 1, lr_shape).astype(np.uint8 if depth <= 8 else np.uint16)
        return cls(lr, imresize(lr.astype(np.float64) / top, output_shape=out_shape), depth, top)


def _check_depth(plan: KernelPlan, bits: int) -> int:
    """The depth ``plan``'s self-check runs at for outputs of ``bits``: a layer-wise plan is
    checked on its float output whatever the depth; a fused one at the depth (float outputs: at
    16 bits, fused plans there being fp32, srgpu.engine.plans.arithmetics_for)."""
    return FLOAT_BITS if plan.kind == "layerwise" else min(bits, 16)


def _depth_name(bits: int) -> str:
    return "float" if bits >= FLOAT_BITS else f"{bits}-bit"


def _as_supported(plane: np.ndarray) -> tuple[np.ndarray, np.dtype | None]:
    """(contiguous plane in a dtype the kernels take, the dtype to cast the result back to)."""
    if plane.ndim != 2:
        raise ValueError(f"expected a 2-D plane, got shape {plane.shape}")
    if plane.dtype in SUPPORTED_DTYPES:
        return np.ascontiguousarray(plane), None
    if np.issubdtype(plane.dtype, np.floating):
        return np.ascontiguousarray(plane, dtype=np.float32), plane.dtype
    raise ValueError(f"unsupported plane dtype {plane.dtype}: use uint8, uint16 or float32")


def _remember(cache: OrderedDict, key: Any, value: Any, limit: int = CACHED_SHAPES) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)
