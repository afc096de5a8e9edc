"""tests/kernels/test_gpu_fused.py's checks on the fused tiles built but not offered (dev/cuda/fused_not_offered.py), which
the product's GPU tests leave out since issue 41 (pytest -m gpu; skipped where no GPU is usable): the streamed-conv2,
wgmma-conv2, wgmma-fold, row-streamed and warp-specialised tiles, the fold path, and every other such tile on a frame
of several tiles with all four borders. The checks are the product test's own functions, given these tiles."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from srgpu.kernels import fused

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # dev/ lies beside the package, not in it
from dev.cuda.fused_not_offered import not_offered_configs  # noqa: E402

pytestmark = pytest.mark.gpu


def _product_checks():
    """tests/kernels/test_gpu_fused.py loaded as a module of its own name (tests/ is no package), for its check_* functions
    (its test_* functions are not collected from here)."""
    spec = importlib.util.spec_from_file_location("gpu_fused_checks", ROOT / "tests" / "kernels" / "test_gpu_fused.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checks = _product_checks()


@pytest.fixture(scope="module")
def cp():
    import cupy

    yield cupy
    cupy.get_default_memory_pool().free_all_blocks()


def _sm90a(cp) -> None:
    if checks._compute_capability(cp) != "9.0":
        pytest.skip("wgmma kernels are built for sm_90a (compute capability 9.0)")


@pytest.mark.parametrize("precision,arch", [(p, a) for p in ("fp16", "fp16-fast") for a in ("9-3-5", "9-5-5")])
def test_not_offered_streamed_conv2_tiles(cp, precision: str, arch: str) -> None:
    configs = [c for c in not_offered_configs(precision, checks.MODELS[arch].f2)
               if c.stream and c.runs_on(checks._compute_capability(cp))]
    if not configs:
        pytest.skip(f"no streamed {precision} tile for {arch} is built but not offered")
    checks.check_streamed_conv2_tiles(cp, precision, arch, configs)


def test_not_offered_wgmma_conv2_tiles(cp) -> None:
    _sm90a(cp)
    configs = [c for c in not_offered_configs("fp16-fast", 5) if c.wg and not c.rows]
    assert configs
    checks.check_wgmma_conv2_tiles(cp, configs)


@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
def test_not_offered_wgmma_fold_tiles(cp, arch: str) -> None:
    _sm90a(cp)
    configs = [c for c in not_offered_configs("fp16-fast", checks.MODELS[arch].f2)
               if c.wg and c.fold and not c.rows and not c.ws]  # ws tiles: test_not_offered_ws_fold_tiles...
    assert configs
    checks.check_wgmma_fold_tiles(cp, arch, configs)


def test_not_offered_row_streamed_tiles(cp) -> None:
    _sm90a(cp)
    configs = [c for c in not_offered_configs("fp16-fast", 5) if c.rows]
    if not configs:
        pytest.skip("no row-streamed tile is built but not offered")
    checks.check_row_streamed_tiles(cp, configs)


def test_not_offered_ws_fold_tiles_same_bits_as_wg(cp) -> None:
    _sm90a(cp)
    configs = [c for c in not_offered_configs("fp16-fast", 1) if c.ws]
    assert configs
    checks.check_ws_fold_tiles_same_bits_as_wg(cp, configs)


@pytest.mark.parametrize("precision", fused.ARITHMETICS)
def test_not_offered_fold_path_matches_reference(cp, precision: str) -> None:
    configs = [c for c in not_offered_configs(precision, 1) if c.fold and c.runs_on(checks._compute_capability(cp))]
    if not configs:
        pytest.skip(f"no {precision} fold tile is built but not offered")
    checks.check_fold_path(cp, precision, configs)


@pytest.mark.parametrize("precision,arch", [(p, a) for p in fused.ARITHMETICS for a in ("9-1-5", "9-5-5")])
def test_not_offered_tiles(cp, precision: str, arch: str) -> None:
    """The tiles test_not_offered_streamed_conv2_tiles does not cover."""
    configs = [c for c in not_offered_configs(precision, checks.MODELS[arch].f2) if not c.stream]
    if not configs:
        pytest.skip(f"no {precision} {arch} tile without streaming is built but not offered")
    checks.check_tiles(cp, precision, arch, configs)
