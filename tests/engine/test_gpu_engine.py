"""The GPU engine end to end against the CPU engine (pytest -m gpu; skipped where no GPU is usable):
real images with the authors' weights, float outputs against the reference, tiling, plan
tuning and its cache, buffer reuse, and failures that name the kernel."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from srgpu.engine import EngineError, GPUOptions, PlaneSpec, create_engine
from srgpu.engine.cpu import CPUEngine
from srgpu.kernels.conv import ConvConfig, default_config, srcnn_layers
from srgpu.model import load_mat, random_model
from srgpu.reference import srcnn_forward
from srgpu.resize import imresize
from srgpu.engine.plans import layerwise_plan
from srgpu.engine.tune import Tuner

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _free_gpu_memory():
    yield
    import cupy as cp

    cp.get_default_memory_pool().free_all_blocks()


def gpu_engine(model, scale, tmp_path: Path, autotune: bool = False, **options):
    """A GPU engine with its plan cache under ``tmp_path``; ``autotune``: handed the tuner."""
    from srgpu.engine.gpu import GPUEngine

    return GPUEngine(model, scale, 0, GPUOptions(cache_dir=tmp_path / "plans", **options),
                     Tuner() if autotune else None)


def _compare_8bit(got: np.ndarray, expect: np.ndarray) -> tuple[float, int]:
    diff = np.abs(got.astype(np.int64) - expect.astype(np.int64))
    return float(np.mean(diff == 0)), int(diff.max())


# ---------------------------------------------------------------- accuracy


@pytest.mark.parametrize("arch, lr_shape, out_shape", [
    ("9-1-5", (541, 961), (1081, 1921)),
    ("9-5-5", (541, 961), (1081, 1921)),
    ("9-1-5", (1080, 1920), (2160, 3840)),
    ("9-1-5", (4, 7), (8, 14)),
    ("9-5-5", (1, 1), (2, 2)),
])
def test_network_float_output_matches_reference(arch, lr_shape, out_shape, tmp_path: Path) -> None:
    model = random_model(arch, seed=4, scale=2)
    lr = np.random.default_rng(8).random(lr_shape, dtype=np.float32)
    with gpu_engine(model, 2, tmp_path) as engine:
        got = engine.srcnn_plane(lr, out_shape, 1.0)
    expect = np.clip(srcnn_forward(imresize(lr, output_shape=out_shape), model), 0, 1)
    err = float(np.max(np.abs(got - expect)))
    print(f"network {arch} {lr_shape}->{out_shape}: max abs err {err:.3g}")
    assert got.dtype == np.float32 and got.shape == out_shape
    assert err <= 1e-4


@pytest.mark.parametrize("arch, scale", [("9-1-5", 2), ("9-1-5", 3), ("9-1-5", 4), ("9-5-5", 2), ("9-5-5", 3)])
def test_set5_8bit_equals_cpu_engine(arch: str, scale: int, shared_data: Path, reference_mat, tmp_path: Path) -> None:
    from srgpu.tools.evaluate import luma_uint8, modcrop
    from srgpu.color import quantize as to_uint8
    from srgpu.images.files import read_image

    model = load_mat(reference_mat(arch, scale), scale)
    cpu = CPUEngine(model, scale)
    equal_total, worst, count = 0.0, 0, 0
    with gpu_engine(model, scale, tmp_path) as gpu:
        for path in sorted((shared_data / "eval" / "Set5").glob("*.bmp")):
            hr = modcrop(luma_uint8(read_image(path)), scale)
            lr = to_uint8(imresize(hr / 255.0, 1.0 / scale), np.uint8)
            got = gpu.srcnn_plane(lr, hr.shape, 255)
            expect = cpu.srcnn_plane(lr, hr.shape, 255)
            equal, diff = _compare_8bit(got, expect)
            print(f"Set5 {path.name} {arch} x{scale}: {equal:.6f} of pixels equal, max diff {diff}")
            assert got.dtype == np.uint8 and got.shape == hr.shape
            assert equal >= 0.999 and diff <= 1
            equal_total += equal * got.size
            count += got.size
            worst = max(worst, diff)
    print(f"Set5 {arch} x{scale}: {equal_total / count:.6f} equal overall, max diff {worst}")


def test_yuv420_frame_and_16bit_planes(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    model = random_model("9-1-5", seed=5, scale=2)
    cpu = CPUEngine(model, 2)
    with gpu_engine(model, 2, tmp_path) as gpu:
        for dtype, max_value in ((np.uint8, 255), (np.uint16, 1023), (np.uint16, 65535)):
            y = rng.integers(0, max_value + 1, (45, 81)).astype(dtype)
            u = rng.integers(0, max_value + 1, (23, 41)).astype(dtype)
            v = rng.integers(0, max_value + 1, (23, 41)).astype(dtype)
            specs = [PlaneSpec((90, 162), True), PlaneSpec((45, 81), False), PlaneSpec((45, 81), False)]
            got = gpu.upscale_frame([y, u, v], specs, max_value)
            expect = cpu.upscale_frame([y, u, v], specs, max_value)
            for name, g, e in zip("yuv", got, expect):
                equal, diff = _compare_8bit(g, e)
                print(f"{np.dtype(dtype).name} max {max_value} plane {name}: {equal:.6f} equal, max diff {diff}")
                assert g.dtype == dtype and g.shape == e.shape
                # float32 differences of ~1e-6 flip a rounding tie ~1e-6 * max_value of the time
                assert diff <= 1 and equal >= {255: 0.999, 1023: 0.99, 65535: 0.8}[max_value]


# ---------------------------------------------------------------- tiling and memory


@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
def test_tiled_equals_untiled(arch: str, tmp_path: Path) -> None:
    model = random_model(arch, seed=6, scale=2)
    lr = np.random.default_rng(2).integers(0, 256, (97, 61)).astype(np.uint8)
    out_shape = (194, 122)
    row_bytes = 4 * out_shape[1] * (model.n1 + model.n2 + 1)
    with gpu_engine(model, 2, tmp_path) as whole, \
            gpu_engine(model, 2, tmp_path, tile_budget_bytes=row_bytes * (2 * model.halo + 21)) as tiled:
        assert whole.strip_rows(*out_shape) == out_shape[0]
        assert tiled.strip_rows(*out_shape) == 2 * model.halo + 21  # several strips
        a, b = whole.srcnn_plane(lr, out_shape, 255), tiled.srcnn_plane(lr, out_shape, 255)
        assert np.array_equal(a, b)
        f = lr.astype(np.float32) / 255
        assert np.array_equal(whole.srcnn_plane(f, out_shape, 1.0), tiled.srcnn_plane(f, out_shape, 1.0))


def test_frame_too_large_for_the_budget_is_refused(tmp_path: Path) -> None:
    model = random_model("9-1-5", scale=2)
    with gpu_engine(model, 2, tmp_path, tile_budget_bytes=1 << 20) as engine:
        with pytest.raises(EngineError, match="needs at least .* MiB of GPU memory"):
            engine.srcnn_plane(np.full((1080, 1920), 7, np.uint8), (2160, 3840), 255)


def test_frames_of_one_size_allocate_nothing(tmp_path: Path) -> None:
    import cupy as cp

    model = random_model("9-1-5", scale=2)
    pool = cp.get_default_memory_pool()
    rng = np.random.default_rng(0)
    with gpu_engine(model, 2, tmp_path) as engine:
        frame = [rng.integers(0, 256, (60, 80)).astype(np.uint8), rng.integers(0, 256, (30, 40)).astype(np.uint8)]
        specs = [PlaneSpec((120, 160), True), PlaneSpec((60, 80), False)]
        first = engine.upscale_frame(frame, specs, 255)
        used, total = pool.used_bytes(), pool.total_bytes()
        for _ in range(3):
            again = engine.upscale_frame(frame, specs, 255)
        assert pool.used_bytes() == used and pool.total_bytes() == total
        assert all(np.array_equal(a, b) for a, b in zip(first, again))


# ---------------------------------------------------------------- plans: tuning and cache


def test_autotune_chooses_quickly_caches_and_rebuilds_a_corrupt_cache(tmp_path: Path) -> None:
    """The first frame size of a run: the quick choice (one fused tile of the fastest arithmetic
    that meets the bar at 8 bits), said in two lines, cached; a corrupt cache is rebuilt."""
    from srgpu.engine.plans import arithmetics_for

    model = random_model("9-1-5", seed=1, scale=2)
    lr = np.random.default_rng(4).integers(0, 256, (30, 26)).astype(np.uint8)
    expect = CPUEngine(model, 2).srcnn_plane(lr, (60, 52), 255)
    plans = tmp_path / "plans"
    notices: list[str] = []
    with gpu_engine(model, 2, tmp_path, autotune=True, notify=notices.append) as engine:
        got = engine.srcnn_plane(lr, (60, 52), 255)
        plan = engine.plan_for((30, 26), (60, 52), 8)
    assert plan.source == "quick" and plan.ms is not None and plan.kind == "fused"
    assert plan.fused.arithmetic in arithmetics_for("auto", 8)
    # a user is told why the first frame waits, once: when the choice starts and what it chose
    assert len(notices) == 2 and "26x30 -> 52x60 8-bit" in notices[0] and plan.describe() in notices[1]
    files = list(plans.glob("*.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["key"]["arch"] == "9-1-5" and data["key"]["hr_shape"] == [60, 52] and data["key"]["bits"] == 8
    assert 1 <= len(data["timings"]) <= 3  # a few candidates, not the whole search
    assert _compare_8bit(got, expect)[1] <= 1
    with gpu_engine(model, 2, tmp_path, autotune=True, notify=notices.append) as engine:
        assert engine.plan_for((30, 26), (60, 52), 8).source == "cache"
    assert len(notices) == 2  # nothing measured, nothing said
    files[0].write_text(files[0].read_text()[:100])
    with gpu_engine(model, 2, tmp_path, autotune=True) as engine:
        assert engine.plan_for((30, 26), (60, 52), 8).source == "quick"
    assert json.loads(files[0].read_text())["plan"]["kind"] == "fused"


def test_a_tile_slow_to_build_is_built_in_the_background_for_the_next_run(tmp_path: Path, monkeypatch) -> None:
    """On compute capability 9.0 the row-streamed tile leads 9-5-5's fp16-fast tiles but takes about a minute to
    build: with an empty kernel cache the quick choice takes the next tile at once, does not cache that plan, and
    builds the rows tile in the background; the next engine finds it built, chooses it and caches the plan. Both
    outputs within one level of the CPU engine."""
    import cupy as cp

    from srgpu.kernels import build

    if cp.cuda.Device().compute_capability != "90":
        pytest.skip("the row-streamed tile is built for sm_90a (compute capability 9.0)")
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "kernels"))
    model = random_model("9-5-5", seed=5, scale=2)
    lr = np.random.default_rng(6).integers(0, 256, (30, 40)).astype(np.uint8)
    expect = CPUEngine(model, 2).srcnn_plane(lr, (60, 80), 255)
    plans = tmp_path / "plans"
    with gpu_engine(model, 2, tmp_path, autotune=True) as engine:
        got = engine.srcnn_plane(lr, (60, 80), 255)
        plan = engine.plan_for((30, 40), (60, 80), 8)
    assert plan.kind == "fused" and plan.fused.arithmetic == "fp16-fast" and "rows" not in dict(plan.fused.params)
    assert not list(plans.glob("*.json"))  # provisional: chosen again next run
    assert _compare_8bit(got, expect)[1] <= 1
    builds = [p for k, p in build._background.items() if k.startswith(str(tmp_path / "kernels"))]
    assert len(builds) == 1 and builds[0] is not None  # a process of its own
    assert builds[0].wait(timeout=400) == 0
    assert not list((tmp_path / "kernels").glob("*.building"))
    with gpu_engine(model, 2, tmp_path, autotune=True) as engine:
        got = engine.srcnn_plane(lr, (60, 80), 255)
        plan = engine.plan_for((30, 40), (60, 80), 8)
    assert plan.source == "quick" and dict(plan.fused.params).get("rows") == 1
    assert len(list(plans.glob("*.json"))) == 1
    assert _compare_8bit(got, expect)[1] <= 1


@pytest.mark.parametrize("dtype, max_value", [(np.uint8, 255), (np.uint16, 1023), (np.uint16, 4095),
                                              (np.uint16, 65535)])
def test_auto_meets_the_bar_at_each_output_depth(dtype: type, max_value: int, tmp_path: Path) -> None:
    """auto takes fp16-fast for 8-bit output and never for a deeper one (srgpu.engine.plans), and what it
    runs is within one level of the CPU engine at that depth."""
    from srgpu.engine.plans import arithmetics_for, output_bits

    model = random_model("9-1-5", seed=2, scale=2)
    bits = output_bits(dtype, max_value)
    lr = np.random.default_rng(bits).integers(0, max_value + 1, (45, 61)).astype(dtype)
    expect = CPUEngine(model, 2).srcnn_plane(lr, (90, 122), max_value)
    with gpu_engine(model, 2, tmp_path, autotune=True) as engine:
        got = engine.srcnn_plane(lr, (90, 122), max_value)
        plan = engine.plan_for((45, 61), (90, 122), bits)
    assert plan.kind == "fused" and plan.fused.arithmetic in arithmetics_for("auto", bits)
    assert (plan.fused.arithmetic == "fp16-fast") == (bits == 8)
    assert _compare_8bit(got, expect)[1] <= 1


def test_full_tune_searches_every_variant(tmp_path: Path) -> None:
    """``srgpu tune``'s search: every layer-wise variant and fused tile timed, the fastest kept."""
    from srgpu.engine.tune import measure

    model = random_model("9-1-5", seed=1, scale=2)
    with gpu_engine(model, 2, tmp_path, precision="fp32") as engine:
        result = measure(engine, (30, 26), (60, 52), 8)
    assert result.plan.source == "tuned" and len(result.timings) >= 30
    assert all(t.fused is None or t.fused.arithmetic == "fp32" for t in result.timings)


def test_every_variant_as_a_whole_plan(tmp_path: Path) -> None:
    """Plans built from each variant run the full engine path (strips, quantisation) correctly."""
    model = random_model("9-5-5", seed=9, scale=3)
    lr = np.random.default_rng(1).integers(0, 256, (23, 19)).astype(np.uint8)
    expect = CPUEngine(model, 3).srcnn_plane(lr, (69, 57), 255)
    layers = srcnn_layers(model)
    for variant in ("v1", "v2", "v3", "v4", "v5"):
        from srgpu.kernels.conv import candidates

        configs = [next((c for c in candidates(l) if c.variant == variant), default_config(l)) for l in layers]
        with gpu_engine(model, 3, tmp_path, plan=layerwise_plan(model, configs)) as engine:
            equal, diff = _compare_8bit(engine.srcnn_plane(lr, (69, 57), 255), expect)
        print(f"plan of {variant}: {equal:.6f} equal, max diff {diff}")
        assert equal >= 0.999 and diff <= 1


# ---------------------------------------------------------------- failures


def test_compile_failure_names_the_kernel() -> None:
    from srgpu.kernels.build import compile_kernels, device_limits

    bad = "conv_v5<1, 64, 9, true, 32, 4, 6, 8, 1>"  # px not a multiple of 4: the kernel's static_assert
    with pytest.raises(EngineError, match=r"conv_v5<1, 64, 9, true, 32, 4, 6, 8, 1>.*failed to compile"):
        compile_kernels("conv.cu", [bad], 0, device_limits(0))


def test_kernels_asked_for_on_many_threads_compile_once_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start-up compiles on threads of its own (the engine's bicubic beside its quantizer, the image
    path's colour kernels beside the plan): a module asked for from several threads at once is
    compiled once and shared, and different modules compile side by side, each whole."""
    from concurrent.futures import ThreadPoolExecutor

    from srgpu.kernels import bicubic, build, colour, quantize

    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))  # compiled here, not found from earlier tests
    monkeypatch.setattr(build, "_modules", {})
    limits = build.device_limits(0)
    sources = [(m.SOURCE, tuple(m.all_kernel_names())) for m in (bicubic, colour, quantize)]
    with ThreadPoolExecutor(4 * len(sources)) as pool:
        got = list(pool.map(lambda job: build.compile_kernels(job[0], job[1], 0, limits), sources * 4))
    assert len(build._modules) == len(sources)
    for i, (_, names) in enumerate(sources):
        assert all(got[i + k * len(sources)] is got[i] for k in range(4))
        assert sorted(got[i]) == sorted(names) and all(k.function.num_regs > 0 for k in got[i].values())


def _bad_plan(model):
    layers = srcnn_layers(model)
    return layerwise_plan(model, [ConvConfig("v1", 64, 32), default_config(layers[1]), default_config(layers[2])])


def test_launch_failure_names_the_kernel(tmp_path: Path) -> None:
    model = random_model("9-1-5", scale=2)
    with pytest.raises(EngineError, match=r"kernel conv_v1<1, 64, 9, true, 64, 32>: 2048 threads"):
        gpu_engine(model, 2, tmp_path, plan=_bad_plan(model))


def test_device_auto_falls_back_and_cuda_fails_clearly() -> None:
    model = random_model("9-1-5", scale=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engine = create_engine("auto", model, 2, GPUOptions(plan=_bad_plan(model)))
    assert isinstance(engine, CPUEngine)
    assert any("conv_v1<1, 64, 9, true, 64, 32>" in str(w.message) for w in caught)
    with pytest.raises(EngineError, match="conv_v1<1, 64, 9, true, 64, 32>"):
        create_engine("cuda", model, 2, GPUOptions(plan=_bad_plan(model)))
    engine = create_engine("cuda:0", model, 2, autotune=False)
    assert engine.name == "cuda" and "GPU cuda:0" in engine.description
    engine.close()


# ---------------------------------------------------------------- CLI


def test_cli_tune_bench_info(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from srgpu.cli import app

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    runner = CliRunner()
    result = runner.invoke(app, ["bench", "--size", "64x48", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["output"] == {"width": 128, "height": 96} and report["device"]
    layers = [t for t in report["layers"] if t["layer"] != "network"]  # fused candidates may fail
    assert len(layers) >= 30 and all(t["ms"] > 0 and t["error"] is None for t in layers)
    # the kernel bench is fp32: the fastest of the layer-wise plan and the fp32 fused tiles (at
    # 64x48 they are within timing noise of each other, so either may win)
    assert report["network_ms"] > 0 and report["plan"]["kind"] in ("layerwise", "fused")
    assert report["plan"]["kind"] == "layerwise" or report["plan"]["fused"]["precision"] == "fp32"
    from srgpu.model import save_npz

    save_npz(random_model("9-5-5", seed=2, scale=2), tmp_path / "m955.npz")
    result = runner.invoke(app, ["tune", "--size", "40x30", "--model", str(tmp_path / "m955.npz"), "--quiet",
                                 "--precision", "fp32"])  # tune's default is auto, as upscale's
    assert result.exit_code == 0, result.output
    assert "plan for 40x30 x2" in result.output and "cached in" in result.output
    result = runner.invoke(app, ["info"])
    assert result.exit_code == 0
    assert "plan 9-5-5 40x30 -> 80x60 fp32 8-bit: conv1 " in result.output
    assert "plan 9-1-5 64x48 -> 128x96 fp32 8-bit: conv1 " in result.output


def test_self_check_reads_its_reference_from_disk_and_a_wrong_one_fails_no_plan(tmp_path: Path) -> None:
    """The start-up self-check's reference is computed once and read back by later engines; a
    stored reference with wrong numbers makes the check recompute it, not fail a good plan, and a
    bad plan still fails against the one computed afresh."""
    from srgpu.engine.check_reference import reference_dir

    model = random_model("9-1-5", seed=5, scale=2)
    lr = np.random.default_rng(5).integers(0, 256, (40, 52)).astype(np.uint8)
    with gpu_engine(model, 2, tmp_path, autotune=True) as engine:
        first = engine.srcnn_plane(lr, (80, 104), 255)
    refs = sorted(reference_dir(tmp_path / "plans").glob("*.npy"))
    assert refs
    for path in refs:
        np.save(path, np.load(path) + 0.25)
    with gpu_engine(model, 2, tmp_path, autotune=True) as engine:
        assert np.array_equal(engine.srcnn_plane(lr, (80, 104), 255), first)
        plan = engine.plan_for((40, 52), (80, 104), 8)
        engine._checked.clear()
        engine.check_plan(plan, 8)  # against a fresh reference: passes
        other = random_model("9-1-5", seed=6, scale=2)
        engine.model = other  # the kernels still hold the first model's weights: a wrong plan now
        engine._checked.clear()
        with pytest.raises(EngineError, match="failed its self-check"):
            engine.check_plan(plan, 8)
