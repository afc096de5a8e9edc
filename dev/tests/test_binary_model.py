"""The binarized SRCNN (issue 20): dev/binary/model.py's file format and CPU forward, the PyTorch
model of scripts/training/binary_net.py (the same function; its straight-through estimator), and
a tiny train.py --binary run on the CPU that writes a loadable file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dev.binary import kernels as binary
from dev.binary.model import (BinarySRCNNModel, binary_forward, binary_layers, is_binary_file, load_binary_npz,
                              random_binary_model, save_binary_npz)
from srgpu.model import ModelError, load_npz, random_model

ROOT = Path(__file__).resolve().parents[2]


def image(shape: tuple[int, int], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = np.add.outer(np.linspace(0.1, 0.7, shape[0]), np.linspace(0, 0.2, shape[1]))
    return (base + rng.random(shape) * 0.2).astype(np.float32)


def test_file_round_trip_and_the_float_loader_refuses_it(tmp_path: Path) -> None:
    model = random_binary_model("9-5-5", seed=3, scale=2)
    path = tmp_path / "b.npz"
    save_binary_npz(replace(model, metadata={"provenance": "test"}), path)
    back = load_binary_npz(path)
    for name, a in model.arrays().items():
        np.testing.assert_array_equal(back.arrays()[name], a, err_msg=name)
    assert back.conv2_sign.dtype == np.int8 and back.scale == 2 and back.label == "9-5-5-binary"
    assert back.metadata["provenance"] == "test" and back.metadata["binary"] == "conv2"
    assert is_binary_file(path)
    with pytest.raises(ModelError, match="binarized SRCNN"):
        load_npz(path)


def test_validation_names_the_problem() -> None:
    model = random_binary_model("9-1-5")
    with pytest.raises(ModelError, match="conv2_sign must be int8"):
        replace(model, conv2_sign=np.zeros_like(model.conv2_sign))
    with pytest.raises(ModelError, match="conv2_threshold has shape"):
        replace(model, conv2_threshold=np.zeros(3, np.float32))


def test_forward_in_strips_equals_the_whole_plane() -> None:
    model = random_binary_model("9-5-5", seed=1)
    y = image((41, 23))
    whole = binary_layers(y, model)
    np.testing.assert_array_equal(binary_forward(y, model, strip_pixels=23 * 7), whole)
    assert whole.std() > 1e-3  # not a constant


def test_forward_conv2_is_the_kernels_reference() -> None:
    """conv2 of the CPU forward is binary.reference on conv1's output (what the GPU kernels match)."""
    from srgpu.reference import conv_single_in, conv_single_out

    model = random_binary_model("9-5-5", seed=2)
    y = image((19, 27), seed=2)
    h1 = np.maximum(conv_single_in(y, model.conv1_weight, model.conv1_bias), 0)
    h2 = binary.reference(h1, model.conv2_threshold, model.conv2_sign, model.conv2_alpha, model.conv2_beta,
                          binary.Epilogue("float32", True))
    np.testing.assert_array_equal(binary_layers(y, model), conv_single_out(h2, model.conv3_weight, model.conv3_bias))


# ---------------------------------------------------------------- PyTorch

torch = pytest.importorskip("torch")
sys.path.insert(0, str(ROOT / "scripts" / "training"))
import binary_net  # noqa: E402


def test_sign_ste_forward_and_clipped_identity_backward() -> None:
    u = torch.tensor([-2.0, -1.0, -0.5, 0.0, 0.3, 1.0, 1.5], requires_grad=True)
    out = binary_net.sign_ste(u)
    assert out.tolist() == [-1, -1, -1, -1, 1, 1, 1]  # 0 -> -1, as the kernels' bit u > 0
    out.backward(torch.arange(1.0, 8.0))
    assert u.grad.tolist() == [0, 2, 3, 4, 5, 6, 0]


def _calibrated_net(arch: str, seed: int = 0) -> "binary_net.BinarySRCNN":
    f1, f2, f3 = (int(v) for v in arch.split("-"))
    torch.manual_seed(seed)
    net = binary_net.BinarySRCNN(f1, f2, f3)
    binary_net.load_float_weights(net, random_model(arch, seed=seed))
    stats = binary_net.calibrate(net, torch.from_numpy(np.stack([image((40, 40), s) for s in range(8)]))[:, None])
    assert stats["fit_correlation_mean"] > 0.2
    return net


@pytest.mark.parametrize("arch", ["9-5-5", "9-1-5"])
def test_pytorch_model_equals_the_numpy_forward(arch: str) -> None:
    """float64: the same signs everywhere and outputs equal to rounding; float32: the file the
    model saves gives the NumPy forward within float32 noise (a sign can flip only where conv1's
    two float32 computations straddle a threshold)."""
    net = _calibrated_net(arch)
    model = net.to_model(2, f"test-{arch}-binary", {})
    y = image((29, 37), seed=5)
    with torch.no_grad():
        ours64 = binary_layers(y, model, np.float64)
        net64 = net.double()
        torch64 = net64(torch.from_numpy(y.astype(np.float64))[None, None])[0, 0].numpy()
        np.testing.assert_allclose(torch64, ours64, rtol=0, atol=1e-10)
        h1 = torch.relu(net64.same(net64.conv1, torch.from_numpy(y.astype(np.float64))[None, None]))
        s_torch = net64.conv2.sums(torch.nn.functional.pad(h1, (model.f2 // 2,) * 4, mode="replicate"))[0].numpy()
        from srgpu.reference import conv_single_in

        h1_np = np.maximum(conv_single_in(y.astype(np.float64), model.conv1_weight.astype(np.float64),
                                          model.conv1_bias.astype(np.float64)), 0)
        signs = np.where(h1_np > model.conv2_threshold.astype(np.float64)[:, None, None], 1.0, -1.0)
        s_np = binary.reference_sums(binary.reference_pack(signs, np.zeros(64)), binary.pack_weights(model.conv2_sign), 64)
        np.testing.assert_array_equal(s_torch, s_np)
        net32 = net.float()
        torch32 = net32(torch.from_numpy(y)[None, None])[0, 0].numpy()
    ours32 = binary_forward(y, model)
    close = np.abs(torch32 - ours32) <= 1e-5
    assert close.mean() > 0.995, close.mean()
    assert np.abs(ours32 - ours64).max() < 0.05


def test_calibration_fits_the_float_layer() -> None:
    """After calibration the binarized conv2 tracks the float conv2 it came from better than an
    uncalibrated one (alpha = mean |W|, thresholds 0)."""
    import torch.nn.functional as F

    arch = "9-5-5"
    fp = random_model(arch, seed=4)
    x = torch.from_numpy(np.stack([image((40, 40), s) for s in range(6)]))[:, None]
    net = binary_net.BinarySRCNN(9, 5, 5)
    binary_net.load_float_weights(net, fp)
    with torch.no_grad():
        h1 = F.relu(net.conv1(x))
        z = F.conv2d(h1, net.conv2.weight, net.conv2.bias)
        net.conv2.alpha.copy_(net.conv2.weight.abs().mean(dim=(1, 2, 3)))
        before = float(((net.conv2(h1) - z) ** 2).mean())
        binary_net.calibrate(net, x)
        after = float(((net.conv2(h1) - z) ** 2).mean())
    assert after < 0.5 * before, (before, after)


def test_train_binary_writes_a_loadable_model(tmp_path: Path, shared_data: Path) -> None:
    hr = tmp_path / "hr"
    hr.mkdir()
    for name in ("baby_GT.bmp", "bird_GT.bmp"):
        shutil.copy(shared_data / "eval" / "Set5" / name, hr / name)
    init = ROOT / "weights" / "srcnn_9-1-5_x3.npz"
    if not init.is_file():
        pytest.skip("shipped 9-1-5 x3 weights missing")
    out = tmp_path / "b.npz"
    cmd = [sys.executable, str(ROOT / "scripts" / "training" / "train.py"), "--arch", "9-1-5", "--scale", "3",
           "--data", str(hr), "--iters", "4", "--batch", "4", "--val-interval", "2", "--val-every-nth", "2",
           "--workers", "1", "--device", "cpu", "--hr-scales", "1.0", "--warmup", "2", "--out", str(out),
           "--init", str(init), "--binary", "conv2"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "binarized conv2 calibrated" in done.stdout
    model = load_binary_npz(out)
    assert isinstance(model, BinarySRCNNModel) and model.arch == "9-1-5" and model.scale == 3
    meta = model.metadata
    assert meta["binary"] == "conv2" and meta["name"] == "srgpu-srcnn-9-1-5-binary-x3"
    assert meta["initialised_from"]["name"] == load_npz(init).name
    assert [it for it, _ in meta["validation_history"]] == [0, 2, 4]
    assert json.loads(done.stdout.strip().splitlines()[-1])["out"] == str(out)
    assert np.all(model.conv2_sign == np.where(model.conv2_latent > 0, 1, -1))
    y = image((20, 20))
    assert np.isfinite(binary_forward(y, model)).all()
