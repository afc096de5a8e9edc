"""The row-streamed 9-5-5 tile (fused_rows.cu, FusedConfig.rows), offline: which tiles the parameters allow, its
names and target, the host's mirror of its shared memory and weights against RowsCfg (NVRTC static_asserts). The
sm_90a build (no spills, warpgroup MMAs not serialised) is dev/tests/test_fused_variants.py's for every new tile; the
GPU test is tests/kernels/test_gpu_fused.py::test_row_streamed_tiles."""

from __future__ import annotations

import numpy as np
import pytest

from srgpu.kernels import fused
from srgpu.kernels.build import COMPILE_OPTIONS, load_source
from srgpu.kernels.fused.pack import wg_b_words
from srgpu.model import random_model

OK = dict(th=110, rw=64, r=3, nt=384, mb1=1, mb2=1, fold=1, wg=1, rows=1)


def rows_configs() -> list[fused.FusedConfig]:
    return [c for c in fused.candidate_configs("fp16-fast", 5) if c.rows]


def test_rows_parameters_are_checked() -> None:
    cfg = fused.config_for("fp16-fast", 5, **OK)
    assert cfg.rows and cfg.source == "fused_rows.cu" and cfg.arch == "sm_90a" and not cfg.runs_on("8.9")
    assert cfg.kernel_name(5) == "fused_tc_rows<110, 3>" and cfg.layout_name(5) == "fused_tc_rows_layout<110, 3>"
    assert cfg.label.endswith(" wgmma rows") and dict(cfg.params)["rows"] == 1
    assert fused.config_for("fp16-fast", 5, **dict(cfg.params)) == cfg  # a cached plan's params
    for bad in (dict(OK, th=108), dict(OK, th=111), dict(OK, r=4), dict(OK, nt=256), dict(OK, rw=32), dict(OK, fold=0),
                dict(OK, wg=0), dict(OK, stream=1, spart=1), dict(OK, mb1=2)):
        with pytest.raises(ValueError):
            fused.config_for("fp16-fast", 5, **bad)
    for arithmetic, f2 in (("fp16", 5), ("fp16-fast", 1)):
        with pytest.raises(ValueError):
            fused.config_for(arithmetic, f2, **OK)
    assert rows_configs()


def test_rows_weights_end_with_w3_in_wgmmas_layout() -> None:
    model = random_model("9-5-5", seed=8)
    rows, e = fused.pack_tc(model, False, True, wg=True, rows=True)
    plain, e0 = fused.pack_tc(model, False, True, wg=True)
    assert e == e0 and rows.size == plain.size + 512
    np.testing.assert_array_equal(rows[:plain.size], plain)
    w3 = np.pad(model.arrays(np.float32)["conv3_weight"][0].reshape(32, 25), ((0, 0), (0, 7)))
    np.testing.assert_array_equal(rows[plain.size:], wg_b_words(w3))
    with pytest.raises(AssertionError):
        fused.pack_tc(model, False, False, wg=True, rows=True)


def test_host_layout_agrees_with_rowscfg(nvrtc) -> None:
    """smem.shared_bytes and pack_tc's size equal RowsCfg's TOTAL and PACKED for every rows tile and ring size."""
    model = random_model("9-5-5", seed=1)
    words = fused.pack_tc(model, False, True, wg=True, rows=True)[0].size
    checks = []
    for th in (8, 62, 110, 122):
        for r in (2, 3):
            cfg = fused.config_for("fp16-fast", 5, **dict(OK, th=th, r=r))
            checks.append(f'static_assert(RowsCfg<{th}, {r}>::TOTAL * 4 == {fused.shared_bytes(cfg, 5)}, "{cfg.label}");')
            checks.append(f'static_assert(RowsCfg<{th}, {r}>::PACKED == {words}, "{cfg.label}");')
    prog = nvrtc.createProgram(load_source("fused_rows.cu") + "\n" + "\n".join(checks) + "\n", "fused_rows.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, [*COMPILE_OPTIONS, "-arch=compute_90a"])
        except nvrtc.NVRTCError:
            pytest.fail(nvrtc.getProgramLog(prog)[:3000])
    finally:
        nvrtc.destroyProgram(prog)
    too_tall = fused.config_for("fp16-fast", 5, **dict(OK, th=128))
    assert fused.shared_bytes(too_tall, 5) > 227 * 1024  # RowsCfg's static_assert refuses it


def test_the_rows_tile_is_offered_first_on_hopper_and_built_in_the_background(nvrtc, monkeypatch, tmp_path) -> None:
    """The rows tile leads the fp16-fast 9-5-5 tiles on compute capability 9.0 (only there), and is slow to build:
    fused_build_pending starts its build in the background while its cubin is not on disk (once), and says the tile
    is ready once the cubin and its name index are there. Tiles quick to build are never pending."""
    import dataclasses

    from srgpu.kernels import build
    from srgpu.kernels.fused import hook
    from srgpu.kernels.launch import H100_LIMITS

    model = random_model("9-5-5", seed=2)
    first = hook.fused_candidates(model, H100_LIMITS, ["fp16-fast"])[0]
    assert first.rows and first.slow_build
    ada = dataclasses.replace(H100_LIMITS, name="a GPU of compute capability 8.9", compute_capability="8.9")
    assert not any(c.rows for c in hook.fused_candidates(model, ada, ["fp16-fast"]))
    assert not fused.config_for("fp16-fast", 5).rows  # the portable default
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    started: list[tuple] = []
    monkeypatch.setattr(hook, "build_in_background", lambda *a: started.append(a))
    params = dict(first.params)
    assert hook.fused_build_pending("fp16-fast", params, model)
    assert started == [(first.source, [first.kernel_name(5), first.layout_name(5)], "sm_90a")]
    other = hook.fused_candidates(model, H100_LIMITS, ["fp16-fast"])[1]
    assert not other.slow_build and not hook.fused_build_pending("fp16-fast", dict(other.params), model)
    names = tuple(sorted({first.kernel_name(5), first.layout_name(5)}))
    cubin, index, _ = build._arch_cache_paths(load_source(first.source), names, "sm_90a")
    cubin.write_bytes(b"built")
    assert hook.fused_build_pending("fp16-fast", params, model)  # no name index yet: not a finished build
    index.write_text("{}")
    assert not hook.fused_build_pending("fp16-fast", params, model)
    assert len(started) == 2


def test_a_build_under_way_elsewhere_is_not_started_again(nvrtc, monkeypatch, tmp_path) -> None:
    """build_in_background starts nothing while another process's marker beside the cubin is fresh (it builds
    that cubin already), and asks once per process."""
    import os
    import time

    from srgpu.kernels import build

    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "_background", {})
    cfg = fused.config_for("fp16-fast", 5, **OK)
    names = tuple(sorted({cfg.kernel_name(5), cfg.layout_name(5)}))
    cubin, _, _ = build._arch_cache_paths(load_source(cfg.source), names, "sm_90a")
    marker = cubin.with_suffix(".building")
    marker.write_text("another process")
    build.build_in_background(cfg.source, list(names), "sm_90a")
    assert build._background == {str(cubin): None} and marker.read_text() == "another process"
    build.build_in_background(cfg.source, list(names), "sm_90a")  # asked again: still nothing started
    assert build._background == {str(cubin): None}
    old = time.time() - build.BUILD_MARKER_S - 60
    os.utime(marker, (old, old))  # a stale marker (its process died) does not hold a build back
    monkeypatch.setattr(build, "_background", {})
    started = []
    monkeypatch.setattr("subprocess.Popen", lambda *a, **k: started.append(a[0]) or "process")
    build.build_in_background(cfg.source, list(names), "sm_90a")
    assert build._background == {str(cubin): "process"} and len(started) == 1
    assert started[0][-len(names):] == list(names) and marker.read_text() == str(os.getpid())
