"""The tables of fused_tc.cu's FOLD path (srgpu.kernels.fused: fold_args, pack_tc, shared_bytes),
checked on the CPU by emulating how the kernel reads them: the LR planes as tc_load_lr fills them,
each lane's A words as tc_chain_z_fold addresses them, the B fragments decoded by the PTX layout of
mma.m16n8k16 (not by srgpu's packer), then acc * fscale + b1 against conv1 of the bicubic upscale
in float64 (srgpu.kernels.fold.axis_fold, which tests/kernels/test_fold.py checks against it)."""

from __future__ import annotations

import numpy as np
import pytest

from srgpu.kernels import fused
from srgpu.kernels.fold import axis_fold
from srgpu.model import random_model


def _mirror(i: np.ndarray, n: int) -> np.ndarray:
    p = 2 * n
    i = np.mod(i, p)
    return np.where(i < n, i, p - 1 - i)


def _b_matrix(words: np.ndarray) -> np.ndarray:
    """(4 K-steps x 4 pairs x 32 lanes x 4) uint32 fragments -> B (64, 64) float32, by the PTX
    layout: b0 holds B[2 (lane % 4) + {0, 1}][lane / 4], b1 the same rows + 8, of n-tile 2j then 2j + 1."""
    frag = words.reshape(4, 4, 32, 4)
    b = np.full((64, 64), np.nan, np.float32)
    for s in range(4):
        for jp in range(4):
            for lane in range(32):
                for reg in range(4):
                    tile, hi_rows = 2 * jp + reg // 2, reg % 2
                    w = frag[s, jp, lane, reg]
                    k = 16 * s + 2 * (lane % 4) + 8 * hi_rows
                    n = 8 * tile + lane // 4
                    halves = np.array([w & 0xFFFF, w >> 16], np.uint16).view(np.float16).astype(np.float32)
                    b[k, n], b[k + 1, n] = halves
    assert not np.isnan(b).any()
    return b


@pytest.mark.parametrize("split", [True, False], ids=["split", "plain"])
@pytest.mark.parametrize("dtype,max_value", [(np.uint8, 255), (np.uint16, 1023)], ids=["u8", "u16"])
def test_fold_tables_give_conv1_of_the_upscale(split: bool, dtype, max_value: int) -> None:
    rng = np.random.default_rng(5)
    model = random_model("9-1-5", seed=8, scale=2)
    cfg = fused.config_for("fp16" if split else "fp16-fast", 1, th=64, rw=64, r=12, nt=256, mb1=2, mb2=2, fold=1)
    h, w = 101, 97  # awkward: odd sizes, a few interior tiles of 64 x 60
    lr = rng.integers(0, max_value + 1, (h, w)).astype(dtype)
    H, W = 2 * h, 2 * w
    fold = fused.fold_args((h, w), (H, W))
    on, off0, off1, offmin, ylo, yhi, xlo, xhi = (int(v) for v in fold)
    assert on and (ylo, yhi, xlo, xhi) == (4, H - 4, 4, W - 4)

    words, e = fused.pack_tc(model, split, fold=True)
    nspl = 2 if split else 1
    # the packed array's layout (TcCfg): common prefix, conv1's bicubic fragments, then 4 phases
    o_w1f = nspl * (4 * 2 * 32 * 4 + 2 * 2 * 32 * 4) + 100
    g_w1p = o_w1f + nspl * 6 * 4 * 32 * 4
    w1p = 4 * 4 * 32 * 4
    assert words.size == g_w1p + 4 * nspl * w1p
    b1 = words[o_w1f - 100:o_w1f - 36].view(np.float32)
    np.testing.assert_array_equal(b1, model.arrays(np.float32)["conv1_bias"])
    fscale = np.float32(np.float32(2.0**-e) * np.float32(1.0 / max_value))

    # the LR planes of one interior block, as tc_load_lr writes them
    th, rw = cfg.th, cfg.rw
    lrr, lrww = (th + 3) // 2 + 9, rw // 4 + 5
    plr0 = lrr * lrww
    plr = plr0 + (48 - plr0 % 32) % 32
    by, bx = 1, 2  # block (row tile 1, column tile 2)
    zvy, zvx = by * th - 2, bx * (rw - 4) - 2
    assert zvy >= ylo and zvy + th + 4 <= yhi and zvx >= xlo and zvx + rw <= xhi
    ly0, lx0 = (zvy >> 1) + offmin, (zvx >> 1) + offmin
    halves = np.zeros(4 * plr, np.float16)
    lw = 2 * lrww
    for r in range(lrr):
        row = lr[_mirror(np.array(ly0 + r), h)]
        vals = row[_mirror(lx0 + np.arange(lw + 1), w)].astype(np.float16)
        halves[r * lw:r * lw + lw] = vals[:lw]
        halves[2 * plr + r * lw:2 * plr + r * lw + lw] = vals[1:]
    L = halves.view(np.uint32)

    unit = lr.astype(np.float32) * np.float32(1.0 / max_value)  # the samples as the reference reads them
    arrays = model.arrays(np.float32)
    fy, fx = axis_fold(h, H), axis_fold(w, W)
    rows_lr, cols_lr = fy.windows(h), fx.windows(w)
    w0 = arrays["conv1_weight"][:, 0].astype(np.float64)

    def want(y: int, x: int) -> np.ndarray:  # conv1 of the bicubic upscale at (y, x), float64
        filt = np.einsum("da,cde,eb->cab", fy.weights[y], w0, fx.weights[x])
        return np.einsum("cab,ab->c", filt, unit[rows_lr[y]][:, cols_lr[x]]) + arrays["conv1_bias"]
    d = {0: off0 - offmin, 1: off1 - offmin}
    worst = 0.0
    for row in (0, 1, 30, th + 3):  # both row phases, first and last rows of the Z region
        py = row & 1
        lrow = (row >> 1) + d[py]
        for px in (0, 1):
            base = g_w1p + (py * 2 + px) * nspl * w1p
            b = _b_matrix(words[base:base + w1p])
            if split:
                b = b + _b_matrix(words[base + w1p:base + 2 * w1p])
            for blk in range(rw // 32):
                for i in range(16):
                    r0, upper = i % 8, i // 8
                    lcol = 16 * blk + r0 + d[px]
                    a = np.zeros(64, np.float32)
                    for s in range(4):
                        for cq in range(4):
                            b0 = (lcol & 1) * plr + lrow * lrww + (lcol >> 1) + cq + 2 * s * lrww + 4 * upper
                            for reg, extra in ((0, 0), (2, lrww)):
                                word = L[b0 + extra]
                                k = 16 * s + 2 * cq + (8 if reg == 2 else 0)
                                a[k:k + 2] = np.array([word & 0xFFFF, word >> 16], np.uint16).view(np.float16)
                    got = (a.astype(np.float64) @ b.astype(np.float64)) * float(fscale) + b1
                    y, x = zvy + row, zvx + px + 2 * (16 * blk + i)
                    worst = max(worst, float(np.max(np.abs(got - want(y, x)))))
    assert worst < (2e-6 if split else 2e-3), worst


def test_fold_args_off_where_the_fold_does_not_hold() -> None:
    assert fused.fold_args((3, 40), (6, 80))[0] == 0  # too few rows for any interior
    assert fused.fold_args((40, 40), (80, 81))[0] == 0  # not an exact x2
    assert fused.fold_args((40, 40), (120, 120))[0] == 0  # x3: the kernel's tables are x2


def test_fold_is_built_for_9_1_5() -> None:
    for precision in ("fp32", "fp16-fast"):
        with pytest.raises(ValueError):
            fused.config_for(precision, 5, fold=1)
    for precision in fused.ARITHMETICS:
        cfg = fused.config_for(precision, 1, fold=1)
        flags = ", true>" if precision == "fp32" else ", true, false>"  # fold (, stream)
        assert cfg.kernel_name(1).endswith(flags) and cfg.label.endswith(" fold")
        # the fold path's weights and planes are counted in the shared memory the host expects
        assert fused.shared_bytes(cfg, 1) > fused.shared_bytes(fused.config_for(precision, 1, fold=0), 1)


def test_fp32_packing_carries_the_phase_filters() -> None:
    model = random_model("9-1-5", seed=4, scale=2)
    plain, folded = fused.pack_fp32(model), fused.pack_fp32(model, fold=True)
    assert folded.size == plain.size + 4 * 64 * 64 and np.array_equal(folded[:plain.size], plain)
    mats, e = fused.fold_matrices(model)
    np.testing.assert_array_equal(folded[plain.size:].reshape(4, 64, 64) * np.float32(2.0**e), mats)


def streamed_name_tail(cfg: fused.FusedConfig) -> str:
    """How a streamed tile's kernel name ends: STREAM, then MINB and SPART where they differ from the defaults, then
    WG."""
    if cfg.wg:
        return f", true, {cfg.minb}, {cfg.spart}, true>"
    return ", true" + (f", {cfg.minb}, {cfg.spart}>" if (cfg.minb, cfg.spart) != (1, 0) else ">")


def test_streamed_conv2_tiles_fit_and_the_split_9_5_5_is_streamed() -> None:
    """The streamed-conv2 tiles fit a 227 KiB block (the split 9-5-5 keeping all of conv2's
    weights does not: 344 KiB), so every split 9-5-5 tile offered is streamed. (The streamed
    tiles the tuner does not offer: dev/tests/test_fused_variants.py.)"""
    streamed = [(cfg, f2) for (precision, f2) in fused.CANDIDATES for cfg in fused.candidate_configs(precision, f2)
                if cfg.stream]
    assert streamed and any(c.wg for c, _ in streamed) and any(c.spart for c, _ in streamed)
    for cfg, f2 in streamed:
        assert cfg.kernel_name(f2).endswith(streamed_name_tail(cfg)), cfg.label
        assert fused.shared_bytes(cfg, f2) <= 227 * 1024, cfg.label
    whole_955 = fused.config_for("fp16", 5, stream=0)
    assert fused.shared_bytes(whole_955, 5) > 227 * 1024
    for cfg in fused.candidate_configs("fp16", 5):
        assert cfg.stream and fused.shared_bytes(cfg, 5) <= 227 * 1024, cfg.label
    assert fused.shared_bytes(fused.config_for("fp16", 5, stream=1), 5) < fused.shared_bytes(whole_955, 5) - 150 * 1024
    with pytest.raises(ValueError):
        fused.config_for("fp16", 1, stream=1)
    with pytest.raises(ValueError):
        fused.config_for("fp32", 5, stream=1)
