"""The GPU's image path (pytest -m gpu; skipped where no GPU is usable): the colour kernels against
their NumPy definition and srgpu.color's CPU path, on random data (never zeros) of awkward sizes
with outputs poisoned first; whole images through OverlappedImages against the plane path
(upscale_whole: the same device planes, the colour conversion on the host) and the CPU engine;
bands, several images and sizes in flight, and a folder through run_batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from srgpu.kernels import colour

pytestmark = pytest.mark.gpu

SIZES = [(1, 1), (7, 13), (33, 17), (541, 961)]
CASES = [(np.uint8, 3, "bgr"), (np.uint8, 4, "bgr"), (np.uint16, 3, "rgb"), (np.uint16, 4, "bgr"), (np.uint8, 3, "rgb")]


@pytest.fixture(autouse=True)
def _free_gpu_memory():
    yield
    import cupy as cp

    cp.get_default_memory_pool().free_all_blocks()


@pytest.fixture(scope="module")
def kernels():
    from srgpu.kernels.build import device_limits

    return colour.Colour(0, device_limits(0))


def _random(shape, dtype, seed: int) -> np.ndarray:
    top = np.iinfo(dtype).max
    return np.random.default_rng(seed).integers(1, top + 1, shape).astype(dtype)  # never zeros


def _to_rgb(image: np.ndarray) -> np.ndarray:
    """OpenCV's BGR(A) order -> RGB(A); gray as it is."""
    if image.ndim == 2:
        return image
    return np.ascontiguousarray(np.concatenate([image[..., 2::-1], image[..., 3:]], axis=-1))


@pytest.mark.parametrize("shape", SIZES, ids=[f"{w}x{h}" for h, w in SIZES])
@pytest.mark.parametrize("dtype, channels, order", CASES, ids=[f"{np.dtype(d).name}-{c}-{o}" for d, c, o in CASES])
def test_colour_kernels_match_their_definition_and_the_cpu_path(kernels, shape, dtype, channels, order) -> None:
    import cupy as cp

    h, w = shape
    image = _random((h, w, channels), dtype, seed=h * 31 + w + channels)
    rng = np.random.default_rng(5)
    a = image[..., 3].copy() if channels == 4 else None
    with cp.cuda.Stream(non_blocking=True) as stream:  # poisoning and copies ordered with the kernels
        planes = [cp.full((h, w), np.nan, np.float32) for _ in range(3)]
        alpha = cp.full((h, w), 0x5A, dtype) if channels == 4 else None
        kernels.to_planes(cp.asarray(image), *planes, alpha, order, stream)
        got = [p.get() for p in planes]
        alpha_got = alpha.get() if alpha is not None else None
        # the way back on planes as an upscale leaves them: clipped to [0, 1], off the round trip's grid
        moved = [np.clip(p + rng.normal(0, 0.02, p.shape), 0, 1).astype(np.float32) for p in got]
        back = cp.full((h, w, channels), 0x5A, dtype)
        kernels.from_planes(*[cp.asarray(p) for p in moved], None if a is None else cp.asarray(a), back, order, stream)
        samples = back.get()

    definition = colour.definition_to_planes(image, order)
    for g, e in zip(got, definition[:3]):
        np.testing.assert_array_equal(g, e)  # the same double arithmetic, rounded once to float
    if channels == 4:
        np.testing.assert_array_equal(alpha_got, image[..., 3])
    cpu = colour.reference_to_planes(image, order)
    ulps = max(float(np.max(np.abs(g.astype(np.float64) - e) / np.spacing(np.abs(e)))) for g, e in zip(got, cpu[:3]))
    np.testing.assert_array_equal(samples, colour.definition_from_planes(*moved, a, np.dtype(dtype), order))
    expect = colour.reference_from_planes(*moved, a, np.dtype(dtype), order)
    diff = np.abs(samples.astype(np.int64) - expect.astype(np.int64))
    print(f"colour {np.dtype(dtype).name} x{channels} {order} {w}x{h}: planes within {ulps:.0f} ulp of the CPU's, "
          f"samples {np.mean(diff == 0):.7f} equal, max diff {diff.max()}")
    assert ulps <= 1.0
    assert diff.max() <= 1 and np.mean(diff == 0) >= 0.99999


def test_colour_self_check() -> None:
    report = colour.self_check()
    print(f"colour self-check: {report}")
    assert report["plane_ulps"] <= 1.0 and report["equal_to_cpu"] >= 0.99999


# ---------------------------------------------------------------- whole images on the GPU


IMAGES = [((45, 67), np.uint8), ((33, 50, 3), np.uint8), ((21, 38, 4), np.uint16), ((17, 29), np.uint16),
          ((64, 23, 4), np.uint8), ((9, 131, 3), np.uint16)]


def _poison(processor) -> None:
    """Fill every slot's pinned and device buffers (as far as they exist) with a value no result has."""
    import cupy as cp

    for slot in processor._slots:
        for buf in slot.store.pinned.values():
            buf.fill(0xAB)
        for role, arr in slot.store.device.items():  # raw bytes; the float planes' roles get NaN
            if role in ("ycc", "YCC"):
                arr.view(cp.float32).fill(np.nan)
            else:
                arr.fill(0xAB)
    cp.cuda.runtime.deviceSynchronize()  # the fills (on the legacy stream) done before the next image


def test_gpu_engine_has_the_image_path(random_gpu_engine) -> None:
    from srgpu.engine.imageproc import OverlappedImages

    processor = random_gpu_engine.image_processor()
    assert isinstance(processor, OverlappedImages) and processor.order == "bgr" and processor.in_flight >= 2
    processor.close()
    processor.close()  # twice is harmless (run_batch's error path)


@pytest.mark.parametrize("shape, dtype", IMAGES, ids=[f"{'x'.join(map(str, s))}-{np.dtype(d).name}" for s, d in IMAGES])
def test_image_path_equals_the_plane_path(random_gpu_engine, shape, dtype) -> None:
    """One upload, colour on the device, one download: the pixels of upscale_whole on the same
    engine (the same device planes, the colour conversion on the host), and for 8 bits within one
    level of the CPU engine."""
    from srgpu.engine.cpu import CPUEngine
    from srgpu.images.upscale import upscale_whole

    image_rgb = _random(shape, dtype, seed=sum(shape))
    image_bgr = _to_rgb(image_rgb)  # the same swap both ways
    processor = random_gpu_engine.image_processor()
    try:
        first = [processor.submit(image_bgr).wait() for _ in processor._slots]  # every slot's buffers made
        _poison(processor)  # and reused for the same shapes: every element must be written again
        again = [processor.submit(image_bgr).wait() for _ in processor._slots]
    finally:
        processor.close()
    for result in first[1:] + again:
        np.testing.assert_array_equal(result, first[0])
    got = _to_rgb(first[0])
    planes = upscale_whole(image_rgb, random_gpu_engine)
    assert got.dtype == planes.dtype and got.shape == planes.shape
    diff = np.abs(got.astype(np.int64) - planes.astype(np.int64))
    print(f"image path {shape} {np.dtype(dtype).name}: {np.mean(diff == 0):.6f} equal to the plane path, "
          f"max diff {diff.max()}")
    assert diff.max() <= 1 and np.mean(diff == 0) >= 0.9999
    if dtype == np.uint8:
        cpu = upscale_whole(image_rgb, CPUEngine(random_gpu_engine.model, random_gpu_engine.scale))
        assert np.abs(got.astype(np.int64) - cpu.astype(np.int64)).max() <= 1


def test_many_images_of_many_sizes_in_flight(random_gpu_engine) -> None:
    """More images queued than there are slots, sizes changing from one to the next: each result is
    the one the image gives alone, whatever order they are waited for in."""
    shapes = [(12 + i, 20 + 3 * i, 3) if i % 3 else (15 + i, 9 + i) for i in range(11)]
    images = [_random(s, np.uint8, seed=i) for i, s in enumerate(shapes)]
    processor = random_gpu_engine.image_processor()
    try:
        alone = [processor.submit(img).wait() for img in images]
        tickets = [processor.submit(img) for img in images]  # nothing waited for: slots run out
        got = [t.wait() for t in reversed(tickets)][::-1]
        assert not processor._queued
    finally:
        processor.close()
    for a, g, s in zip(alone, got, shapes):
        assert g.shape == (2 * s[0], 2 * s[1]) + s[2:]
        np.testing.assert_array_equal(g, a)


def test_groups_give_what_each_image_gives_alone(random_gpu_engine) -> None:
    """Images of a few shapes interleaved (portrait and landscape, gray, 16-bit RGBA), submitted
    before any is waited for, go through in groups (every kernel once per group: a batch of planes):
    each result is what the image gives alone, after the buffers were poisoned."""
    from srgpu.engine.imageproc import OverlappedImages

    kinds = [((24, 36, 3), np.uint8), ((36, 24, 3), np.uint8), ((19, 27), np.uint8), ((22, 17, 4), np.uint16)]
    images = [_random(*kinds[i % 4], seed=100 + i) for i in range(22)]
    processor = OverlappedImages(random_gpu_engine, group_output_pixels=4 * 36 * 24 * 4)  # up to 4 images a group
    try:
        alone = [processor.submit(img).wait() for img in images]
        _poison(processor)
        tickets = [processor.submit(img) for img in images]
        sent = len(processor._queued)
        got = [t.wait() for t in tickets]
        assert not processor._queued and not processor._open
    finally:
        processor.close()
    assert sent >= 2  # full groups went before anything was waited for
    for a, g in zip(alone, got):
        np.testing.assert_array_equal(g, a)


@pytest.mark.parametrize("shape, dtype", [((301, 203, 3), np.uint8), ((157, 61, 4), np.uint16), ((90, 77), np.uint8)])
def test_large_images_go_in_bands_that_agree_with_the_whole(random_gpu_engine, shape, dtype) -> None:
    from srgpu.engine.imageproc import OverlappedImages

    image = _random(shape, dtype, seed=shape[0])
    whole = OverlappedImages(random_gpu_engine)
    banded = OverlappedImages(random_gpu_engine, band_output_pixels=shape[1] * 4 * 23)  # 23 input rows a band
    seen: list[tuple[int, int]] = []
    try:
        a = whole.submit(image).wait()
        b = banded.submit(image, progress=lambda d, t: seen.append((d, t))).wait()
    finally:
        whole.close()
        banded.close()
    diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
    print(f"bands {shape} {np.dtype(dtype).name}: {np.mean(diff == 0):.6f} equal to the whole, max diff {diff.max()}")
    assert b.shape == a.shape and diff.max() <= 1
    assert len(seen) == -(-shape[0] // 23) and seen[-1] == (2 * shape[0], 2 * shape[0])
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_a_folder_through_the_gpu_image_path(random_gpu_engine, tmp_path: Path, make_image) -> None:
    """run_batch with the GPU engine: PNG outputs equal to upscale_whole on the same engine, the
    sideways photo turned upright, the ICC profile kept, a broken file failing alone."""
    import cv2
    from test_images import encode_with, exif_with_orientation, make_icc, metadata_of

    from srgpu.images.files import read_image, write_image_atomic
    from srgpu.batch.local import ImageOptions, run_batch
    from srgpu.batch.plan import plan_batch
    from srgpu.images.upscale import upscale_whole

    src = tmp_path / "in"
    src.mkdir()
    icc = make_icc()
    originals = {"a.png": make_image((17, 23, 3), seed=1), "b.png": make_image((11, 9), seed=2),
                 "c.png": make_image((13, 15, 4), np.uint16, seed=3)}
    for name, image in originals.items():
        write_image_atomic(src / name, image)
    sideways = make_image((6, 10, 3), seed=4)
    (src / "d.png").write_bytes(encode_with(sideways, ".png", exif_with_orientation(6)))
    originals["d.png"] = np.ascontiguousarray(np.rot90(sideways, -1))
    (src / "e.png").write_bytes(encode_with(make_image((9, 14, 3), seed=5), ".png", icc=icc))
    originals["e.png"] = make_image((9, 14, 3), seed=5)
    (src / "f.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    result = run_batch(plan_batch(src, tmp_path / "out"), random_gpu_engine, images=ImageOptions(jobs=3))
    assert [o.job.src.name for o in result.failed] == ["f.png"] and len(result.done) == 5
    for name, image in originals.items():
        got = read_image(tmp_path / "out" / name)
        want = upscale_whole(image, random_gpu_engine)
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert got.shape == want.shape and diff.max() <= 1 and np.mean(diff == 0) >= 0.999, name
    assert metadata_of(tmp_path / "out" / "e.png")[cv2.IMAGE_METADATA_ICCP] == icc
    assert result.stages.images == 5


def test_bench_folder_on_the_gpu(tmp_path: Path, make_image) -> None:
    """``srgpu bench FOLDER`` on the GPU: a first run that chooses the plan (timed apart) and a run
    with the plan it cached, each against the codec floor."""
    import json

    from typer.testing import CliRunner

    from srgpu import cli
    from srgpu.images.files import write_image_atomic

    src = tmp_path / "photos"
    src.mkdir()
    for i in range(4):
        write_image_atomic(src / f"{i}.png", make_image((40, 48, 3), seed=i))
    r = CliRunner().invoke(cli.app, ["bench", str(src), "--json", "--jobs", "2"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    first, warm = report["runs"]
    assert first["label"] == "first run" and warm["label"] == "warm plans"
    assert first["images"] == warm["images"] == 4 and report["codec_floor"]["seconds"] > 0
    assert first["plans_measured"] == 1 and first["plan_s"] > 0 and warm["plans_measured"] == 0
    # every run self-checks its plan once: the first within its plan choice, the warm one alone
    assert 0 < first["check_s"] <= first["plan_s"] and warm["check_s"] > 0 and warm["plan_s"] == 0
    assert "cuda" in report["engine"] or "GPU" in report["engine"]


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_auto_precision_follows_the_image_depth(tmp_path: Path, dtype: type) -> None:
    """With the default precision the luma of an 8-bit image runs the fastest plan that meets the
    bar at 8 bits (fp16-fast), and a 16-bit image's one that meets it at 16 (never fp16-fast):
    the depth of the image decides, not the float plane the luma passes through. The pixels stay
    close to the CPU engine's (one level of luma, spread over R, G and B by the colour matrix)."""
    from srgpu.engine.cpu import CPUEngine
    from srgpu.engine.gpu import GPUEngine
    from srgpu.engine.options import GPUOptions
    from srgpu.images.upscale import upscale_whole
    from srgpu.model import random_model
    from srgpu.engine.tune import Tuner

    model = random_model("9-1-5", seed=5, scale=2)
    engine = GPUEngine(model, 2, 0, GPUOptions(cache_dir=tmp_path), Tuner())
    image_rgb = _random((61, 83, 3), dtype, seed=3)
    processor = engine.image_processor()
    try:
        got = _to_rgb(processor.submit(_to_rgb(image_rgb)).wait())
    finally:
        processor.close()
    bits = 8 if dtype == np.uint8 else 16
    plan = engine.plan_for((61, 83), (122, 166), bits)
    assert (plan.kind == "fused" and plan.fused.arithmetic == "fp16-fast") == (bits == 8)
    cpu = upscale_whole(image_rgb, CPUEngine(model, 2))
    diff = np.abs(got.astype(np.int64) - cpu.astype(np.int64))
    print(f"auto, {bits}-bit image: {plan.describe()}; {np.mean(diff == 0):.5f} equal to the CPU, max {diff.max()}")
    assert diff.max() <= 2
    engine.close()
