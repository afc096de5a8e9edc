"""The self-check's CPU reference kept on disk (srgpu.engine.check_reference): the same numbers
as computing it, read back by the next process, recomputed when the file is damaged."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from srgpu.engine.check_reference import reference_dir, srcnn_reference
from srgpu.model import random_model
from srgpu.reference import srcnn_forward


def _frame(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((30, 26))


def test_stored_then_read_back_equal_to_the_reference(tmp_path: Path) -> None:
    model = random_model("9-1-5", seed=1, scale=2)
    up = _frame()
    expect = srcnn_forward(up, model, dtype=np.float64)
    first = srcnn_reference(model, up, tmp_path)
    files = list(tmp_path.glob("*.npy"))
    assert np.array_equal(first, expect) and len(files) == 1 and not list(tmp_path.glob("*.tmp"))
    stamp = files[0].stat().st_mtime_ns
    again = srcnn_reference(model, up, tmp_path)
    assert np.array_equal(again, expect) and files[0].stat().st_mtime_ns == stamp  # read, not rewritten


def test_keyed_by_model_and_frame(tmp_path: Path) -> None:
    a, b = random_model("9-1-5", seed=1, scale=2), random_model("9-1-5", seed=2, scale=2)
    srcnn_reference(a, _frame(0), tmp_path)
    got_b = srcnn_reference(b, _frame(0), tmp_path)
    got_frame = srcnn_reference(a, _frame(1), tmp_path)
    assert len(list(tmp_path.glob("*.npy"))) == 3
    assert np.array_equal(got_b, srcnn_forward(_frame(0), b, dtype=np.float64))
    assert np.array_equal(got_frame, srcnn_forward(_frame(1), a, dtype=np.float64))


def test_damaged_files_are_computed_again_and_fresh_ignores_the_file(tmp_path: Path) -> None:
    model = random_model("9-1-5", seed=3, scale=2)
    up = _frame()
    expect = srcnn_reference(model, up, tmp_path)
    path = next(tmp_path.glob("*.npy"))
    path.write_bytes(path.read_bytes()[:100])  # truncated
    assert np.array_equal(srcnn_reference(model, up, tmp_path), expect)
    np.save(path, np.zeros((3, 3)))  # another shape
    assert np.array_equal(srcnn_reference(model, up, tmp_path), expect)
    np.save(path, expect + 1.0)  # plausible but wrong: only a fresh computation sees it
    assert np.array_equal(srcnn_reference(model, up, tmp_path), expect + 1.0)
    assert np.array_equal(srcnn_reference(model, up, tmp_path, fresh=True), expect)


def test_an_unwritable_folder_still_gives_the_reference(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    model = random_model("9-1-5", seed=4, scale=2)
    up = _frame()
    assert np.array_equal(srcnn_reference(model, up, blocker / "refs"), srcnn_forward(up, model, dtype=np.float64))


def test_lives_beside_the_plan_cache(tmp_path: Path) -> None:
    assert reference_dir(tmp_path / "plans") == tmp_path / "check-references"
