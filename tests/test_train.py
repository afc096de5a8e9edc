"""scripts/training/train.py (needs PyTorch, the `train` extra; skipped without it): a run stopped by
--time-limit and continued with --resume ends exactly where the uninterrupted run ends."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from srgpu.model import load_npz  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def train(out: Path, data: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "scripts" / "training" / "train.py"), "--arch", "9-1-5", "--scale", "3", "--data", str(data),
           "--iters", "6", "--batch", "4", "--val-interval", "2", "--val-every-nth", "2", "--workers", "1",
           "--device", "cpu", "--hr-scales", "1.0", "--warmup", "2", "--out", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def hr_folder(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hr")
    for name in ("baby_GT.bmp", "bird_GT.bmp"):  # one validation plane, one training plane
        shutil.copy(shared_data / "eval" / "Set5" / name, folder / name)
    return folder


def test_resumed_run_equals_the_uninterrupted_run(tmp_path: Path, hr_folder: Path) -> None:
    whole = train(tmp_path / "whole.npz", hr_folder)
    assert whole.returncode == 0, whole.stderr
    # --time-limit 0 stops at the first validation of each invocation: 3 pieces of 2 iterations
    first = train(tmp_path / "pieces.npz", hr_folder, "--time-limit", "0")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout.strip().splitlines()[-1])["stopped_at"] == 2
    assert "continue with --resume" in first.stdout
    second = train(tmp_path / "pieces.npz", hr_folder, "--time-limit", "0", "--resume")
    assert json.loads(second.stdout.strip().splitlines()[-1])["stopped_at"] == 4
    third = train(tmp_path / "pieces.npz", hr_folder, "--resume")
    assert third.returncode == 0, third.stderr
    a, b = load_npz(tmp_path / "whole.npz"), load_npz(tmp_path / "pieces.npz")
    for name, array in a.arrays().items():
        np.testing.assert_array_equal(array, b.arrays()[name], err_msg=name)
    assert a.metadata["validation_history"] == b.metadata["validation_history"]
    assert a.metadata["selected_iteration"] == b.metadata["selected_iteration"]
    assert [(s["from_iteration"], s["to_iteration"]) for s in b.metadata["segments"]] == [(0, 2), (2, 4), (4, 6)]
    assert b.metadata["command"] == a.metadata["command"].replace("whole.npz", "pieces.npz") + " --time-limit 0"
    # the final training state too (not only the best weights): network, Adam's moments, the RNG
    import torch

    sa = torch.load(tmp_path / "whole.state.pt", weights_only=False)
    sb = torch.load(tmp_path / "pieces.state.pt", weights_only=False)
    assert sa["iteration"] == sb["iteration"] == 6
    for name, t in sa["net"].items():
        assert torch.equal(t, sb["net"][name]), name
    for key, moments in sa["opt"]["state"].items():
        for name, t in moments.items():
            assert torch.equal(torch.as_tensor(t), torch.as_tensor(sb["opt"]["state"][key][name])), (key, name)
    assert torch.equal(sa["gen"], sb["gen"]) and sa["aug_rng"] == sb["aug_rng"]
    # resuming a finished run writes the final model again and adds no piece
    again = train(tmp_path / "pieces.npz", hr_folder, "--resume")
    assert again.returncode == 0 and "is complete" in again.stdout
    assert len(load_npz(tmp_path / "pieces.npz").metadata["segments"]) == 3


def test_resume_refuses_other_settings_or_no_state(tmp_path: Path, hr_folder: Path) -> None:
    missing = train(tmp_path / "none.npz", hr_folder, "--resume")
    assert missing.returncode == 1 and "no training state" in missing.stderr
    assert train(tmp_path / "m.npz", hr_folder, "--time-limit", "0").returncode == 0
    other = train(tmp_path / "m.npz", hr_folder, "--resume", "--lr", "5e-4")
    assert other.returncode == 1 and "--lr 0.001 (now 0.0005)" in other.stderr


def test_the_trained_centre_is_the_inference_networks_centre() -> None:
    """Training computes only the scored centre of each patch, with 'valid' convolutions: it must be
    exactly the inference network's ('same' size, replicate border) output there."""
    import torch

    sys.path.insert(0, str(ROOT / "scripts" / "training"))
    from train import SRCNN

    torch.manual_seed(0)
    for f1, f2, f3 in ((9, 1, 5), (9, 5, 5)):
        net = SRCNN(f1, f2, f3)
        torch.nn.init.normal_(net.conv3.weight, std=0.05)  # not the near-zero initial layer
        h = net.halo
        x = torch.rand(3, 1, 21 + 2 * h, 17 + 2 * h)
        with torch.no_grad():
            whole = net(x)
            centre = net.forward_centre(x)
        assert centre.shape == (3, 1, 21, 17)
        torch.testing.assert_close(centre, whole[..., h:h + 21, h:h + 17], rtol=0, atol=1e-6)
