"""Every shipped model, evaluated on Set5 with srgpu's own evaluation, matches the value recorded
in weights/README.md: a regression in inference or a damaged file shows here."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from srgpu.tools.evaluate import evaluate_folder, mean_scores
from srgpu.model import builtin_models, load_npz
from srgpu.reference import srcnn_forward

WEIGHTS = Path(__file__).resolve().parents[1] / "weights"
ROW = re.compile(r"^\| (srcnn_[\w-]+\.npz) \| (\d) \| ([\d.]+) \| ([\d.]+) \|", re.M)


def recorded() -> dict[str, tuple[int, float, float]]:
    text = (WEIGHTS / "README.md").read_text()
    return {m[1]: (int(m[2]), float(m[3]), float(m[4])) for m in ROW.finditer(text)}


def test_every_shipped_file_has_a_recorded_score() -> None:
    files = sorted(p.name for p in WEIGHTS.glob("*.npz"))
    assert files, "no shipped weights"
    assert sorted(recorded()) == files


def test_builtin_models_are_installed() -> None:
    found = {(arch, scale) for arch, scale, _ in builtin_models()}
    assert {("9-1-5", s) for s in (2, 3, 4)} | {("9-5-5", s) for s in (2, 3, 4)} <= found


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(recorded()))
def test_shipped_model_reproduces_recorded_set5(name: str, shared_data: Path) -> None:
    scale, bicubic, expected = recorded()[name]
    model = load_npz(WEIGHTS / name)
    assert model.scale == scale
    assert model.metadata["provenance"].startswith("trained by srgpu")
    bic, sr = mean_scores(list(evaluate_folder(shared_data / "eval" / "Set5", model, scale, _float32(model))))
    assert bic.psnr == pytest.approx(bicubic, abs=0.002)
    assert sr.psnr == pytest.approx(expected, abs=0.02)
    assert sr.psnr > bic.psnr + 1.0


# "Set5 on compressed inputs" in weights/README.md: | file | scale | input | bicubic | srgpu | SSIM |
COMPRESSED_ROW = re.compile(r"^\| (srcnn_[\w-]+\.npz) \| (\d) \| ((?:jpeg|h264|hevc):\d+) \| ([\d.]+) \| ([\d.]+) \|",
                            re.M)
REAL_SOURCE_TARGETS = ("jpeg:75", "h264:23")


def _float32(model):
    """The CPU forward in float32: within ~1e-4 dB of the float64 evaluation the table records,
    at a fraction of its time (every shipped file is checked on Set5 clean and compressed)."""
    return lambda bic: srcnn_forward(bic, model, dtype=np.float32).astype(np.float64)  # issue 19: where a real-source model must beat the clean one


def recorded_compressed() -> dict[tuple[str, str], tuple[int, float, float]]:
    text = (WEIGHTS / "README.md").read_text()
    return {(m[1], m[3]): (int(m[2]), float(m[4]), float(m[5])) for m in COMPRESSED_ROW.finditer(text)}


def test_every_real_source_model_has_its_compressed_scores() -> None:
    rows = recorded_compressed()
    assert {name for name, _ in rows} <= {p.name for p in WEIGHTS.glob("*.npz")}, "a row for a file not shipped"
    for path in WEIGHTS.glob("srcnn_*-real_x*.npz"):
        for spec in REAL_SOURCE_TARGETS:
            assert (path.name, spec) in rows, (path.name, spec)
        assert load_npz(path).metadata.get("degradation"), f"{path.name}: no degradation in its metadata"


@pytest.mark.slow
@pytest.mark.parametrize("name, spec", sorted(recorded_compressed()))
def test_shipped_model_reproduces_recorded_compressed_set5(name: str, spec: str, shared_data: Path) -> None:
    from srgpu.tools.degrade import parse_degradation

    scale, bicubic, expected = recorded_compressed()[name, spec]
    model = load_npz(WEIGHTS / name)
    bic, sr = mean_scores(list(evaluate_folder(shared_data / "eval" / "Set5", model, scale, _float32(model),
                                               degradation=parse_degradation(spec))))
    assert bic.psnr == pytest.approx(bicubic, abs=0.002)
    assert sr.psnr == pytest.approx(expected, abs=0.02)
