"""Shared test fixtures for tests/ (the product's) and dev/tests/ (the experiments'): where the shared
data lives, the GPU skip, small models and images. At the checkout's root, so pytest gives it to both."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent


def _shared_data() -> Path:
    """$SRGPU_SHARED_DATA, else shared/data inside the checkout (how it travels to the GPU
    machine), else ../shared/data beside it (developers' machines and CI)."""
    env = os.environ.get("SRGPU_SHARED_DATA")
    if env:
        return Path(env)
    inside = ROOT / "shared" / "data"
    return inside if inside.is_dir() else ROOT.parent / "shared" / "data"


SHARED_DATA = _shared_data()
PUBLISHED_SET5 = {  # Y-PSNR, ../shared/data/README.md
    "bicubic": {2: 33.66, 3: 30.39, 4: 28.42},
    "9-1-5": {2: 36.34, 3: 32.39, 4: 30.08},
    "9-5-5": {2: 36.66, 3: 32.75, 4: 30.48},
}
REFERENCE_FOLDERS = {"9-1-5": "srcnn-9-1-5-91images", "9-5-5": "srcnn-9-5-5-imagenet"}


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def reference_mat(shared_data: Path):
    """reference_mat(arch, scale) -> path of the authors' .mat for that model (verification only)."""
    pytest.importorskip("scipy", reason="reading .mat weights needs scipy (the [test] extra has it)")

    def path(arch: str, scale: int) -> Path:
        p = shared_data / "reference-weights" / REFERENCE_FOLDERS[arch] / f"x{scale}.mat"
        if not p.is_file():
            pytest.fail(f"reference weights missing: {p}")
        return p
    return path


@pytest.fixture(scope="session")
def random_npz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A seeded random 9-1-5 model for x2 in srgpu's .npz format."""
    from srgpu.model import random_model, save_npz

    path = tmp_path_factory.mktemp("models") / "random_9-1-5_x2.npz"
    save_npz(random_model("9-1-5", seed=7, scale=2), path)
    return path


@pytest.fixture(scope="session")
def cpu_engine(random_npz: Path):
    """The CPU engine with the random x2 model of ``random_npz``."""
    from srgpu.engine.cpu import CPUEngine
    from srgpu.model import load_npz

    return CPUEngine(load_npz(random_npz), 2)


@pytest.fixture(scope="session")
def nvrtc():
    """CuPy's NVRTC binding, for tests that compile kernels offline (no GPU needed); skips where
    NVRTC cannot be loaded."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # noqa: BLE001 - no NVRTC on this machine: nothing to compile with
        pytest.skip(f"NVRTC is not available here ({type(e).__name__}: {e})")
    return nvrtc


@pytest.fixture(scope="session")
def hopper():
    """Skips unless a compute capability 9.0 GPU is here (wgmma, sm_90a); gives CuPy."""
    cp = pytest.importorskip("cupy")
    try:
        cc = cp.cuda.Device().compute_capability
    except Exception as e:  # noqa: BLE001 - no usable GPU here
        pytest.skip(f"no GPU ({type(e).__name__})")
    if cc != "90":
        pytest.skip("wgmma needs compute capability 9.0")
    return cp


@pytest.fixture(scope="session", autouse=True)
def _own_plan_cache(tmp_path_factory: pytest.TempPathFactory):
    """srgpu's plan cache ($XDG_CACHE_HOME/srgpu/plans) in a folder of this test session, for the
    tests and every srgpu they start: a plan cached by an earlier run (any size serves a new one)
    must not decide what a test runs, nor a test's plan outlive the session."""
    import os

    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture(scope="module")
def random_gpu_engine(tmp_path_factory: pytest.TempPathFactory):
    """A GPU engine for a seeded random 9-1-5 x2 model, fp32 (the tests hold it to the CPU
    engine), with a plan cache of its own and no autotuning (GPU tests only)."""
    from srgpu.engine.gpu import GPUEngine
    from srgpu.engine.options import GPUOptions
    from srgpu.model import random_model

    options = GPUOptions(precision="fp32", cache_dir=tmp_path_factory.mktemp("plans"))
    engine = GPUEngine(random_model("9-1-5", seed=5, scale=2), 2, 0, options)  # no planner: no autotuning
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def default_model_path() -> Path:
    """The shipped default model (9-1-5 x2); tests that need it skip only while it is absent."""
    from srgpu.model import builtin_path

    p = builtin_path("9-1-5", 2)
    if not p.is_file():
        pytest.skip(f"default model not in this checkout yet ({p})")
    return p


def centred_model(arch: str = "9-1-5", seed: int = 0, scale: int | None = None):
    """Seeded random weights with conv3's bias set so that a mid-grey plane comes out mid-grey:
    the outputs of test images spread over the sample range instead of saturating at 0 or 1
    (where a wrong sample could hide)."""
    from dataclasses import replace

    from srgpu.model import random_model
    from srgpu.reference import srcnn_layers

    model = random_model(arch, seed=seed, scale=scale)
    grey = float(srcnn_layers(np.full((1, 1), 0.5, np.float32), model)[0, 0])
    return replace(model, conv3_bias=(model.conv3_bias + np.float32(0.5 - grey)).astype(np.float32))


def random_image(shape: tuple[int, ...], dtype: type = np.uint8, seed: int = 0) -> np.ndarray:
    """Random but image-like data (smooth gradient plus noise, full range used), never constant."""
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    h, w = shape[:2]
    base = np.add.outer(np.linspace(0, 0.6, h), np.linspace(0, 0.4, w))
    if len(shape) == 3:
        base = base[..., None] + np.linspace(0, 0.2, shape[2])
    values = np.clip(base * 0.8 + rng.random(shape) * 0.3, 0, 1)
    return np.round(values * top).astype(dtype)


@pytest.fixture(scope="session")
def make_image():
    """make_image(shape, dtype=np.uint8, seed=0): see :func:`random_image`."""
    return random_image


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture
def read_only_dir(tmp_path: Path):
    """A folder nothing can be created in: mode 0555, or for root (who ignores modes) the immutable
    attribute; skipped where neither holds."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    root = os.geteuid() == 0
    if root and not shutil.which("chattr"):
        pytest.skip("running as root without chattr: no folder is read-only to root")
    if root:
        subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
    else:
        folder.chmod(0o555)
    try:
        try:
            (folder / "probe").touch()
        except OSError:
            yield folder
        else:
            pytest.skip("cannot make a folder read-only here")
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
        else:
            folder.chmod(0o755)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    from srgpu.engine.gpuinfo import cuda_status

    status = cuda_status()
    if status.usable:
        return
    skip = pytest.mark.skip(reason=f"no usable CUDA GPU: {status.reason}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


def compile_all(nvrtc, filename: str, names: list[str], arch: int | str, code: str | None = None) -> str:
    """Compile ``filename`` (project headers inlined, as the engine does; or ``code``) with every
    template instantiation in ``names``, as CuPy's RawModule would; fail with NVRTC's log. Returns
    the PTX."""
    from srgpu.kernels.build import COMPILE_OPTIONS, load_source

    prog = nvrtc.createProgram(code if code is not None else load_source(filename), filename, [], [])
    try:
        for name in names:
            nvrtc.addNameExpression(prog, name)
        try:
            nvrtc.compileProgram(prog, [*COMPILE_OPTIONS, f"-arch=compute_{arch}"])
        except nvrtc.NVRTCError:
            pytest.fail(f"{filename} (compute_{arch}) does not compile:\n{nvrtc.getProgramLog(prog)[:3000]}")
        missing = [n for n in names if not nvrtc.getLoweredName(prog, n)]
        assert not missing, missing
        ptx = nvrtc.getPTX(prog)
        assert ptx
        return ptx.decode() if isinstance(ptx, bytes) else ptx
    finally:
        nvrtc.destroyProgram(prog)
