"""The binary convolution's NumPy reference (dev/binary/kernels.py), which the GPU kernels are held
to bit for bit: packing, XOR-popcount sums against a direct float correlation of the signs, the
float epilogue's order, the vote's exact folding, and the launch shapes against device limits."""

from __future__ import annotations

import numpy as np
import pytest

from dev.binary import kernels as binary
from dev.binary.kernels import BinaryConfig, BinaryLayer, Epilogue
from srgpu.kernels.launch import H100_LIMITS, validate_launch
from srgpu.reference import conv_multi

from conftest import compile_all  # the checkout's root conftest (tests/kernels/test_kernel_compile.py's harness)


def signs(x: np.ndarray, threshold: np.ndarray | float) -> np.ndarray:
    t = np.asarray(threshold, np.float32).reshape(-1, *([1] * (x.ndim - 1))) if np.ndim(threshold) else threshold
    return np.where(x.astype(np.float32) > t, 1.0, -1.0)


@pytest.mark.parametrize("cin", [64, 32, 100, 1])
def test_pack_sets_one_bit_per_channel_above_its_threshold(cin: int) -> None:
    rng = np.random.default_rng(cin)
    x = rng.standard_normal((cin, 5, 7)).astype(np.float32)
    t = (rng.standard_normal(cin) * 0.2).astype(np.float32)
    t[0] = x[0, 2, 3]  # equal to the threshold: -1 (the bit is x > t)
    packed = binary.reference_pack(x, t)
    assert packed.shape == (binary.words(cin), 5, 7) and packed.dtype == np.uint64
    bits = binary.unpack_bits(packed, binary.words(cin) * 64)
    np.testing.assert_array_equal(bits[:cin], x > t[:, None, None])
    assert not bits[cin:].any()  # unused bits stay 0
    assert not bits[0, 2, 3]
    word = int(packed[0, 1, 1])  # bit b of word 0 is channel b, by hand
    assert word == sum(1 << b for b in range(min(cin, 64)) if x[b, 1, 1] > t[b])


def test_pack_of_fp16_compares_in_float32() -> None:
    x = np.array([[[0.1, 0.2]], [[0.3, 0.0]]], np.float16)
    t = np.array([np.float32(np.float16(0.1)), 0.25], np.float32)  # x[0,0,0] equals t[0] exactly: -1
    np.testing.assert_array_equal(binary.unpack_bits(binary.reference_pack(x, t), 2)[:, 0], [[False, True], [True, False]])


def test_weight_packing_layout() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 70, 3, 3)).astype(np.float32)
    packed = binary.pack_weights(w)
    assert packed.shape == (2, 3, 3, 3)  # (CW, k, k, cout)
    for o in range(3):
        for dy in range(3):
            for dx in range(3):
                bits = [(int(packed[c // 64, dy, dx, o]) >> (c % 64)) & 1 for c in range(128)]
                assert bits[:70] == [int(v > 0) for v in w[o, :, dy, dx]] and not any(bits[70:])


@pytest.mark.parametrize("cin, cout, k, shape", [(64, 32, 5, (7, 13)), (64, 32, 1, (33, 65)), (32, 32, 3, (1, 1)),
                                                 (100, 8, 3, (9, 4)), (64, 16, 5, (2, 3))])
def test_popcount_sums_equal_the_float_correlation_of_the_signs(cin: int, cout: int, k: int, shape) -> None:
    """N - 2 popcount(a XOR w) is the +-1 correlation, 'same' size with replicate border (computed
    here by srgpu.reference's float layer on +-1 planes: integers, exact in float64)."""
    rng = np.random.default_rng(cin + k)
    x = np.maximum(rng.standard_normal((cin, *shape)), 0).astype(np.float32)
    t = (rng.random(cin) * 0.5).astype(np.float32)
    w = rng.standard_normal((cout, cin, k, k)).astype(np.float32)
    s = binary.reference_sums(binary.reference_pack(x, t), binary.pack_weights(w), cin)
    direct = conv_multi(signs(x, t), np.where(w > 0, 1.0, -1.0), np.zeros(cout))
    np.testing.assert_array_equal(s, direct.astype(np.int32))
    assert s.dtype == np.int32 and np.abs(s).max() <= k * k * cin
    assert len(np.unique(s)) > 3  # not a degenerate case


def test_the_whole_layer_equals_its_float_definition() -> None:
    """reference(): pack, sums, alpha * s + beta, ReLU; against a direct computation in float64
    (float32 rounding of one product and one sum: within 1 ulp-ish of the exact value)."""
    layer = BinaryLayer("conv2", 64, 32, 5)
    d = binary.random_layer(layer, (11, 9), seed=3)
    ep = Epilogue("float32", True)
    got = binary.reference(d.x, d.threshold, d.weight, d.alpha, d.beta, ep)
    s = conv_multi(signs(d.x, d.threshold), np.where(d.weight > 0, 1.0, -1.0), np.zeros(32))
    exact = np.maximum(d.alpha[:, None, None].astype(np.float64) * s + d.beta[:, None, None], 0)
    np.testing.assert_allclose(got, exact, rtol=2e-7, atol=1e-7)
    assert (got > 0).mean() > 0.2 and (got == 0).mean() > 0.05


def test_epilogue_rounds_the_product_then_the_sum() -> None:
    """Values where an FMA would round differently: the reference must be the unfused order."""
    s = np.array([[[3]]], np.int32)
    a, b = np.array([np.float32(1) / np.float32(3)]), np.array([np.float32(-1.0)])
    got = binary.reference_epilogue(s, a, b, Epilogue("float32", False))
    expect = np.float32(np.float32(a[0] * np.float32(3)) + b[0])
    assert got.dtype == np.float32 and got[0, 0, 0] == expect
    fused = np.float32(np.float64(a[0]) * 3 + np.float64(b[0]))  # what an FMA rounds to
    assert expect != fused  # the case tells the two orders apart
    h = binary.reference_epilogue(s, a, b, Epilogue("float16", False))
    assert h.dtype == np.float16 and h[0, 0, 0] == np.float16(expect)


@pytest.mark.parametrize("relu", [True, False])
def test_fold_vote_decides_as_the_float_epilogue_for_every_sum(relu: bool) -> None:
    rng = np.random.default_rng(7)
    n = 5 * 5 * 64
    alpha = (rng.standard_normal(40) * 0.01).astype(np.float32)
    alpha[:3] = [0.0, -0.0, 1e-30]  # constant decisions and a vanishing scale
    beta = (rng.standard_normal(40) * 0.3).astype(np.float32)
    t = (rng.standard_normal(40) * 0.2).astype(np.float32)
    t[3] = 0.0
    k, d = binary.fold_vote(alpha, beta, t, relu, n)
    s = np.arange(-n, n + 1, dtype=np.int32)
    for o in range(40):
        v = np.float32(alpha[o]) * s.astype(np.float32) + np.float32(beta[o])
        v = np.maximum(v, 0) if relu else v
        np.testing.assert_array_equal(d[o] * s > k[o], v > t[o], err_msg=f"channel {o}")


def test_majority_vote() -> None:
    """dir 1, k 0: one bit per output where more signs agree than disagree."""
    s = np.array([[[-3, 0, 1, 64]], [[5, -1, 2, 0]]], np.int32)
    votes = binary.reference_epilogue(s, None, None, Epilogue("vote", False), (np.zeros(2), np.ones(2)))
    assert votes.shape == (1, 1, 4)
    np.testing.assert_array_equal(binary.unpack_bits(votes, 2)[:, 0], [[0, 0, 1, 1], [1, 0, 1, 0]])


def test_vote_output_feeds_the_next_binary_layer() -> None:
    """The vote of a layer is the packing of its float output against the next threshold."""
    layer = BinaryLayer("conv2", 64, 32, 3)
    d = binary.random_layer(layer, (6, 10), seed=1)
    t_next = np.linspace(-0.05, 0.05, 32).astype(np.float32)
    floats = binary.reference(d.x, d.threshold, d.weight, d.alpha, d.beta, Epilogue("float32", True))
    vote = binary.fold_vote(d.alpha, d.beta, t_next, True, layer.nbits)
    votes = binary.reference(d.x, d.threshold, d.weight, d.alpha, d.beta, Epilogue("vote", False), vote)
    np.testing.assert_array_equal(votes, binary.reference_pack(floats, t_next))


def test_epilogue_refuses_a_relu_vote() -> None:
    with pytest.raises(ValueError, match="fold_vote"):
        Epilogue("vote", True)


@pytest.mark.parametrize("layer_id", list(binary.SRCNN_LAYERS))
def test_candidates_instantiate_and_fit_the_device(layer_id: str) -> None:
    layer = binary.SRCNN_LAYERS[layer_id]
    for ep in binary.ALL_EPILOGUES:
        configs = binary.candidates(layer, ep)
        assert any(c.variant == "b0" for c in configs) and any(c.variant == "b1" for c in configs)
        for cfg in configs:
            assert not cfg.problems(layer, ep)
            launch = cfg.launch(layer, ep, 2160, 3840)
            validate_launch(launch, H100_LIMITS)
            assert launch.shared_bytes <= 48 * 1024  # no opt-in needed
        assert binary.default_config(layer, ep).variant == "b1"


def test_launch_covers_the_frame() -> None:
    layer = binary.SRCNN_LAYERS["conv2-5x5"]
    cfg = BinaryConfig("b1", 32, 8, 4, 16)
    launch = cfg.launch(layer, Epilogue(), 2160, 3840)
    assert launch.grid[0] == 30 * 270 * 2 and launch.block == (32, 8, 1)
    assert cfg.shared_bytes(layer) == 8 * (25 * 16 + 12 * 132)
    assert cfg.kernel_name(layer, Epilogue("float16", False)) == "bconv_b1<1, 32, 5, 32, 8, 4, 16, 3>"


def test_problems_name_what_cannot_instantiate() -> None:
    layer = BinaryLayer("x", 64, 128, 3)
    assert BinaryConfig("b1", 32, 4, 2, 32).problems(layer, Epilogue("vote", False))  # a vote word split over threads
    assert not BinaryConfig("b1", 32, 4, 1, 64).problems(layer, Epilogue("vote", False))
    assert BinaryConfig("b1", 32, 4, 2, 48).problems(layer, Epilogue())
    assert BinaryConfig("b0", 32, 4, 2, 32).problems(layer, Epilogue())


def test_speed_quality_plot_draws_the_points(tmp_path) -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "benchmarks" / "plot_speed_quality.py"
    spec = importlib.util.spec_from_file_location("plot_speed_quality", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    points = [{"model": "9-1-5", "scale": 2, "ms": 0.6, "psnr": 36.38}, {"model": "9-5-5", "scale": 2, "ms": 4.2, "psnr": 36.73},
              {"model": "bicubic", "scale": 2, "ms": 0.1, "psnr": 33.66}]
    img = mod.plot(points, "test")
    assert img.shape == (600, 900, 3)
    coloured = (img[..., 0] == mod.COLOURS[2][0]) & (img[..., 1] == mod.COLOURS[2][1]) & (img[..., 2] == mod.COLOURS[2][2])
    assert coloured.sum() > 3 * 50  # three filled markers


@pytest.mark.slow
def test_every_binary_kernel_compiles(nvrtc) -> None:
    """The packers and every candidate x epilogue of the binarized layers (binary.cu)."""
    compile_all(nvrtc, binary.SOURCE, binary.all_kernel_names(), 75)
