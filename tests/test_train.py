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

from srgpu.images.files import read_image, write_image_atomic  # noqa: E402
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


DEGRADE = ("--degrade", "jpeg:60-95", "--degrade", "h264:18-30", "--variants", "3", "--clean-fraction", "0.25")


def test_real_source_run_records_its_mix_reuses_its_cache_and_refuses_another(tmp_path: Path, hr_folder: Path) -> None:
    out, cache = tmp_path / "real.npz", tmp_path / "cache"
    first = train(out, hr_folder, *DEGRADE, "--degraded-cache", str(cache), "--time-limit", "0")
    assert first.returncode == 0, first.stderr
    assert "degraded inputs saved in" in first.stdout and "x 3 variants" in first.stdout
    assert len(list(cache.glob("degraded_x3_*.npz"))) == 1
    # another mix (refused before any data is made), or none
    other = train(out, hr_folder, "--degrade", "jpeg:50-95", "--degrade", "h264:18-30", "--variants", "2", "--resume")
    assert other.returncode == 1, other.stderr
    for shown in ("--degrade ['jpeg:60-95', 'h264:18-30'] (now ['jpeg:50-95', 'h264:18-30'])",
                  "--clean-fraction 0.25 (now 0.2)", "--variants 3 (now 2)"):
        assert shown in other.stderr, other.stderr
    clean = train(out, hr_folder, "--resume")
    assert clean.returncode == 1 and "--degrade ['jpeg:60-95', 'h264:18-30'] (now None)" in clean.stderr, clean.stderr
    set5 = tmp_path / "set5"  # a small stand-in: the report is only checked for its fields
    set5.mkdir()
    write_image_atomic(set5 / "bird.png", read_image(hr_folder / "bird_GT.bmp")[100:196, 100:196])
    done = train(out, hr_folder, *DEGRADE, "--degraded-cache", str(cache), "--resume", "--set5", str(set5))
    assert done.returncode == 0, done.stderr
    assert "degraded inputs from" in done.stdout  # the cache, not a second generation
    model = load_npz(out)
    assert model.name == "srgpu-srcnn-9-1-5-real-x3"
    mix = model.metadata["degradation"]
    assert mix["degrade"] == ["jpeg:60-95", "h264:18-30"] and mix["clean_fraction"] == 0.25 and mix["variants"] == 3
    assert sum(mix["val_variants"].values()) == 3  # one validation plane, three variants
    assert set(model.metadata["set5_compressed"]) == {"jpeg:75", "h264:23"}
    assert model.metadata["set5_compressed"]["jpeg:75"]["bicubic_psnr"] < model.metadata["set5_bicubic_psnr"]


def test_degraded_variants_are_seeded_per_variant_and_compressed(hr_folder: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    sys.path.insert(0, str(ROOT / "scripts" / "training"))
    from degraded_data import TRAIN, DegradeMix, lr_uint8, make_variants

    from srgpu.tools.evaluate import luma_uint8

    planes = [luma_uint8(read_image(p)) for p in sorted(hr_folder.iterdir())]
    sources = [(p, 3, hs) for p in planes for hs in (1.0, 0.8)]
    keys = [(TRAIN, 3, i // 2, i % 2) for i in range(len(sources))]
    mix = DegradeMix.parse(["jpeg:60-95", "h264:18-30"], 0.2, 4, seed=5)
    with ThreadPoolExecutor(2) as pool:
        v = make_variants(sources, keys, mix, pool)
        again = make_variants(sources[::-1], keys[::-1], mix, pool)  # another order: the same draws
    assert v.labels == again.labels[::-1]
    for i, (row, labels) in enumerate(zip(v.lr, v.labels)):
        clean = lr_uint8(sources[i])
        for lr, label in zip(row, labels):
            if label == "clean":
                assert lr is None
            else:
                assert lr.shape == clean.shape and not np.array_equal(lr, clean), label
                np.testing.assert_array_equal(lr, again.lr[len(sources) - 1 - i][labels.index(label)])
    draws = [mix.draw((TRAIN, 2, i, 0, 0)) for i in range(2000)]
    assert 0.17 < sum(d is None for d in draws) / 2000 < 0.23
    assert {d[0] for d in draws if d} == {"jpeg", "h264"}
