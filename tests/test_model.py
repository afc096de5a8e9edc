"""Model files: srgpu's .npz round trip, the loader's errors, the authors' .mat importer,
--model resolution and the shipped default model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from srgpu.model import (ModelError, builtin_models, load_mat, load_npz, random_model, resolve_model,
                         save_npz)


def test_npz_round_trip_keeps_arrays_and_metadata(tmp_path):
    m = random_model("9-5-5", seed=3, scale=3)
    m = type(m)(**{k: getattr(m, k) for k in ("conv1_weight", "conv1_bias", "conv2_weight", "conv2_bias",
                                              "conv3_weight", "conv3_bias")},
                scale=3, name="mine", metadata={"provenance": "unit test", "iterations": 5})
    p = tmp_path / "m.npz"
    save_npz(m, p)
    back = load_npz(p)
    for name, a in m.arrays().items():
        np.testing.assert_array_equal(back.arrays()[name], a)
    assert (back.arch, back.scale, back.name) == ("9-5-5", 3, "mine")
    assert back.metadata["provenance"] == "unit test" and back.metadata["iterations"] == 5
    assert back.metadata["arch"] == "9-5-5" and back.metadata["n1"] == 64
    assert not list(tmp_path.glob(".*tmp"))  # written atomically, nothing left over


def _arrays(model) -> dict[str, np.ndarray]:
    return model.arrays()


def _write(path: Path, arrays: dict, meta: dict | None) -> Path:
    extra = {} if meta is None else {"metadata": np.array(json.dumps(meta))}
    np.savez(path, **arrays, **extra)
    return path


GOOD_META = {"format": "srgpu-srcnn", "format_version": 1, "arch": "9-1-5", "scale": 2}


@pytest.mark.parametrize("mutate,expect", [
    (lambda a: a.update(conv2_weight=np.zeros((32, 64, 2, 2), np.float32)), "conv2_weight"),
    (lambda a: a.update(conv1_weight=np.zeros((64, 1, 9, 7), np.float32)), "conv1_weight"),
    (lambda a: a.update(conv3_weight=np.zeros((1, 16, 5, 5), np.float32)), "conv3_weight has shape"),
    (lambda a: a.update(conv1_bias=np.zeros((63,), np.float32)), "conv1_bias has shape"),
    (lambda a: a.__setitem__("conv1_bias", np.full(64, np.nan, np.float32)), "NaN"),
    (lambda a: a.__setitem__("conv3_weight", np.full((1, 32, 5, 5), np.inf, np.float32)), "NaN or infinity"),
    (lambda a: a.update(conv2_bias=np.zeros(32, np.int32)), "float array"),
    (lambda a: a.pop("conv3_bias"), "missing array(s) conv3_bias"),
    (lambda a: a.update(extra=np.zeros(3, np.float32)), "unexpected array(s) extra"),
])
def test_bad_arrays_are_named(tmp_path, mutate, expect):
    arrays = _arrays(random_model("9-1-5", 0))
    mutate(arrays)
    p = _write(tmp_path / "bad.npz", arrays, GOOD_META)
    with pytest.raises(ModelError, match=expect.replace("(", r"\(").replace(")", r"\)")) as e:
        load_npz(p)
    assert str(p) in str(e.value)


def test_truncated_file(tmp_path):
    good = tmp_path / "good.npz"
    save_npz(random_model("9-1-5", 0, 2), good)
    data = good.read_bytes()
    for cut in (10, len(data) // 2, len(data) - 30):
        p = tmp_path / f"cut{cut}.npz"
        p.write_bytes(data[:cut])
        with pytest.raises(ModelError, match="not an srgpu model"):
            load_npz(p)


def test_foreign_npz_and_other_files(tmp_path):
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, weights=np.ones(3))
    with pytest.raises(ModelError, match="not an srgpu model"):
        load_npz(foreign)
    other_format = _write(tmp_path / "other.npz", _arrays(random_model()), {"format": "keras"})
    with pytest.raises(ModelError, match="format is 'keras'"):
        load_npz(other_format)
    newer = _write(tmp_path / "newer.npz", _arrays(random_model()), {**GOOD_META, "format_version": 99})
    with pytest.raises(ModelError, match="newer"):
        load_npz(newer)
    wrong_arch = _write(tmp_path / "arch.npz", _arrays(random_model("9-1-5")), {**GOOD_META, "arch": "9-5-5"})
    with pytest.raises(ModelError, match="metadata says architecture 9-5-5"):
        load_npz(wrong_arch)
    text = tmp_path / "text.npz"
    text.write_text("hello")
    with pytest.raises(ModelError, match=r"not an srgpu model: .*\(this file: not a zip archive\)"):
        load_npz(text)
    with pytest.raises(ModelError, match="no such model file"):
        load_npz(tmp_path / "missing.npz")
    garbage_mat = tmp_path / "x2.mat"
    garbage_mat.write_bytes(b"\x00" * 200)
    with pytest.raises(ModelError, match="not a readable MATLAB file"):
        load_mat(garbage_mat)


def test_mat_import_layout(reference_mat):
    from scipy.io import loadmat

    path = reference_mat("9-5-5", 3)
    m = load_mat(path)
    raw = loadmat(str(path))
    assert (m.arch, m.scale) == ("9-5-5", 3)
    assert m.conv1_weight.shape == (64, 1, 9, 9) and m.conv2_weight.shape == (32, 64, 5, 5)
    assert m.conv3_weight.shape == (1, 32, 5, 5)
    # column-major: tap (row r, col c) of a k x k filter is entry c*k + r of the MATLAB vector
    assert m.conv1_weight[7, 0, 2, 5] == raw["weights_conv1"][5 * 9 + 2, 7]
    assert m.conv2_weight[4, 11, 3, 1] == raw["weights_conv2"][11, 1 * 5 + 3, 4]
    assert m.conv3_weight[0, 9, 4, 0] == raw["weights_conv3"][9, 0 * 5 + 4]
    assert m.conv3_bias[0] == raw["biases_conv3"][0, 0]
    m915 = load_mat(reference_mat("9-1-5", 2))
    assert m915.conv2_weight.shape == (32, 64, 1, 1) and m915.scale == 2 and m915.halo == 6


def test_resolve_model(tmp_path, reference_mat):
    p = tmp_path / "r.npz"
    save_npz(random_model("9-1-5", 0, 3), p)
    assert resolve_model(str(p), 3).scale == 3
    with pytest.raises(ModelError, match="trained for x3, not x2"):
        resolve_model(str(p), 2)
    with pytest.raises(ModelError, match="scale x5 is not supported"):
        resolve_model(str(p), 5)
    assert resolve_model(str(reference_mat("9-1-5", 4)), 4).arch == "9-1-5"
    with pytest.raises(ModelError, match="unknown model"):
        resolve_model("9-9-9", 2)
    txt = tmp_path / "model.txt"
    txt.write_text("x")
    with pytest.raises(ModelError, match="unsupported model file type"):
        resolve_model(str(txt), 2)


def test_random_model_is_seeded():
    a, b, c = random_model("9-1-5", 1), random_model("9-1-5", 1), random_model("9-1-5", 2)
    np.testing.assert_array_equal(a.conv1_weight, b.conv1_weight)
    assert not np.array_equal(a.conv1_weight, c.conv1_weight)
    assert random_model("9-3-5").conv2_weight.shape == (32, 64, 3, 3)
    assert random_model("9-1-5").macs_per_pixel == 8032 and random_model("9-5-5").macs_per_pixel == 57184


def test_default_model_ships_with_provenance(default_model_path):
    m = resolve_model(None, 2)
    assert (m.arch, m.scale) == ("9-1-5", 2)
    assert m.metadata.get("provenance") or m.metadata.get("data")
    assert any(arch == "9-1-5" and s == 2 for arch, s, _ in builtin_models())


@pytest.mark.parametrize("meta", [{"format_version": "x"}, {"scale": "two"}, {"scale": [2]}])
def test_non_integer_version_or_scale_is_a_model_error(tmp_path, meta):
    import json

    from srgpu.model import FORMAT_NAME, ModelError, load_npz, random_model

    path = tmp_path / "m.npz"
    np.savez(path, metadata=np.array(json.dumps({"format": FORMAT_NAME, **meta})),
             **random_model("9-1-5", 0, 2).arrays())
    with pytest.raises(ModelError, match="must be integers"):
        load_npz(path)


def test_failed_save_leaves_neither_a_partial_model_nor_a_temporary_file(tmp_path, monkeypatch):
    import numpy as np_

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np_, "savez_compressed", broken)
    with pytest.raises(OSError, match="disk full"):
        save_npz(random_model("9-1-5", 0, 2), tmp_path / "m.npz")
    assert list(tmp_path.iterdir()) == []


def test_saved_model_is_readable_by_others_under_the_umask(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        save_npz(random_model("9-1-5", 0, 2), tmp_path / "m.npz")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m.npz").stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]
