"""Fused tiles that are built but not offered by the tuner, because the GPU sweep
(`bench_peers.py --sweep --not-offered`, BENCHMARKS.md) found a faster tile of the same arithmetic:
streamed-conv2 kernels (conv2's weights in shared memory one tap row at a time) where a tile that
keeps all of conv2's weights fits, and issue 17's tiles that lost (the winners moved to
tiles.CANDIDATES). Kept for the studies here and compiled / checked by the tests so the template
branches stay alive."""

from __future__ import annotations

from srgpu.kernels.fused.tiles import Arithmetic, FusedConfig, f2_key, config_for

NOT_OFFERED: dict[tuple[Arithmetic, int], list[dict[str, int]]] = {
    ("fp16", 3): [dict(th=32, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1)],
    # issue 17 (BENCHMARKS.md "Kernels closer to the limit: new tiles, offline"): conv2's streamed
    # weights double-buffered, the next part of a tap row arriving by cp.async under the current
    # part's MMAs (spart = parts per tap row); with 8 warps where the shared memory allows
    ("fp16", 5): [dict(th=64, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1, spart=2),
                  dict(th=64, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1, spart=5)],
    # the first, not pipelined, is the streamed tile timed before; the others (and the offered 16-row
    # tile) free shared memory by streaming (40 or 20 KiB of conv2's weights instead of 100) for
    # 16-row chunks, so that each warp's conv2 job holds 4 blocks (192 shared bytes read per MMA, not 256)
    # (issue 17) the folded conv1 on the wgmma tile (fused_tc.cu tc_conv1_ring_fold; the 16-row one is offered:
    # tiles.CANDIDATES): at 8-row chunks (spart 1 fits there), 3.22-3.27 ms against 2.84 for the offered fold tile
    # (H100, 2026-11-24, BENCHMARKS.md "Issue 17: the folded conv1 on 9-5-5's wgmma tile"); one MMA block per warp
    # job in conv1 (mb1 1)
    ("fp16-fast", 5): [dict(th=60, rw=32, r=8, nt=256, mb1=2, mb2=2, stream=1, spart=1, fold=1, wg=1),
                       dict(th=60, rw=32, r=16, nt=256, mb1=1, mb2=4, stream=1, spart=2, fold=1, wg=1),
                       dict(th=64, rw=32, r=8, nt=256, mb1=2, mb2=2, stream=1),
                       dict(th=64, rw=32, r=16, nt=256, mb1=2, mb2=4, stream=1, spart=2),
                       dict(th=60, rw=32, r=16, nt=256, mb1=2, mb2=4, stream=1, spart=2)],
    # two blocks of 8 warps per SM (96-108 KiB each, registers capped at 128): one block's bicubic,
    # barriers and conv3 sums overlap the other's MMAs, where one block of 16 warps waits at its barriers
    # (issue 17) the fold chain's three GEMMs on the warpgroup MMA, A from registers (fused_tc.cu tc_wg_fold_z;
    # sm_90a, compute capability 9.0 only): mb2 = jobs of 64 positions a warpgroup runs through each GEMM at once;
    # at 16 warps mb1 = 1 (the edge blocks' mma.sync chain) keeps the 128-register cap without spills (NVRTC 12.9
    # spills 16 bytes at mb1 = 2), and two jobs at once need more than 128 registers
    # (the first of them, th=66 r24 nt512 mb1/1, is offered: tiles.CANDIDATES).
    # H100 sweeps (BENCHMARKS.md "9-1-5's fold chain on wgmma"), against 0.545-0.552 ms for the offered wg tile:
    # 8 or 12 warps with two jobs per warpgroup 0.56-0.65, two blocks per SM 0.558-0.570. (Two switches timed
    # there, a pipelined chunk walk and Z rows split by column phase, gained nothing measurable and were taken
    # out again: BENCHMARKS.md.)
    # (the mma.sync tiles of two blocks per SM at the end: their 64-row twin of the first, 0.598 ms, left with
    # 872b253; under NVRTC 12.9 it spills 24 bytes at the 128-register cap since the ReLU moved into the conversion)
    # (issue 17, BENCHMARKS.md "9-1-5's fold blocks with warps specialised") the offered wg tile with its fold blocks'
    # warps specialised (fused_tc.cu tc_ws_block): (nt - 32) // 128 warpgroups run the chain, the warps after them sum
    # conv3, mbarriers per 4-row group of the Z ring instead of chunk barriers (nt 640 with r 12 is offered:
    # tiles.CANDIDATES; r 24, the Z ring of 28 rows offered before, is 1-2 % slower); one or two summing warps (544,
    # 576) are too few: 0.77 and 0.61 ms
    ("fp16-fast", 1): [dict(th=66, rw=64, r=24, nt=640, mb1=1, mb2=1, fold=1, wg=1, ws=1),
                       dict(th=66, rw=64, r=24, nt=512, mb1=1, mb2=1, fold=1, wg=1, ws=1),
                       dict(th=66, rw=64, r=24, nt=544, mb1=1, mb2=1, fold=1, wg=1, ws=1),
                       dict(th=66, rw=64, r=24, nt=576, mb1=1, mb2=1, fold=1, wg=1, ws=1),
                       dict(th=66, rw=64, r=24, nt=384, mb1=2, mb2=2, fold=1, wg=1),
                       dict(th=66, rw=64, r=24, nt=256, mb1=2, mb2=2, fold=1, wg=1),
                       dict(th=66, rw=64, r=4, nt=256, mb1=1, mb2=1, fold=1, minb=2, wg=1),
                       dict(th=66, rw=64, r=4, nt=256, mb1=2, mb2=2, fold=1, minb=2),
                       dict(th=66, rw=64, r=6, nt=256, mb1=1, mb2=1, fold=1, minb=2)],
}


def not_offered_configs(arithmetic: Arithmetic, f2: int) -> list[FusedConfig]:
    """The NOT_OFFERED tiles of ``arithmetic`` and f2 (none for most)."""
    return [config_for(arithmetic, f2, **c) for c in NOT_OFFERED.get((arithmetic, f2_key(f2)), [])]
