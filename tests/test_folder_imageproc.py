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
from srgpu.images import ImageOptions, plan_batch, run_batch, upscale_image
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

    def plane_device(self, src, out, spec, max_value):  # the video path's entry (not used by images)
        raise AssertionError("images use srcnn_device / bicubic_device")

    def srcnn_device(self, src, out, max_value, bits=None):
        self.calls.append(("srcnn", src.shape, out.shape, src.dtype, bits))
        np.copyto(out, self.srcnn_plane(np.asarray(src), out.shape, max_value))

    def bicubic_device(self, src, out, max_value):
        self.calls.append(("bicubic", src.shape, out.shape, src.dtype))
        np.copyto(out, self.bicubic_plane(np.asarray(src), out.shape, max_value))


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
    # the float luma runs the plan for the depth it ends up in (srgpu.plans.output_bits); a gray
    # plane is of that depth itself
    assert [c[4] for c in engine.calls if c[0] == "srcnn"] == [8, None, 16, None, 8, 8]
    assert not processor._pending and len(processor._free) == len(processor._slots)
    processor.close()


def test_more_images_than_slots_and_any_order_of_waiting(engine, make_image) -> None:
    cpu = CPUEngine(engine.model, 2)
    processor = engine.image_processor()
    images = [make_image((5 + i % 4, 6 + i, 3) if i % 2 else (4 + i, 5), np.uint8, seed=i) for i in range(10)]
    tickets = [processor.submit(_bgr(img)) for img in images]  # more than the slots: the oldest are copied out
    for ticket, image in reversed(list(zip(tickets, images))):
        np.testing.assert_array_equal(_bgr(ticket.wait()), upscale_image(image, cpu))
        np.testing.assert_array_equal(_bgr(ticket.wait()), upscale_image(image, cpu))  # twice: the same
    assert not processor._pending and len(processor._free) == len(processor._slots)


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
    assert [c[1][0] for c in engine.calls if c[0] == "srcnn"][1:] == [6 + 6, 6 + 12, 6 + 12, 6 + 12, 6 + 12, 6 + 11,
                                                                       5 + 6]  # own rows + context
    np.testing.assert_array_equal(_bgr(queued.wait()), upscale_image(make_image((5, 6, 3), seed=1), cpu))
    assert len(processor._free) == len(processor._slots)


def test_a_folder_through_the_image_path(engine, make_image, tmp_path) -> None:
    from srgpu.imagefile import read_image, write_image_atomic

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
