"""``srgpu bench FOLDER``: srgpu, the codec floor and srgpu's own split, in one run, as a table or one
JSON object; the folder generator's images; bad input in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from srgpu import cli
from srgpu.images.files import read_image, write_image_atomic

ROOT = Path(__file__).resolve().parents[2]


def _folder(tmp_path: Path, make_image) -> Path:
    src = tmp_path / "photos"
    (src / "sub").mkdir(parents=True)
    for i in range(5):
        write_image_atomic(src / f"{i}.png", make_image((12 + i, 10, 3), seed=i))
    write_image_atomic(src / "sub" / "g.jpg", make_image((9, 14, 3), seed=7))
    (src / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n?")
    return src


def test_bench_folder_json_on_the_cpu(tmp_path, random_npz, make_image) -> None:
    src = _folder(tmp_path, make_image)
    r = CliRunner().invoke(cli.app, ["bench", str(src), "--device", "cpu", "--model", str(random_npz), "--json",
                                     "--jobs", "2", "--png-compression", "3"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["images"] == 7 and report["formats"] == {".jpg": 1, ".png": 6}
    assert report["scale"] == 2 and report["workers"] == 2 and report["png_compression"] == 3
    assert report["input_megapixels"] > 0 and report["codec_floor"]["seconds"] > 0
    (run,) = report["runs"]
    assert run["label"] == "cpu" and run["images"] == 6 and run["failed"] == 1
    assert run["seconds"] > 0 and run["times_codec_floor"] > 0 and run["plans_measured"] == 0
    assert run["check_s"] == 0  # the CPU engine has no plans to check
    stages = run["stages"]
    assert stages["images"] == 6 and stages["workers"] == 2 and stages["read_s"] > 0 and stages["write_s"] > 0
    assert stages["output_pixels"] == 4 * stages["input_pixels"]
    assert set(run["stage_wall_s"]) == {"read", "engine", "write"}
    assert not list(src.rglob("*.srgpu-*"))  # nothing written into the folder measured


def test_bench_folder_table_and_bad_input(tmp_path, random_npz, make_image) -> None:
    src = _folder(tmp_path, make_image)
    runner = CliRunner()
    r = runner.invoke(cli.app, ["bench", str(src), "--device", "cpu", "--model", str(random_npz), "--quiet"])
    assert r.exit_code == 0, r.output
    assert "codec floor" in r.stdout and "srgpu, cpu" in r.stdout and "x floor" in r.stdout
    empty = tmp_path / "empty"
    (empty / "nothing").mkdir(parents=True)
    (empty / "notes.txt").write_text("no images")
    r = runner.invoke(cli.app, ["bench", str(empty), "--device", "cpu", "--model", str(random_npz)])
    assert r.exit_code == 1 and "no images to benchmark" in r.stderr and r.stderr.count("srgpu: error:") == 1
    r = runner.invoke(cli.app, ["bench", str(src), "--device", "cpu", "--model", str(random_npz), "--jobs", "0"])
    assert r.exit_code == 1 and "--jobs 0" in r.stderr


@pytest.mark.slow
def test_the_folder_generator_makes_photo_sized_images(tmp_path) -> None:
    script = ROOT / "scripts" / "benchmarks" / "make_image_folders.py"
    done = subprocess.run([sys.executable, str(script), "--out", str(tmp_path), "--only", "small"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    files = sorted((tmp_path / "small").iterdir())
    assert len(files) == 100 and all(f.suffix == ".jpg" for f in files)
    shapes = {read_image(f).shape for f in files[:4]}
    assert shapes == {(320, 480, 3), (480, 320, 3)}
    image = read_image(files[0]).astype(np.float64)
    assert 20 < image.std() < 90  # not flat, not noise
