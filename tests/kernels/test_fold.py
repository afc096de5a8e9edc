"""conv1 with the bicubic folded in (srgpu.kernels.fold): the same values as conv1 on the bicubic
upscale, edges included, and the interior served by s*s phase filters on small LR windows."""

from __future__ import annotations

import numpy as np
import pytest

from srgpu.kernels.fold import axis_fold, conv1_folded_reference, phase_filters, regular_range
from srgpu.reference import conv_single_in
from srgpu.resize import imresize

SIZES = [(1, 1), (5, 9), (7, 13), (17, 33)]  # (h, w) of the LR plane


def _conv1(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(0, 0.1, (64, 1, 9, 9)), rng.normal(0, 0.1, 64)


@pytest.mark.slow
@pytest.mark.parametrize("scale", [2, 3, 4])
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for h, w in SIZES])
def test_folded_conv1_equals_conv1_on_the_upscale(size: tuple[int, int], scale: int) -> None:
    rng = np.random.default_rng(size[0] * 10 + scale)
    lr = rng.integers(0, 256, size).astype(np.float64) / 255.0
    weight, bias = _conv1(rng)
    upscaled = imresize(lr, float(scale))
    want = conv_single_in(upscaled, weight, bias)
    got = conv1_folded_reference(lr, weight, bias, upscaled.shape)
    assert got.shape == want.shape == (64,) + upscaled.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("scale, taps", [(2, 8), (3, 7), (4, 6)])
def test_the_interior_needs_one_filter_per_phase_on_a_small_window(scale: int, taps: int) -> None:
    rng = np.random.default_rng(scale)
    weight, _ = _conv1(rng)
    phases = phase_filters(weight, scale)
    assert phases.taps == taps  # LR samples per axis, against 9 upscaled ones
    h, w = 11, 14
    H, W = h * scale, w * scale
    fy, fx = axis_fold(h, H), axis_fold(w, W)
    w0 = weight[:, 0]
    for y in range(4, H - 4):
        assert fy.starts[y] == y // scale + phases.offsets[y % scale]
        for x in range(4, W - 4):
            own = np.einsum("da,cde,eb->cab", fy.weights[y], w0, fx.weights[x])
            np.testing.assert_allclose(own, phases.filters[y % scale, x % scale], rtol=0, atol=1e-12)
    # the edge rows are not phase-periodic: they need filters of their own
    edge = np.einsum("da,cde,eb->cab", fy.weights[0], w0, fx.weights[W // 2])
    assert not np.allclose(edge, phases.filters[0, (W // 2) % scale], atol=1e-6)


@pytest.mark.parametrize("h", [5, 8, 9, 17, 40])
def test_regular_range_is_where_the_phase_filters_hold(h: int) -> None:
    """The FOLD kernels fold a tile only inside regular_range: there every output's fold is its
    phase's (same window start, same weights); the outputs just outside it are not."""
    scale, k = 2, 9
    lo, hi = regular_range(h, h * scale, scale)
    assert 0 < lo < hi < h * scale
    rng = np.random.default_rng(h)
    phases = phase_filters(rng.normal(0, 0.1, (64, 1, k, k)), scale)
    fold = axis_fold(h, h * scale, k)
    ref = axis_fold(4 * k, 4 * k * scale, k)
    mid = 2 * k * scale

    def regular(y: int) -> bool:
        w = fold.weights[y]
        if w.shape[1] != ref.taps:
            return False
        return bool(fold.starts[y] == y // scale + phases.offsets[y % scale]
                    and np.allclose(w, ref.weights[mid + y % scale], rtol=0, atol=1e-12))

    assert all(regular(y) for y in range(lo, hi))
    assert not regular(lo - 1) and not regular(hi)  # the edges need their own filters
    assert regular_range(h, h * scale + 1, scale) == (0, 0)  # not an exact upscale


def test_regular_range_checks_the_edges_only_and_agrees_with_the_full_check() -> None:
    """regular_range runs for every new frame size, so it checks the outputs near the edges and
    takes the middle as regular; on every size here that gives what checking every output gives
    (at x2, the scale the kernels fold, on frames up to 4K and beyond)."""
    from srgpu.kernels.fold import regular_outputs

    def full(h: int, scale: int) -> tuple[int, int]:
        ok = regular_outputs(h, h * scale, scale)
        if not ok.any():
            return (0, 0)
        runs = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]])))
        lengths = runs[1::2] - runs[::2]
        i = int(np.argmax(lengths))
        return (int(runs[2 * i]), int(runs[2 * i + 1]))

    sizes = list(range(1, 160)) + [333, 540, 719, 1080, 1919, 3840]
    for h in sizes:
        assert regular_range(h, 2 * h, 2) == full(h, 2), h
    for scale in (3, 4):
        for h in sizes[:60] + [540]:
            assert regular_range(h, scale * h, scale) == full(h, scale), (scale, h)
    edges_only = regular_outputs(1080, 2160, 2, edges_only=True)
    assert edges_only.sum() == 2160 - 8 and not edges_only[:4].any() and not edges_only[-4:].any()


def test_fold_args_offsets_are_the_phase_filters_offsets() -> None:
    from srgpu.kernels.fold import interior_offsets

    for scale in (2, 3, 4):
        assert interior_offsets(scale) == list(phase_filters(np.zeros((1, 1, 9, 9)), scale).offsets)
