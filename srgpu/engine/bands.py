"""Large images in bands of rows: which input rows each band reads and which output rows it keeps.

A band keeps output rows ``[k0 * scale, k1 * scale)`` and reads input rows ``[b0, b1)``, that is
its own rows plus :func:`halo_rows` of context either side as far as the image goes. With an
integer scale a band that starts at an input row sees the same bicubic phases as the whole image,
and its cut edges' false borders reach only the context rows, which are dropped: on the CPU engine
the bands are bit-identical to the whole image. Shared by srgpu.batch.local (the CPU path) and
srgpu.engine.imageproc (the GPU's image path), which choose their own band sizes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    """Input rows [k0, k1) kept, computed from input rows [b0, b1) (k0..k1 plus the context)."""

    k0: int
    k1: int
    b0: int
    b1: int

    def kept(self, scale: int) -> slice:
        """The output rows the band keeps, in the band's own output."""
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
    """Bands of ``rows`` input rows covering ``height`` (one band when they all fit)."""
    if rows >= height:
        return [Band(0, height, 0, height)]
    return [Band(k0, min(height, k0 + rows), max(0, k0 - halo), min(height, k0 + rows + halo))
            for k0 in range(0, height, rows)]
