"""dev/cuda/wgmma_conv23_dy (issue 17: the row-streamed consumer, dz_conv23s: dy_conv2s' conv2, then per finished
conv2 row the fp16 conversion, the Z GEMM on the warpgroup MMA, a Z ring and conv3's shifted sum): its sizes, its
W3 packing, its sm_90a builds offline (no spills, no wgmma serialisation); on a compute capability 9.0 GPU its
reference check (float64 conv3(ReLU(conv2 + b2)) + b3, nine awkward sizes, NaN-poisoned output, 1 and 2 passes)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # dev/ lies beside the package, not in it
from dev.cuda import wgmma_conv23_dy as wz  # noqa: E402


def test_conv23_prototype_sizes_and_packing() -> None:
    zb = (26 * 388 * 4 + 127) // 128 * 128
    assert wz.shared_bytes(48, 2) == 25 * 8 * 512 + 2 * 2 * 8 * (68 * 16 + 80) + 2048 + 2 * zb + 256 <= 232448
    assert wz.parse_configs(["48,2", "24,2,2,4,5"]) == [(48, 2, 2, 2, 10), (24, 2, 2, 4, 5)]
    w3 = np.arange(32 * 25, dtype=np.float32).reshape(1, 32, 5, 5) / 1024
    pk = wz.pack_w3(w3)  # [group][tap][8 channels]: W3[channel 8 g + k][tap]
    assert pk.shape == (4, 32, 8) and pk.dtype == np.float16
    assert pk[2, 7, 3] == np.float16(w3[0, 19, 1, 2]) and not pk[:, 25:].any()


def test_conv23_prototype_reference_is_the_layers() -> None:
    """The reference against the network written out directly (fp16 A2 inside the bound)."""
    from dev.cuda import wgmma_conv2 as wc

    x, w2, b2, w3, b3 = wz.random_case(np.random.default_rng(3), 5, 7)
    ref, s = wz.reference(x, w2, b2, w3, b3)
    a2 = wc.reference(x, w2, b2).astype(np.float16).astype(np.float64)
    w3f = w3.astype(np.float16).astype(np.float64)[0]
    direct = np.full((5, 7), float(b3))
    for y in range(5):
        for x0 in range(7):
            direct[y, x0] += np.sum(a2[y:y + 5, x0:x0 + 5].transpose(2, 0, 1) * w3f)
    assert ref.shape == (5, 7) and np.all(np.abs(direct - ref) <= 2.0**-11 * s + 1e-9)


@pytest.mark.gpu
def test_conv23_prototype_matches_reference_on_hopper(hopper) -> None:
    assert wz.check([(48, 2, 2, 2, 10), (12, 2, 2, 2, 10), (24, 2, 2, 4, 5)])
