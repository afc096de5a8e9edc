"""Fused kernel weights, packed as the kernels read them (fused_fp32.cu FfmaCfg, fused_tc.cu
TcCfg): plain float32 for the FMA kernel, mma.sync B fragments (fp16, split hi + lo or not) for
the tensor-core kernels, and the folded conv1's phase matrices."""

from __future__ import annotations

import numpy as np

from ...model import SRCNNModel


def pack_fp32(model: SRCNNModel, fold: bool = False) -> np.ndarray:
    """float32 [b1 | b2 | b3, 0, 0, 0 | W3 (25 taps x 32) | W2 | W1 (81 taps x 64) | with ``fold``: the
    four phase filters (64 LR taps x 64) of the folded conv1, unscaled]; W2 is (64 in x 32 out) for
    f2 = 1 and (64 in, f2, f2, 32 out) otherwise (fused_fp32.cu FfmaCfg)."""
    a = model.arrays(np.float32)
    w1 = a["conv1_weight"][:, 0].reshape(64, 81).T
    w3 = a["conv3_weight"][0].reshape(32, 25).T
    w2 = a["conv2_weight"].transpose(1, 2, 3, 0)  # (in, dy, dx, out)
    parts = [a["conv1_bias"], a["conv2_bias"], np.array([a["conv3_bias"][0], 0, 0, 0], np.float32), w3, w2, w1]
    if fold:
        mats, e = fold_matrices(model)
        parts.append(mats * np.float32(2.0**-e))  # exact: a power of two
    return np.ascontiguousarray(np.concatenate([np.asarray(p, np.float32).ravel() for p in parts]))


def split_fp16(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 -> (hi, lo) float16 with hi + lo ~ x to ~22 bits (round to nearest even, as cvt.rn)."""
    x = np.asarray(x, np.float32)
    hi = x.astype(np.float16)
    lo = (x - hi.astype(np.float32)).astype(np.float16)
    return hi, lo


def b_fragments(b: np.ndarray) -> np.ndarray:
    """(K, N) float16 B matrix -> its mma.m16n8k16 B fragments, (K/16, N/16, 32 lanes, 4) uint32:
    per lane (b0, b1) of n-tile 2j then of n-tile 2j + 1; b0 holds k = 2(lane%4) + {0, 1} (low half
    first), b1 the same k + 8, both at n = lane/4 of the n-tile."""
    k, n = b.shape
    assert k % 16 == 0 and n % 16 == 0, (k, n)
    bits = np.ascontiguousarray(b, np.float16).view(np.uint16).astype(np.uint32)
    lane = np.arange(32)
    kk, nn = 2 * (lane % 4), lane // 4
    out = np.empty((k // 16, n // 16, 32, 4), np.uint32)
    for s in range(k // 16):
        for jp in range(n // 16):
            for half in range(2):
                col = 8 * (2 * jp + half) + nn
                k0 = 16 * s + kk
                out[s, jp, :, 2 * half] = bits[k0, col] | (bits[k0 + 1, col] << 16)
                out[s, jp, :, 2 * half + 1] = bits[k0 + 8, col] | (bits[k0 + 9, col] << 16)
    return out


def conv1_matrix(w1: np.ndarray) -> np.ndarray:
    """conv1 weights (64, 9, 9) -> B (96, 64): k = 2p + e is tap (p // 5, 2 (p % 5) + e); the 10th
    column of each row and p >= 45 are zero (fused_tc.cu reads them from valid memory)."""
    b = np.zeros((96, 64), np.float32)
    for p in range(45):
        for e in range(2):
            dy, dx = p // 5, 2 * (p % 5) + e
            if dx < 9:
                b[2 * p + e] = w1[:, dy, dx]
    return b


FOLD_SCALE = 2  # the folded conv1 is built for exact x2 upscales (four phase filters)
FOLD_MAX_SAMPLE = 2048  # integers up to 2^11 are exact in fp16


def fold_matrices(model: SRCNNModel) -> tuple[np.ndarray, int]:
    """conv1 folded with the x2 bicubic (fold.phase_filters) as four matrices (64 LR taps a * 8 + b,
    64 channels), one per phase py * 2 + px, scaled by 2^e so the largest is ~2^14 (the fp16 lo
    halves stay normal); returns (matrices (4, 64, 64) float32, e)."""
    from ..fold import phase_filters

    ph = phase_filters(model.arrays(np.float32)["conv1_weight"].astype(np.float64), FOLD_SCALE)
    f = ph.filters.reshape(FOLD_SCALE * FOLD_SCALE, 64, ph.taps * ph.taps)  # (phase, c, a * taps + b)
    e = int(np.floor(np.log2(2.0**14 / np.max(np.abs(f)))))
    return np.ascontiguousarray((f * 2.0**e).transpose(0, 2, 1).astype(np.float32)), e


def wg_conv2_words(w2: np.ndarray) -> np.ndarray:
    """conv2 weights (32 out, 64 in, f2, f2) -> the warpgroup-MMA layout (fused_tc.cu WG): fp16
    [dy][dx][channel group g][out n][8 channels], as uint32 words (channel pairs, low half first)."""
    f2 = w2.shape[2]
    w = np.asarray(w2, np.float32).transpose(2, 3, 1, 0).reshape(f2, f2, 8, 8, 32)  # (dy, dx, g, k, n)
    return np.ascontiguousarray(w.transpose(0, 1, 2, 4, 3).astype(np.float16)).view(np.uint32).ravel()


def wg_b_words(b: np.ndarray) -> np.ndarray:
    """(K, N) B matrix -> the warpgroup-MMA layout of fused_tc.cu's tc_wg_fold_z: fp16 [K / 8][N][8] (core
    matrices of 8 n x 8 k, K-major), as uint32 words (k pairs, low half first)."""
    k, n = b.shape
    assert k % 16 == 0 and n % 8 == 0, (k, n)
    w = np.asarray(b, np.float32).reshape(k // 8, 8, n).transpose(0, 2, 1)  # (g, n, k % 8)
    return np.ascontiguousarray(w.astype(np.float16)).view(np.uint32).ravel()


def pack_tc(model: SRCNNModel, split: bool, fold: bool = False, wg: bool = False,
            rows: bool = False) -> tuple[np.ndarray, int]:
    """uint32 [W2 fragments hi (lo) | W3 fragments hi (lo) | b1 | b2 | b3 0 0 0 | W1 fragments hi (lo)
    | with ``fold``: the four phase matrices' fragments, hi (lo) each] (fused_tc.cu TcCfg): B
    fragments of conv2 per tap (64 x 32), the Z GEMM (32 channels x 25 taps padded to 32), conv1
    (96 x 64) and the folded conv1 (64 x 64 per phase); and the fold's exponent e (0 without). ``wg``:
    conv2's part (same size) in the warpgroup-MMA layout instead (:func:`wg_conv2_words`); with ``fold`` (f2 = 1,
    tc_wg_fold_z) the phase matrices in that layout instead of fragments (same size), then conv2's, the Z
    GEMM's and conv1's (96 x 64) weights once more in it (:func:`wg_b_words`; the edge blocks of the wg tiles read
    the fragments, those of the ws tiles these). ``rows`` (9-5-5 with wg
    and fold, fused_rows.cu): the Z GEMM's weights once more at the end, in that layout."""
    a = model.arrays(np.float32)
    f2 = model.f2

    def fragments(m: np.ndarray, rows: int) -> list[np.ndarray]:
        hi, lo = split_fp16(m)
        return [np.concatenate([b_fragments(part[t:t + rows]).ravel() for t in range(0, part.shape[0], rows)])
                for part in ((hi, lo) if split else (hi,))]

    assert not (wg and split), "the warpgroup-MMA kernels are fp16-fast"
    wg_fold = wg and f2 == 1
    assert not wg or f2 > 1 or fold, "the f2 = 1 warpgroup-MMA kernel is a fold tile"
    if wg and not wg_fold:
        words = [wg_conv2_words(a["conv2_weight"])]
    else:
        words = fragments(np.concatenate([a["conv2_weight"][:, :, dy, dx].T for dy in range(f2) for dx in range(f2)]),
                          64)
    words += fragments(np.pad(a["conv3_weight"][0].reshape(32, 25), ((0, 0), (0, 7))), 32)
    biases = np.concatenate([a["conv1_bias"], a["conv2_bias"], [a["conv3_bias"][0], 0, 0, 0]]).astype(np.float32)
    words.append(biases.view(np.uint32))
    words += fragments(conv1_matrix(a["conv1_weight"][:, 0]), 96)
    e = 0
    if fold:
        mats, e = fold_matrices(model)
        for m in mats:
            words += [wg_b_words(m)] if wg_fold else fragments(m, 64)
        if wg_fold:
            words += [wg_b_words(a["conv2_weight"][:, :, 0, 0].T),
                      wg_b_words(np.pad(a["conv3_weight"][0].reshape(32, 25), ((0, 0), (0, 7)))),
                      wg_b_words(conv1_matrix(a["conv1_weight"][:, 0]))]
    if rows:
        assert wg and fold and f2 == 5, "the row-streamed tile is a 9-5-5 wgmma fold tile"
        words.append(wg_b_words(np.pad(a["conv3_weight"][0].reshape(32, 25), ((0, 0), (0, 7)))))
    return np.ascontiguousarray(np.concatenate(words).astype(np.uint32)), e
