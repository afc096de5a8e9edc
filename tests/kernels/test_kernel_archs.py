"""The kernels srgpu offers on the GPUs people own compile for each of their architectures: compute
capability 7.5 (RTX 20, T4), 8.0 (A100), 8.6 (RTX 30), 8.9 (RTX 40, L4, L40), 9.0 (H100, H200),
10.0 (B200) and 12.0 (RTX 50), with the NVRTC of the nvidia-cuda-nvrtc-cu12 wheel (no GPU needed:
CI runs this), each skipped, saying why, where that NVRTC does not know the architecture.

What is offered where follows from shared memory (srgpu.kernels.fused.hook.available): every fused
tile needs 138-220 KB per block and an arithmetic is offered only where its default tile fits, so
on 7.5 (64 KB), 8.6/8.9/12.0 (99 KB) and, for the shipped 9-1-5 and 9-5-5, 8.0 (163 KB) srgpu runs
the layer-wise kernels (conv.cu) only; 9.0 and 10.0 (227 KB) get every fused tile, the
warpgroup-MMA ones (sm_90a) on 9.0 only. "Your own GPU" (docs/gpu-and-precision.md) says the
same; test_offered_tiles_per_architecture keeps it true.

Per architecture this compiles every kernel source the engine loads there, with a representative
set of instantiations: the layer-wise variants' first launch shape each, and the default tile of
every arithmetic and f2 offered there (plus the first wgmma tile on 9.0). The sources have no
architecture-specific code besides wgmma, so the other instantiations differ in template
parameters only, which tests/kernels/test_kernel_compile.py compiles in full at one architecture; all of
them for all seven architectures takes minutes (SRGPU_COMPILE_EVERY_TILE=1 does it).
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from srgpu.kernels import bicubic, colour, conv, quantize
from srgpu.kernels.fused.hook import available
from srgpu.kernels.fused.smem import shared_bytes
from srgpu.kernels.fused.tiles import ARITHMETICS, FusedConfig, candidate_configs
from srgpu.kernels.launch import H100_LIMITS
from srgpu.model import random_model

from test_kernel_compile import compile_all

KB = 1024
# compute capability -> the most shared memory one block may opt into (CUDA C++ Programming Guide,
# "Technical Specifications per Compute Capability"), which decides the fused tiles offered
SHARED_OPTIN = {"7.5": 64 * KB, "8.0": 163 * KB, "8.6": 99 * KB, "8.9": 99 * KB, "9.0": 227 * KB,
                "10.0": 227 * KB, "12.0": 99 * KB}
SHIPPED_F2 = (1, 5)  # weights/: 9-1-5 and 9-5-5
EVERY_TILE = os.environ.get("SRGPU_COMPILE_EVERY_TILE") == "1"


def offered(cc: str) -> list[tuple[FusedConfig, int]]:
    """The fused tiles the engine offers on a device of compute capability ``cc`` for the shipped
    models, as srgpu.kernels.fused.hook.fused_candidates picks them (every arithmetic)."""
    limits = dataclasses.replace(H100_LIMITS, name=f"sm_{cc}", compute_capability=cc,
                                 max_shared_per_block_optin=SHARED_OPTIN[cc])
    out = []
    for f2 in SHIPPED_F2:
        model = random_model(f"9-{f2}-5")
        for arithmetic in ARITHMETICS:
            if available(model, arithmetic, limits) is None:
                out += [(cfg, f2) for cfg in candidate_configs(arithmetic, f2)
                        if shared_bytes(cfg, f2) <= limits.max_shared_per_block_optin and cfg.runs_on(cc)]
    return out


def test_offered_tiles_per_architecture() -> None:
    """What "Your own GPU" (docs/gpu-and-precision.md) says: no fused tile where a block gets 99 KB or less."""
    for cc in ("7.5", "8.0", "8.6", "8.9", "12.0"):
        assert offered(cc) == [], cc
    hopper, blackwell = offered("9.0"), offered("10.0")
    assert {cfg.arithmetic for cfg, _ in hopper} == set(ARITHMETICS) and any(cfg.wg for cfg, _ in hopper)
    assert [c for c in hopper if not c[0].wg] == blackwell  # the same, less wgmma (sm_90a code)


def _representative(tiles: list[tuple[FusedConfig, int]]) -> list[tuple[FusedConfig, int]]:
    """The first tile offered per (arithmetic, f2), and the first wgmma one."""
    firsts: dict[tuple[object, ...], tuple[FusedConfig, int]] = {}
    for cfg, f2 in tiles:
        firsts.setdefault((cfg.arithmetic, f2, cfg.wg), (cfg, f2))
    return list(firsts.values())


def _layerwise_names(every: bool) -> list[str]:
    names = set()
    for f2 in SHIPPED_F2:
        for layer in conv.srcnn_layers(random_model(f"9-{f2}-5")):
            seen: set[str] = set()
            for cfg in conv.candidates(layer):
                if every or cfg.variant not in seen:
                    names.add(cfg.kernel_name(layer))
                    seen.add(cfg.variant)
    return sorted(names)


@pytest.mark.slow
@pytest.mark.parametrize("cc", list(SHARED_OPTIN))
def test_offered_kernels_compile_for_each_architecture(nvrtc, cc: str) -> None:
    arch = cc.replace(".", "")
    known = {str(a) for a in nvrtc.getSupportedArchs()}
    if arch not in known:
        pytest.skip(f"this NVRTC ({'.'.join(map(str, nvrtc.getVersion()))}) does not know sm_{arch}")
    compile_all(nvrtc, bicubic.SOURCE, bicubic.all_kernel_names(), arch)
    compile_all(nvrtc, quantize.SOURCE, quantize.all_kernel_names(), arch)
    compile_all(nvrtc, colour.SOURCE, colour.all_kernel_names(), arch)
    compile_all(nvrtc, conv.SOURCE, _layerwise_names(EVERY_TILE), arch)
    tiles = offered(cc) if EVERY_TILE else _representative(offered(cc))
    by_target: dict[tuple[str, str], set[str]] = {}
    for cfg, f2 in tiles:
        target = "90a" if cfg.wg else arch  # wgmma exists on sm_90a only (FusedConfig.arch)
        by_target.setdefault((cfg.source, target), set()).update({cfg.kernel_name(f2), cfg.layout_name(f2)})
    for (source, target), names in sorted(by_target.items()):
        compile_all(nvrtc, source, sorted(names), target)
