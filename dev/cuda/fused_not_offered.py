"""Fused tiles that are built but not offered by the tuner: streamed-conv2 kernels (conv2's
weights in shared memory one tap row at a time) where a tile that keeps all of conv2's weights
fits and is faster (BENCHMARKS.md, "Streamed conv2"). The streamed split fp16 9-5-5, the only
split 9-5-5 that fits, is offered since the accuracy bar became per bit depth (tiles.CANDIDATES).
Kept for the studies here and compiled / checked by the tests so the template branch stays alive."""

from __future__ import annotations

from srgpu.kernels.fused.tiles import Arithmetic, FusedConfig, f2_key, config_for

NOT_OFFERED: dict[tuple[Arithmetic, int], list[dict[str, int]]] = {
    ("fp16", 3): [dict(th=32, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1)],
    ("fp16-fast", 5): [dict(th=64, rw=32, r=8, nt=256, mb1=2, mb2=2, stream=1)],
}


def not_offered_configs(arithmetic: Arithmetic, f2: int) -> list[FusedConfig]:
    """The NOT_OFFERED tiles of ``arithmetic`` and f2 (none for most)."""
    return [config_for(arithmetic, f2, **c) for c in NOT_OFFERED.get((arithmetic, f2_key(f2)), [])]
