"""dev/cuda/wgmma_conv2_dy (issue 17: 9-5-5's conv2 on the warpgroup MMA with register A reused over the 5
tap rows): its sizes and its sm_90a builds offline (no spills, no wgmma serialisation); on a compute capability
9.0 GPU its own reference check (NumPy float64, eight awkward sizes, NaN-poisoned output, 1 and 2 passes)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # dev/ lies beside the package, not in it
from dev.cuda import wgmma_conv2_dy as wd  # noqa: E402
from dev.cuda import wgmma_conv23_dy as wz  # noqa: E402


def test_dy_prototype_shared_size() -> None:
    assert wd.shared_bytes(8, 2) == 25 * 8 * 512 + 8 * ((12 * 68 * 16 + 127) // 128 * 128 + 16) + 128
    assert wd.shared_bytes(10, 2) <= 232448  # 227 KB per block
    assert wd.parse_configs(["8,2", "s:48,2"]) == [(8, 2, 6, 2), (48, 2, 2, 2, 1)]
    assert wd.shared_bytes(48, 2, 2, 2, 1) == 25 * 8 * 512 + 2 * 2 * 8 * (68 * 16 + 80) + 128
    assert wd.positions((48, 2, 2, 2, 1)) == 48 * 64 * 2 and wd.positions((8, 2, 6, 2)) == 8 * 64


# conv2 alone (dy_conv2, dy_conv2s) and with the rest of the consumer (dz_conv23s, wgmma_conv23_dy.py)
@pytest.mark.slow
@pytest.mark.parametrize("name", [wd.kernel_name(8, 2, 6, 2), wd.kernel_name(48, 2, 2, 2, 1),
                                  wz.kernel_name(48, 2, 2, 2, 10), wz.kernel_name(12, 2, 2, 4, 10)])
def test_dy_prototypes_build_for_sm90a(nvrtc, name) -> None:
    cubin, lowered, log = wd.compile_cubin([name], verbose=True)
    assert cubin and all(lowered.values())
    if "registers" in log:  # CUDA 12.9's NVRTC passes ptxas -v on; CUDA 13's leaves the log empty
        assert " 0 bytes spill stores" in log
    assert "serialized" not in log  # ptxas' C75xx notes: wgmma serialised


@pytest.mark.gpu
def test_dy_prototype_matches_reference_on_hopper(hopper) -> None:
    assert wd.check([(8, 2, 6, 2), (10, 2, 5, 2), (48, 2, 2, 2, 1), (24, 2, 3, 4, 1)])
