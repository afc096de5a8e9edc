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


# ---------------------------------------------------------------- crop packs (issue 42)


@pytest.fixture(scope="module")
def crop_pack_file(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A crop pack of Set5's images: two for training crops, one for each validation split."""
    root = tmp_path_factory.mktemp("cropdata")
    (root / "imgs" / "S").mkdir(parents=True)
    for name in ("baby_GT.bmp", "bird_GT.bmp", "butterfly_GT.bmp", "head_GT.bmp"):
        shutil.copy(shared_data / "eval" / "Set5" / name, root / "imgs" / "S" / name)
    (root / "unlike.txt").write_text("[x]\nS/butterfly_GT.bmp\n")
    out = root / "pack.npz"
    cmd = [sys.executable, str(ROOT / "scripts" / "training" / "pack_train_data.py"), "--crops", str(root / "imgs"),
           "-o", str(out), "--crop", "96", "--val-every-nth", "3", "--val2-list", str(root / "unlike.txt"),
           "--val-max-side", "96", "--max-mb", "0.2", "--eval", str(root / "none"), "--workers", "1"]
    (root / "none").mkdir()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def test_a_crop_pack_run_reports_split_2_chooses_on_split_1_and_resumes(tmp_path: Path, crop_pack_file: Path) -> None:
    whole = train(tmp_path / "whole.npz", crop_pack_file)
    assert whole.returncode == 0, whole.stderr
    assert "validation split 1 1 planes (chooses), split 2 1 planes (reported)" in whole.stdout, whole.stdout
    first = train(tmp_path / "pieces.npz", crop_pack_file, "--time-limit", "0")
    assert first.returncode == 0, first.stderr
    assert "validation2_psnr" in json.loads(first.stdout.strip().splitlines()[-1])
    assert train(tmp_path / "pieces.npz", crop_pack_file, "--resume").returncode == 0
    a, b = load_npz(tmp_path / "whole.npz"), load_npz(tmp_path / "pieces.npz")
    for name, array in a.arrays().items():
        np.testing.assert_array_equal(array, b.arrays()[name], err_msg=name)
    meta = b.metadata
    assert meta["validation_history"] == a.metadata["validation_history"]
    assert meta["validation2_history"] == a.metadata["validation2_history"]
    assert [i for i, _ in meta["validation2_history"]] == [i for i, _ in meta["validation_history"]] == [2, 4, 6]
    best = max(meta["validation_history"], key=lambda iv: iv[1])
    assert meta["selected_iteration"] == best[0] and meta["validation_psnr"] == best[1]
    assert meta["validation2_psnr"] == dict(meta["validation2_history"])[best[0]]
    assert meta["val_planes"] == 1 and meta["val2_planes"] == 1
    assert meta["data_pack"]["train_crops"] >= 2 and meta["data_pack"]["cut_margin"] == 13
    # another pack under the same name is other data: no resume
    other = tmp_path / "other.npz"
    shutil.copy(crop_pack_file, other)
    assert train(tmp_path / "m.npz", other, "--time-limit", "0").returncode == 0
    with open(other, "ab") as f:
        f.write(b"\0")
    refused = train(tmp_path / "m.npz", other, "--resume")
    assert refused.returncode == 1 and "--data-sha256" in refused.stderr, refused.stderr
    # a crop pack comes alone
    both = train(tmp_path / "n.npz", crop_pack_file, "--data", str(crop_pack_file), str(crop_pack_file))
    assert both.returncode == 1 and "comes alone" in both.stderr


def test_a_crop_pack_run_with_compressed_inputs(tmp_path: Path, crop_pack_file: Path) -> None:
    done = train(tmp_path / "real.npz", crop_pack_file, "--degrade", "jpeg:60-95", "--variants", "2",
                 "--clean-fraction", "0.5", "--degraded-cache", str(tmp_path / "cache"))
    assert done.returncode == 0, done.stderr
    mix = load_npz(tmp_path / "real.npz").metadata["degradation"]
    assert sum(mix["val_variants"].values()) == 2 and sum(mix["val2_variants"].values()) == 2
    again = train(tmp_path / "real2.npz", crop_pack_file, "--degrade", "jpeg:60-95", "--variants", "2",
                  "--clean-fraction", "0.5", "--degraded-cache", str(tmp_path / "cache"))
    assert again.returncode == 0 and "degraded inputs from" in again.stdout, again.stderr
    a, b = load_npz(tmp_path / "real.npz"), load_npz(tmp_path / "real2.npz")
    assert a.metadata["validation2_history"] == b.metadata["validation2_history"]


def test_patches_of_a_crop_are_patches_of_the_whole_image(shared_data: Path) -> None:
    """Away from its cut edges by cut_margin, a crop's training patches (input and target) are the whole
    image's patches at the same pixels; at the image's own edges they reach the border as before."""
    sys.path.insert(0, str(ROOT / "scripts" / "training"))
    import crop_pack
    from train import edge_margins, make_pair, patch_origins

    from srgpu.tools.evaluate import luma_uint8

    full = luma_uint8(read_image(shared_data / "eval" / "Set5" / "baby_GT.bmp"))
    for scale in (2, 3, 4):
        bic_full, hr_full = make_pair((full, scale, 1.0))
        for r0, c0, h, w in ((12 * scale, 20 * scale, 150, 170), (0, 0, 140, 130)):
            crop = full[r0 : r0 + h, c0 : c0 + w]
            own = (r0 == 0, False, c0 == 0, False)
            bic, hr = make_pair((crop, scale, 1.0))
            corners = patch_origins(hr.shape, 60, 7, edge_margins(own, crop_pack.cut_margin(scale)))
            assert corners and (r0 > 0 or min(r for r, _ in corners) == 0)
            for r, c in corners:
                np.testing.assert_allclose(bic[r : r + 60, c : c + 60], bic_full[r0 + r : r0 + r + 60, c0 + c : c0 + c + 60],
                                           rtol=0, atol=1e-6)
                np.testing.assert_array_equal(hr[r : r + 60, c : c + 60], hr_full[r0 + r : r0 + r + 60, c0 + c : c0 + c + 60])
            # without the margin, a patch at a cut edge would not be the whole image's
            r, c = 0, w - (w % scale) - 60
            assert np.abs(bic[r : r + 60, c : c + 60] - bic_full[r0 + r : r0 + r + 60, c0 + c : c0 + c + 60]).max() > 1e-3
