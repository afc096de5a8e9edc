"""`srgpu eval --degrade` end to end through the CLI (real OpenCV and ffmpeg), and the real-source
model names (--model 9-1-5-real / 9-5-5-real) resolving to weights/srcnn_<arch>-real_x<s>.npz."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_cli import one_error_line, srgpu

from srgpu.images.files import read_image, write_image_atomic


@pytest.fixture(scope="module")
def small_set(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two Set5 images cropped to 120 x 96 (fast on the float64 CPU path)."""
    folder = tmp_path_factory.mktemp("set2")
    for name in ("bird_GT.bmp", "butterfly_GT.bmp"):
        image = read_image(shared_data / "eval" / "Set5" / name)
        write_image_atomic(folder / name.replace(".bmp", ".png"), np.ascontiguousarray(image[60:156, 60:180]))
    return folder


def run_eval(folder: Path, *extra: str) -> dict:
    r = srgpu("eval", folder, "--scale", "3", "--model", "9-1-5", "--json", *extra)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_eval_degrade_end_to_end(small_set: Path, default_model_path: Path) -> None:
    clean = run_eval(small_set)
    assert "degradation" not in clean  # the clean report is what it always was
    for spec in ("jpeg:75", "h264:23"):
        report = run_eval(small_set, "--degrade", spec)
        assert report["degradation"] == spec
        m, c = report["mean"], clean["mean"]
        # compression costs both bicubic and SRCNN, and each image is scored on its own degraded input
        assert m["bicubic"]["psnr"] < c["bicubic"]["psnr"] - 0.2, spec
        assert m["srcnn"]["psnr"] < c["srcnn"]["psnr"] - 0.2, spec
        assert m["srcnn"]["ssim"] < c["srcnn"]["ssim"], spec
        assert m["bicubic"]["psnr"] < m["srcnn"]["psnr"], spec  # SRCNN still helps at these qualities
        assert [i["name"] for i in report["images"]] == [i["name"] for i in clean["images"]]
    # deterministic: the same numbers again
    assert run_eval(small_set, "--degrade", "h264:23") == run_eval(small_set, "--degrade", "h264:23")


def test_eval_degrade_table(small_set: Path, default_model_path: Path) -> None:
    r = srgpu("eval", small_set, "--scale", "3", "--degrade", "jpeg:75")
    assert r.exit_code == 0, r.stderr
    assert "LR compressed jpeg:75" in r.stdout.splitlines()[0]


@pytest.mark.parametrize("spec, fragment", [
    ("jpeg:60-95", "is a range: give one quality"),
    ("gif:3", "unknown codec 'gif'"),
    ("h264", "expected CODEC:QUALITY"),
])
def test_eval_bad_degrade_is_one_error_line(small_set: Path, spec: str, fragment: str) -> None:
    one_error_line(srgpu("eval", small_set, "--scale", "3", "--degrade", spec), fragment)


@pytest.fixture
def weights_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, default_model_path: Path) -> Path:
    """A weights folder holding the clean 9-1-5 x2 model and a stand-in 9-1-5-real x2 (a copy)."""
    import srgpu.model as model

    folder = tmp_path / "weights"
    folder.mkdir()
    shutil.copy(default_model_path, folder / default_model_path.name)
    shutil.copy(default_model_path, folder / "srcnn_9-1-5-real_x2.npz")
    monkeypatch.setattr(model, "_weights_dir", lambda: folder)
    return folder


def test_real_model_names_resolve(weights_dir: Path) -> None:
    from srgpu.model import ModelError, builtin_models, resolve_model

    assert resolve_model("9-1-5-real", 2).arch == "9-1-5"
    assert ("9-1-5-real", 2, weights_dir / "srcnn_9-1-5-real_x2.npz") in builtin_models()
    with pytest.raises(ModelError, match=r"no built-in 9-5-5-real model for x3 .*srcnn_9-5-5-real_x3\.npz is missing"):
        resolve_model("9-5-5-real", 3)


def test_real_model_names_through_the_cli(weights_dir: Path, small_set: Path, tmp_path: Path) -> None:
    r = srgpu("eval", small_set, "--scale", "2", "--model", "9-1-5-real", "--degrade", "jpeg:90", "--json")
    assert r.exit_code == 0, r.stderr
    image = small_set / "bird_GT.png"
    r = srgpu("upscale", image, "-o", tmp_path / "up.png", "--model", "9-1-5-real", "--device", "cpu", "--quiet")
    assert r.exit_code == 0, r.stderr
    assert read_image(tmp_path / "up.png").shape[:2] == (192, 240)
    one_error_line(srgpu("upscale", image, "-o", tmp_path / "x3.png", "--scale", "3", "--model", "9-1-5-real",
                         "--device", "cpu"), "srcnn_9-1-5-real_x3.npz is missing")
    one_error_line(srgpu("eval", small_set, "--scale", "2", "--model", "9-5-5-real"),
                   "srcnn_9-5-5-real_x2.npz is missing")
    assert not (tmp_path / "x3.png").exists()
    r = srgpu("info")
    assert "  9-1-5-real x2" in r.stdout
