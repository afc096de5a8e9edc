"""CPU-side tests of the GPU engine's pure parts (run in CI, no GPU needed): launch-configuration
checks, the candidate lists, plans and their cache, and the NumPy references the kernels are
held to (the tiling of a frame into strips: tests/engine/test_bands.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from srgpu.kernels import bicubic, conv
from srgpu.kernels.build import load_source, sources_digest
from srgpu.kernels.launch import H100_LIMITS, Launch, LaunchError, validate_launch
from srgpu.model import random_model
from srgpu.reference import srcnn_forward
from srgpu.resize import imresize
from srgpu.engine.plans import (CACHE_VERSION, FusedChoice, LayerChoice, KernelPlan, PlanKey, default_plan, load_cached, plan_key, save_cached)

ARCHS = ("9-1-5", "9-3-5", "9-5-5")


# ---------------------------------------------------------------- launch configuration


def test_launch_within_limits_passes() -> None:
    validate_launch(Launch("k", (10_000, 1, 1), (32, 8, 1), 40 * 1024), H100_LIMITS, kernel_max_threads=256)


@pytest.mark.parametrize("launch, kernel_max, words", [
    (Launch("conv_v1<x>", (1, 1, 1), (64, 32, 1)), None, "2048 threads per block exceeds the device's 1024"),
    (Launch("conv_v5<x>", (1, 1, 1), (32, 8, 1)), 128, "256 threads per block exceeds the 128 its registers allow"),
    (Launch("conv_v3<x>", (1, 1, 1), (32, 4, 1), 300 * 1024), None, "bytes of shared memory per block exceeds"),
    (Launch("resample_rows<x>", (1, 70_000, 1), (32, 8, 1)), None, "grid dimension y=70000 exceeds 65535"),
    (Launch("k<x>", (1, 1, 1), (1, 1, 128)), None, "block dimension z=128 exceeds 64"),
    (Launch("k<x>", (0, 1, 1), (32, 1, 1)), None, "empty launch"),
])
def test_launch_over_limits_names_the_kernel(launch: Launch, kernel_max: int | None, words: str) -> None:
    with pytest.raises(LaunchError) as e:
        validate_launch(launch, H100_LIMITS, kernel_max)
    assert str(e.value).startswith(f"kernel {launch.kernel}:") and words in str(e.value)


def test_a_kernel_remembers_only_launches_that_passed() -> None:
    """Launches are validated once per configuration (a folder launches the same few thousands of
    times); one over the limits still fails every time, after valid ones."""
    from types import SimpleNamespace

    from srgpu.errors import EngineError
    from srgpu.kernels.build import Kernel

    kernel = Kernel("k<x>", SimpleNamespace(max_threads_per_block=256), H100_LIMITS)
    good, bad = Launch("k<x>", (4, 1, 1), (256, 1, 1)), Launch("k<x>", (4, 1, 1), (512, 1, 1))
    kernel.check(good)
    kernel.check(good)
    for _ in range(2):
        with pytest.raises(EngineError, match="512 threads per block exceeds the 256"):
            kernel.check(bad)
    assert bad not in kernel._checked and good in kernel._checked


def test_shared_memory_opt_in_threshold() -> None:
    assert not Launch("k", (1, 1, 1), (32, 1, 1), 48 * 1024).needs_shared_optin
    assert Launch("k", (1, 1, 1), (32, 1, 1), 48 * 1024 + 4).needs_shared_optin


@pytest.mark.parametrize("arch", ARCHS)
def test_every_candidate_is_valid_and_launchable_on_h100(arch: str) -> None:
    optin_used = False
    for layer in conv.srcnn_layers(random_model(arch)):
        cands = conv.candidates(layer)
        assert {c.variant for c in cands} >= {"v1", "v2", "v3", "v5"}
        assert ("v4" in {c.variant for c in cands}) == (layer.k <= 5)
        names = [c.kernel_name(layer) for c in cands]
        assert len(set(names)) == len(names)
        for cfg in cands + [conv.default_config(layer)]:
            assert cfg.problems(layer) == []
            for h, w in ((1, 1), (2160, 3840), (4320, 7680)):
                launch = cfg.launch(layer, h, w)
                validate_launch(launch, H100_LIMITS)
                optin_used |= launch.needs_shared_optin
    if arch == "9-1-5":
        assert optin_used, "the candidates should exercise the >48 KB shared-memory opt-in"


def test_config_problems_are_reported() -> None:
    conv1, conv2, _ = conv.srcnn_layers(random_model("9-1-5"))
    assert conv.ConvConfig("v5", 32, 4, 6, 8, 1).problems(conv1) == ["v5 needs px a multiple of 4"]
    assert "fo=7 must divide cout=64" in conv.ConvConfig("v5", 32, 4, 4, 7, 1).problems(conv1)
    assert "ch=3 must divide cin=64" in conv.ConvConfig("v2", 32, 4, ch=3).problems(conv2)
    assert "v4 is for 1x1..5x5 layers" in conv.ConvConfig("v4", 32, 4, 4, 8, 1).problems(conv1)


def test_shared_bytes_grow_with_the_tile() -> None:
    _, _, conv3 = conv.srcnn_layers(random_model("9-1-5"))
    small = conv.ConvConfig("v5", 32, 4, 4, 1, 4)
    # weights 4*25*1 = 100 floats; tile 4 channels x (4+4) rows x (128+4) columns
    assert small.shared_bytes(conv3) == 4 * (100 + 4 * 8 * 132)
    assert replace(small, by=8).shared_bytes(conv3) == 4 * (100 + 4 * 12 * 132)


# ---------------------------------------------------------------- kernel sources


def test_sources_inline_project_headers() -> None:
    for name in ("conv.cu", "bicubic.cu", "quantize.cu"):
        src = load_source(name)
        assert '#include "' not in src
        assert "clampi" in src and "store_unit" in src
    digest = sources_digest()
    assert len(digest) == 16 and digest == sources_digest()


# ---------------------------------------------------------------- plans and their cache


def _key(**changes: object) -> PlanKey:
    key = PlanKey("NVIDIA H100 80GB HBM3 (sm_90)", "9-1-5", (1080, 1920), (2160, 3840), "fp32", 8, "0123456789abcdef")
    return replace(key, **changes)


def _tuned_plan(arch: str = "9-1-5") -> KernelPlan:
    layers = conv.srcnn_layers(random_model(arch))
    return KernelPlan("layerwise", tuple(LayerChoice(l.name, conv.candidates(l)[-1], 1.5) for l in layers), None, 4.25, "tuned")


def test_plan_round_trips_through_dict() -> None:
    plan = _tuned_plan()
    back = KernelPlan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert back.layers == plan.layers and back.ms == plan.ms and back.kind == "layerwise"
    fused = KernelPlan("fused", (), FusedChoice("srgpu.kernels.fused", "fused_fp16", (("tile", 32),), "fp16"), 0.4)
    back = KernelPlan.from_dict(json.loads(json.dumps(fused.to_dict())))
    assert back.fused == fused.fused and "fused_fp16 fp16 tile=32" in back.describe()


def test_cache_round_trip(tmp_path: Path) -> None:
    plan, key = _tuned_plan(), _key()
    layers = conv.srcnn_layers(random_model("9-1-5"))
    path = save_cached(key, plan, (), tmp_path)
    assert path == tmp_path / key.filename and path.is_file()
    loaded = load_cached(key, tmp_path, layers)
    assert loaded is not None and loaded.layers == plan.layers and loaded.source == "cache"
    assert [p.name for p in tmp_path.iterdir()] == [key.filename]  # no temporary file left


@pytest.mark.filterwarnings("error")  # "plan cache not written" would fail the thread that saw it
def test_cache_written_by_engines_on_many_threads_at_once(tmp_path: Path) -> None:
    """Engines made on several threads of one process (a Dask worker's threads, srgpu's own prototypes)
    save the same plan key together: every save lands, the file is one of them whole, no temporary is
    left (each write had a temporary of its own; one per process collided and lost saves)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    key, layers = _key(), conv.srcnn_layers(random_model("9-1-5"))
    plans = [KernelPlan("layerwise", _tuned_plan().layers, None, 1.0 + i) for i in range(16)]
    start = threading.Barrier(len(plans))

    def save(plan: KernelPlan) -> Path | None:
        start.wait()
        return save_cached(key, plan, (), tmp_path)

    with ThreadPoolExecutor(len(plans)) as pool:
        saved = list(pool.map(save, plans))
    assert saved == [tmp_path / key.filename] * len(plans)
    loaded = load_cached(key, tmp_path, layers)
    assert loaded is not None and loaded.ms in {p.ms for p in plans}
    assert [p.name for p in tmp_path.iterdir()] == [key.filename]


def test_cache_dir_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from srgpu.engine.plans import cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "srgpu" / "plans"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "srgpu" / "plans"


@pytest.mark.parametrize("damage", [
    lambda text: text[: len(text) // 2],  # truncated
    lambda text: "\x00\xff garbage",
    lambda text: "[]",
    lambda text: text.replace('"layerwise"', '"sideways"'),
    lambda text: text.replace('"variant": "v5"', '"variant": 5'),
    lambda text: text.replace('"bx": 32', '"bx": "32"'),
    lambda text: text.replace('"format": "srgpu-plan"', '"format": "other"'),
    lambda text: text.replace(f'"version": {CACHE_VERSION}', '"version": 99'),
])
def test_corrupt_cache_is_ignored(tmp_path: Path, damage) -> None:
    key = _key()
    path = save_cached(key, _tuned_plan(), (), tmp_path)
    path.write_text(damage(path.read_text()))
    assert load_cached(key, tmp_path, conv.srcnn_layers(random_model("9-1-5"))) is None


def test_stale_cache_is_ignored_and_overwritten(tmp_path: Path) -> None:
    layers = conv.srcnn_layers(random_model("9-1-5"))
    old = _key(kernels="ffffffffffffffff")
    save_cached(old, _tuned_plan(), (), tmp_path)
    new = _key()
    assert old.filename == new.filename  # same GPU, model and size: one file
    assert load_cached(new, tmp_path, layers) is None  # measured with other kernels
    save_cached(new, _tuned_plan(), (), tmp_path)
    assert load_cached(new, tmp_path, layers) is not None


def test_cached_plan_for_another_architecture_is_rejected(tmp_path: Path) -> None:
    key = _key()
    save_cached(key, _tuned_plan("9-5-5"), (), tmp_path)
    # a 9-5-5 plan names conv2 configs for a 5x5 layer; v4/v5 shapes may not fit 9-1-5's layers
    plan_ok = load_cached(key, tmp_path, conv.srcnn_layers(random_model("9-1-5")))
    assert plan_ok is None or all(not c.config.problems(l) for c, l in
                                  zip(plan_ok.layers, conv.srcnn_layers(random_model("9-1-5"))))
    bad = KernelPlan("layerwise", (LayerChoice("conv1", conv.ConvConfig("v4", 32, 4, 4, 8, 1)),) + _tuned_plan().layers[1:])
    save_cached(key, bad, (), tmp_path)
    assert load_cached(key, tmp_path, conv.srcnn_layers(random_model("9-1-5"))) is None


def test_cache_keys_differ_by_gpu_model_size_precision_and_depth() -> None:
    names = {_key().filename, _key(gpu="NVIDIA H200 (sm_90)").filename, _key(arch="9-5-5").filename,
             _key(hr_shape=(2160, 3842)).filename, _key(lr_shape=(540, 960)).filename, _key(precision="fp16").filename,
             _key(bits=10).filename}
    assert len(names) == 7
    assert all("/" not in n and " " not in n for n in names)


def test_default_plan_is_valid_for_every_arch() -> None:
    for arch in ARCHS:
        model = random_model(arch)
        plan = default_plan(model)
        plan.check(conv.srcnn_layers(model))
        assert plan.kind == "layerwise" and len(plan.layers) == 3


# ---------------------------------------------------------------- references


@pytest.mark.parametrize("in_shape, out_shape", [((1, 1), (2, 2)), ((7, 13), (21, 39)), ((17, 33), (68, 132)),
                                                 ((9, 5), (18, 16)), ((12, 12), (12, 30))])
@pytest.mark.parametrize("dtype, max_value", [(np.uint8, 255), (np.uint16, 1023), (np.float32, 1.0)])
def test_bicubic_reference_is_imresize(in_shape, out_shape, dtype, max_value) -> None:
    rng = np.random.default_rng(5)
    plane = (rng.integers(0, max_value + 1, in_shape).astype(dtype) if dtype != np.float32
             else rng.random(in_shape, dtype=np.float32))
    got = bicubic.reference(plane, out_shape, max_value)
    unit = plane.astype(np.float64) / (1.0 if dtype == np.float32 else max_value)
    assert got.dtype == np.float32 and got.shape == out_shape
    assert np.max(np.abs(got - imresize(unit, output_shape=out_shape))) < 1e-6


def test_bicubic_pass_order_is_imresize_order() -> None:
    assert bicubic.pass_order((10, 10), (20, 20)) == (0, 1)  # ties: rows first
    assert bicubic.pass_order((10, 10), (30, 20)) == (1, 0)  # columns have the smaller scale
    assert bicubic.intermediate_shape((10, 10), (30, 20)) == (10, 20)
    assert bicubic.intermediate_shape((10, 10), (20, 20)) == (20, 10)


def _naive_layer(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, relu: bool) -> np.ndarray:
    """Direct float64 definition: correlation, same size, replicate border."""
    cout, cin, k, _ = weight.shape
    r = k // 2
    _, h, w = x.shape
    out = np.zeros((cout, h, w))
    for o in range(cout):
        for i in range(h):
            for j in range(w):
                acc = bias[o]
                for c in range(cin):
                    for dy in range(k):
                        for dx in range(k):
                            acc += weight[o, c, dy, dx] * x[c, min(max(i + dy - r, 0), h - 1), min(max(j + dx - r, 0), w - 1)]
                out[o, i, j] = max(acc, 0.0) if relu else acc
    return out


@pytest.mark.parametrize("cin, cout, k, relu", [(1, 4, 9, True), (3, 2, 1, True), (3, 2, 5, True), (4, 1, 5, False)])
def test_conv_reference_matches_the_definition(cin: int, cout: int, k: int, relu: bool) -> None:
    rng = np.random.default_rng(11)
    x = rng.random((cin, 6, 7))
    weight = rng.standard_normal((cout, cin, k, k))
    bias = rng.standard_normal(cout)
    got = conv.reference(x, weight, bias, relu)
    assert np.allclose(got, _naive_layer(x, weight, bias, relu), atol=1e-10)


def test_transposed_weights_put_filters_last() -> None:
    w = np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5)
    t = conv.transpose_weights(w)
    assert t.shape == (3, 5, 5, 2) and t.flags.c_contiguous
    assert t[1, 2, 3, 0] == w[0, 1, 2, 3] and t[2, 4, 0, 1] == w[1, 2, 4, 0]


def test_network_reference_chain_is_srcnn_forward() -> None:
    """conv.reference applied layer by layer is the oracle's forward pass."""
    model = random_model("9-1-5", seed=2)
    y = np.random.default_rng(1).random((15, 12))
    a = model.arrays(np.float64)
    h = y[None]
    for i, relu in ((1, True), (2, True), (3, False)):
        h = conv.reference(h, a[f"conv{i}_weight"], a[f"conv{i}_bias"], relu)
    assert np.allclose(h[0], srcnn_forward(y, model, dtype=np.float64), atol=1e-12)


# ---------------------------------------------------------------- CLI (error paths that need no GPU)


def test_cli_tune_and_bench_refuse_the_cpu_and_bad_sizes() -> None:
    from typer.testing import CliRunner

    from srgpu.cli import app

    runner = CliRunner()
    for command in ("tune", "bench"):
        result = runner.invoke(app, [command, "--device", "cpu"])
        assert result.exit_code == 1 and "run on a GPU" in result.output
        result = runner.invoke(app, [command, "--size", "1920"])
        assert result.exit_code == 2 and "WIDTHxHEIGHT" in result.output


def test_info_lists_cached_plans_of_this_gpu_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from srgpu.cli.commands import _cached_plan_lines
    from srgpu.kernels.launch import gpu_key

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _cached_plan_lines("NVIDIA H200", "9.0") == ["    no tuned plan cached (srgpu tune)"]
    key = _key(gpu=gpu_key("NVIDIA H200", "9.0"), kernels=sources_digest())
    save_cached(key, _tuned_plan(), ())
    save_cached(_key(gpu=gpu_key("NVIDIA H100 80GB HBM3", "9.0"), kernels=sources_digest()), _tuned_plan(), ())
    save_cached(_key(gpu=gpu_key("NVIDIA H200", "9.0"), arch="9-5-5", kernels="stale"), _tuned_plan("9-5-5"), ())
    (tmp_path / "srgpu" / "plans" / "junk.json").write_text("{not json")
    lines = _cached_plan_lines("NVIDIA H200", "9.0")
    assert len(lines) == 1
    assert lines[0].startswith("    plan 9-1-5 1920x1080 -> 3840x2160 fp32 8-bit: conv1 v5 ") and "(4.25 ms/frame)" in lines[0]


def _policy_engine(tmp_path: Path, planner: object, notices: list[str], precision: str = "auto") -> object:
    """A GPUEngine with only what its plan policy reads (measurement replaced by ``planner``)."""
    from srgpu.engine.gpu import GPUEngine
    from srgpu.engine.options import GPUOptions

    model = random_model("9-1-5")
    engine = object.__new__(GPUEngine)
    engine.model, engine.layers, engine.limits = model, conv.srcnn_layers(model), H100_LIMITS
    engine.options = GPUOptions(precision=precision, cache_dir=tmp_path, notify=notices.append, self_check=False)
    engine.planner, engine._chosen, engine._plans, engine._checked = planner, {}, {}, set()
    engine._prepare = lambda plan: None
    return engine


class _FakePlanner:
    def __init__(self) -> None:
        self.measured: list[tuple[tuple[int, int], int]] = []

    def measure(self, eng, lr, hr, bits):
        self.measured.append((hr, bits))
        return replace(_tuned_plan(), source=f"tuned {bits}")


def test_engine_chooses_once_per_depth_then_reuses_or_loads_cached_plans(tmp_path: Path) -> None:
    """The engine's plan policy (measurement itself replaced by a planner: it needs a GPU): one
    choice per engine and output depth, reused for later sizes of that depth, a size's cached
    plan preferred, and nothing measured without a planner."""
    notices: list[str] = []
    planner = _FakePlanner()
    engine = _policy_engine(tmp_path, planner, notices)
    first = engine.plan_for((10, 10), (20, 20), 8)
    assert engine.plan_for((30, 40), (60, 80), 8) is first and engine.plan_for((10, 10), (20, 20), 8) is first
    assert planner.measured == [((20, 20), 8)]
    # the user is told once that the first frame waits for a choice, and what it chose
    assert len(notices) == 2 and "10x10 -> 20x20 8-bit" in notices[0] and first.describe() in notices[1]
    # another depth is another choice: what meets the accuracy bar depends on it
    ten = engine.plan_for((30, 40), (60, 80), 10)
    assert ten.source == "tuned 10" and planner.measured[-1] == ((60, 80), 10)
    model = engine.model
    save_cached(plan_key(H100_LIMITS.key, model.arch, (5, 5), (10, 10), "auto", 8), default_plan(model), (), tmp_path)
    assert engine.plan_for((5, 5), (10, 10), 8).source == "cache"
    engine.planner, engine._chosen = None, {}
    assert engine.plan_for((7, 7), (14, 14), 16).source == "default" and len(planner.measured) == 2


def test_a_new_size_starts_from_a_cached_plan_of_another_size(tmp_path: Path) -> None:
    """No per-size stall: a plan cached for one size serves a new size in a new process without a
    measurement, the nearest at the same scale first; never one of another depth, precision,
    GPU model or kernel sources."""
    notices: list[str] = []
    planner = _FakePlanner()
    engine = _policy_engine(tmp_path, planner, notices)
    model = engine.model
    fused = KernelPlan("fused", (), FusedChoice("srgpu.kernels.fused", "fused-tc", (("th", 64),), "fp16-fast"), 0.5, "tuned")
    far = KernelPlan("fused", (), FusedChoice("srgpu.kernels.fused", "fused-tc", (("th", 32),), "fp16-fast"), 0.9, "tuned")
    save_cached(plan_key(H100_LIMITS.key, model.arch, (1080, 1920), (2160, 3840), "auto", 8), fused, (), tmp_path)
    save_cached(plan_key(H100_LIMITS.key, model.arch, (100, 100), (300, 300), "auto", 8), far, (), tmp_path)
    for other in (plan_key(H100_LIMITS.key, model.arch, (720, 1280), (1440, 2560), "fp32", 8),
                  plan_key(H100_LIMITS.key, model.arch, (720, 1280), (1440, 2560), "auto", 10),
                  plan_key("NVIDIA H200 (sm_90)", model.arch, (720, 1280), (1440, 2560), "auto", 8),
                  replace(plan_key(H100_LIMITS.key, model.arch, (720, 1280), (1440, 2560), "auto", 8),
                          kernels="stale")):
        save_cached(other, _tuned_plan(), (), tmp_path)
    got = engine.plan_for((540, 960), (1080, 1920), 8)
    assert got.fused == fused.fused and got.source == "cache (1920x1080 -> 3840x2160)"
    assert planner.measured == [] and notices == []
    # a depth with nothing cached is chosen by the planner
    assert engine.plan_for((540, 960), (1080, 1920), 12).source == "tuned 12"


def test_fp16_says_when_no_fp16_arithmetic_meets_the_bar(tmp_path: Path) -> None:
    notices: list[str] = []
    engine = _policy_engine(tmp_path, _FakePlanner(), notices, precision="fp16")
    engine.plan_for((10, 10), (20, 20), 32)
    assert "fp16 does not meet the accuracy bar for 32-bit output; running fp32" in notices[0]
    notices.clear()
    engine.plan_for((10, 10), (20, 20), 8)
    assert not any("does not meet" in n for n in notices)


def test_info_skips_cached_plans_of_another_cache_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """srgpu info lists only plans the engine would load: one written by another cache version
    is skipped, as load_cached skips it."""
    import json

    from srgpu.cli.commands import _cached_plan_lines
    from srgpu.kernels.launch import gpu_key

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    key = _key(gpu=gpu_key("NVIDIA H200", "9.0"), kernels=sources_digest())
    path = save_cached(key, _tuned_plan(), ())
    assert len(_cached_plan_lines("NVIDIA H200", "9.0")) == 1 and "plan 9-1-5" in _cached_plan_lines("NVIDIA H200", "9.0")[0]
    data = json.loads(path.read_text())
    data["version"] = -1
    path.write_text(json.dumps(data))
    assert _cached_plan_lines("NVIDIA H200", "9.0") == ["    no tuned plan cached (srgpu tune)"]


def test_a_cached_plan_that_fails_its_self_check_is_chosen_again(tmp_path: Path) -> None:
    """Every plan is self-checked at the output depth before its first use, cached ones included;
    one that fails (say, written by another driver) is not run: the planner chooses again."""
    from srgpu.errors import EngineError

    notices: list[str] = []
    planner = _FakePlanner()
    engine = _policy_engine(tmp_path, planner, notices)
    engine.options = replace(engine.options, self_check=True)
    checked: list[tuple[str, int]] = []

    def check_plan(plan: KernelPlan, bits: int = 8) -> None:
        checked.append((plan.kind, bits))
        if plan.kind == "fused":
            raise EngineError("plan fused-tc failed its self-check at 8 bits: output up to 3 levels from the reference")

    engine.check_plan = check_plan
    bad = KernelPlan("fused", (), FusedChoice("srgpu.kernels.fused", "fused-tc", (("th", 64),), "fp16-fast"), 0.5, "tuned")
    save_cached(plan_key(H100_LIMITS.key, engine.model.arch, (10, 10), (20, 20), "auto", 8), bad, (), tmp_path)
    plan = engine.plan_for((10, 10), (20, 20), 8)
    assert plan.source == "tuned 8" and planner.measured == [((20, 20), 8)]
    assert checked == [("fused", 8), ("layerwise", 8)]
    assert "cached plan not used: plan fused-tc failed its self-check" in notices[0]
