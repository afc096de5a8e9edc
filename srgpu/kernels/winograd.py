"""1-D Winograd (Toom-Cook) correlation for the folded conv1 of the FFMA kernel (fused_fp32.cu).

The folded conv1 (fold.py) is, per phase, an 8 x 8 filter on the LR samples. Along a row, four
neighbouring outputs of an 8-tap correlation, ``y[i] = sum_b g[b] d[i + b]`` (i < 4, 11 inputs),
are ``AT @ ((G @ g) * (BT @ d))``: 11 multiplications instead of 32. The kernel transforms each
11-sample window once per tile (``BT``: shared by all 64 channels), keeps the filters transformed
(``G``, here on the host) and sums the 8 rows of a filter in the transformed domain, so a
channel's four outputs cost 8 x 11 + 38 (``AT``) FMAs instead of 8 x 32.

Points: 0, +-1, +-2, +-1/2, 1/4, +-4 and infinity. Powers of two keep ``AT`` exact in float32;
among the sets tried (CPU emulation in float32 on Set5 content with the shipped filters) this one
had the smallest error, ~1.3e-6 of conv1 on the unit scale against ~1e-6 for the direct sum.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

OUTPUTS = 4  # m: outputs per window
TAPS = 8  # r: the folded filter's taps per row (x2)
ALPHA = OUTPUTS + TAPS - 1  # 11: window length = products per row
POINTS = (Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2), Fraction(1, 2), Fraction(-1, 2),
          Fraction(1, 4), Fraction(4), Fraction(-4))  # and infinity


def _vandermonde(n: int, points: tuple[Fraction, ...] = POINTS) -> list[list[Fraction]]:
    """(len(points) + 1) x n: row i = powers of point i; the last row (infinity) picks the leading
    coefficient."""
    rows = [[p**k for k in range(n)] for p in points]
    rows.append([Fraction(0)] * (n - 1) + [Fraction(1)])
    return rows


def _inverse(m: list[list[Fraction]]) -> list[list[Fraction]]:
    """Exact Gauss-Jordan inverse of a square matrix of Fractions."""
    n = len(m)
    a = [row[:] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(m)]
    for c in range(n):
        p = next(r for r in range(c, n) if a[r][c] != 0)
        a[c], a[p] = a[p], a[c]
        piv = a[c][c]
        a[c] = [v / piv for v in a[c]]
        for r in range(n):
            if r != c and a[r][c] != 0:
                f = a[r][c]
                a[r] = [v - f * w for v, w in zip(a[r], a[c])]
    return [row[n:] for row in a]


def matrices(outputs: int = OUTPUTS, taps: int = TAPS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(AT (outputs x alpha), G (alpha x taps), BT (alpha x alpha)) in float64, exact up to the
    final rounding: correlation = C(g)^T d with C(g) = V^-1 diag(V_taps g) V_outputs (Toom-Cook
    convolution), so AT = V_outputs^T, G = V_taps, BT = V^-T."""
    alpha = outputs + taps - 1
    points = POINTS[: alpha - 1]
    if len(points) != alpha - 1:
        raise ValueError(f"{alpha - 1} finite points needed, {len(POINTS)} defined")
    v = _vandermonde(alpha, points)
    vinv = _inverse(v)
    at = np.array([[float(x) for x in row] for row in _vandermonde(outputs, points)]).T
    g = np.array([[float(x) for x in row] for row in _vandermonde(taps, points)])
    bt = np.array([[float(vinv[k][x]) for k in range(alpha)] for x in range(alpha)])
    return at, g, bt


def correlate(d: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The float64 Winograd form of ``y[i] = sum_b g[b] d[..., i + b]`` over the last axis of ``d``
    (length ALPHA): the identity the kernel relies on (tests compare it with the direct sum)."""
    at, gm, bt = matrices()
    return (np.asarray(d, np.float64) @ bt.T * (gm @ np.asarray(g, np.float64))) @ at.T


def transform_filters(filters: np.ndarray) -> np.ndarray:
    """Phase filters (phases, channels, a, b) with TAPS taps along b -> (phases, a, ALPHA, channels)
    float32: ``G`` applied along b (in float64, rounded once), laid out as the kernel reads them
    (4 channels per float4)."""
    _, g, _ = matrices()
    u = np.einsum("xb,pcab->paxc", g, np.asarray(filters, np.float64))
    return np.ascontiguousarray(u.astype(np.float32))


def c_table(name: str, m: np.ndarray) -> str:
    """``m`` as a C++ constexpr float array literal (float32 values, round-trip exact)."""
    rows = ", ".join("{" + ", ".join(f"{float(np.float32(v))!r}f" for v in row) + "}" for row in m)
    return f"constexpr float {name}[{m.shape[0]}][{m.shape[1]}] = {{{rows}}};"
