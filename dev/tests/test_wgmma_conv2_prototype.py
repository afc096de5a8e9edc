"""dev/cuda/wgmma_conv2 (the warpgroup-MMA conv2 prototype of issue 17): its weight layout and its
sm_90a build offline; on a compute capability 9.0 GPU its own reference check (NumPy, four awkward
sizes, NaN-poisoned output) for the configurations BENCHMARKS.md times."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # dev/ lies beside the package, not in it
from dev.cuda import wgmma_conv2 as wc  # noqa: E402


def test_prototype_weight_layout_and_reference() -> None:
    rng = np.random.default_rng(2)
    w2 = rng.standard_normal((32, 64, 5, 5)).astype(np.float32)
    p = wc.pack_weights(w2)
    assert p.shape == (25, 8, 32, 8) and p.dtype == np.float16
    assert p[7, 3, 20, 6] == np.float16(w2[20, 8 * 3 + 6, 1, 2])  # tap 7 = (dy 1, dx 2)
    x = rng.uniform(0, 1, (9, 11, 64)).astype(np.float16)
    b2 = rng.standard_normal(32).astype(np.float32)
    ref = wc.reference(x, w2, b2)
    y, xx, n = 2, 3, 5
    direct = sum(float(x[y + dy, xx + dx].astype(np.float64) @ w2[n, :, dy, dx].astype(np.float16).astype(np.float64))
                 for dy in range(5) for dx in range(5)) + float(b2[n])
    assert ref.shape == (5, 7, 32) and np.isclose(ref[y, xx, n], max(direct, 0.0))
    assert wc.shared_bytes(16, 2) == 25 * 8 * 512 + 8 * ((20 * 36 * 16 + 127) // 128 * 128 + 16) + 128


def test_prototype_builds_for_sm90a(nvrtc) -> None:
    cubin, lowered = wc.compile_cubin([wc.kernel_name(16, 2), wc.kernel_name(8, 1, 2)])
    assert cubin and all(lowered.values())


@pytest.mark.gpu
def test_prototype_matches_reference_on_hopper(hopper) -> None:
    assert wc.check([(16, 2, 1), (8, 1, 1), (16, 2, 2)], swap=0)
