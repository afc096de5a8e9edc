"""SRCNN weights: the in-memory model, srgpu's .npz format, the authors' .mat importer, and
resolution of ``--model`` (a built-in name, an .npz path or a .mat path)."""

from __future__ import annotations

import json
import os
import re
import zipfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from . import outputs

FORMAT_NAME = "srgpu-srcnn"
FORMAT_VERSION = 1
N1, N2 = 64, 32
F1, F3 = 9, 5
BUILTIN_ARCHS = ("9-1-5", "9-5-5")
# the same architectures trained on compressed (JPEG, H.264) inputs: weights/srcnn_<arch>-real_x<s>.npz
REAL_SUFFIX = "-real"
BUILTIN_NAMES = BUILTIN_ARCHS + tuple(a + REAL_SUFFIX for a in BUILTIN_ARCHS)
DEFAULT_ARCH = "9-1-5"
SUPPORTED_SCALES = (2, 3, 4)
ARRAY_NAMES = ("conv1_weight", "conv1_bias", "conv2_weight", "conv2_bias", "conv3_weight", "conv3_bias")


class ModelError(ValueError):
    """A model file or name that cannot be used; the message says exactly why."""


class NetworkShape:
    """The sizes a three-layer SRCNN's arrays imply (shared by the float and binarized models):
    needs ``conv1_weight``, ``conv3_weight`` and ``conv2_shape`` (out, in, k, k)."""

    conv1_weight: np.ndarray
    conv3_weight: np.ndarray
    conv2_shape: tuple[int, ...]

    @property
    def f1(self) -> int:
        return int(self.conv1_weight.shape[-1])

    @property
    def f2(self) -> int:
        return int(self.conv2_shape[-1])

    @property
    def f3(self) -> int:
        return int(self.conv3_weight.shape[-1])

    @property
    def n1(self) -> int:
        return int(self.conv1_weight.shape[0])

    @property
    def n2(self) -> int:
        return int(self.conv2_shape[0])

    @property
    def arch(self) -> str:
        return f"{self.f1}-{self.f2}-{self.f3}"

    @property
    def halo(self) -> int:
        """Input rows/columns each side that influence one output pixel."""
        return self.f1 // 2 + self.f2 // 2 + self.f3 // 2


@dataclass(frozen=True)
class SRCNNModel(NetworkShape):
    """The three convolutions, weights laid out (out_channels, in_channels, kh, kw) for correlation.

    ``scale`` is the upscale factor the model was trained for (None: unknown, any scale allowed).
    """

    conv1_weight: np.ndarray  # (64, 1, f1, f1)
    conv1_bias: np.ndarray  # (64,)
    conv2_weight: np.ndarray  # (32, 64, f2, f2)
    conv2_bias: np.ndarray  # (32,)
    conv3_weight: np.ndarray  # (1, 32, f3, f3)
    conv3_bias: np.ndarray  # (1,)
    scale: int | None = None
    name: str = "srcnn"
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        validate_arrays({n: getattr(self, n) for n in ARRAY_NAMES}, source=self.name)

    @property
    def conv2_shape(self) -> tuple[int, ...]:
        return tuple(self.conv2_weight.shape)

    @property
    def macs_per_pixel(self) -> int:
        return self.n1 * self.f1**2 + self.n2 * self.n1 * self.f2**2 + self.n2 * self.f3**2

    def arrays(self, dtype: type = np.float32) -> dict[str, np.ndarray]:
        return {n: np.ascontiguousarray(getattr(self, n), dtype=dtype) for n in ARRAY_NAMES}

    def check_scale(self, scale: int) -> None:
        if self.scale is not None and scale != self.scale:
            raise ModelError(
                f"model {self.name} is trained for x{self.scale}, not x{scale}; "
                f"choose --scale {self.scale} or a model for x{scale}"
            )

    def describe(self) -> str:
        s = f"x{self.scale}" if self.scale else "any scale"
        return f"{self.name} (SRCNN {self.arch}, {s})"


def validate_arrays(arrays: dict[str, Any], source: str) -> None:
    """Check names, ranks, shapes, dtypes and finiteness; raise ModelError naming the problem."""
    missing = [n for n in ARRAY_NAMES if n not in arrays]
    if missing:
        raise ModelError(f"{source}: missing array(s) {', '.join(missing)}")
    for n in ARRAY_NAMES:
        a = arrays[n]
        if not isinstance(a, np.ndarray) or not np.issubdtype(a.dtype, np.floating):
            raise ModelError(f"{source}: {n} must be a float array, got {getattr(a, 'dtype', type(a).__name__)}")
        if not np.all(np.isfinite(a)):
            raise ModelError(f"{source}: {n} contains NaN or infinity")
    w1, b1 = arrays["conv1_weight"], arrays["conv1_bias"]
    w2, b2 = arrays["conv2_weight"], arrays["conv2_bias"]
    w3, b3 = arrays["conv3_weight"], arrays["conv3_bias"]
    for n, a, rank in (("conv1_weight", w1, 4), ("conv2_weight", w2, 4), ("conv3_weight", w3, 4),
                       ("conv1_bias", b1, 1), ("conv2_bias", b2, 1), ("conv3_bias", b3, 1)):
        if a.ndim != rank:
            raise ModelError(f"{source}: {n} must have {rank} dimensions, has shape {a.shape}")
    for n, a in (("conv1_weight", w1), ("conv2_weight", w2), ("conv3_weight", w3)):
        if a.shape[2] != a.shape[3] or a.shape[2] % 2 == 0:
            raise ModelError(f"{source}: {n} must have square odd-sized filters, has shape {a.shape}")
    n1, n2 = w1.shape[0], w2.shape[0]
    expect = {
        "conv1_weight": (n1, 1, w1.shape[2], w1.shape[2]),
        "conv1_bias": (n1,),
        "conv2_weight": (n2, n1, w2.shape[2], w2.shape[2]),
        "conv2_bias": (n2,),
        "conv3_weight": (1, n2, w3.shape[2], w3.shape[2]),
        "conv3_bias": (1,),
    }
    for n, shape in expect.items():
        if arrays[n].shape != shape:
            raise ModelError(f"{source}: {n} has shape {arrays[n].shape}, expected {shape}")


# ---------------------------------------------------------------- srgpu .npz


def save_npz(model: SRCNNModel, path: str | Path) -> None:
    """Write the model as srgpu's .npz: float32 arrays plus a JSON ``metadata`` string."""
    meta = dict(model.metadata)
    meta.update(format=FORMAT_NAME, format_version=FORMAT_VERSION, arch=model.arch, scale=model.scale,
                name=model.name, n1=model.n1, n2=model.n2)
    path = Path(path)
    tmp, fd = outputs.create_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez_compressed(f, metadata=np.array(json.dumps(meta, sort_keys=True)), **model.arrays(np.float32))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    outputs.publish(tmp, path, replace=True)  # training replaces its own checkpoints


def load_npz(path: str | Path) -> SRCNNModel:
    path = Path(path)
    src = str(path)
    if not path.is_file():
        raise ModelError(f"{src}: no such model file")
    try:
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as z:  # numpy leaves its own file open on a bad zip
            contents = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, AttributeError) as e:
        # numpy's own messages talk of pickles and allow_pickle; say what srgpu wanted instead
        raise ModelError(f"{src}: not an srgpu model: expected a .npz archive of float32 arrays {', '.join(ARRAY_NAMES)} "
                         f"and a metadata string (this file: {_what_it_is(path, e)})") from None
    if "metadata" not in contents:
        raise ModelError(f"{src}: not an srgpu model (no metadata array)")
    try:
        meta = json.loads(str(contents.pop("metadata")))
    except json.JSONDecodeError as e:
        raise ModelError(f"{src}: metadata is not valid JSON ({e})") from None
    if isinstance(meta, dict) and meta.get("format") == "srgpu-srcnn-binary":  # dev/binary/model.py's FORMAT_NAME
        raise ModelError(f"{src}: a binarized SRCNN ({meta.get('arch')} with a binary conv2): the engines do not run "
                         "binarized models; dev/binary/model.py (load_binary_npz) in srgpu's repository reads it")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise ModelError(f"{src}: not an srgpu model (format is {meta.get('format') if isinstance(meta, dict) else meta!r})")
    try:  # hand-edited or foreign metadata: one clear ModelError, not a traceback
        version, scale = int(meta.get("format_version", 0)), meta.get("scale")
        scale = int(scale) if scale else None
    except (TypeError, ValueError):
        raise ModelError(f"{src}: metadata format_version and scale must be integers") from None
    if version > FORMAT_VERSION:
        raise ModelError(f"{src}: model format version {meta['format_version']} is newer than this srgpu supports")
    extra = sorted(set(contents) - set(ARRAY_NAMES))
    if extra:
        raise ModelError(f"{src}: unexpected array(s) {', '.join(extra)}")
    validate_arrays(contents, src)
    model = SRCNNModel(**{n: contents[n].astype(np.float32) for n in ARRAY_NAMES},
                       scale=scale, name=str(meta.get("name", path.stem)),
                       metadata=meta)
    if meta.get("arch") not in (None, model.arch):
        raise ModelError(f"{src}: metadata says architecture {meta['arch']} but the arrays are {model.arch}")
    return model


def _what_it_is(path: Path, error: Exception) -> str:
    """A few words on what a file that is not an .npz looks like."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        return f"cannot be read: {e.strerror or e}"
    if not head:
        return "empty"
    if head.startswith(b"\x93NUMPY"):
        return "a single .npy array, not an .npz archive"
    if not head.startswith(b"PK"):
        return "not a zip archive"
    if "pickle" in str(error):
        return "an archive of Python objects, not of plain arrays"
    return "a zip archive that numpy cannot read as .npz"


# ---------------------------------------------------------------- the authors' MATLAB files


def load_mat(path: str | Path, scale: int | None = None) -> SRCNNModel:
    """Import the authors' SRCNN .mat (layout in ../shared/data/README.md). For verification only.

    The scale comes from ``scale`` or from an ``x<N>`` in the file name.
    """
    path = Path(path)
    src = str(path)
    try:
        from scipy.io import loadmat
    except ImportError:
        raise ModelError("reading MATLAB .mat models needs scipy: pip install 'srgpu[mat]'") from None
    if not path.is_file():
        raise ModelError(f"{src}: no such model file")
    try:
        m = loadmat(str(path))
    except Exception as e:  # scipy raises several types for damaged files
        raise ModelError(f"{src}: not a readable MATLAB file ({type(e).__name__}: {e})") from None
    need = ["weights_conv1", "biases_conv1", "weights_conv2", "biases_conv2", "weights_conv3", "biases_conv3"]
    missing = [n for n in need if n not in m]
    if missing:
        raise ModelError(f"{src}: not an SRCNN model, missing {', '.join(missing)}")
    try:
        w1, b1, w2, b2, w3, b3 = (np.asarray(m[n], dtype=np.float64) for n in need)
    except (ValueError, TypeError) as e:  # strings, cell arrays: not numbers
        raise ModelError(f"{src}: not an SRCNN model, its arrays are not numbers ({e})") from None
    try:
        taps1, n1 = w1.shape
        f1 = _square_side(taps1)
        conv1 = np.stack([w1[:, i].reshape(f1, f1, order="F") for i in range(n1)])[:, None]
        if w2.ndim == 2:  # MATLAB drops the singleton tap axis of a 1x1 layer
            w2 = w2[:, None, :]
        cin2, taps2, n2 = w2.shape
        f2 = _square_side(taps2)
        conv2 = np.stack([np.stack([w2[j, :, i].reshape(f2, f2, order="F") for j in range(cin2)])
                          for i in range(n2)])
        cin3, taps3 = w3.shape
        f3 = _square_side(taps3)
        conv3 = np.stack([w3[i, :].reshape(f3, f3, order="F") for i in range(cin3)])[None]
    except ValueError as e:
        raise ModelError(f"{src}: unexpected array layout ({e})") from None
    if scale is None:
        found = re.search(r"(?:^|[_-])x(\d+)$", path.stem)  # x3.mat, srcnn_x3.mat
        scale = int(found.group(1)) if found else None
    return SRCNNModel(
        conv1_weight=conv1, conv1_bias=b1.reshape(-1), conv2_weight=conv2, conv2_bias=b2.reshape(-1),
        conv3_weight=conv3, conv3_bias=b3.reshape(-1),
        scale=scale, name=f"{path.parent.name}/{path.name}",
        metadata={"provenance": f"imported from {path.name} (authors' SRCNN, verification only)"},
    )


def _square_side(n: int) -> int:
    side = int(round(np.sqrt(n)))
    if side * side != n:
        raise ValueError(f"{n} taps is not a square filter")
    return side


# ---------------------------------------------------------------- --model resolution


def _weights_dir() -> Path:
    try:
        return Path(str(resources.files("srgpu.weights")))
    except ModuleNotFoundError:  # run from a checkout without installing (PYTHONPATH=.): weights/ beside srgpu/
        return Path(__file__).resolve().parents[1] / "weights"


def builtin_path(name: str, scale: int) -> Path:
    """The shipped file of a built-in name (an architecture, or one with REAL_SUFFIX)."""
    return _weights_dir() / f"srcnn_{name}_x{scale}.npz"


def builtin_models() -> list[tuple[str, int, Path]]:
    """(name, scale, path) of every shipped model present in this installation."""
    found = []
    for arch in BUILTIN_NAMES:
        for s in SUPPORTED_SCALES:
            p = builtin_path(arch, s)
            if p.is_file():
                found.append((arch, s, p))
    return found


def resolve_model(spec: str | None, scale: int) -> SRCNNModel:
    """``--model``: a built-in name (9-1-5, 9-5-5, 9-1-5-real, 9-5-5-real), an .npz or a .mat path."""
    if spec is not None and not spec.strip():  # an empty --model "" is a mistake, never the default
        raise ModelError(f"--model is empty: give {', '.join(BUILTIN_NAMES)}, an .npz or a .mat file")
    spec = spec or DEFAULT_ARCH
    if scale not in SUPPORTED_SCALES:
        raise ModelError(f"scale x{scale} is not supported; choose one of {', '.join(map(str, SUPPORTED_SCALES))}")
    if spec in BUILTIN_NAMES:
        p = builtin_path(spec, scale)
        if not p.is_file():
            raise ModelError(f"no built-in {spec} model for x{scale} in this installation ({p} is missing)")
        model = load_npz(p)
    else:
        p = Path(spec)
        if p.suffix.lower() == ".mat":
            model = load_mat(p)
        elif p.suffix.lower() == ".npz":
            model = load_npz(p)
        elif not p.exists():
            raise ModelError(f"unknown model {spec!r}: give {', '.join(BUILTIN_NAMES)}, an .npz or a .mat file")
        else:
            raise ModelError(f"{spec}: unsupported model file type (expected .npz or .mat)")
    model.check_scale(scale)
    return model


def random_model(arch: str = "9-1-5", seed: int = 0, scale: int | None = None) -> SRCNNModel:
    """Seeded random weights of the given architecture, for tests and benchmarks."""
    f1, f2, f3 = (int(v) for v in arch.split("-"))
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        fan_in = int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    return SRCNNModel(
        conv1_weight=w(N1, 1, f1, f1), conv1_bias=(rng.standard_normal(N1) * 0.05).astype(np.float32),
        conv2_weight=w(N2, N1, f2, f2), conv2_bias=(rng.standard_normal(N2) * 0.05).astype(np.float32),
        conv3_weight=w(1, N2, f3, f3), conv3_bias=(rng.standard_normal(1) * 0.05).astype(np.float32),
        scale=scale, name=f"random-{arch}-seed{seed}",
    )
