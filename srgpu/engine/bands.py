"""Rows with a halo: a plane or image cut into bands of rows, each computed from its own rows plus
context either side, so that the rows it keeps are exact.

A band keeps rows ``[k0, k1)`` and reads rows ``[b0, b1)``: its own rows plus ``halo`` rows either
side as far as the image goes (clipped at the edges, where the real border is the whole image's).
A band's cut edges get a false border, which reaches only the context rows, and those are dropped.
The bands keep every row exactly once, in order. The one place rows are cut so, for:

- the image paths (srgpu.images.upscale, srgpu.engine.imageproc): a large image in bands of input
  rows, with :func:`halo_rows` of context. With an integer scale a band that starts at an input
  row sees the same bicubic phases as the whole image, so on the CPU engine the bands are
  bit-identical to the whole image; the band keeps its output rows ``kept(scale)``;
- the CPU engine (srgpu.engine.cpu): strips of output rows of its tiles (halo: the network's);
- the GPU engine (srgpu.engine.gpu): strips of the layer intermediates, as many rows as its
  buffers hold (:func:`bands_within`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    """Rows [k0, k1) kept, computed from rows [b0, b1) (k0..k1 plus the context)."""

    k0: int
    k1: int
    b0: int
    b1: int

    def kept(self, scale: int = 1) -> slice:
        """The rows the band keeps, in the band's own rows (its output's, upscaled by ``scale``)."""
        return slice((self.k0 - self.b0) * scale, (self.k1 - self.b0) * scale)


def halo_rows(network_halo: int, scale: int) -> int:
    """Input rows a band reads beyond its own on each side so that its own output rows are exact:
    the network's halo in input rows, plus the bicubic support (2 input rows each side of a
    sample's centre, +1 for the centre's half-pixel offset)."""
    return -(-network_halo // scale) + 3


def band_rows(width: int, scale: int, output_pixels: int) -> int:
    """Input rows per band so that a band's output holds about ``output_pixels`` (at least one)."""
    return max(1, output_pixels // max(1, width * scale * scale))


def bands(height: int, rows: int, halo: int) -> list[Band]:
    """Bands keeping ``rows`` rows each (the last what is left) covering ``height``, each reading
    ``halo`` rows more either side as far as the image goes (one band when they all fit; planes
    are never empty, and a height of 0 gives one empty band)."""
    if rows < 1 or halo < 0:
        raise ValueError(f"bands of {rows} rows with a halo of {halo} rows")
    if rows >= height:
        return [Band(0, height, 0, height)]
    return [Band(k0, min(height, k0 + rows), max(0, k0 - halo), min(height, k0 + rows + halo))
            for k0 in range(0, height, rows)]


def bands_within(height: int, rows: int, halo: int) -> list[Band]:
    """Bands covering ``height`` that each read at most ``rows`` rows, halo included: for buffers
    of ``rows`` rows (one band when the whole height fits). ValueError where ``rows`` cannot hold a
    kept row besides the halo either side."""
    if rows >= height:
        return [Band(0, height, 0, height)]
    kept = rows - 2 * halo
    if kept < 1:
        raise ValueError(f"strips of {rows} rows cannot hold a halo of {halo} rows each side")
    return bands(height, kept, halo)
