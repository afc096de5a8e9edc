"""Fused tiles that are built but not offered by the tuner: the streamed-conv2 kernels (conv2's
weights in shared memory one tap row at a time). They make the split fp16 9-5-5 fit, but it is
slower than the alternatives and under the accuracy bar on real images (BENCHMARKS.md, "Streamed
conv2 checked"). Kept for the studies here and compiled / checked by the tests so the template
branch stays alive; the tuner's tiles are srgpu.kernels.fused.tiles.CANDIDATES."""

from __future__ import annotations

from srgpu.kernels.fused.tiles import Arithmetic, FusedConfig, f2_key, config_for

NOT_OFFERED: dict[tuple[Arithmetic, int], list[dict[str, int]]] = {
    ("fp16", 5): [dict(th=32, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1),
                  dict(th=32, rw=32, r=4, nt=128, mb1=1, mb2=1, stream=1),
                  dict(th=64, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1)],
    ("fp16", 3): [dict(th=32, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1)],
    ("fp16-fast", 5): [dict(th=64, rw=32, r=8, nt=256, mb1=2, mb2=2, stream=1)],
}


def not_offered_configs(arithmetic: Arithmetic, f2: int) -> list[FusedConfig]:
    """The NOT_OFFERED tiles of ``arithmetic`` and f2 (none for most)."""
    return [config_for(arithmetic, f2, **c) for c in NOT_OFFERED.get((arithmetic, f2_key(f2)), [])]
