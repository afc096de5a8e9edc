"""GPU colour conversion for images (colour.cu): interleaved RGB(A)/BGR(A) samples, 8 or 16 bits,
to BT.601 Y/Cb/Cr float planes and back, as srgpu.color computes them on the CPU.

The kernels compute in double with srgpu.color's own constants and NumPy's order of operations
(no fused multiply-adds), so that:

- ``to_planes`` gives the planes the CPU path gives (``rgb_to_ycbcr(image / top)`` cast to
  float32) to within one float32 unit in the last place, where NumPy's 3x3 product (BLAS) rounds
  its double sums another way, which is rare: equal in practice (the tests measure it);
- ``from_planes`` gives the samples the CPU path gives (``quantize(ycbcr_to_rgb(planes))``),
  differing only where a value lies within a double's rounding of a half level, which random
  data does not hit: the tests allow one level on at most 1e-5 of the samples.

So the GPU's image path adds nothing measurable to what the GPU's planes already differ from the
CPU engine's (the accuracy bar: within one 8-bit level). :func:`definition_to_planes` and
:func:`definition_from_planes` are the kernels' arithmetic in NumPy, element by element;
:func:`reference_to_planes` / :func:`reference_from_planes` are srgpu.color's, the CPU engine's path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..color import BT601_MATRIX, BT601_OFFSET, _INVERSE, quantize, rgb_to_ycbcr, ycbcr_to_rgb
from .launch import Launch, cdiv

SOURCE = "colour.cu"
THREADS = 256
SAMPLE_TYPES = {np.dtype(np.uint8): "unsigned char", np.dtype(np.uint16): "unsigned short"}
ORDERS = ("rgb", "bgr")
CHANNELS = (3, 4)


def _name(fn: str, dtype: np.dtype, channels: int, order: str) -> str:
    if order not in ORDERS:
        raise ValueError(f"channel order {order!r}: use rgb or bgr")
    if channels not in CHANNELS:
        raise ValueError(f"{channels} channels: colour conversion takes 3 or 4")
    return f"{fn}<{SAMPLE_TYPES[np.dtype(dtype)]}, {channels}, {'true' if order == 'bgr' else 'false'}>"


def to_planes_name(dtype: np.dtype, channels: int, order: str) -> str:
    return _name("to_ycc", dtype, channels, order)


def from_planes_name(dtype: np.dtype, channels: int, order: str) -> str:
    return _name("from_ycc", dtype, channels, order)


def all_kernel_names() -> list[str]:
    return [fn(d, c, o) for fn in (to_planes_name, from_planes_name) for d in SAMPLE_TYPES for c in CHANNELS
            for o in ORDERS]


def coefficients() -> tuple[np.ndarray, np.ndarray]:
    """(forward, inverse): 12 float64 each, the 3x3 matrix row by row then the three offsets."""
    forward = np.concatenate([BT601_MATRIX.ravel(), BT601_OFFSET]).astype(np.float64)
    inverse = np.concatenate([_INVERSE.ravel(), BT601_OFFSET]).astype(np.float64)
    return forward, inverse


def top_of(dtype: np.dtype) -> float:
    return float(np.iinfo(np.dtype(dtype)).max)


def _rgb_index(order: str) -> tuple[int, int, int]:
    return (2, 1, 0) if order == "bgr" else (0, 1, 2)


# ---------------------------------------------------------------- NumPy: the kernels' arithmetic


def definition_to_planes(image: np.ndarray, order: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """colour.cu's to_ycc in NumPy: (Y, Cb, Cr float32, alpha or None)."""
    top = top_of(image.dtype)
    m, _ = coefficients()
    x = [image[..., i].astype(np.float64) / top for i in _rgb_index(order)]
    planes = [(((m[3 * k] * x[0] + m[3 * k + 1] * x[1]) + m[3 * k + 2] * x[2]) + m[9 + k]) / 255.0 for k in range(3)]
    alpha = image[..., 3].copy() if image.shape[-1] == 4 else None
    return planes[0].astype(np.float32), planes[1].astype(np.float32), planes[2].astype(np.float32), alpha


def definition_from_planes(y: np.ndarray, cb: np.ndarray, cr: np.ndarray, alpha: np.ndarray | None,
                           dtype: np.dtype, order: str) -> np.ndarray:
    """colour.cu's from_ycc in NumPy: interleaved samples of ``dtype``."""
    top = top_of(dtype)
    _, m = coefficients()
    t = [p.astype(np.float64) * 255.0 - m[9 + k] for k, p in enumerate((y, cb, cr))]
    rgb = [((m[3 * k] * t[0] + m[3 * k + 1] * t[1]) + m[3 * k + 2] * t[2]) for k in range(3)]
    out = np.empty(y.shape + (3 if alpha is None else 4,), np.dtype(dtype))
    for k, index in enumerate(_rgb_index(order)):
        out[..., index] = quantize(rgb[k], np.dtype(dtype), int(top))
    if alpha is not None:
        out[..., 3] = alpha
    return out


# ---------------------------------------------------------------- NumPy: the CPU engine's path


def reference_to_planes(image: np.ndarray, order: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """What srgpu.images.upscale.upscale_whole hands the engine: rgb_to_ycbcr in float64, cast to float32."""
    rgb = image[..., list(_rgb_index(order))]
    ycc = rgb_to_ycbcr(rgb.astype(np.float64) / top_of(image.dtype))
    alpha = image[..., 3].copy() if image.shape[-1] == 4 else None
    return ycc[..., 0].astype(np.float32), ycc[..., 1].astype(np.float32), ycc[..., 2].astype(np.float32), alpha


def reference_from_planes(y: np.ndarray, cb: np.ndarray, cr: np.ndarray, alpha: np.ndarray | None,
                          dtype: np.dtype, order: str) -> np.ndarray:
    """What srgpu.images.upscale.upscale_whole makes of the engine's planes: ycbcr_to_rgb, quantize."""
    rgb = quantize(ycbcr_to_rgb(np.stack([y, cb, cr], axis=-1)), np.dtype(dtype), int(top_of(dtype)))
    out = rgb[..., list(_rgb_index(order))]
    return np.concatenate([out, alpha[..., None].astype(out.dtype)], axis=-1) if alpha is not None else out


# ---------------------------------------------------------------- GPU


class Colour:
    """The colour kernels on one device, with srgpu.color's constants uploaded once."""

    def __init__(self, device_index: int, limits: Any) -> None:
        import cupy as cp

        from .build import compile_kernels

        self.kernels = compile_kernels(SOURCE, all_kernel_names(), device_index, limits)
        self.max_blocks = limits.multiprocessors * 32
        with cp.cuda.Device(device_index):
            forward, inverse = coefficients()
            self._forward, self._inverse = cp.asarray(forward), cp.asarray(inverse)
            # stands in for the alpha pointer of 3-channel images (never read or written)
            self._no_alpha = {d: cp.zeros(1, dtype=d) for d in SAMPLE_TYPES}
            cp.cuda.Device(device_index).synchronize()  # uploaded on the legacy stream: done before any use

    def _launch(self, name: str, n: int) -> Launch:
        return Launch(name, (max(1, min(cdiv(n, THREADS), self.max_blocks)), 1, 1), (THREADS, 1, 1))

    def to_planes(self, src: Any, y: Any, cb: Any, cr: Any, alpha: Any | None, order: str, stream: Any) -> None:
        """``src`` (H, W, C) uint8/uint16 -> float32 ``y``, ``cb``, ``cr`` (H, W) and, for C = 4,
        ``alpha`` (H, W) of src's dtype. Every array contiguous."""
        h, w, c = _check(src, y, cb, cr, alpha)
        name = to_planes_name(src.dtype, c, order)
        a = alpha if alpha is not None else self._no_alpha[np.dtype(src.dtype)]
        self.kernels[name](self._launch(name, h * w), (src, y, cb, cr, a, np.int64(h * w), np.float64(top_of(src.dtype)),
                                                         self._forward), stream)

    def from_planes(self, y: Any, cb: Any, cr: Any, alpha: Any | None, dst: Any, order: str, stream: Any) -> None:
        """float32 ``y``, ``cb``, ``cr`` (H, W) and ``alpha`` -> interleaved ``dst`` (H, W, C)."""
        h, w, c = _check(dst, y, cb, cr, alpha)
        name = from_planes_name(dst.dtype, c, order)
        a = alpha if alpha is not None else self._no_alpha[np.dtype(dst.dtype)]
        self.kernels[name](self._launch(name, h * w), (y, cb, cr, a, dst, np.int64(h * w), np.float64(top_of(dst.dtype)),
                                                         self._inverse), stream)


def _check(image: Any, y: Any, cb: Any, cr: Any, alpha: Any | None) -> tuple[int, int, int]:
    if image.ndim != 3 or image.shape[2] not in CHANNELS or np.dtype(image.dtype) not in SAMPLE_TYPES:
        raise ValueError(f"colour conversion takes (H, W, 3 or 4) uint8/uint16 samples, got {image.dtype} {image.shape}")
    h, w, c = (int(v) for v in image.shape)
    for plane in (y, cb, cr):
        if tuple(plane.shape) != (h, w) or np.dtype(plane.dtype) != np.float32:
            raise ValueError(f"colour planes must be float32 {(h, w)}, got {plane.dtype} {plane.shape}")
    if (alpha is not None) != (c == 4):
        raise ValueError("an alpha plane goes with 4 channels, and only with them")
    if alpha is not None and (tuple(alpha.shape) != (h, w) or alpha.dtype != image.dtype):
        raise ValueError(f"the alpha plane must be {image.dtype} {(h, w)}, got {alpha.dtype} {alpha.shape}")
    for a in (image, y, cb, cr) + ((alpha,) if alpha is not None else ()):
        if not a.flags.c_contiguous:
            raise ValueError("colour conversion needs contiguous arrays")
    return h, w, c


def self_check(device_index: int = 0, seed: int = 0) -> dict[str, float]:
    """Random images of awkward sizes, both depths, 3 and 4 channels and both orders through both
    kernels (outputs poisoned first) against the kernels' NumPy definition: planes within one
    float32 ulp, samples equal. Returns the worst plane error in ulps and the fraction of samples
    equal to srgpu.color's path; raises on a mismatch."""
    import cupy as cp

    from .build import device_limits

    rng = np.random.default_rng(seed)
    colour = Colour(device_index, device_limits(device_index))
    stream = cp.cuda.Stream(non_blocking=True)
    worst_ulps, equal, total = 0.0, 0, 0
    for (h, w), dtype, c, order in (((1, 1), np.uint8, 3, "bgr"), ((7, 13), np.uint16, 4, "rgb"),
                                    ((33, 17), np.uint8, 4, "bgr"), ((61, 129), np.uint16, 3, "bgr"),
                                    ((5, 1031), np.uint8, 3, "rgb")):
        top = int(top_of(dtype))
        image = rng.integers(1, top + 1, (h, w, c)).astype(dtype)
        with stream:  # the poisoning and the copies on the kernels' stream, ordered with them
            planes = [cp.full((h, w), np.nan, np.float32) for _ in range(3)]
            alpha = cp.full((h, w), 0x5A, dtype) if c == 4 else None
            colour.to_planes(cp.asarray(image), *planes, alpha, order, stream)
            back = cp.full((h, w, c), 0x5A, dtype)
            colour.from_planes(*planes, alpha, back, order, stream)
            got = [p.get() for p in planes]
            alpha_got = alpha.get() if alpha is not None else None
            samples = back.get()
        want = definition_to_planes(image, order)
        for g, e in zip(got, want[:3]):
            ulps = float(np.max(np.abs(g.astype(np.float64) - e) / np.spacing(np.abs(e).astype(np.float32))))
            if not ulps <= 1.0:
                raise AssertionError(f"to_ycc {np.dtype(dtype).name} x{c} {order} {h}x{w}: {ulps} ulps")
            worst_ulps = max(worst_ulps, ulps)
        if c == 4 and not np.array_equal(alpha_got, image[..., 3]):
            raise AssertionError("to_ycc: alpha plane differs")
        expect = definition_from_planes(*got, image[..., 3] if c == 4 else None, np.dtype(dtype), order)
        if not np.array_equal(samples, expect):
            raise AssertionError(f"from_ycc {np.dtype(dtype).name} x{c} {order} {h}x{w}: differs from its definition")
        cpu = reference_from_planes(*got, image[..., 3] if c == 4 else None, np.dtype(dtype), order)
        equal += int(np.count_nonzero(samples == cpu))
        total += samples.size
    return {"plane_ulps": worst_ulps, "equal_to_cpu": equal / total}
