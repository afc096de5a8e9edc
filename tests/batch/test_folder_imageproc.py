"""The GPU image path's host side (srgpu.engine.imageproc.OverlappedImages: slots, buffers sized per
image, tickets, bands, the batch around it), run where there is no GPU on stand-ins: CuPy's arrays,
streams and events by NumPy and no-ops, the device steps by the CPU engine and the colour kernels'
NumPy definition. It checks the bookkeeping, not CUDA (test_gpu_colour.py runs the real thing): every
result lands where it belongs, whatever the sizes, the bands and the order of waiting, and no slot
is lost."""

from __future__ import annotations

import contextlib
import sys
import types

import numpy as np
import pytest

from srgpu.engine.cpu import CPUEngine
from srgpu.batch.local import ImageOptions, run_batch
from srgpu.batch.plan import plan_batch
from srgpu.images.upscale import upscale_image
from srgpu.kernels import colour as colour_module
from srgpu.model import random_model


class _DeviceArray(np.ndarray):
    """A 'device' array: NumPy memory with CuPy's set/get."""

    def set(self, arr, stream=None):
        assert arr.shape == self.shape and arr.dtype == self.dtype and arr.flags.c_contiguous
        np.copyto(self, arr)

    def get(self, stream=None, out=None, blocking=True):
        assert out is not None and out.shape == self.shape and out.dtype == self.dtype
        np.copyto(out, self)
        return out


class _Stream:
    def __init__(self, non_blocking: bool = False) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def wait_event(self, event) -> None:
        pass

    def synchronize(self) -> None:
        pass


class _Event:
    def __init__(self, block: bool = False, disable_timing: bool = False) -> None:
        pass

    def record(self, stream=None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    @property
    def done(self) -> bool:
        return True


def _empty(shape, dtype=np.float32):
    return np.empty(shape, dtype).view(_DeviceArray)


@pytest.fixture
def fake_cupy(monkeypatch):
    """CuPy as far as OverlappedImages and SlotPipeline use it (pinned memory: plain bytes)."""
    cuda = types.SimpleNamespace(Stream=_Stream, Event=_Event, Device=lambda i=0: contextlib.nullcontext(),
                                 alloc_pinned_memory=bytearray)
    cupy = types.SimpleNamespace(cuda=cuda, empty=_empty)
    monkeypatch.setitem(sys.modules, "cupy", cupy)

    class FakeColour:
        def __init__(self, device_index, limits) -> None:
            self.calls = 0

        def to_planes(self, src, y, cb, cr, alpha, order, stream):
            colour_module._check(src, y, cb, cr, alpha)
            planes = colour_module.definition_to_planes(np.asarray(src), order)
            for dst, p in zip((y, cb, cr, alpha), planes):
                if dst is not None:
                    np.copyto(dst, p)

        def from_planes(self, y, cb, cr, alpha, dst, order, stream):
            colour_module._check(dst, y, cb, cr, alpha)
            a = None if alpha is None else np.asarray(alpha)
            np.copyto(dst, colour_module.definition_from_planes(np.asarray(y), np.asarray(cb), np.asarray(cr), a,
                                                                dst.dtype, order))

    monkeypatch.setattr(colour_module, "Colour", FakeColour)


class FakeGPU(CPUEngine):
    """The GPU engine's device API on the CPU engine: planes 'on the device' are NumPy arrays."""

    name = "cuda"
    device_index = 0
    limits = None

    def __init__(self, model, scale) -> None:
        super().__init__(model, scale)
        self.device = contextlib.nullcontext()
        self.stream = _Stream()
        self.calls: list[tuple] = []

    @contextlib.contextmanager
    def _guard(self, what: str):
        yield

    def ready_for(self, in_shape, out_shape, bits) -> None:  # the CPU engine has no plans to choose
        pass

    def plane_device(self, src, out, spec, max_value):  # the video path's entry (not used by images)
        raise AssertionError("images use srcnn_device / bicubic_device")

    def srcnn_device(self, src, out, max_value, bits=None):  # a plane, or a batch of them (N, h, w)
        self.calls.append(("srcnn", src.shape, out.shape, src.dtype, bits))
        for s, o in _planes(src, out):
            np.copyto(o, self.srcnn_plane(np.asarray(s), o.shape, max_value))

    def bicubic_device(self, src, out, max_value):
        self.calls.append(("bicubic", src.shape, out.shape, src.dtype))
        for s, o in _planes(src, out):
            np.copyto(o, self.bicubic_plane(np.asarray(s), o.shape, max_value))


def _planes(src, out):
    assert src.ndim == out.ndim and src.shape[:-2] == out.shape[:-2]
    if src.ndim == 3:  # the real engine takes a batch only C-contiguous (kernels: plane z after z - 1)
        assert src.flags.c_contiguous and out.flags.c_contiguous
        return list(zip(src, out))
    return [(src, out)]


def _bgr(image: np.ndarray) -> np.ndarray:
    if image.ndim == 2:
        return image
    return np.ascontiguousarray(np.concatenate([image[..., 2::-1], image[..., 3:]], axis=-1))


@pytest.fixture
def engine(fake_cupy):
    return FakeGPU(random_model("9-1-5", seed=3, scale=2), 2)


def test_the_image_path_gives_the_plane_paths_pixels(engine, make_image) -> None:
    cpu = CPUEngine(engine.model, 2)
    processor = engine.image_processor()
    shapes = [((7, 9, 3), np.uint8), ((6, 5), np.uint8), ((5, 8, 4), np.uint16), ((9, 4), np.uint16),
              ((7, 9, 3), np.uint8), ((3, 11, 4), np.uint8)]
    for shape, dtype in shapes:
        image = make_image(shape, dtype, seed=sum(shape))
        got = processor.submit(_bgr(image)).wait()
        np.testing.assert_array_equal(_bgr(got), upscale_image(image, cpu), err_msg=str(shape))
    # the float luma runs the plan for the depth it ends up in (srgpu.engine.plans.output_bits); a gray
    # plane is of that depth itself
    assert [c[4] for c in engine.calls if c[0] == "srcnn"] == [8, None, 16, None, 8, 8]
    assert not processor._queued and not processor._open and len(processor._free) == len(processor._slots)
    processor.close()


def test_more_images_than_slots_and_any_order_of_waiting(engine, make_image) -> None:
    cpu = CPUEngine(engine.model, 2)
    processor = engine.image_processor()
    images = [make_image((5 + i % 4, 6 + i, 3) if i % 2 else (4 + i, 5), np.uint8, seed=i) for i in range(10)]
    tickets = [processor.submit(_bgr(img)) for img in images]  # more than the slots: the oldest are copied out
    for ticket, image in reversed(list(zip(tickets, images))):
        np.testing.assert_array_equal(_bgr(ticket.wait()), upscale_image(image, cpu))
        np.testing.assert_array_equal(_bgr(ticket.wait()), upscale_image(image, cpu))  # twice: the same
    assert not processor._queued and not processor._open and len(processor._free) == len(processor._slots)


def test_a_large_image_goes_in_bands(fake_cupy, engine, make_image) -> None:
    from srgpu.engine.imageproc import OverlappedImages

    cpu = CPUEngine(engine.model, 2)
    image = make_image((41, 13, 4), np.uint16, seed=9)
    processor = OverlappedImages(engine, band_output_pixels=13 * 4 * 6)  # 6 input rows a band: 7 bands
    queued = processor.submit(_bgr(make_image((5, 6, 3), seed=1)))  # an image in flight before it
    seen: list[tuple[int, int]] = []
    got = processor.submit(_bgr(image), progress=lambda d, t: seen.append((d, t))).wait()
    np.testing.assert_array_equal(_bgr(got), upscale_image(image, cpu))  # bit-identical on the CPU engine
    assert seen == [(min(82, 12 * k), 82) for k in range(1, 8)]
    # the small image (a shape's first group: itself alone), then the bands: own rows + context
    assert [c[1][-2] for c in engine.calls if c[0] == "srcnn"] == [5, 6 + 6, 6 + 12, 6 + 12, 6 + 12, 6 + 12, 6 + 11,
                                                                   5 + 6]
    np.testing.assert_array_equal(_bgr(queued.wait()), upscale_image(make_image((5, 6, 3), seed=1), cpu))
    assert len(processor._free) == len(processor._slots)


def test_a_folder_through_the_image_path(engine, make_image, tmp_path) -> None:
    from srgpu.images.files import read_image, write_image_atomic

    src = tmp_path / "in"
    src.mkdir()
    images = {f"{i}.png": make_image((6 + i, 9 - i % 3, 3) if i % 3 else (7, 5 + i), np.uint8, seed=i)
              for i in range(9)}
    for name, image in images.items():
        write_image_atomic(src / name, image)
    (src / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n?")
    result = run_batch(plan_batch(src, tmp_path / "out"), engine, images=ImageOptions(jobs=3))
    assert [o.job.src.name for o in result.failed] == ["broken.png"] and len(result.done) == 9
    cpu = CPUEngine(engine.model, 2)
    for name, image in images.items():
        np.testing.assert_array_equal(read_image(tmp_path / "out" / name), upscale_image(image, cpu), err_msg=name)


def _sizes(engine, kind="srcnn"):
    return [c[1][0] for c in engine.calls if c[0] == kind]


def test_a_shapes_groups_start_small_and_double(fake_cupy, engine, make_image) -> None:
    from srgpu.engine.imageproc import OverlappedImages

    cpu = CPUEngine(engine.model, 2)
    processor = OverlappedImages(engine, group_output_pixels=4 * 80 + 79)  # 4 images of 5x4 (80 output pixels)
    images = [make_image((5, 4, 3), np.uint8, seed=30 + i) for i in range(12)]
    tickets = [processor.submit(_bgr(image)) for image in images]
    # 1, 2, 4, 4 sent as they filled; the last one gathering until it is waited for
    assert _sizes(engine) == [1, 2, 4, 4] and processor.in_flight == processor.groups_in_flight * 4
    assert [t.ready() for t in tickets] == [True] * 11 + [False]  # the fake device is done at once
    for ticket, image in zip(tickets, images):
        np.testing.assert_array_equal(_bgr(ticket.wait()), upscale_image(image, cpu))
    assert _sizes(engine) == [1, 2, 4, 4, 1]
    assert not processor._queued and not processor._open and len(processor._free) == len(processor._slots)


def test_small_images_of_alternating_shapes_go_through_in_groups(fake_cupy, engine, make_image) -> None:
    from srgpu.engine.imageproc import OverlappedImages

    cpu = CPUEngine(engine.model, 2)
    # room for 3 images of 4x4 (64 output pixels each) and 2 of 5x6 (120) in a group
    processor = OverlappedImages(engine, group_output_pixels=250)
    images = [make_image((4, 4, 3) if i % 2 == 0 else (5, 6, 3), np.uint8, seed=40 + i) for i in range(13)]
    tickets = [processor.submit(_bgr(image)) for image in images]
    # 4x4: images 0 | 2, 4 | 6, 8, 10 | 12 ...; 5x6: 1 | 3, 5 | 7, 9 | 11 ...
    assert [c[1] for c in engine.calls if c[0] == "srcnn"] == [(1, 4, 4), (1, 5, 6), (2, 4, 4), (2, 5, 6), (2, 5, 6),
                                                                (3, 4, 4)]
    for ticket, image in zip(tickets, images):
        np.testing.assert_array_equal(_bgr(ticket.wait()), upscale_image(image, cpu))
    assert _sizes(engine)[6:] == [1, 1]  # 11 alone and 12 alone, sent when waited for
    # the chroma planes of a group are one batch of 2N planes for the bicubic
    assert _sizes(engine, "bicubic") == [2 * n for n in _sizes(engine)]
    assert not processor._queued and not processor._open and len(processor._free) == len(processor._slots)
    processor.close()


def test_gray_and_16_bit_alpha_groups(fake_cupy, engine, make_image) -> None:
    from srgpu.engine.imageproc import OverlappedImages

    cpu = CPUEngine(engine.model, 2)
    processor = OverlappedImages(engine, group_output_pixels=10**6)
    images = [make_image((7, 5), np.uint16, seed=50 + i) if i % 2 else make_image((4, 6, 4), np.uint16, seed=50 + i)
              for i in range(10)]
    tickets = [processor.submit(_bgr(image)) for image in images]
    results = [t.wait() for t in tickets]
    for got, image in zip(results, images):
        np.testing.assert_array_equal(_bgr(got), upscale_image(image, cpu))
    # RGBA 0 | 2, 4 | 6, 8 and gray 1 | 3, 5 | 7, 9; the RGBA groups' bicubic: chroma (2N), then alpha (N)
    assert _sizes(engine) == [1, 1, 2, 2, 2, 2] and _sizes(engine, "bicubic") == [2, 1, 4, 2, 4, 2]
    results[2][:] = 0  # each result is the caller's: writing one leaves the others of its group alone
    np.testing.assert_array_equal(_bgr(results[4]), upscale_image(images[4], cpu))


def test_a_new_shape_sends_the_oldest_gathering_group(fake_cupy, engine, make_image) -> None:
    from srgpu.engine import imageproc

    processor = imageproc.OverlappedImages(engine, group_output_pixels=10**6)
    shapes = [(4 + i, 5, 3) for i in range(imageproc.OPEN_GROUPS + 2)]
    images = [make_image(s, np.uint8, seed=i) for i, s in enumerate(shapes)]
    tickets = [processor.submit(_bgr(image)) for image in images + images]
    # the first round: each shape's first group, alone; the second gathers (groups of two), and beyond
    # OPEN_GROUPS shapes the oldest gathering group goes, so that a folder of many sizes keeps the
    # device busy instead of gathering until the first wait
    assert [c[1] for c in engine.calls if c[0] == "srcnn"][len(shapes):] == [(1, 4, 5), (1, 5, 5)]
    assert len(processor._open) == imageproc.OPEN_GROUPS
    cpu = CPUEngine(engine.model, 2)
    for ticket, image in zip(tickets, images + images):
        np.testing.assert_array_equal(_bgr(ticket.wait()), upscale_image(image, cpu))
    assert len(processor._free) == len(processor._slots)


def test_a_failing_group_fails_each_of_its_images_and_frees_its_slot(fake_cupy, engine, make_image) -> None:
    from srgpu.engine.imageproc import OverlappedImages
    from srgpu.errors import EngineError

    processor = OverlappedImages(engine, group_output_pixels=10**6)
    first = processor.submit(_bgr(make_image((5, 6, 3), np.uint8, seed=0)))  # alone: sent, done

    def broken(src, out, max_value, bits=None):
        raise EngineError("GPU error while processing a frame: an illegal memory access")

    engine.srcnn_device = broken
    gathering = processor.submit(_bgr(make_image((5, 6, 3), np.uint8, seed=1)))  # a group of two, gathering
    with pytest.raises(EngineError, match="illegal memory access"):
        processor.submit(_bgr(make_image((5, 6, 3), np.uint8, seed=2)))  # fills it: sent, fails
    with pytest.raises(EngineError, match="illegal memory access"):
        gathering.wait()  # the same failure for every image of the group
    assert gathering.ready() and first.wait().shape == (10, 12, 3)
    assert not processor._queued and not processor._open and len(processor._free) == len(processor._slots)
