"""The srgpu command as a user runs it: exit codes, one-line errors without tracebacks,
what it prints, and eval --json's schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import PUBLISHED_SET5
from typer.testing import CliRunner

from srgpu.cli import app
from srgpu.gpuinfo import cuda_status
from srgpu.imagefile import read_image, write_image_atomic
from srgpu.model import random_model, save_npz

ROOT = Path(__file__).resolve().parents[1]


def srgpu(*args: object):
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception  # an unexpected error: show its traceback in the test report
    return result


def one_error_line(result, fragment: str) -> None:
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    errors = [l for l in lines if l.startswith("srgpu: error: ")]
    assert errors and fragment in errors[-1], result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.fixture
def image(tmp_path, make_image) -> Path:
    p = tmp_path / "in.png"
    write_image_atomic(p, make_image((6, 8, 3), seed=3))
    return p


def test_upscale_one_image(image, tmp_path, random_npz):
    out = tmp_path / "out.png"
    r = srgpu("upscale", image, "-o", out, "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 0, r.stderr
    assert read_image(out).shape == (12, 16, 3)
    assert f"wrote {out}" in r.stdout
    assert "device: CPU" in r.stderr


def test_device_auto_says_which_device(image, tmp_path, random_npz):
    r = srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", random_npz)
    assert r.exit_code == 0
    if not cuda_status().usable:
        assert "device: CPU (GPU not used: " in r.stderr
    else:
        assert "device: " in r.stderr and "device: CPU" not in r.stderr


def test_quiet_prints_nothing(image, tmp_path, random_npz):
    r = srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", random_npz, "--quiet")
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == ""


def test_folder_with_a_corrupt_file(tmp_path, make_image, random_npz):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    for name in ("a.png", "sub/b.png", "sub/c.png"):
        write_image_atomic(src / name, make_image((5, 5, 3)))
    (src / "sub" / "bad.png").write_bytes(b"garbage")
    r = srgpu("upscale", src, "-o", tmp_path / "out", "--model", random_npz)
    assert r.exit_code == 1
    assert "bad.png: not a readable image" in r.stderr and "Traceback" not in r.stderr
    assert "3 upscaled, 0 skipped (output exists), 1 failed" in r.stdout
    assert "1 of 4 files failed" in r.stderr.strip().splitlines()[-1]
    assert sorted(p.name for p in (tmp_path / "out").rglob("*.png")) == ["a.png", "b.png", "c.png"]
    assert "img/s" in r.stderr  # the progress bar counts images per second
    again = srgpu("upscale", src, "-o", tmp_path / "out", "--model", random_npz)
    assert "0 upscaled, 3 skipped (output exists), 1 failed" in again.stdout


@pytest.mark.parametrize("args,fragment", [
    (["{image}", "-o", "{tmp}/missing/o.png"], "output directory does not exist"),
    (["{image}", "-o", "{image}", "--overwrite"], "output is the input file"),
    (["{image}", "-o", "{tmp}/taken.png"], "output exists (use --overwrite"),
    (["{image}", "-o", "{tmp}/o.png", "--scale", "5"], "scale x5 is not supported"),
    (["{image}", "-o", "{tmp}/o.png", "--scale", "3"], "trained for x2, not x3"),
    (["{tmp}/nothing.png", "-o", "{tmp}/o.png"], "no such file or directory"),
    (["{image}", "-o", "{tmp}/o.png", "--device", "tpu"], "unknown device 'tpu'"),
    (["{image}", "-o", "{tmp}/o.png", "--format", "gif"], "unsupported --format"),
])
def test_bad_input_is_one_line(image, tmp_path, random_npz, args, fragment):
    args = [a.format(image=image, tmp=tmp_path) for a in args]
    (tmp_path / "taken.png").write_bytes(b"someone's file")
    r = srgpu("upscale", *args, "--model", random_npz)
    one_error_line(r, fragment)
    assert not (tmp_path / "o.png").exists()
    assert (tmp_path / "taken.png").read_bytes() == b"someone's file"


def test_bad_model_files(image, tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 truncated")
    one_error_line(srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", bad), "not a readable .npz model")
    one_error_line(srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", "9-9-9"), "unknown model '9-9-9'")


def test_device_cuda_without_gpu_fails_clearly(image, tmp_path, random_npz):
    if cuda_status().usable:
        pytest.skip("a GPU is usable here")
    one_error_line(srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", random_npz, "--device", "cuda"),
                   "srgpu: error:")
    assert not (tmp_path / "o.png").exists()


def test_eval_json_schema(tmp_path, make_image):
    folder = tmp_path / "hr"
    folder.mkdir()
    write_image_atomic(folder / "one.png", make_image((24, 30, 3), seed=1))
    write_image_atomic(folder / "two.png", make_image((26, 22), seed=2))
    model = tmp_path / "m.npz"
    save_npz(random_model("9-1-5", 0, 3), model)
    r = srgpu("eval", folder, "--scale", 3, "--model", model, "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert set(report) == {"scale", "model", "images", "mean"}
    assert report["scale"] == 3 and report["model"] == "random-9-1-5-seed0"
    assert [i["name"] for i in report["images"]] == ["one.png", "two.png"]
    for entry in report["images"] + [report["mean"]]:
        assert set(entry) >= {"bicubic", "srcnn"}
        for method in ("bicubic", "srcnn"):
            assert set(entry[method]) == {"psnr", "ssim"}
            assert all(isinstance(v, float) for v in entry[method].values())
    for method in ("bicubic", "srcnn"):
        for metric in ("psnr", "ssim"):
            mean = np.mean([i[method][metric] for i in report["images"]])
            assert report["mean"][method][metric] == pytest.approx(mean)


def test_eval_set5_table_and_json(shared_data, reference_mat):
    set5 = shared_data / "eval" / "Set5"
    r = srgpu("eval", set5, "--scale", 3, "--model", reference_mat("9-1-5", 3), "--json")
    assert r.exit_code == 0
    mean = json.loads(r.stdout)["mean"]
    assert mean["srcnn"]["psnr"] == pytest.approx(PUBLISHED_SET5["9-1-5"][3], abs=0.03)
    assert mean["bicubic"]["psnr"] == pytest.approx(PUBLISHED_SET5["bicubic"][3], abs=0.03)
    table = srgpu("eval", set5, "--scale", 3, "--model", reference_mat("9-1-5", 3))
    assert table.exit_code == 0
    last = table.stdout.strip().splitlines()[-1].split()
    assert last[0] == "mean" and float(last[3]) == pytest.approx(PUBLISHED_SET5["9-1-5"][3], abs=0.03)


def test_eval_errors(tmp_path, random_npz):
    one_error_line(srgpu("eval", tmp_path / "nope", "--scale", 2, "--model", random_npz), "not a folder")
    one_error_line(srgpu("eval", tmp_path, "--scale", 2, "--model", random_npz), "no images")


def test_info():
    r = srgpu("info")
    assert r.exit_code == 0
    assert r.stdout.startswith("srgpu 0.1.0")
    assert "CUDA:" in r.stdout and "models" in r.stdout and "ffmpeg" in r.stdout
    status = cuda_status()
    if not status.usable:
        assert "no usable CUDA device" in r.stdout


def test_module_and_console_script_entry_points(tmp_path):
    r = subprocess.run([sys.executable, "-m", "srgpu", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "upscale" in r.stdout and "eval" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "srgpu", "upscale", str(tmp_path / "x.png"), "-o",
                          str(tmp_path / "y.png")], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 1
    assert bad.stderr.strip() == f"srgpu: error: {tmp_path / 'x.png'}: no such file or directory"
