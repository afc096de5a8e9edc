"""Binary convolution on the GPU (binary.cu, beside this file): XNOR emulated by XOR, matches counted by popcount,
on channels packed 64 to a word (the method of CN106779057B), with its NumPy reference and a
self-check.

A binarized layer takes the signs of its input, ``a = +1 if x > t else -1`` with a per-channel
threshold ``t``, and the signs of its weights, ``sign(w) = +1 if w > 0 else -1``; for output
channel ``o`` at a pixel, with ``N = K*K*CIN`` signs under the filter,

    s = sum sign(a) sign(w) = N - 2 * popcount(a XOR w)     (an integer, exact)

and the epilogue writes ``alpha[o] * s + beta[o]`` (float32, ReLU or not; or that rounded to
fp16) or, where the next layer is binary too, the vote: a packed bit ``dir[o] * s > k[o]``.

Layout: packed planes are planar (CW, H, W) uint64, CW = ceil(C / 64), bit ``c % 64`` of word
``c // 64``, unused bits 0: a pixel's 64 channels are one 8-byte load (the width of a memory
access, as the patent asks), neighbouring threads load neighbouring pixels (coalesced), and it is
the planar layout of the float tensors the other kernels (conv.cu) read and write, so the packer
reads conv1's output as it is. Weights are packed on the host to (CW, K, K, COUT): a tap's
filters contiguous, as conv.cu's transposed weights.

Variants (``BinaryConfig``): ``b0`` direct (one thread a pixel x FO filters, global loads);
``b1`` two-level blocking (a block's output tile with its halo of words and its filters' weights
in shared memory; each thread PX pixels x FO filters in registers). Kernels are template
instantiations per layer (CW, COUT, K), launch shape and epilogue (``Epilogue``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from srgpu.kernels.launch import Launch, cdiv

SOURCE = str(Path(__file__).resolve().parent / "binary.cu")  # beside this file; its #include "common.cuh"
# is srgpu/kernels' (build.load_source reads an absolute path as it is, its project headers from srgpu/kernels)
VARIANTS = ("b0", "b1")
PACK_THREADS = 256
WORD = 64  # channels per packed word
SHARED_BUDGET = 96 * 1024
POISON_WORD = np.uint64(0xA5A5A5A5A5A5A5A5)  # what an output word holds before a check (never a plausible result)
ACT_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float16): "unsigned short"}  # fp16 travels as its bits
OUT_CODES = {("float32", True): 0, ("float32", False): 1, ("float16", True): 2, ("float16", False): 3, ("vote", False): 4}


def words(channels: int) -> int:
    return cdiv(channels, WORD)


@dataclass(frozen=True)
class BinaryLayer:
    """One binary convolution: cin -> cout channels, k x k filters."""

    name: str
    cin: int
    cout: int
    k: int

    @property
    def words_in(self) -> int:
        return words(self.cin)

    @property
    def words_out(self) -> int:
        return words(self.cout)

    @property
    def nbits(self) -> int:
        """N: the signs under one filter."""
        return self.k * self.k * self.cin

    @property
    def word_ops_per_pixel(self) -> int:
        """XOR + popcount of 64-bit words per output pixel (vs cin*cout*k*k multiply-adds)."""
        return self.words_in * self.k * self.k * self.cout


@dataclass(frozen=True)
class Epilogue:
    """What the layer writes: ``float32`` or ``float16`` planes of alpha * s + beta (ReLU or
    not), or ``vote`` (packed bits for a following binary layer)."""

    out: str = "float32"
    relu: bool = True

    def __post_init__(self) -> None:
        if (self.out, self.relu) not in OUT_CODES:
            raise ValueError(f"epilogue {self.out} relu={self.relu}: use float32 or float16 (ReLU or not) or vote "
                             "(relu=False: fold the ReLU into the vote's thresholds with fold_vote)")

    @property
    def code(self) -> int:
        return OUT_CODES[(self.out, self.relu)]

    @property
    def label(self) -> str:
        return self.out + ("+relu" if self.relu else "")


@dataclass(frozen=True)
class BinaryConfig:
    """A variant and its launch shape: block (bx, by) threads, px pixels (b1) x fo filters a thread."""

    variant: str
    bx: int
    by: int
    px: int
    fo: int

    @property
    def label(self) -> str:
        return f"{self.variant} {self.bx}x{self.by} px{self.px} fo{self.fo}"

    def kernel_name(self, layer: BinaryLayer, epilogue: Epilogue) -> str:
        args = [layer.words_in, layer.cout, layer.k, self.bx, self.by]
        args += [self.fo] if self.variant == "b0" else [self.px, self.fo]
        return f"bconv_{self.variant}<{', '.join(str(a) for a in args + [epilogue.code])}>"

    def shared_bytes(self, layer: BinaryLayer) -> int:
        """Dynamic shared memory; mirrors bconv_b1's sizes (which trap if short)."""
        if self.variant == "b0":
            return 0
        k = layer.k
        return 8 * layer.words_in * (k * k * self.fo + (self.by + k - 1) * (self.bx * self.px + k - 1))

    def launch(self, layer: BinaryLayer, epilogue: Epilogue, h: int, w: int) -> Launch:
        blocks = cdiv(w, self.bx * self.px) * cdiv(h, self.by) * (layer.cout // self.fo)
        return Launch(self.kernel_name(layer, epilogue), (blocks, 1, 1), (self.bx, self.by, 1), self.shared_bytes(layer))

    def problems(self, layer: BinaryLayer, epilogue: Epilogue) -> list[str]:
        """Why this config cannot instantiate for ``layer`` and ``epilogue`` (empty when it can)."""
        out = []
        if self.variant not in VARIANTS:
            out.append(f"unknown variant {self.variant}")
        if self.variant == "b0" and self.px != 1:
            out.append("b0 computes one pixel per thread")
        if self.fo < 1 or layer.cout % self.fo:
            out.append(f"fo={self.fo} must divide cout={layer.cout}")
        if epilogue.out == "vote" and not (self.fo % WORD == 0 or (self.fo == layer.cout <= WORD)):
            out.append("a vote word is written by one thread: fo must be all filters (cout <= 64) or a multiple of 64")
        if self.bx < 1 or self.by < 1 or self.px < 1:
            out.append("empty block")
        if layer.k % 2 == 0:
            out.append("odd filter sizes only ('same' output)")
        return out


def candidates(layer: BinaryLayer, epilogue: Epilogue) -> list[BinaryConfig]:
    """Every variant x launch shape the timing script (and a tuner) tries for ``layer``."""
    cout = layer.cout
    if epilogue.out == "vote":
        fos = [cout] if cout <= WORD else [WORD]
        shapes = [("b0", 32, 4, 1, fos[0]), ("b1", 32, 4, 1, fos[0]), ("b1", 32, 8, 2, fos[0]), ("b1", 32, 4, 2, fos[0])]
    else:
        shapes = [("b0", 32, 4, 1, cout), ("b0", 32, 8, 1, min(cout, 16))]
        for bx, by, px, fo in ((32, 4, 4, 16), (32, 8, 4, 16), (32, 4, 2, 32), (32, 8, 2, 32), (32, 4, 4, 8),
                               (32, 8, 8, 8)):  # ~100-150 registers; px8 fo16 or px4 fo32 reach 255
            shapes.append(("b1", bx, by, px, min(fo, cout)))
    out = []
    for variant, bx, by, px, fo in shapes:
        cfg = BinaryConfig(variant, bx, by, px, fo)
        if cfg not in out and not cfg.problems(layer, epilogue) and cfg.shared_bytes(layer) <= SHARED_BUDGET:
            out.append(cfg)
    return out


def default_config(layer: BinaryLayer, epilogue: Epilogue) -> BinaryConfig:
    """Before measurement: a two-level blocked shape."""
    return next(c for c in candidates(layer, epilogue) if c.variant == "b1")


def pack_name(dtype: np.dtype) -> str:
    return f"pack_bits<{ACT_TYPES[np.dtype(dtype)]}>"


def all_kernel_names(layers: Iterable[BinaryLayer] = (), epilogues: Iterable[Epilogue] | None = None) -> list[str]:
    """The packers and every candidate of ``layers`` (default: SRCNN's binarized conv2 of 9-1-5 and
    9-5-5, and a binary layer after it) under every epilogue."""
    layers = list(layers) or list(SRCNN_LAYERS.values())
    eps = list(epilogues) if epilogues is not None else ALL_EPILOGUES
    names = {pack_name(d) for d in ACT_TYPES}
    for layer in layers:
        for ep in eps:
            names.update(cfg.kernel_name(layer, ep) for cfg in candidates(layer, ep))
    return sorted(names)


ALL_EPILOGUES = [Epilogue("float32", True), Epilogue("float32", False), Epilogue("float16", True),
                 Epilogue("float16", False), Epilogue("vote", False)]
SRCNN_LAYERS = {  # binarized conv2 of 9-1-5 and 9-5-5, and a binary 32 -> 32 layer that could follow a vote
    "conv2-1x1": BinaryLayer("conv2", 64, 32, 1),
    "conv2-5x5": BinaryLayer("conv2", 64, 32, 5),
    "next-3x3": BinaryLayer("next", 32, 32, 3),
}


# ---------------------------------------------------------------- host-side packing and folding


def pack_weights(weight: np.ndarray) -> np.ndarray:
    """(cout, cin, k, k) float (latent weights or +-1 signs) -> (CW, k, k, cout) uint64 bits,
    bit set where the weight is > 0 (its sign is +1); unused bits 0."""
    cout, cin, k, _ = weight.shape
    bits = np.asarray(weight) > 0  # (cout, cin, k, k)
    padded = np.zeros((cout, words(cin) * WORD, k, k), bool)
    padded[:, :cin] = bits
    grouped = padded.reshape(cout, words(cin), WORD, k, k).transpose(1, 3, 4, 0, 2)  # (CW, k, k, cout, 64)
    return np.ascontiguousarray(_bits_to_words(grouped))


def _bits_to_words(bits: np.ndarray) -> np.ndarray:
    """(..., 64) bool -> (...) uint64, element b as bit b."""
    weights = np.left_shift(np.uint64(1), np.arange(WORD, dtype=np.uint64))
    return np.bitwise_or.reduce(np.where(bits, weights, np.uint64(0)), axis=-1).astype(np.uint64)


def unpack_bits(packed: np.ndarray, channels: int) -> np.ndarray:
    """(CW, H, W) uint64 -> (channels, H, W) bool (for tests and for reading votes)."""
    cw = packed.shape[0]
    shifts = np.arange(WORD, dtype=np.uint64)
    bits = (packed[:, None] >> shifts[None, :, None, None]) & np.uint64(1)  # (CW, 64, H, W)
    return bits.reshape(cw * WORD, *packed.shape[1:])[:channels].astype(bool)


def fold_vote(alpha: np.ndarray, beta: np.ndarray, threshold: np.ndarray, relu: bool,
              nbits: int) -> tuple[np.ndarray, np.ndarray]:
    """The vote that decides exactly what ``act(alpha*s + beta) > threshold`` decides (float32, in
    binary.cu's order) for every possible s in [-nbits, nbits]: (k, dir) int32 with the bit
    ``dir * s > k``. The float decision is monotone in s (rounding is monotone), so a step."""
    s = np.arange(-nbits, nbits + 1, dtype=np.int32)
    ks, dirs = [], []
    for a, b, t in zip(np.asarray(alpha, np.float32), np.asarray(beta, np.float32), np.asarray(threshold, np.float32)):
        bit = _epilogue_values(s[None], np.array([a]), np.array([b]), relu)[0] > t
        if a >= 0:  # non-decreasing: ones from the first s that passes
            first = int(np.argmax(bit)) if bit.any() else len(s)
            k, d = (int(s[first]) - 1 if first < len(s) else nbits), 1
        else:  # non-increasing: ones up to the last s that passes
            last = len(s) - 1 - int(np.argmax(bit[::-1])) if bit.any() else -1
            k, d = (-(int(s[last]) + 1) if last >= 0 else nbits), -1
        if not np.array_equal(d * s > k, bit):
            raise AssertionError(f"the epilogue's decision is not a step in s (alpha {a}, beta {b}, threshold {t})")
        ks.append(k)
        dirs.append(d)
    return np.array(ks, np.int32), np.array(dirs, np.int32)


def vote_array(k: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """The kernels' ``vote`` argument: k then dir, int32 (2 * cout)."""
    return np.concatenate([np.asarray(k, np.int32), np.asarray(direction, np.int32)])


# ---------------------------------------------------------------- NumPy reference (bit-exact)


def reference_pack(x: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """pack_bits: (C, H, W) float32/float16 -> (CW, H, W) uint64, bit = x[c] > t[c] (in float32)."""
    c = x.shape[0]
    bits = x.astype(np.float32) > np.asarray(threshold, np.float32)[:, None, None]
    padded = np.zeros((words(c) * WORD,) + x.shape[1:], bool)
    padded[:c] = bits
    grouped = padded.reshape(words(c), WORD, *x.shape[1:])
    return np.ascontiguousarray(_bits_to_words(np.moveaxis(grouped, 1, -1)))


def _popcount(a: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(a).astype(np.int32)
    table = np.array([bin(i).count("1") for i in range(256)], np.int32)  # numpy < 2.0
    return table[a[..., None].view(np.uint8)].sum(axis=-1, dtype=np.int32)


def reference_popcounts(packed: np.ndarray, wbits: np.ndarray) -> np.ndarray:
    """Popcounts of the disagreeing signs: (CW, H, W) words and (CW, k, k, cout) weight words ->
    (cout, H, W) int32, 'same' size, replicate border."""
    cw, h, w = packed.shape
    k, cout = wbits.shape[1], wbits.shape[3]
    r = k // 2
    pad = np.pad(packed, ((0, 0), (r, r), (r, r)), mode="edge") if r else packed
    pc = np.zeros((cout, h, w), np.int32)
    for o in range(cout):
        for c in range(cw):
            for dy in range(k):
                for dx in range(k):
                    pc[o] += _popcount(pad[c, dy:dy + h, dx:dx + w] ^ wbits[c, dy, dx, o])
    return pc


def reference_sums(packed: np.ndarray, wbits: np.ndarray, cin: int) -> np.ndarray:
    """s = N - 2 popcount: the +-1 correlation, (cout, H, W) int32."""
    k = wbits.shape[1]
    return (k * k * cin - 2 * reference_popcounts(packed, wbits)).astype(np.int32)


def _epilogue_values(s: np.ndarray, alpha: np.ndarray, beta: np.ndarray, relu: bool) -> np.ndarray:
    """alpha * s + beta in float32, the product rounded, then the sum (binary.cu's __fmul_rn, __fadd_rn)."""
    shape = (-1,) + (1,) * (s.ndim - 1)
    a = np.asarray(alpha, np.float32).reshape(shape)
    b = np.asarray(beta, np.float32).reshape(shape)
    v = np.multiply(a, s.astype(np.float32), dtype=np.float32)
    v = np.add(v, b, dtype=np.float32)
    return np.maximum(v, np.float32(0)) if relu else v


def reference_epilogue(s: np.ndarray, alpha: np.ndarray, beta: np.ndarray, epilogue: Epilogue,
                       vote: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """The kernel's output from the sums: float32 / float16 planes, or (words_out, H, W) uint64 votes
    (``vote`` = (k, dir))."""
    if epilogue.out == "vote":
        assert vote is not None
        k, d = (np.asarray(v, np.int64)[:, None, None] for v in vote)
        return reference_pack((d * s.astype(np.int64) > k).astype(np.float32), np.full(s.shape[0], 0.5, np.float32))
    v = _epilogue_values(s, alpha, beta, epilogue.relu)
    return v.astype(np.float16) if epilogue.out == "float16" else v


def reference(x: np.ndarray, threshold: np.ndarray, weight: np.ndarray, alpha: np.ndarray, beta: np.ndarray,
              epilogue: Epilogue, vote: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """The whole binarized layer on float input: pack, XOR-popcount convolution, epilogue."""
    return reference_epilogue(reference_sums(reference_pack(x, threshold), pack_weights(weight), x.shape[0]),
                              alpha, beta, epilogue, vote)


# ---------------------------------------------------------------- GPU


def compile_configs(layer: BinaryLayer, pairs: Iterable[tuple[BinaryConfig, Epilogue]], device_index: int,
                    limits: Any) -> dict[str, Any]:
    """The packers and the kernels of (config, epilogue) pairs for ``layer`` in one NVRTC call,
    each launch shape checked against the device first: kernel name -> Kernel."""
    from srgpu.errors import EngineError
    from srgpu.kernels.build import compile_kernels
    from srgpu.kernels.launch import LaunchError, validate_launch

    names = [pack_name(d) for d in ACT_TYPES]
    for cfg, ep in pairs:
        problems = cfg.problems(layer, ep)
        if problems:
            raise EngineError(f"kernel {cfg.kernel_name(layer, ep)}: {'; '.join(problems)}")
        try:
            validate_launch(cfg.launch(layer, ep, 1, 1), limits)
        except LaunchError as e:
            raise EngineError(str(e)) from None
        names.append(cfg.kernel_name(layer, ep))
    return compile_kernels(SOURCE, names, device_index, limits)


def pack_launch(name: str, n: int, limits: Any) -> Launch:
    return Launch(name, (max(1, min(cdiv(n, PACK_THREADS), limits.multiprocessors * 32)), 1, 1), (PACK_THREADS, 1, 1))


def run_pack(kernels: dict[str, Any], limits: Any, x: Any, threshold: Any, out: Any, stream: Any) -> None:
    """out (CW, H, W) uint64 = the signs of x (C, H, W) float32/float16 against ``threshold`` (C,) float32."""
    c, h, w = (int(v) for v in x.shape)
    if tuple(out.shape) != (words(c), h, w) or np.dtype(out.dtype) != np.uint64 or threshold.size != c:
        raise ValueError(f"pack: x {x.shape} needs out ({words(c)}, {h}, {w}) uint64 and {c} thresholds")
    name = pack_name(x.dtype)
    kernels[name](pack_launch(name, words(c) * h * w, limits),
                  (x, threshold, out, np.int32(c), np.int64(h * w)), stream)


def run_conv(kernel: Any, layer: BinaryLayer, cfg: BinaryConfig, epilogue: Epilogue, x: Any, wbits: Any,
             alpha: Any, beta: Any, vote: Any, y: Any, stream: Any) -> None:
    """y = the binary layer of packed x (CW, H, W); y (cout, H, W) float32/float16 or
    (words_out, H, W) uint64 for the vote. ``alpha``/``beta`` (cout,) float32, ``vote`` (2 cout,)
    int32: each is read only by its epilogue, but always passed."""
    h, w = int(x.shape[-2]), int(x.shape[-1])
    want = {"float32": ((layer.cout, h, w), np.float32), "float16": ((layer.cout, h, w), np.float16),
            "vote": ((layer.words_out, h, w), np.uint64)}[epilogue.out]
    if tuple(x.shape) != (layer.words_in, h, w) or (tuple(y.shape), np.dtype(y.dtype)) != (want[0], np.dtype(want[1])):
        raise ValueError(f"{layer.name}: x {x.shape} / y {y.dtype} {y.shape} do not fit ({layer.cin}->{layer.cout} "
                         f"{epilogue.label}, {h}x{w})")
    vec_ok = w % 4 == 0 and y.data.ptr % 16 == 0
    kernel(cfg.launch(layer, epilogue, h, w), (x, wbits, alpha, beta, vote, y, np.int32(h), np.int32(w),
                                               np.int32(layer.nbits), np.int32(vec_ok)), stream)


@dataclass(frozen=True)
class RandomLayer:
    """Seeded random data for a check: input (never all zeros), thresholds, weights, alpha, beta, vote."""

    x: np.ndarray
    threshold: np.ndarray
    weight: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    vote: tuple[np.ndarray, np.ndarray]


def random_layer(layer: BinaryLayer, shape: tuple[int, int], seed: int, dtype: type = np.float32) -> RandomLayer:
    rng = np.random.default_rng(seed)
    h, w = shape
    x = np.maximum(rng.standard_normal((layer.cin, h, w)), 0).astype(dtype)  # a ReLU output: many zeros, not all
    x[:, 0, 0] = 1 + rng.random(layer.cin).astype(dtype)
    threshold = (rng.random(layer.cin) * 0.3).astype(np.float32)
    weight = rng.standard_normal((layer.cout, layer.cin, layer.k, layer.k)).astype(np.float32)
    alpha = (rng.random(layer.cout) * 0.02 + 0.001).astype(np.float32)
    alpha[::5] *= -1  # negative scales too (the vote's other direction)
    beta = (rng.standard_normal(layer.cout) * 0.1).astype(np.float32)
    vote = fold_vote(alpha, beta, np.zeros(layer.cout, np.float32), False, layer.nbits)
    return RandomLayer(x, threshold, weight, alpha, beta, vote)


def check_configs(layer: BinaryLayer, configs: Sequence[BinaryConfig], epilogues: Sequence[Epilogue],
                  shape: tuple[int, int], device_index: int = 0, seed: int = 0,
                  act_dtype: type = np.float32) -> dict[str, int]:
    """Pack random activations and run each (config, epilogue) against the NumPy reference, outputs
    poisoned first: 'label epilogue' -> number of output elements that differ (0: bit-exact).
    The packed plane is checked too (key 'pack')."""
    import cupy as cp

    from srgpu.kernels.build import device_limits

    limits = device_limits(device_index)
    data = random_layer(layer, shape, seed, act_dtype)
    h, w = shape
    packed = reference_pack(data.x, data.threshold)
    sums = reference_sums(packed, pack_weights(data.weight), layer.cin)
    pairs = [(c, e) for c in configs for e in epilogues if not c.problems(layer, e)]
    kernels = compile_configs(layer, pairs, device_index, limits)
    diffs: dict[str, int] = {}
    with cp.cuda.Device(device_index), cp.cuda.Stream(non_blocking=True) as stream:
        dx, dt = cp.asarray(data.x), cp.asarray(data.threshold)
        dbits = cp.full((layer.words_in, h, w), POISON_WORD, dtype=cp.uint64)
        run_pack(kernels, limits, dx, dt, dbits, stream)
        diffs["pack"] = int(np.count_nonzero(dbits.get() != packed))
        dw, da, db = cp.asarray(pack_weights(data.weight)), cp.asarray(data.alpha), cp.asarray(data.beta)
        dv = cp.asarray(vote_array(*data.vote))
        for ep in epilogues:
            expect = reference_epilogue(sums, data.alpha, data.beta, ep, data.vote)
            if ep.out == "vote":
                dy = cp.empty((layer.words_out, h, w), dtype=cp.uint64)
            else:
                dy = cp.empty((layer.cout, h, w), dtype=np.dtype(ep.out))
            for cfg in configs:
                if cfg.problems(layer, ep):
                    continue
                dy.fill(POISON_WORD if ep.out == "vote" else np.nan)
                run_conv(kernels[cfg.kernel_name(layer, ep)], layer, cfg, ep, dbits, dw, da, db, dv, dy, stream)
                got = dy.get()
                # NaN (the poison, an element never written) differs from everything
                diffs[f"{cfg.label} {ep.label}"] = int(np.count_nonzero(~(got == expect)))
        stream.synchronize()
    return diffs


def self_check(device_index: int = 0, seed: int = 0) -> int:
    """Every candidate of the SRCNN binary layers under every epilogue, on small awkward sizes, fp32
    and fp16 activations; raises on any element that differs from the NumPy reference; returns the
    number of (config, epilogue, size) cases checked."""
    cases = 0
    for layer in SRCNN_LAYERS.values():
        for i, shape in enumerate(((1, 1), (7, 13), (33, 65))):
            for dtype in (np.float32, np.float16):
                diffs = check_configs(layer, candidates(layer, Epilogue("float32", True)) +
                                      candidates(layer, Epilogue("vote", False)), ALL_EPILOGUES, shape, device_index,
                                      seed + i, dtype)
                bad = {k: v for k, v in diffs.items() if v}
                if bad:
                    raise AssertionError(f"binary {layer.name} {layer.cin}->{layer.cout} {layer.k}x{layer.k} at {shape} "
                                         f"({np.dtype(dtype).name}): elements differing from the reference: {bad}")
                cases += len(diffs)
    return cases
