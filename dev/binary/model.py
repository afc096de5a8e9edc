"""Binarized SRCNN (issue 20; out of the product since issue 41: the engines do not run it): the model, its .npz format and the CPU forward pass.

The network
-----------
conv1 and conv3 stay in full precision (standard practice: the first and last layers of a
binary network carry the signal in and out, and are 9 % of 9-5-5's work); conv2 is binary:

1. ``h1 = ReLU(conv1(y))``, float32, 'same' size, replicate border (as every srgpu layer).
2. Activations binarized with a learned per-channel threshold (ReLU outputs are >= 0, so a sign
   at 0 would only say "active or not"): ``a_c = +1 if h1_c > t_c else -1``, packed 64 channels
   to a uint64 per pixel (dev/binary/kernels.py).
3. ``s_o = sum over taps and channels of a * sign(W2_o)`` with ``sign(w) = +1 if w > 0 else -1``;
   on bits ``s = N - 2 popcount(a XOR w)``, N = f2*f2*64 (1 600 for 9-5-5, 64 for 9-1-5).
   Replicate padding of the packed plane is exact: the sign of a replicated value is the
   replicated sign.
4. ``h2_o = ReLU(alpha_o * s_o + beta_o)`` in float32, the product rounded, then the sum
   (binary.cu's epilogue); alpha (the per-output-channel scale of the binary-network literature)
   and beta are learned.
5. ``out = conv3(h2)``, float32, 'same', replicate.

Trained with a straight-through estimator (scripts/training/binary_net.py) from a shipped
full-precision model. No layer after conv2 is binary, so SRCNN uses the float epilogue, not the
vote.

The file
--------
srgpu's .npz with ``format`` "srgpu-srcnn-binary" in its JSON metadata and the arrays
``conv1_weight, conv1_bias, conv2_sign`` (int8 +-1, (n2, n1, f2, f2)), ``conv2_alpha,
conv2_beta`` (n2), ``conv2_threshold`` (n1), ``conv3_weight, conv3_bias`` (float32), and
``conv2_latent`` (float32, the latent weights: what further training continues from; inference
reads the signs only). srgpu.model.load_npz refuses these files with a message pointing here:
the engines do not run binarized models (that waits on the measured verdict).
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from srgpu import outputs
from srgpu.model import ModelError, NetworkShape
from srgpu.reference import STRIP_PIXELS, conv_single_in, conv_single_out

from . import kernels as binary

FORMAT_NAME = "srgpu-srcnn-binary"
FORMAT_VERSION = 1
FLOAT_ARRAYS = ("conv1_weight", "conv1_bias", "conv2_alpha", "conv2_beta", "conv2_threshold", "conv3_weight",
                "conv3_bias", "conv2_latent")
ARRAY_NAMES = FLOAT_ARRAYS + ("conv2_sign",)


@dataclass(frozen=True)
class BinarySRCNNModel(NetworkShape):
    conv1_weight: np.ndarray  # (n1, 1, f1, f1)
    conv1_bias: np.ndarray  # (n1,)
    conv2_sign: np.ndarray  # (n2, n1, f2, f2) int8, +-1
    conv2_alpha: np.ndarray  # (n2,)
    conv2_beta: np.ndarray  # (n2,)
    conv2_threshold: np.ndarray  # (n1,): a = +1 where h1 > threshold
    conv3_weight: np.ndarray  # (1, n2, f3, f3)
    conv3_bias: np.ndarray  # (1,)
    conv2_latent: np.ndarray  # (n2, n1, f2, f2): the latent float weights (training only)
    scale: int | None = None
    name: str = "srcnn-binary"
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        validate(self.arrays(), self.name)

    @property
    def conv2_shape(self) -> tuple[int, ...]:
        return tuple(self.conv2_sign.shape)

    @property
    def label(self) -> str:
        return f"{self.arch}-binary"

    @property
    def layer(self) -> binary.BinaryLayer:
        return binary.BinaryLayer("conv2", self.n1, self.n2, self.f2)

    def arrays(self) -> dict[str, np.ndarray]:
        return {n: getattr(self, n) for n in ARRAY_NAMES}

    def check_scale(self, scale: int) -> None:
        if self.scale is not None and scale != self.scale:
            raise ModelError(f"model {self.name} is trained for x{self.scale}, not x{scale}")

    def describe(self) -> str:
        return f"{self.name} (binarized SRCNN {self.arch}, {f'x{self.scale}' if self.scale else 'any scale'})"


def validate(arrays: dict[str, Any], source: str) -> None:
    """Names, shapes, dtypes, finiteness and signs; raise ModelError naming the problem."""
    missing = [n for n in ARRAY_NAMES if n not in arrays]
    if missing:
        raise ModelError(f"{source}: missing array(s) {', '.join(missing)}")
    for n in FLOAT_ARRAYS:
        a = arrays[n]
        if not isinstance(a, np.ndarray) or not np.issubdtype(a.dtype, np.floating) or not np.all(np.isfinite(a)):
            raise ModelError(f"{source}: {n} must be a finite float array")
    sign = arrays["conv2_sign"]
    if not isinstance(sign, np.ndarray) or sign.dtype != np.int8 or not np.all(np.abs(sign) == 1):
        raise ModelError(f"{source}: conv2_sign must be int8 +-1")
    w1, w3 = arrays["conv1_weight"], arrays["conv3_weight"]
    if w1.ndim != 4 or sign.ndim != 4 or w3.ndim != 4:
        raise ModelError(f"{source}: weights must have 4 dimensions")
    n1, n2, f1, f2, f3 = w1.shape[0], sign.shape[0], w1.shape[2], sign.shape[2], w3.shape[2]
    expect = {"conv1_weight": (n1, 1, f1, f1), "conv1_bias": (n1,), "conv2_sign": (n2, n1, f2, f2),
              "conv2_latent": (n2, n1, f2, f2), "conv2_alpha": (n2,), "conv2_beta": (n2,), "conv2_threshold": (n1,),
              "conv3_weight": (1, n2, f3, f3), "conv3_bias": (1,)}
    for n, shape in expect.items():
        if arrays[n].shape != shape:
            raise ModelError(f"{source}: {n} has shape {arrays[n].shape}, expected {shape}")
    if min(f1, f2, f3) < 1 or not (f1 % 2 and f2 % 2 and f3 % 2):
        raise ModelError(f"{source}: filters must have odd sizes")


def save_binary_npz(model: BinarySRCNNModel, path: str | Path) -> None:
    meta = dict(model.metadata)
    meta.update(format=FORMAT_NAME, format_version=FORMAT_VERSION, arch=model.arch, binary="conv2",
                scale=model.scale, name=model.name, n1=model.n1, n2=model.n2)
    path = Path(path)
    tmp, fd = outputs.create_temp(path)
    arrays = {n: np.ascontiguousarray(a, np.int8 if n == "conv2_sign" else np.float32) for n, a in model.arrays().items()}
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez_compressed(f, metadata=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    outputs.publish(tmp, path, replace=True)


def load_binary_npz(path: str | Path) -> BinarySRCNNModel:
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such model file")
    try:
        with np.load(path, allow_pickle=False) as z:
            contents = {k: z[k] for k in z.files}
        meta = json.loads(str(contents.pop("metadata")))
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        raise ModelError(f"{path}: not a binarized srgpu model ({type(e).__name__}: {e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise ModelError(f"{path}: not a binarized srgpu model (format {meta.get('format') if isinstance(meta, dict) else meta!r})")
    if int(meta.get("format_version", 0)) > FORMAT_VERSION:
        raise ModelError(f"{path}: binarized model format version {meta['format_version']} is newer than this srgpu")
    extra = sorted(set(contents) - set(ARRAY_NAMES))
    if extra:
        raise ModelError(f"{path}: unexpected array(s) {', '.join(extra)}")
    validate(contents, str(path))
    scale = meta.get("scale")
    return BinarySRCNNModel(**{n: contents[n] if n == "conv2_sign" else contents[n].astype(np.float32)
                               for n in ARRAY_NAMES},
                            scale=int(scale) if scale else None, name=str(meta.get("name", path.stem)), metadata=meta)


def is_binary_file(path: str | Path) -> bool:
    """Whether ``path`` is an .npz whose metadata names the binarized format (no validation)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return "metadata" in z.files and json.loads(str(z["metadata"])).get("format") == FORMAT_NAME
    except Exception:  # noqa: BLE001 - anything unreadable is not one
        return False


# ---------------------------------------------------------------- CPU forward


def binary_layers(y: np.ndarray, model: BinarySRCNNModel, dtype: type = np.float32) -> np.ndarray:
    """The three layers on one whole (H, W) plane; (H, W), unclipped. In float32 conv2 is
    exactly the GPU kernels' arithmetic (the NumPy reference of binary.cu); float64 (conv1 and
    conv3 in float64, the epilogue in float64) is for tests against the PyTorch model."""
    y = np.ascontiguousarray(y, dtype=dtype)
    h1 = np.maximum(conv_single_in(y, model.conv1_weight.astype(dtype), model.conv1_bias.astype(dtype)), 0)
    packed = binary.reference_pack(h1, model.conv2_threshold) if dtype == np.float32 else \
        binary.reference_pack(np.where(h1 > model.conv2_threshold.astype(dtype)[:, None, None], 1.0, -1.0), np.zeros(model.n1))
    s = binary.reference_sums(packed, binary.pack_weights(model.conv2_sign), model.n1)
    if dtype == np.float32:
        h2 = binary.reference_epilogue(s, model.conv2_alpha, model.conv2_beta, binary.Epilogue("float32", True))
    else:
        h2 = np.maximum(model.conv2_alpha.astype(dtype)[:, None, None] * s + model.conv2_beta.astype(dtype)[:, None, None], 0)
    return conv_single_out(h2.astype(dtype), model.conv3_weight.astype(dtype), model.conv3_bias.astype(dtype))


def binary_forward(y: np.ndarray, model: BinarySRCNNModel, dtype: type = np.float32,
                   strip_pixels: int = STRIP_PIXELS) -> np.ndarray:
    """The binarized SRCNN on the bicubic-upscaled luma ``y`` (H, W) in [0, 1], in row strips with
    the network's halo (every output row sees the rows it sees on the whole plane)."""
    h, w = y.shape
    rows = max(1, strip_pixels // max(w, 1))
    if rows >= h:
        return binary_layers(y, model, dtype)
    out = np.empty((h, w), dtype)
    for r0 in range(0, h, rows):
        r1 = min(h, r0 + rows)
        a0, a1 = max(0, r0 - model.halo), min(h, r1 + model.halo)
        out[r0:r1] = binary_layers(y[a0:a1], model, dtype)[r0 - a0:r0 - a0 + (r1 - r0)]
    return out


def random_binary_model(arch: str = "9-5-5", seed: int = 0, scale: int | None = None) -> BinarySRCNNModel:
    """Seeded random weights (tests): conv2 scales and thresholds of a plausible size."""
    from srgpu.model import random_model

    fp = random_model(arch, seed, scale)
    rng = np.random.default_rng(seed + 1)
    latent = fp.conv2_weight
    return BinarySRCNNModel(
        conv1_weight=fp.conv1_weight, conv1_bias=fp.conv1_bias,
        conv2_sign=np.where(latent > 0, 1, -1).astype(np.int8), conv2_latent=latent,
        conv2_alpha=(np.abs(latent).mean(axis=(1, 2, 3)) * rng.uniform(0.5, 1.5, fp.n2)).astype(np.float32),
        conv2_beta=(rng.standard_normal(fp.n2) * 0.05).astype(np.float32),
        conv2_threshold=(rng.random(fp.n1) * 0.1).astype(np.float32),
        conv3_weight=fp.conv3_weight, conv3_bias=fp.conv3_bias, scale=scale, name=f"random-{arch}-binary-seed{seed}")
