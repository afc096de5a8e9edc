"""The binary convolution kernels (binary.cu) against their NumPy reference, bit for bit (pytest -m
gpu; skipped where no GPU is usable): the packers (fp32 and fp16 activations) and every variant and
launch shape of the binarized SRCNN layers under every epilogue (float32 / float16, ReLU or not,
the vote), on random data (never all zeros) of awkward sizes and 1080-row frames, outputs poisoned
first (NaN, or a word pattern for packed outputs)."""

from __future__ import annotations

import numpy as np
import pytest

from dev.binary import kernels as binary
from dev.binary.kernels import BinaryLayer, Epilogue

pytestmark = pytest.mark.gpu

SIZES = [(1, 1), (7, 13), (33, 65), (1081, 67)]  # (H, W)
LAYERS = dict(binary.SRCNN_LAYERS, **{"two-words-3x3": BinaryLayer("wide", 100, 64, 3)})


@pytest.fixture(autouse=True)
def _free_gpu_memory():
    yield
    import cupy as cp

    cp.get_default_memory_pool().free_all_blocks()


def _configs(layer: BinaryLayer) -> list[binary.BinaryConfig]:
    out = binary.candidates(layer, Epilogue("float32", True))
    return out + [c for c in binary.candidates(layer, Epilogue("vote", False)) if c not in out]


def _check(layer: BinaryLayer, shape: tuple[int, int], seed: int, dtype: type) -> None:
    diffs = binary.check_configs(layer, _configs(layer), binary.ALL_EPILOGUES, shape, seed=seed, act_dtype=dtype)
    print(f"binary {layer.name} {layer.cin}->{layer.cout} {layer.k}x{layer.k} {shape[1]}x{shape[0]} "
          f"{np.dtype(dtype).name}: {len(diffs)} cases, differing elements {sum(diffs.values())}")
    bad = {k: v for k, v in diffs.items() if v}
    assert not bad, f"{layer.name} at {shape}: {bad}"
    assert len(diffs) > 10


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("shape", SIZES, ids=[f"{w}x{h}" for h, w in SIZES])
@pytest.mark.parametrize("layer_id", list(LAYERS))
def test_binary_kernels_are_bit_exact(layer_id: str, shape: tuple[int, int], dtype: type) -> None:
    _check(LAYERS[layer_id], shape, seed=SIZES.index(shape) * 10 + list(LAYERS).index(layer_id), dtype=dtype)


def test_binary_kernels_on_a_full_hd_frame() -> None:
    """The default (two-level blocked) and the direct kernel of the 5x5 layer on 1921x1081."""
    layer = binary.SRCNN_LAYERS["conv2-5x5"]
    configs = [binary.default_config(layer, Epilogue()), binary.candidates(layer, Epilogue())[0]]
    diffs = binary.check_configs(layer, configs, [Epilogue("float32", True), Epilogue("float16", True)],
                                 (1081, 1921), seed=5)
    assert not any(diffs.values()), diffs


def test_binary_self_check() -> None:
    assert binary.self_check() > 100
