"""A large image is upscaled in bands of rows (memory for a band, not for the whole image in
float64): on the CPU engine bit-identical to the whole image, for every layout, depth, scale and
architecture, whatever the band height; and the progress moves inside the image."""

from __future__ import annotations

import tracemalloc

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from srgpu import cli
from srgpu.cli import progress as cli_progress
from srgpu.images import files as imagefile
from srgpu.images import upscale as images_upscale
from srgpu.color import quantize, rgb_to_ycbcr, ycbcr_to_rgb
from srgpu.engine.frames import PlaneSpec
from srgpu.engine.cpu import CPUEngine
from srgpu.images.files import read_image, write_image_atomic
from srgpu.images.upscale import upscale_image, upscale_whole
from srgpu.model import random_model, save_npz

from conftest import centred_model


def natural(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    top = np.iinfo(dtype).max
    y, x = np.mgrid[: shape[0], : shape[1]]
    base = (np.sin(x / 3.0) + np.cos(y / 4.0) + 2) / 4 * top
    if len(shape) == 3:
        base = base[..., None] * np.linspace(0.6, 1.0, shape[2])
    return np.clip(base + rng.normal(0, top / 20, shape), 0, top).astype(dtype)


def definition(image: np.ndarray, engine: CPUEngine) -> np.ndarray:
    """The whole image in one go, as the protocol says: whole planes through the engine, the whole
    output converted back to RGB at once."""
    top = np.iinfo(image.dtype).max
    out_shape = (image.shape[0] * engine.scale, image.shape[1] * engine.scale)
    if image.ndim == 2:
        return engine.srcnn_plane(image, out_shape, top)
    ycc = rgb_to_ycbcr(image[..., :3].astype(np.float64) / top)
    planes = [ycc[..., i].astype(np.float32) for i in range(3)]
    if image.shape[2] == 4:
        planes.append(image[..., 3].copy())
    outs = engine.upscale_frame(planes, [PlaneSpec(out_shape, i == 0) for i in range(len(planes))], top)
    rgb = quantize(ycbcr_to_rgb(np.stack(outs[:3], axis=-1)), image.dtype, top)
    return np.concatenate([rgb, outs[3][..., None]], axis=-1) if len(outs) == 4 else rgb


@pytest.mark.parametrize("arch, scale", [("9-1-5", 2), ("9-1-5", 3), ("9-5-5", 4)])
@pytest.mark.parametrize("channels, dtype", [(None, np.uint8), (3, np.uint8), (4, np.uint16)])
def test_bands_are_bit_identical_to_the_whole_image(monkeypatch, arch: str, scale: int, channels: int | None,
                                                    dtype: type) -> None:
    """Bands of 1, 5 and 22 of 23 rows, converted back to RGB a row, 2 rows or 7 rows at a time,
    into an output poisoned beforehand: every sample is the whole image's."""
    rng = np.random.default_rng(7)
    engine = CPUEngine(centred_model(arch, seed=2, scale=scale), scale)
    image = natural(rng, (23, 9) if channels is None else (23, 9, channels), dtype)
    whole = definition(image, engine)
    assert len(np.unique(whole)) > 20  # not saturated
    real_empty = np.empty
    monkeypatch.setattr(images_upscale.np, "empty", lambda *a, **k: np.full_like(real_empty(*a, **k), 77))
    assert np.array_equal(upscale_whole(image, engine), whole)
    out_row = 9 * scale
    cases = ((1, 1), (out_row * scale * 5, 2 * out_row), (out_row * scale * 22, 7 * out_row))  # bands of 1, 5, 22 rows
    for band_pixels, convert_pixels in cases:
        monkeypatch.setattr(images_upscale, "CONVERT_PIXELS", convert_pixels)
        seen: list[tuple[int, int]] = []
        banded = upscale_image(image, engine, progress=lambda d, t: seen.append((d, t)),
                               band_output_pixels=band_pixels)
        assert banded.dtype == whole.dtype and np.array_equal(banded, whole), band_pixels
        assert seen[-1] == (23 * scale, 23 * scale) and len(seen) > 1
        assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_conversion_back_to_rgb_holds_a_few_rows_of_float64(monkeypatch) -> None:
    """The float64 YCbCr -> RGB conversion of a band goes a few rows at a time (one chunk per
    CPU at once): its traced peak (less the output it writes into) follows CONVERT_PIXELS, not
    the band."""
    rng = np.random.default_rng(1)
    outs = [rng.random((256, 512), dtype=np.float32) for _ in range(3)]
    monkeypatch.setattr(images_upscale, "CONVERT_PIXELS", 4 * 512)
    dst = np.empty((256, 512, 3), np.uint8)
    images_upscale._to_samples(outs, dst[:8], 0, 255)  # warm up
    tracemalloc.start()
    try:
        images_upscale._to_samples(outs, dst, 0, 255)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < images_upscale.cpu_cores() * 12 * 3 * 8 * 4 * 512  # a dozen float64 RGB temporaries of 4 rows
    assert np.array_equal(dst, quantize(ycbcr_to_rgb(np.stack(outs, axis=-1)), np.uint8, 255))


def test_progress_moves_inside_a_large_image(tmp_path, monkeypatch) -> None:
    """In a log (stderr not a terminal) the rows bar prints plain lines as the bands complete."""
    rng = np.random.default_rng(3)
    src = tmp_path / "big.png"
    write_image_atomic(src, natural(rng, (40, 16, 3), np.uint8))
    model = tmp_path / "m.npz"
    save_npz(random_model("9-1-5", seed=1, scale=2), model)
    monkeypatch.setattr(images_upscale, "BAND_OUTPUT_PIXELS", 16 * 4 * 10)  # 10 input rows a band: 4 bands
    monkeypatch.setattr(cli_progress, "LOG_PROGRESS_EVERY", 0.0)
    r = CliRunner().invoke(cli.app, ["upscale", str(src), "-o", str(tmp_path / "out.png"), "--model", str(model),
                                     "--device", "cpu"])
    assert r.exit_code == 0, r.output
    rows = [line for line in r.stderr.splitlines() if line.startswith("srgpu: big.png: ")]
    assert [line.split()[2] for line in rows] == ["20/80", "40/80", "60/80", "80/80"], r.stderr  # once each
    assert read_image(tmp_path / "out.png").shape == (80, 32, 3)


@pytest.mark.parametrize("channels", [3, 4])
def test_encoding_swaps_channels_in_place_and_back(tmp_path, monkeypatch, channels: int) -> None:
    """The encoder wants BGR: the swap is done in the image's own memory, a few rows per call
    (OpenCV clones a source that is also its destination, so one call on a large output would copy
    all of it), and undone, so the caller's image is as it was and the file is right."""
    image = natural(np.random.default_rng(5), (7, 5, channels), np.uint8)
    before = image.copy()
    monkeypatch.setattr(imagefile, "SWAP_CHUNK_BYTES", 2 * 5 * channels)  # two rows a call
    seen: list[int] = []
    convert = cv2.cvtColor

    def spy(src, code, *args, **kwargs):
        seen.append(src.nbytes)
        return convert(src, code, *args, **kwargs)

    monkeypatch.setattr(cv2, "cvtColor", spy)
    write_image_atomic(tmp_path / "o.png", image)
    assert seen and max(seen) <= 2 * 5 * channels and sum(seen) == 2 * image.nbytes  # there and back
    assert np.array_equal(image, before)
    assert np.array_equal(read_image(tmp_path / "o.png"), before)
    frozen = before.copy()
    frozen.flags.writeable = False  # not ours to swap: copied instead
    write_image_atomic(tmp_path / "f.png", frozen)
    assert np.array_equal(read_image(tmp_path / "f.png"), before)


@pytest.mark.gpu
def test_gpu_bands_agree_with_the_whole_image(random_gpu_engine) -> None:
    """On the GPU the bands go through the same kernels; a band's own rows must agree with the
    whole image's to within the accuracy bar's one level (exactly, where the tiles compute each
    pixel alike whatever the frame height)."""
    image = natural(np.random.default_rng(11), (301, 203, 3), np.uint8)
    whole = upscale_whole(image, random_gpu_engine)
    banded = upscale_image(image, random_gpu_engine, band_output_pixels=203 * 4 * 40)
    diff = np.abs(banded.astype(int) - whole.astype(int))
    print(f"banded vs whole on the GPU: {np.mean(diff == 0):.6f} of samples equal, max {diff.max()}")
    assert diff.max() <= 1
