"""GPU kernels against their CPU references (pytest -m gpu; skipped where no GPU is usable).

Every convolution variant and launch shape of every SRCNN layer type, on random [0, 1] inputs
with seeded random weights, at awkward and full-HD/4K sizes, output poisoned with NaN first;
the bicubic kernels against srgpu.resize.imresize and their canonical NumPy definition; the
output conversion against srgpu.engine.base.from_unit_float.
"""

from __future__ import annotations

import numpy as np
import pytest

from srgpu.kernels import bicubic, conv, quantize
from srgpu.kernels.conv import ConvLayer

pytestmark = pytest.mark.gpu

# (H, W): 1x1, 7x13, 33x17, 1921x1081, 3840x2160 (W x H)
SIZES = [(1, 1), (13, 7), (17, 33), (1081, 1921), (2160, 3840)]
LAYERS = {  # conv1 and conv3 are shared by 9-1-5 and 9-5-5; conv2 is 1x1 (9-1-5) or 5x5 (9-5-5)
    "conv1": ConvLayer("conv1", 1, 64, 9, True),
    "conv2-1x1": ConvLayer("conv2", 64, 32, 1, True),
    "conv2-5x5": ConvLayer("conv2", 64, 32, 5, True),
    "conv3": ConvLayer("conv3", 32, 1, 5, False),
}
TOLERANCE = 1e-4


@pytest.fixture(autouse=True)
def _free_gpu_memory():
    yield
    import cupy as cp

    cp.get_default_memory_pool().free_all_blocks()


def _check(layer: ConvLayer, shape: tuple[int, int], seed: int) -> None:
    errors = conv.check_configs(layer, conv.candidates(layer), shape, seed=seed)
    for label, err in errors.items():
        print(f"{layer.name} {layer.cin}->{layer.cout} {layer.k}x{layer.k} {shape[1]}x{shape[0]} {label:26s} max abs err {err:.3g}")
    bad = {label: err for label, err in errors.items() if not err <= TOLERANCE}
    assert not bad, f"{layer.name} at {shape}: {bad}"


@pytest.mark.parametrize("shape", SIZES, ids=[f"{w}x{h}" for h, w in SIZES])
@pytest.mark.parametrize("layer_id", list(LAYERS))
def test_conv_variants_match_reference(layer_id: str, shape: tuple[int, int]) -> None:
    _check(LAYERS[layer_id], shape, seed=SIZES.index(shape) * 10 + list(LAYERS).index(layer_id))


@pytest.mark.parametrize("shape", SIZES[:3], ids=[f"{w}x{h}" for h, w in SIZES[:3]])
def test_conv_variants_3x3_layer(shape: tuple[int, int]) -> None:
    """9-3-5's middle layer: every variant also takes f2 = 3."""
    _check(ConvLayer("conv2", 64, 32, 3, True), shape, seed=99)


def test_conv_self_check() -> None:
    assert conv.self_check(arch="9-1-5") <= TOLERANCE


# ---------------------------------------------------------------- bicubic


BICUBIC_CASES = [((1, 1), (2, 2)), ((13, 7), (26, 14)), ((17, 33), (51, 99)), ((9, 5), (36, 20)),
                 ((12, 12), (12, 30)), ((7, 13), (5, 9)), ((541, 961), (1081, 1921)), ((1080, 1920), (2160, 3840))]


def _plane(shape: tuple[int, int], dtype: type, max_value: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.float32:
        return rng.random(shape, dtype=np.float32)
    return rng.integers(0, int(max_value) + 1, shape).astype(dtype)


@pytest.mark.parametrize("dtype, max_value", [(np.uint8, 255), (np.uint16, 1023), (np.float32, 1.0)],
                         ids=["u8", "u10", "f32"])
@pytest.mark.parametrize("in_shape, out_shape", [((13, 7), (26, 14)), ((17, 33), (51, 99)), ((12, 12), (12, 30))],
                         ids=["13x7-x2", "17x33-x3", "columns-first"])
def test_bicubic_kernel_on_a_batch_of_planes(in_shape, out_shape, dtype, max_value) -> None:
    """A batch (N, h, w) in one launch per pass (grid z): each plane equal to the canonical
    reference on its own, every output sample written (NaN / 0xAB poison), nothing written past
    the batch (a poisoned plane after it stays so)."""
    import cupy as cp

    from srgpu.kernels import bicubic
    from srgpu.kernels.build import device_limits

    n = 3
    planes = np.stack([_plane(in_shape, dtype, max_value, seed=70 + i) for i in range(n)])
    bic = bicubic.Bicubic(0, device_limits(0))
    poison = 0xAB if dtype != np.float32 else np.nan
    with cp.cuda.Stream(non_blocking=True) as stream:
        tmp = cp.full((n,) + bicubic.intermediate_shape(in_shape, out_shape), np.nan, dtype=np.float32)
        raw = cp.full((n + 1,) + out_shape, np.nan, dtype=np.float32)
        final = cp.full((n + 1,) + out_shape, poison, dtype=dtype)
        bic.resize(cp.asarray(planes), raw[:n], tmp, max_value, False, stream)
        bic.resize(cp.asarray(planes), final[:n], tmp, max_value, True, stream)
        got_raw, got_final = raw.get(stream=stream), final.get(stream=stream)
        alone = cp.full(out_shape, poison, dtype=dtype)
        bic.resize(cp.asarray(planes[1]), alone, tmp[0], max_value, True, stream)
        got_alone = alone.get(stream=stream)
    for i in range(n):
        err = float(np.max(np.abs(got_raw[i] - bicubic.reference(planes[i], out_shape, max_value))))
        assert err <= 1e-6, (i, err)
    assert np.isnan(got_raw[n]).all() and not np.isnan(got_raw[:n]).any()
    np.testing.assert_array_equal(got_final[1], got_alone)  # a plane of a batch is what it gives alone
    if dtype == np.float32:
        assert np.isnan(got_final[n]).all()
    else:
        assert (got_final[n] == 0xAB).all()


@pytest.mark.parametrize("in_shape, out_shape", BICUBIC_CASES, ids=[f"{a[1]}x{a[0]}-{b[1]}x{b[0]}" for a, b in BICUBIC_CASES])
@pytest.mark.parametrize("dtype, max_value", [(np.uint8, 255), (np.uint16, 1023), (np.float32, 1.0)],
                         ids=["u8", "u10", "f32"])
def test_bicubic_kernel(in_shape, out_shape, dtype, max_value) -> None:
    import cupy as cp

    from srgpu.engine.cpu import CPUEngine
    from srgpu.kernels.build import device_limits
    from srgpu.model import random_model
    from srgpu.resize import imresize

    plane = _plane(in_shape, dtype, max_value, seed=in_shape[0] + out_shape[1])
    bic = bicubic.Bicubic(0, device_limits(0))
    with cp.cuda.Stream(non_blocking=True) as stream:
        src = cp.asarray(plane)
        tmp = cp.full(bicubic.intermediate_shape(in_shape, out_shape), np.nan, dtype=np.float32)
        raw = cp.full(out_shape, np.nan, dtype=np.float32)
        bic.resize(src, raw, tmp, max_value, False, stream)
        final = cp.full(out_shape, 0xAB if dtype != np.float32 else np.nan, dtype=dtype)
        bic.resize(src, final, tmp, max_value, True, stream)
        got_raw, got_final = raw.get(stream=stream), final.get(stream=stream)
    canonical = bicubic.reference(plane, out_shape, max_value)
    unit = plane.astype(np.float64) / (1.0 if dtype == np.float32 else max_value)
    err_canonical = float(np.max(np.abs(got_raw - canonical)))
    err_imresize = float(np.max(np.abs(got_raw - imresize(unit, output_shape=out_shape))))
    cpu = CPUEngine(random_model("9-1-5"), 2).bicubic_plane(plane, out_shape, max_value)
    if dtype == np.float32:
        diff = np.abs(got_final - cpu)
        equal = float(np.mean(diff <= 1e-6))
        ties_only = True
    else:
        diff = np.abs(got_final.astype(np.int64) - cpu.astype(np.int64))
        equal = float(np.mean(diff == 0))
        # the engines may round a value that is a half level in exact arithmetic differently
        # (fused multiply-add vs multiply then add): any difference must sit on such a tie
        levels = np.clip(imresize(unit, output_shape=out_shape), 0, 1) * max_value
        ties_only = bool(np.all(np.abs(levels - np.floor(levels) - 0.5)[diff > 0] < 1e-3))
    print(f"bicubic {in_shape}->{out_shape} {np.dtype(dtype).name}: vs canonical {err_canonical:.3g}, "
          f"vs imresize {err_imresize:.3g}, final equal to CPU engine {equal:.6f}, max diff {diff.max()}")
    assert err_canonical <= 1e-6
    assert err_imresize <= 1e-5
    assert diff.max() <= (1 if dtype != np.float32 else 1e-5) and ties_only


def test_bicubic_self_check() -> None:
    assert bicubic.self_check() <= 1e-6


def test_quantize_matches_cpu_conversion() -> None:
    quantize.self_check()
