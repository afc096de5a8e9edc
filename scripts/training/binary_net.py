"""The binarized SRCNN in PyTorch, for scripts/training/train.py --binary conv2 (issue 20).

The network is dev/binary/model.py's (its docstring has the arithmetic): conv1 and conv3 in full
precision, conv2 on signs, ``ReLU(alpha_o * sum sign(h1 - t) sign(W2_o) + beta_o)``.

Training:
- sign() has zero gradient almost everywhere, so its backward is the straight-through estimator
  with the clipped identity (BinaryConnect / XNOR-Net): d sign(u)/du = 1 where |u| <= 1, else 0.
  Weights: u = the latent float weight (SRCNN's are all well inside [-1, 1]); activations:
  u = (h1_c - t_c) / sigma_c, with sigma_c a fixed per-channel spread measured at calibration,
  so the window where gradients pass is one typical deviation of that channel wide.
- Learned: the latent weights (their signs are the binary weights), the thresholds t, the
  scales alpha and the biases beta (the ``bias`` parameter), and conv1, conv3 as before.
- Start: a full-precision srgpu model (the shipped weights): conv1, conv3, conv2's weights as
  the latent weights; then :func:`calibrate` on training patches sets t_c to the channel's mean
  activation and (alpha_o, beta_o) to the least-squares fit of the float conv2's pre-activation
  by alpha * s + beta, so training starts from the best binarized copy of that model.
- Values: the +-1 products sum to integers (|s| <= 1 600) exactly in fp32, TF32 and fp16 alike,
  so s is the binary kernel's s whatever the training precision.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dev.binary.model import BinarySRCNNModel, binary_forward, is_binary_file, load_binary_npz, save_binary_npz  # noqa: E402
from srgpu.model import SRCNNModel, load_npz, save_npz  # noqa: E402

BINARIZABLE = ("conv2",)


class SignSTE(torch.autograd.Function):
    """+1 where u > 0, else -1 (srgpu's bit = u > 0); backward: the clipped identity."""

    @staticmethod
    def forward(ctx, u: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(u)
        return torch.where(u > 0, torch.ones_like(u), -torch.ones_like(u))

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (u,) = ctx.saved_tensors
        return grad * (u.abs() <= 1).to(grad.dtype)


def sign_ste(u: torch.Tensor) -> torch.Tensor:
    return SignSTE.apply(u)


class BinaryConv2d(torch.nn.Module):
    """A convolution on the signs of its input (against learned per-channel thresholds) with the
    signs of its latent weights, scaled per output channel: alpha * s + bias. No padding (the
    network pads, replicate: exact for signs)."""

    def __init__(self, cin: int, cout: int, k: int) -> None:
        super().__init__()
        self.kernel_size = (k, k)
        self.weight = torch.nn.Parameter(torch.randn(cout, cin, k, k) * (2.0 / (cin * k * k)) ** 0.5)
        self.bias = torch.nn.Parameter(torch.zeros(cout))  # beta
        self.alpha = torch.nn.Parameter(torch.full((cout,), 0.01))
        self.threshold = torch.nn.Parameter(torch.zeros(cin))
        self.register_buffer("act_scale", torch.ones(cin))  # sigma: the STE window's width per channel

    def signs(self, x: torch.Tensor) -> torch.Tensor:
        return sign_ste((x - self.threshold.view(1, -1, 1, 1)) / self.act_scale.view(1, -1, 1, 1))

    def sums(self, x: torch.Tensor) -> torch.Tensor:
        """s: the +-1 correlation (integers)."""
        return F.conv2d(self.signs(x), sign_ste(self.weight).to(x.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.sums(x)
        return s * self.alpha.view(1, -1, 1, 1).to(s.dtype) + self.bias.view(1, -1, 1, 1).to(s.dtype)


class ThreeLayers(torch.nn.Module):
    """What every SRCNN trained here computes from its conv1..conv3 (train.SRCNN, BinarySRCNN):
    the inference network and its 'valid' centre."""

    conv1: torch.nn.Module
    conv2: torch.nn.Module
    conv3: torch.nn.Module

    @staticmethod
    def same(conv: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        r = conv.kernel_size[0] // 2
        return conv(F.pad(x, (r, r, r, r), mode="replicate") if r else x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The inference network: 'same' output size, replicate border at every layer."""
        x = F.relu(self.same(self.conv1, x))
        x = F.relu(self.same(self.conv2, x))
        return self.same(self.conv3, x)

    def forward_centre(self, x: torch.Tensor) -> torch.Tensor:
        """forward(x) cropped by the halo on every side, computed with 'valid' convolutions: the
        centre never reads a padded sample, so it is the same function (and the same gradients)
        without the padded rows and columns that the loss never scores (with 48-pixel centres, a
        quarter of the work for 9-1-5 and a third for 9-5-5)."""
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        return self.conv3(x)

    @property
    def halo(self) -> int:
        return sum(c.kernel_size[0] // 2 for c in (self.conv1, self.conv2, self.conv3))


class BinarySRCNN(ThreeLayers):
    """SRCNN with a binary conv2: the same interface as train.SRCNN (forward, forward_centre, halo,
    to_model, conv1..conv3)."""

    def __init__(self, f1: int, f2: int, f3: int, n1: int = 64, n2: int = 32) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, n1, f1)
        self.conv2 = BinaryConv2d(n1, n2, f2)
        self.conv3 = torch.nn.Conv2d(n2, 1, f3)

    def to_model(self, scale: int, name: str, metadata: dict) -> BinarySRCNNModel:
        def a(t: torch.Tensor) -> np.ndarray:
            return np.ascontiguousarray(t.detach().float().cpu().contiguous().numpy(), dtype=np.float32)

        latent = a(self.conv2.weight)
        return BinarySRCNNModel(
            conv1_weight=a(self.conv1.weight), conv1_bias=a(self.conv1.bias),
            conv2_sign=np.where(latent > 0, 1, -1).astype(np.int8), conv2_latent=latent,
            conv2_alpha=a(self.conv2.alpha), conv2_beta=a(self.conv2.bias), conv2_threshold=a(self.conv2.threshold),
            conv3_weight=a(self.conv3.weight), conv3_bias=a(self.conv3.bias),
            scale=scale, name=name, metadata=metadata)


def make_net(binary: str | None, f1: int, f2: int, f3: int, fp_class: type) -> torch.nn.Module:
    """train.py's network: ``fp_class`` (train.SRCNN) or, with --binary conv2, BinarySRCNN."""
    if binary is None:
        return fp_class(f1, f2, f3)
    if binary not in BINARIZABLE:
        raise SystemExit(f"--binary {binary}: only {', '.join(BINARIZABLE)} can be binarized")
    return BinarySRCNN(f1, f2, f3)


@torch.no_grad()
def load_binary_weights(net: BinarySRCNN, model: BinarySRCNNModel) -> None:
    """Every parameter from a binarized file (continuing a binarized run); act_scale is recomputed
    by :func:`calibrate` (``thresholds=False`` keeps the file's thresholds and scales)."""
    for name, value in (("conv1.weight", model.conv1_weight), ("conv1.bias", model.conv1_bias),
                        ("conv2.weight", model.conv2_latent), ("conv2.bias", model.conv2_beta),
                        ("conv2.alpha", model.conv2_alpha), ("conv2.threshold", model.conv2_threshold),
                        ("conv3.weight", model.conv3_weight), ("conv3.bias", model.conv3_bias)):
        net.get_parameter(name).copy_(torch.from_numpy(value))


@torch.no_grad()
def load_float_weights(net: BinarySRCNN, model: SRCNNModel) -> None:
    for i, conv in enumerate((net.conv1, net.conv2, net.conv3), start=1):
        conv.weight.copy_(torch.from_numpy(getattr(model, f"conv{i}_weight")))
        conv.bias.copy_(torch.from_numpy(getattr(model, f"conv{i}_bias")))


@torch.no_grad()
def calibrate(net: BinarySRCNN, x: torch.Tensor, fit: bool = True) -> dict:
    """Per-channel spreads (the STE windows) from conv1's activations on patches ``x``; with
    ``fit``, also thresholds (the channel means) and alpha, beta (least squares of the float
    conv2's pre-activation, whose weights are the latent ones, by alpha * s + beta)."""
    h1 = F.relu(net.conv1(x.float()))
    c = net.conv2
    dims = (0, 2, 3)
    c.act_scale.copy_(h1.std(dim=dims).clamp_min(1e-4))
    if not fit:
        return {}
    c.threshold.copy_(h1.mean(dim=dims))
    z = F.conv2d(h1, c.weight)  # the float layer (without its bias), on the same patches
    s = c.sums(h1)
    sm, zm = s.mean(dim=dims), z.mean(dim=dims)
    cov = ((s - sm.view(1, -1, 1, 1)) * (z - zm.view(1, -1, 1, 1))).mean(dim=dims)
    var = ((s - sm.view(1, -1, 1, 1)) ** 2).mean(dim=dims).clamp_min(1e-6)
    alpha = cov / var
    c.alpha.copy_(alpha)
    c.bias.add_(zm - alpha * sm)  # beta = the float bias + the fit's offset
    corr = cov / (var.sqrt() * ((z - zm.view(1, -1, 1, 1)) ** 2).mean(dim=dims).sqrt().clamp_min(1e-12))
    return {"threshold_mean": float(c.threshold.mean()), "alpha_mean": float(alpha.mean()),
            "fit_correlation_mean": float(corr.mean()), "fit_correlation_min": float(corr.min())}


def initialise(net: BinarySRCNN, init: Path, patches: torch.Tensor, log: Callable[[str], None]) -> dict:
    """--init for --binary: from a full-precision file (then calibrated) or a binarized one (its
    own thresholds and scales kept). Returns the init file's metadata (provenance)."""
    if is_binary_file(init):
        model = load_binary_npz(init)
        load_binary_weights(net, model)
        calibrate(net, patches, fit=False)
        log(f"initialised from the binarized {init}")
    else:
        model = load_npz(init)
        load_float_weights(net, model)
        stats = calibrate(net, patches)
        log(f"initialised from {init}, binarized conv2 calibrated on {len(patches)} patches: " +
            ", ".join(f"{k} {v:.4g}" for k, v in stats.items()))
    return {k: v for k, v in model.metadata.items() if k != "validation_history"}


def save_model(model: SRCNNModel | BinarySRCNNModel, path: Path) -> None:
    (save_binary_npz if isinstance(model, BinarySRCNNModel) else save_npz)(model, path)


def sr_function(model: SRCNNModel | BinarySRCNNModel) -> Callable[[np.ndarray], np.ndarray] | None:
    """The CPU forward srgpu.tools.evaluate uses for ``model`` (None: its default, the float model's)."""
    if isinstance(model, BinarySRCNNModel):
        return lambda bic: binary_forward(bic, model, np.float32).astype(np.float64)
    return None
