"""Issue 17's fused tile variants, offline (no GPU): the template parameters MINB (blocks per SM in
__launch_bounds__) and SPART (a streamed conv2's tap rows in parts through two cp.async buffers)
default to the kernels as they were; every NOT_OFFERED tile fits the shared memory of the blocks per
SM it is built for; smem.py and pack.py agree with the kernel's own TcCfg (NVRTC evaluates
static_asserts against it: a disagreement fails to compile); and ptxas (sm_90) reports no spills and
registers that leave room for MINB blocks. The GPU tests (tests/kernels/test_gpu_fused.py) run the same tiles
against the NumPy reference."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from srgpu.kernels import fused
from srgpu.kernels.build import COMPILE_OPTIONS, load_source
from srgpu.model import random_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # dev/ lies beside the package, not in it
from dev.cuda.fused_not_offered import NOT_OFFERED, not_offered_configs  # noqa: E402

from conftest import compile_all  # noqa: E402  (shared with tests/kernels/test_kernel_compile.py)

OPTIN = 227 * 1024  # shared memory a block may opt into (H100 / H200)
PER_SM = 228 * 1024  # shared memory per SM; each resident block also reserves 1 KiB
REGISTERS_PER_SM = 65536


def all_configs() -> list[tuple[fused.FusedConfig, int]]:
    out = []
    for (arithmetic, f2) in sorted(set(fused.CANDIDATES) | set(NOT_OFFERED)):
        cfgs = (fused.candidate_configs(arithmetic, f2) if (arithmetic, f2) in fused.CANDIDATES else [])
        out += [(c, f2) for c in cfgs + not_offered_configs(arithmetic, f2)]
    return out


def new_configs() -> list[tuple[fused.FusedConfig, int]]:
    return [(c, f2) for c, f2 in all_configs() if c.minb != 1 or c.spart or c.wg]


def test_defaults_keep_the_earlier_kernels() -> None:
    """Every offered tile without the new settings is built as before (ten template arguments,
    params without minb / spart, so plans cached before keep their params); every offered tile's
    params give it back."""
    for (arithmetic, f2), tiles in fused.CANDIDATES.items():
        for cfg in fused.candidate_configs(arithmetic, f2):
            if cfg.minb == 1 and cfg.spart == 0:
                assert "minb" not in dict(cfg.params) and "spart" not in dict(cfg.params)
                if cfg.kernel == "tc" and not cfg.wg:  # wg tiles name MINB, SPART and WG (sm_90a only)
                    assert cfg.kernel_name(f2).count(",") == 9, cfg.kernel_name(f2)
            assert fused.config_for(arithmetic, f2, **dict(cfg.params)) == cfg  # a cached plan's params
    cfg = fused.config_for("fp16", 5, stream=1, spart=5)
    assert cfg.kernel_name(5).endswith(", false, true, 1, 5>") and dict(cfg.params)["spart"] == 5
    assert fused.config_for("fp16", 5, **dict(cfg.params)) == cfg
    assert fused.config_for("fp16-fast", 1, minb=2).kernel_name(1).endswith(", 2, 0>")


def test_variant_parameters_are_checked() -> None:
    with pytest.raises(ValueError):
        fused.config_for("fp16-fast", 5, stream=0, spart=2)  # spart needs a streamed conv2
    with pytest.raises(ValueError):
        fused.config_for("fp16", 5, stream=1, spart=3)  # 20 K-steps per tap row: not in 3 parts
    with pytest.raises(ValueError):
        fused.config_for("fp32", 1, minb=2)  # the FFMA kernel has no MINB
    with pytest.raises(ValueError):
        fused.config_for("fp16-fast", 1, nt=512, minb=5)  # 2560 threads per SM


def test_every_not_offered_tile_compiles(nvrtc) -> None:
    """tests/kernels/test_kernel_compile.py's check for the tiles built but not offered: with the NVRTC a pip install brings,
    for the oldest architecture each kernel runs on (FFMA 7.5, mma.sync 8.0; warpgroup MMA: sm_90a)."""
    cfgs = [(cfg, f2) for p in fused.ARITHMETICS for f2 in (1, 3, 5) for cfg in not_offered_configs(p, f2)]
    assert cfgs
    groups: dict[tuple[str, int | str], set[str]] = {}
    for cfg, f2 in cfgs:
        arch = "90a" if cfg.wg else 75 if cfg.kernel == "fp32" else 80
        groups.setdefault((cfg.source, arch), set()).update({cfg.kernel_name(f2), cfg.layout_name(f2)})
    for (source, arch), names in sorted(groups.items(), key=str):
        compile_all(nvrtc, source, sorted(names), arch)


def test_not_offered_streamed_tiles_fit_and_stay_out_of_the_offer() -> None:
    """The streamed-conv2 tiles built but not offered (slower than the alternatives) fit a 227 KiB block, are named as
    the offered streamed tiles are (tests/kernels/test_fused_fold_tables.py), and the tuner does not offer them."""
    for (precision, f2), tiles in NOT_OFFERED.items():
        for cfg in not_offered_configs(precision, f2):
            if cfg.stream:  # STREAM, then MINB and SPART where they differ from the defaults
                tail = f", {cfg.minb}, {cfg.spart}>" if (cfg.minb, cfg.spart) != (1, 0) else ">"
                if cfg.wg:  # then WG
                    tail = f", {cfg.minb}, {cfg.spart}, true>"
                assert cfg.kernel_name(f2).endswith(", true" + tail)
            assert fused.shared_bytes(cfg, f2) <= 227 * 1024, cfg.label
            assert cfg not in fused.candidate_configs(precision, f2)


def test_streamed_parts_change_only_conv2s_buffers() -> None:
    """spart p holds two parts of a tap row (2 / p rows) where spart 0 holds one row."""
    base = fused.config_for("fp16", 5, spart=0)
    row = 2 * 5 * 4 * 2 * 32 * 4 * 4  # split: hi and lo, bytes
    for p in (1, 2, 4, 5, 10, 20):
        cfg = fused.config_for("fp16", 5, spart=p)
        assert fused.shared_bytes(cfg, 5) == fused.shared_bytes(base, 5) - row + 2 * row // p


@pytest.mark.parametrize("cfg,f2", new_configs(), ids=lambda v: v.label if isinstance(v, fused.FusedConfig) else str(v))
def test_new_tiles_fit_their_blocks_per_sm(cfg: fused.FusedConfig, f2: int) -> None:
    shared = fused.shared_bytes(cfg, f2)
    assert shared <= OPTIN, (cfg.label, shared)
    assert cfg.minb * (shared + 1024) <= PER_SM, (cfg.label, shared)


def _compile(nvrtc, code: str, names: list[str], options: list[str]) -> str:
    prog = nvrtc.createProgram(code, "fused_tc.cu", [], [])
    try:
        for name in names:
            nvrtc.addNameExpression(prog, name)
        try:
            nvrtc.compileProgram(prog, [*COMPILE_OPTIONS, *options])
        except nvrtc.NVRTCError:
            pytest.fail(f"does not compile:\n{nvrtc.getProgramLog(prog)[:3000]}")
        return nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)


def _tc_cfg(cfg: fused.FusedConfig, f2: int) -> str:
    b = lambda v: "true" if v else "false"  # noqa: E731
    return (f"TcCfg<{f2}, {b(cfg.split)}, {cfg.th}, {cfg.rw}, {cfg.r}, {cfg.nt}, {cfg.mb1}, {cfg.mb2}, "
            f"{b(cfg.fold)}, {b(cfg.stream)}, {cfg.spart}{', true' if cfg.wg else ''}>")


def test_host_layout_agrees_with_the_kernels_tccfg(nvrtc) -> None:
    """For every tensor-core tile (offered and not): TcCfg's shared bytes and packed weight words
    equal smem.shared_bytes and pack_tc's size, checked by static_asserts that NVRTC evaluates (the
    runner checks the same against the device's layout kernel at construction)."""
    checks = []
    for cfg, f2 in all_configs():
        if cfg.kernel != "tc" or cfg.rows:  # the row-streamed tile's RowsCfg: tests/kernels/test_fused_rows.py
            continue
        words = fused.pack_tc(random_model({1: "9-1-5", 3: "9-3-5", 5: "9-5-5"}[f2], seed=1), cfg.split, cfg.fold,
                              cfg.wg)[0]
        c = _tc_cfg(cfg, f2)
        checks.append(f'static_assert({c}::TOTAL * 4 == {fused.shared_bytes(cfg, f2)}, "shared: {cfg.label}");')
        checks.append(f'static_assert({c}::PACKED == {words.size}, "packed: {cfg.label}");')
    _compile(nvrtc, load_source("fused_tc.cu") + "\n" + "\n".join(checks) + "\n", [], ["-arch=compute_80"])


_USED = re.compile(r"Used (\d+) registers")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


@pytest.mark.slow
@pytest.mark.parametrize("cfg,f2", new_configs(), ids=lambda v: v.label if isinstance(v, fused.FusedConfig) else str(v))
def test_new_tiles_compile_for_sm90_without_spills(nvrtc, cfg: fused.FusedConfig, f2: int) -> None:
    name = cfg.kernel_name(f2)
    prog = nvrtc.createProgram(load_source(cfg.source), cfg.source, [], [])
    try:
        nvrtc.addNameExpression(prog, name)
        nvrtc.addNameExpression(prog, cfg.layout_name(f2))
        try:
            nvrtc.compileProgram(prog, [*COMPILE_OPTIONS, f"-arch={cfg.arch or 'sm_90'}", "-Xptxas=-v"])
        except nvrtc.NVRTCError:
            pytest.fail(f"{name} does not compile:\n{nvrtc.getProgramLog(prog)[:3000]}")
        lowered = nvrtc.getLoweredName(prog, name)
        log = nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)
    block = log[log.index(f"Function properties for {lowered}"):]
    used, frame = _USED.search(block), _FRAME.search(block)
    assert used and frame, log[:2000]
    regs, stack, spill_st, spill_ld = int(used.group(1)), *(int(g) for g in frame.groups())
    print(f"{name}: {regs} registers, stack {stack}, spills {spill_st}/{spill_ld}")
    assert stack == 0 and spill_st == 0 and spill_ld == 0, (name, stack, spill_st, spill_ld)
    assert regs * cfg.nt * cfg.minb <= REGISTERS_PER_SM, (name, regs)
    # wgmma tiles: ptxas neither serialises the warpgroup MMAs (C7510, C7520, ...) nor waits between them (C7517)
    bad = [ln for ln in log.splitlines() if lowered in ln and ("serialized" in ln or "warpgroup.wait" in ln)]
    assert not bad, bad
