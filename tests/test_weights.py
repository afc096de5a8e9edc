"""Every shipped model, evaluated on Set5 with srgpu's own evaluation, matches the value recorded
in weights/README.md: a regression in inference or a damaged file shows here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from srgpu.evaluate import evaluate_folder, mean_scores
from srgpu.model import builtin_models, load_npz

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


@pytest.mark.parametrize("name", sorted(recorded()))
def test_shipped_model_reproduces_recorded_set5(name: str, shared_data: Path) -> None:
    scale, bicubic, expected = recorded()[name]
    model = load_npz(WEIGHTS / name)
    assert model.scale == scale
    assert model.metadata["provenance"].startswith("trained by srgpu")
    bic, sr = mean_scores(list(evaluate_folder(shared_data / "eval" / "Set5", model, scale)))
    assert bic.psnr == pytest.approx(bicubic, abs=0.002)
    assert sr.psnr == pytest.approx(expected, abs=0.02)
    assert sr.psnr > bic.psnr + 1.0
