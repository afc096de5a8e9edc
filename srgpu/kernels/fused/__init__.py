"""Fused SRCNN kernels (fused_fp32.cu, fused_tc.cu): bicubic + conv1 + conv2 + conv3 in one launch.

One block per output tile reads the low-resolution luma footprint of its tile, upscales it with
the canonical GPU bicubic (bit for bit the one of bicubic.cu) into shared memory, runs the three
layers there and writes the final 8/16-bit (or float) plane; nothing intermediate touches global
memory (fused_common.cu describes the tile walk and the replicate borders).

Arithmetics (tiles.Arithmetic; which of them a user's --precision may use is srgpu.engine.plans' call):

- ``fp32``: float32 on the FMA units; equals the CPU reference within ~1e-6.
- ``fp16``: tensor cores (mma.sync m16n8k16, fp32 accumulation) with every fp16 operand split
  into hi + lo halves and three MMAs per product, so it keeps ~22 bits: within one level of fp32
  at every output depth up to 16 bits. 9-5-5's split conv2 weights fit only streamed one tap row
  at a time (``FusedConfig.stream``).
- ``fp16-fast``: plain fp16 operands, one MMA per product: the fastest; within one level of fp32
  at 8 bits (a few % of samples one level off), not at 10 or more (fp16 keeps 11 bits).

Fold (``FusedConfig.fold``, 9-1-5, the default tiles): on an exact x2 upscale of integer samples,
tiles away from the frame's edge skip the bicubic and run conv1 folded with it on the LR samples
(srgpu/kernels/fold.py: 8 x 8 LR taps per phase instead of 9 x 9 upscaled ones; on the tensor
cores the samples are exact in fp16, so conv1 needs two MMAs per product instead of three). Edge
tiles, float input and other ratios take the bicubic path of the same kernel.

One job per module: ``tiles`` (instantiations and the tiles worth timing), ``smem`` (shared memory
per block, offline), ``pack`` (weights as the kernels read them), ``numpy_reference`` (what the
kernels compute, on the CPU), ``runner`` (FusedSRCNN on a device) and ``hook`` (the backend that
plans name: ``fused_candidates`` / ``fused_runner``). This package re-exports them: its name is
the backend recorded in cached plans.
"""

from .hook import available, fused_build_pending, fused_candidates, fused_runner
from .numpy_reference import agreement, reference
from .pack import (FOLD_MAX_SAMPLE, FOLD_SCALE, b_fragments, conv1_matrix, fold_matrices, pack_fp32, pack_tc,
                   split_fp16)
from .runner import IN_CODES, FusedSRCNN, Layout, fold_args, self_check
from .smem import shared_bytes
from .tiles import ARITHMETICS, CANDIDATES, Arithmetic, FusedConfig, candidate_configs, config_for

__all__ = ["ARITHMETICS", "CANDIDATES", "FOLD_MAX_SAMPLE", "FOLD_SCALE", "IN_CODES", "Arithmetic", "FusedConfig",
           "FusedSRCNN", "Layout", "agreement", "available", "b_fragments", "candidate_configs", "config_for",
           "conv1_matrix", "fold_args", "fold_matrices", "fused_build_pending", "fused_candidates", "fused_runner",
           "pack_fp32", "pack_tc", "reference", "self_check", "shared_bytes", "split_fp16"]
