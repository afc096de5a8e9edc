"""The Winograd conv1 of the FFMA fold path (srgpu.kernels.winograd, fused_fp32.cu FOLD == 2), on the
CPU: the Toom-Cook identity, the kernel's literal tables, and the packed filters and transformed tile
as the kernel addresses them against conv1 of the bicubic upscale in float64."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from srgpu.kernels import fused, winograd
from srgpu.kernels.fold import axis_fold
from srgpu.model import random_model

SOURCE = Path(fused.__file__).with_name("fused_fp32.cu")


def _mirror(i: np.ndarray, n: int) -> np.ndarray:
    p = 2 * n
    i = np.mod(i, p)
    return np.where(i < n, i, p - 1 - i)


def test_identity_is_the_correlation() -> None:
    rng = np.random.default_rng(1)
    for _ in range(20):
        d, g = rng.normal(size=winograd.ALPHA), rng.normal(size=winograd.TAPS)
        direct = np.array([g @ d[i:i + winograd.TAPS] for i in range(winograd.OUTPUTS)])
        np.testing.assert_allclose(winograd.correlate(d, g), direct, rtol=0, atol=1e-12)
    at, _, _ = winograd.matrices()
    assert set(np.abs(at[at != 0]).tolist()) <= {2.0**k for k in range(-6, 7)}  # AT exact in float32


@pytest.mark.parametrize("name,which", [("WINO_AT_INIT", 0), ("WINO_BT_INIT", 2)])
def test_kernel_tables_are_the_module_s(name: str, which: int) -> None:
    text = re.search(rf"#define {name} (.*)", SOURCE.read_text()).group(1)
    got = np.array([[float(v.rstrip("f")) for v in row.split(",")] for row in re.findall(r"\{([^{}]*)\}", text)],
                   np.float32)
    np.testing.assert_array_equal(got, winograd.matrices()[which].astype(np.float32))


@pytest.mark.parametrize("dtype,max_value", [(np.uint8, 255), (np.uint16, 1023)], ids=["u8", "u16"])
def test_packed_filters_and_tile_give_conv1_of_the_upscale(dtype, max_value: int) -> None:
    """Every position of one interior block's Z region, both phases: the transformed tile as
    wino_build_vt fills it and the filters as ffma_chain_z_wino reads them, in float32."""
    rng = np.random.default_rng(7)
    model = random_model("9-1-5", seed=3, scale=2)
    cfg = fused.config_for("fp32", 1, **fused.UNVERIFIED[("fp32", 1)][0])
    assert cfg.wino and cfg.rw == 32
    h, w = 97, 75
    lr = rng.integers(0, max_value + 1, (h, w)).astype(dtype)
    H, W = 2 * h, 2 * w
    on, off0, off1, offmin, ylo, yhi, xlo, xhi = (int(v) for v in fused.fold_args((h, w), (H, W)))
    assert on
    packed = fused.pack_fp32(model, fold=True, wino=True)
    g_u = 100 + 25 * 32 + 64 * 32 + 81 * 64  # FfmaCfg G_W1P
    assert packed.size == g_u + 4 * 8 * 11 * 64
    u = packed[g_u:].reshape(4, 8, 11, 64)
    arrays = model.arrays(np.float32)
    b1 = packed[:64]
    np.testing.assert_array_equal(b1, arrays["conv1_bias"])
    _, _, bt = winograd.matrices()
    at = winograd.matrices()[0].astype(np.float32)
    bt32 = bt.astype(np.float32)

    th, rw = cfg.th, cfg.rw
    nwin, lrr = rw // 8, (th + 3) // 2 + 9
    by, bx = 1, 2
    zvy, zvx = by * th - 2, bx * (rw - 4) - 2
    assert zvy >= ylo and zvy + th + 4 <= yhi and zvx >= xlo and zvx + rw <= xhi
    ly0, lx0 = (zvy >> 1) + offmin, (zvx >> 1) + offmin
    d = (off0 - offmin, off1 - offmin)
    # wino_build_vt: vt[l, px, k] = BT @ (11 samples from LR column lx0 + d[px] + 4k)
    vt = np.zeros((lrr, 2, nwin, 11), np.float32)
    for r in range(lrr):
        row = lr[_mirror(np.array(ly0 + r), h)].astype(np.float32)
        for px in (0, 1):
            for k in range(nwin):
                vt[r, px, k] = bt32 @ row[_mirror(lx0 + d[px] + 4 * k + np.arange(11), w)]
    fscale = np.float32(1.0 / max_value)
    unit = lr.astype(np.float64) / max_value
    fy, fx = axis_fold(h, H), axis_fold(w, W)
    rows_lr, cols_lr = fy.windows(h), fx.windows(w)
    w0 = arrays["conv1_weight"][:, 0].astype(np.float64)
    worst = 0.0
    for rr in range(th + 4):
        py = rr & 1
        for px in (0, 1):
            for k in range(nwin):
                v = vt[(rr >> 1) + d[py]: (rr >> 1) + d[py] + 8, px, k]  # (8 rows, 11)
                m = np.einsum("axc,ax->xc", u[py * 2 + px], v)  # (11, 64)
                got = (at @ m) * fscale + b1  # (4 outputs, 64)
                for p in range(4):
                    y, x = zvy + rr, zvx + px + 8 * k + 2 * p
                    filt = np.einsum("da,cde,eb->cab", fy.weights[y], w0, fx.weights[x])
                    want = np.einsum("cab,ab->c", filt, unit[rows_lr[y]][:, cols_lr[x]]) + arrays["conv1_bias"]
                    worst = max(worst, float(np.max(np.abs(got[p] - want))))
    assert worst < 2e-5, worst


def test_wino_is_for_the_folded_ffma_kernel() -> None:
    with pytest.raises(ValueError):
        fused.config_for("fp32", 1, fold=0, wino=1)
    with pytest.raises(ValueError):
        fused.config_for("fp16", 1, fold=1, wino=1)
    cfg = fused.config_for("fp32", 1, th=60, rw=32, r=32, nt=256, p=4, fold=1, wino=1)
    assert cfg.kernel_name(1).endswith(", 2>") and cfg.label.endswith(" wino")
    assert fused.shared_bytes(cfg, 1) <= 227 * 1024
    plain, wino = fused.pack_fp32(random_model("9-1-5", seed=2)), fused.pack_fp32(random_model("9-1-5", seed=2),
                                                                                  fold=True, wino=True)
    assert np.array_equal(wino[:plain.size], plain) and wino.size == plain.size + 4 * 8 * 11 * 64
