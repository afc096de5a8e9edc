"""Every kernel instantiation the engine or its tuner can ask for compiles with the NVRTC that a
pip install brings (nvidia-cuda-nvrtc-cu12, a runtime dependency), which is not the CUDA 13 of the
GPU machine where the GPU tests run. NVRTC needs no GPU, so this runs in CI: a kernel edit that
only one compiler accepts, or a tile in the tuner's candidate lists that does not instantiate,
fails here before any user's first run. One architecture each: the oldest srgpu's FFMA kernels
run on (compute 7.5) and the oldest the tensor-core kernels need (8.0); the sources have no
architecture-specific paths. (The tiles built but not offered: dev/tests/test_fused_variants.py.)"""

from __future__ import annotations

import pytest

from srgpu.kernels import bicubic, colour, conv, fused, quantize
from srgpu.model import random_model

from conftest import compile_all  # (shared with dev/tests/ and tests/kernels/test_kernel_archs.py)

ARCHS = ("9-1-5", "9-3-5", "9-5-5")  # the shipped models and the authors' 9-3-5


def test_the_harness_sees_a_compile_error(nvrtc) -> None:
    with pytest.raises(pytest.fail.Exception, match="undefined_x"):
        compile_all(nvrtc, "broken.cu", ["k"], 75, code="__global__ void k() { undefined_x(); }")


def test_the_colour_kernels_compile_with_nvrtc(nvrtc) -> None:
    """With no fused multiply-add in double (NumPy rounds each product and sum) and IEEE division."""
    for arch in (75, 90):
        ptx = compile_all(nvrtc, colour.SOURCE, colour.all_kernel_names(), arch)
        assert "fma.rn.f64" not in ptx and "div.rn.f64" in ptx


def test_bicubic_and_quantize_kernels_compile(nvrtc) -> None:
    compile_all(nvrtc, bicubic.SOURCE, bicubic.all_kernel_names(), 75)
    compile_all(nvrtc, quantize.SOURCE, quantize.all_kernel_names(), 75)


@pytest.mark.slow
def test_every_layerwise_conv_candidate_compiles(nvrtc) -> None:
    names = sorted({cfg.kernel_name(layer) for arch in ARCHS for layer in conv.srcnn_layers(random_model(arch))
                    for cfg in conv.candidates(layer)})
    compile_all(nvrtc, conv.SOURCE, names, 75)


@pytest.mark.slow
@pytest.mark.parametrize("precisions, source, arch", [(("fp32",), "fused_fp32.cu", 75),
                                                       (("fp16", "fp16-fast"), "fused_tc.cu", 80)])
def test_every_fused_candidate_compiles(nvrtc, precisions: tuple[str, ...], source: str, arch: int) -> None:
    cfgs = [(cfg, f2) for p in precisions for f2 in (1, 3, 5)
            for cfg in fused.candidate_configs(p, f2)]
    cfgs = [(cfg, f2) for cfg, f2 in cfgs if cfg.source == source]  # fused_rows.cu: dev/tests/test_fused_variants.py
    names = sorted({n for cfg, f2 in cfgs if not cfg.wg for n in (cfg.kernel_name(f2), cfg.layout_name(f2))})
    assert all(cfg.source == source for p in precisions for cfg in fused.candidate_configs(p, 1))
    compile_all(nvrtc, source, names, arch)
    wg = sorted({n for cfg, f2 in cfgs if cfg.wg for n in (cfg.kernel_name(f2), cfg.layout_name(f2))})
    if wg:  # warpgroup-MMA tiles: sm_90a only
        compile_all(nvrtc, source, wg, "90a")
