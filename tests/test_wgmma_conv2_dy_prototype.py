"""dev/cuda/wgmma_conv2_dy (issue 17: 9-5-5's conv2 on the warpgroup MMA with register A reused over the 5
tap rows): its shared-memory size and its sm_90a build offline; on a compute capability 9.0 GPU its own
reference check (NumPy float64, seven awkward sizes, NaN-poisoned output, 1 and 2 MMA passes)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # dev/ lies beside the package, not in it
from dev.cuda import wgmma_conv2_dy as wd  # noqa: E402


def test_dy_prototype_shared_size() -> None:
    assert wd.shared_bytes(8, 2) == 25 * 8 * 512 + 8 * ((12 * 68 * 16 + 127) // 128 * 128 + 16) + 128
    assert wd.shared_bytes(10, 2) <= 232448  # 227 KB per block
    assert wd.parse_configs(["8,2"]) == [(8, 2, 6, 2)]


def test_dy_prototype_builds_for_sm90a(nvrtc) -> None:
    cubin, lowered, log = wd.compile_cubin([wd.kernel_name(8, 2, 6, 2)], verbose=True)
    assert cubin and all(lowered.values())
    assert "spill stores" in log and " 0 bytes spill stores" in log
    assert "C7510" not in log and "C7515" not in log and "C7520" not in log  # no serialised wgmma


@pytest.mark.gpu
def test_dy_prototype_matches_reference_on_hopper() -> None:
    cp = pytest.importorskip("cupy")
    try:
        cc = cp.cuda.Device().compute_capability
    except Exception as e:  # noqa: BLE001 - no usable GPU here
        pytest.skip(f"no GPU ({type(e).__name__})")
    if cc != "90":
        pytest.skip("wgmma needs compute capability 9.0")
    assert wd.check([(8, 2, 6, 2), (8, 2, 5, 2), (10, 2, 6, 3)])
