"""The fused 9-5-5 tiles whose conv2 runs on Hopper's warpgroup MMA (fused_tc.cu WG, FusedConfig.wg),
offline: which tiles the parameters allow, that they are offered on compute capability 9.0 only and
never as the portable default, the weights' layout, and the sm_90a build (NVRTC, no GPU). The GPU
test is tests/kernels/test_gpu_fused.py::test_wgmma_conv2_tiles."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from srgpu.kernels import fused
from srgpu.kernels.build import COMPILE_OPTIONS, load_source
from srgpu.kernels.fused.hook import fused_candidates
from srgpu.kernels.fused.pack import wg_conv2_words
from srgpu.kernels.launch import H100_LIMITS
from srgpu.model import random_model


def wg_configs() -> list[fused.FusedConfig]:
    return [c for c in fused.candidate_configs("fp16-fast", 5) if c.wg and not c.rows]  # rows: test_fused_rows.py


def test_wg_tiles_are_offered_on_hopper_only() -> None:
    model = random_model("9-5-5", seed=3)
    assert wg_configs()
    assert not fused.config_for("fp16-fast", 5).wg  # the default runs on every tensor-core GPU
    on_h100 = fused_candidates(model, H100_LIMITS, ["fp16-fast"])
    assert any(c.wg for c in on_h100)
    for cc in ("8.0", "8.9", "10.0", "12.0"):  # as much shared memory as the H100, other instruction sets
        limits = dataclasses.replace(H100_LIMITS, name=f"a GPU of compute capability {cc}", compute_capability=cc)
        offered = fused_candidates(model, limits, ["fp16-fast"])
        assert offered and not any(c.wg for c in offered)
    for cfg in wg_configs():
        assert cfg.arch == "sm_90a" and cfg.runs_on("9.0") and not cfg.runs_on("8.9") and not cfg.runs_on("10.0")
        assert "wgmma" in cfg.label and cfg.kernel_name(5).endswith(f", {cfg.minb}, {cfg.spart}, true>")
        assert fused.config_for("fp16-fast", 5, **dict(cfg.params)) == cfg  # a cached plan's params


def test_wg_parameters_are_checked() -> None:
    ok = dict(th=60, rw=32, r=16, nt=256, stream=1, spart=1, wg=1)
    assert fused.config_for("fp16-fast", 5, **ok).wg
    for bad in (dict(ok, r=12), dict(ok, spart=4), dict(ok, stream=0, spart=0), dict(ok, nt=192), dict(ok, nt=384)):
        with pytest.raises(ValueError):
            fused.config_for("fp16-fast", 5, **bad)
    with pytest.raises(ValueError):
        fused.config_for("fp16", 5, **ok)  # the split arithmetic
    with pytest.raises(ValueError):
        fused.config_for("fp16-fast", 3, th=32, rw=32, r=8, nt=256, stream=1, spart=1, wg=1)


def test_wg_weight_layout() -> None:
    """[dy][dx][channel group][out][8 channels] fp16, the same number of words as the mma.sync fragments."""
    rng = np.random.default_rng(5)
    w2 = rng.standard_normal((32, 64, 5, 5)).astype(np.float32)
    words = wg_conv2_words(w2)
    halves = words.view(np.float16).reshape(5, 5, 8, 32, 8)
    dy, dx, g, n, k = 3, 1, 6, 17, 5
    assert halves[dy, dx, g, n, k] == np.float16(w2[n, 8 * g + k, dy, dx])
    np.testing.assert_array_equal(halves.astype(np.float32),
                                  w2.astype(np.float16).astype(np.float32).transpose(2, 3, 1, 0)
                                  .reshape(5, 5, 8, 8, 32).transpose(0, 1, 2, 4, 3))
    model = random_model("9-5-5", seed=4)
    packed, _ = fused.pack_tc(model, False, False, wg=True)
    plain, _ = fused.pack_tc(model, False, False)
    assert packed.size == plain.size
    n2 = 25 * 4 * 2 * 32 * 4  # conv2's words (TcCfg W2F); the rest of the array is the same
    np.testing.assert_array_equal(packed[n2:], plain[n2:])
    np.testing.assert_array_equal(packed[:n2], wg_conv2_words(model.arrays(np.float32)["conv2_weight"]))


@pytest.mark.slow
def test_wg_tiles_build_for_sm90a(nvrtc) -> None:
    """NVRTC builds the wg tiles for sm_90a with HGMMA and without serialised warpgroup MMAs (the
    spill and register checks: dev/tests/test_fused_variants.py)."""
    names = [n for cfg in wg_configs() for n in (cfg.kernel_name(5), cfg.layout_name(5))]
    prog = nvrtc.createProgram(load_source("fused_tc.cu"), "fused_tc.cu", [], [])
    try:
        for n in names:
            nvrtc.addNameExpression(prog, n)
        try:
            nvrtc.compileProgram(prog, [*COMPILE_OPTIONS, "-arch=sm_90a", "-Xptxas=-v"])
        except nvrtc.NVRTCError:
            pytest.fail(nvrtc.getProgramLog(prog)[:3000])
        log = nvrtc.getProgramLog(prog)
        ptx_prog = nvrtc.createProgram(load_source("fused_tc.cu"), "fused_tc.cu", [], [])
        for n in names:
            nvrtc.addNameExpression(ptx_prog, n)
        nvrtc.compileProgram(ptx_prog, [*COMPILE_OPTIONS, "-arch=compute_90a"])
        ptx = nvrtc.getPTX(ptx_prog)
        nvrtc.destroyProgram(ptx_prog)
    finally:
        nvrtc.destroyProgram(prog)
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16" in ptx
    assert "serialized" not in log, log[:3000]


# --- 9-1-5: the fold blocks' three GEMMs on wgmma with A from registers (fused_tc.cu tc_wg_fold_z); GPU test:
# tests/kernels/test_gpu_fused.py::test_wgmma_fold_tiles

def test_wg_fold_tiles_are_offered_on_hopper_only() -> None:
    model = random_model("9-1-5", seed=3)
    first = fused.candidate_configs("fp16-fast", 1)[0]
    assert first.wg and first.fold and first.arch == "sm_90a" and not first.runs_on("8.9")
    assert not fused.config_for("fp16-fast", 1).wg  # the portable default
    assert fused_candidates(model, H100_LIMITS, ["fp16-fast"])[0] == first
    for cc in ("8.0", "8.9", "10.0", "12.0"):
        limits = dataclasses.replace(H100_LIMITS, name=f"a GPU of compute capability {cc}", compute_capability=cc)
        offered = fused_candidates(model, limits, ["fp16-fast"])
        assert offered and not any(c.wg for c in offered)
    assert fused.config_for("fp16-fast", 1, **dict(first.params)) == first  # a cached plan's params
    assert first.kernel_name(1).endswith(", 1, 0, true, true>") and "wgmma" in first.label and first.ws
    second = fused.candidate_configs("fp16-fast", 1)[1]  # the same tile without the warp specialisation
    assert second.wg and not second.ws and second.kernel_name(1).endswith(", 1, 0, true>")


def test_wg_fold_parameters_are_checked() -> None:
    ok = dict(th=66, rw=64, r=24, nt=512, mb1=1, mb2=1, fold=1, wg=1)
    assert fused.config_for("fp16-fast", 1, **ok).wg
    assert fused.config_for("fp16-fast", 1, **ok).kernel_name(1).endswith(", 1, 0, true>")
    for bad in (dict(ok, fold=0), dict(ok, rw=32), dict(ok, r=6), dict(ok, nt=448), dict(ok, mb2=3), dict(ok, spart=1),
                dict(ok, th=65)):
        with pytest.raises(ValueError):
            fused.config_for("fp16-fast", 1, **bad)
    ws = dict(ok, nt=640, ws=1)
    assert fused.config_for("fp16-fast", 1, **ws).ws and "ws" in fused.config_for("fp16-fast", 1, **ws).label
    for bad in (dict(ws, wg=0), dict(ws, mb2=2), dict(ws, nt=128), dict(ws, nt=650)):
        with pytest.raises(ValueError):
            fused.config_for("fp16-fast", 1, **bad)
    with pytest.raises(ValueError):
        fused.config_for("fp16", 1, **ok)  # the split arithmetic
    with pytest.raises(ValueError):
        fused.config_for("fp16-fast", 1, **dict(ok, wg=0, spart=1))  # spart without wg: streamed conv2 only


def test_wg_fold_weight_layout() -> None:
    """The phase matrices as [K / 8][N][8] fp16 in place of their fragments, then conv2's and the Z GEMM's weights
    once more in that layout, then conv1's 96 x 64 matrix (the ws edge blocks'); everything before them as the
    mma.sync fold tile's array."""
    from srgpu.kernels.fused.pack import fold_matrices, wg_b_words

    rng = np.random.default_rng(6)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    halves = wg_b_words(b).view(np.float16).reshape(8, 32, 8)
    assert halves[5, 17, 3] == np.float16(b[8 * 5 + 3, 17])
    model = random_model("9-1-5", seed=4)
    packed, e = fused.pack_tc(model, False, True, wg=True)
    plain, e0 = fused.pack_tc(model, False, True)
    assert e == e0
    n_phases = 4 * 64 * 64 // 2
    head = plain.size - n_phases  # conv2, conv3, biases, conv1 fragments: shared with the edge blocks
    np.testing.assert_array_equal(packed[:head], plain[:head])
    mats, _ = fold_matrices(model)
    np.testing.assert_array_equal(packed[head:head + n_phases], np.concatenate([wg_b_words(m) for m in mats]))
    a = model.arrays(np.float32)
    np.testing.assert_array_equal(packed[head + n_phases:head + n_phases + 1024], wg_b_words(a["conv2_weight"][:, :, 0, 0].T))
    w3 = np.pad(a["conv3_weight"][0].reshape(32, 25), ((0, 0), (0, 7)))
    np.testing.assert_array_equal(packed[head + n_phases + 1024:head + n_phases + 1536], wg_b_words(w3))
    # conv1 for the ws tiles' edge blocks: the fragments' 96 x 64 matrix, in the warpgroup layout
    np.testing.assert_array_equal(packed[head + n_phases + 1536:], wg_b_words(fused.conv1_matrix(a["conv1_weight"][:, 0])))
