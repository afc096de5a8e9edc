"""The overlapped GPU path (several frames in flight, pinned buffers, separate copy streams) gives
exactly what one frame at a time gives, in order, for 8- and 10-bit frames and whole videos."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import numpy as np
import pytest

from srgpu.engine.frames import FrameFormat, FrameProcessor, PlaneSpec
from srgpu.video.api import EncodeOptions, VideoOptions, upscale_video

from test_video import decode, make_clip

pytestmark = pytest.mark.gpu


def _frames(rng: np.random.Generator, shapes, dtype, max_value: int, n: int) -> list[list[np.ndarray]]:
    return [[rng.integers(0, max_value + 1, s).astype(dtype) for s in shapes] for _ in range(n)]


@pytest.mark.parametrize("dtype, max_value, size", [(np.uint8, 255, (45, 67)), (np.uint16, 1023, (33, 50))])
def test_overlapped_equals_one_frame_at_a_time(random_gpu_engine, dtype, max_value: int, size) -> None:
    h, w = size
    in_shapes = ((h, w), ((h + 1) // 2, (w + 1) // 2), ((h + 1) // 2, (w + 1) // 2))
    H, W = 2 * h, 2 * w
    specs = (PlaneSpec((H, W), True), PlaneSpec(((H + 1) // 2, (W + 1) // 2), False),
             PlaneSpec(((H + 1) // 2, (W + 1) // 2), False))
    frames = _frames(np.random.default_rng(1), in_shapes, dtype, max_value, 14)
    want = [random_gpu_engine.upscale_frame(f, specs, max_value) for f in frames]

    proc = random_gpu_engine.frame_processor(FrameFormat(in_shapes, np.dtype(dtype), specs, max_value), slots=4)
    for slot in proc._free:  # poison the pinned outputs: every element must be written
        for host in slot.host_out:
            host.fill(0xAB if dtype == np.uint8 else 0xABCD)
    pending: deque = deque()
    got = []
    held = None
    for i, f in enumerate(frames):
        while len(pending) >= proc.in_flight:
            job = pending.popleft()
            planes = [p.copy() for p in job.wait()]
            got.append(planes)
            if held is None:
                held = (job, planes)  # keep one slot taken for a while: later frames must not touch it
            else:
                job.release()
        pending.append(proc.submit(f))
        if held is not None and i % 5 == 4:
            job, planes = held
            np.testing.assert_array_equal(job.wait()[0], planes[0])  # untouched while held
            job.release()
            held = None
    while pending:
        job = pending.popleft()
        got.append([p.copy() for p in job.wait()])
        job.release()
    if held is not None:
        held[0].release()
    proc.close()
    assert len(got) == len(want)
    for g, e in zip(got, want):
        for gp, ep in zip(g, e):
            assert gp.dtype == ep.dtype
            np.testing.assert_array_equal(gp, ep)


def test_submit_rejects_a_frame_of_another_format(random_gpu_engine) -> None:
    fmt = FrameFormat(((8, 8),), np.dtype(np.uint8), (PlaneSpec((16, 16), True),), 255)
    proc = random_gpu_engine.frame_processor(fmt, slots=2)
    with pytest.raises(ValueError, match="does not match"):
        proc.submit([np.zeros((8, 9), np.uint8)])
    proc.close()


def test_overlapped_video_is_bit_identical_to_one_frame_at_a_time(random_gpu_engine, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    src = make_clip(tmp_path / "src.mkv", size="320x180", frames=30, audio="aac", codec="libx264",
                    out_args=("-crf", "20"))
    ffv1 = VideoOptions(EncodeOptions(codec="ffv1"), hwdec="no")  # the software decoder, both times
    fast = upscale_video(src, tmp_path / "fast.mkv", random_gpu_engine, ffv1)
    monkeypatch.setattr(random_gpu_engine, "frame_processor", lambda fmt, slots=None: FrameProcessor(random_gpu_engine, fmt))
    slow = upscale_video(src, tmp_path / "slow.mkv", random_gpu_engine, ffv1)
    assert fast.frames == slow.frames == 30
    a = decode(tmp_path / "fast.mkv", "yuv420p", 640, 360)
    b = decode(tmp_path / "slow.mkv", "yuv420p", 640, 360)
    assert len(a) == len(b) == 30
    for fa, fb in zip(a, b):
        for pa, pb in zip(fa, fb):
            np.testing.assert_array_equal(pa, pb)


def test_a_pinned_input_buffer_may_be_refilled_as_soon_as_submit_returns(random_gpu_engine) -> None:
    """The video reader decodes into the processor's pinned input buffers, from which frames are
    uploaded with no host copy, and refills a buffer as soon as submit returns: every result must
    still be its own frame's (submit waits for the upload), for frames queued back to back."""
    import cupy as cp

    h, w = 540, 960
    in_shapes = ((h, w), (h // 2, w // 2), (h // 2, w // 2))
    specs = (PlaneSpec((2 * h, 2 * w), True), PlaneSpec((h, w), False), PlaneSpec((h, w), False))
    fmt = FrameFormat(in_shapes, np.dtype(np.uint8), specs, 255)
    frames = _frames(np.random.default_rng(3), in_shapes, np.uint8, 255, 5)
    want = [random_gpu_engine.upscale_frame(f, specs, 255) for f in frames]
    proc = random_gpu_engine.frame_processor(fmt, slots=6)
    buf = proc.input_buffer(sum(a * b for a, b in in_shapes))
    assert cp.cuda.runtime.pointerGetAttributes(buf.ctypes.data).type == 1  # cudaMemoryTypeHost: pinned
    views, offset = [], 0
    for a, b in in_shapes:
        views.append(buf[offset:offset + a * b].reshape(a, b))
        offset += a * b
    jobs = []
    for f in frames:
        for v, p in zip(views, f):
            np.copyto(v, p)
        jobs.append(proc.submit(views))
        buf.fill(0xAB)  # the reader decodes the next frame into the same buffer at once
    for job, e in zip(jobs, want):
        for gp, ep in zip(job.wait(), e):
            np.testing.assert_array_equal(gp, ep)
        job.release()
    proc.close()


def test_close_waits_for_every_slots_downloads(random_gpu_engine) -> None:
    """On an error path frames are submitted and never waited for; close() must not return while a
    download into a slot's pinned output is still running (the buffers go back to the pool after)."""
    h, w = 1080, 1920
    in_shapes = ((h, w),)
    fmt = FrameFormat(in_shapes, np.dtype(np.uint8), (PlaneSpec((2 * h, 2 * w), True),), 255)
    frames = _frames(np.random.default_rng(4), in_shapes, np.uint8, 255, 3)
    proc = random_gpu_engine.frame_processor(fmt, slots=4)
    jobs = [proc.submit(f) for f in frames]  # nobody waits: the last downloads follow the compute
    proc.close()
    assert all(job.slot.downloaded.done for job in jobs)


def test_timed_processor_gives_stage_times_and_the_same_planes(random_gpu_engine) -> None:
    """The processor srgpu bench times (timed=True: CUDA events around upload, compute and
    download) gives the untimed engine's planes and a positive time for each stage."""
    from srgpu.engine.overlap import OverlappedGPU

    h, w = 40, 52
    in_shapes = ((h, w), (h // 2, w // 2))
    specs = (PlaneSpec((2 * h, 2 * w), True), PlaneSpec((h, w), False))
    frames = _frames(np.random.default_rng(7), in_shapes, np.uint8, 255, 3)
    proc = OverlappedGPU(random_gpu_engine, FrameFormat(in_shapes, np.dtype(np.uint8), specs, 255), slots=2,
                         timed=True)
    try:
        for f in frames:
            job = proc.submit(f)
            stages = job.stage_ms()
            want = random_gpu_engine.upscale_frame(f, specs, 255)
            for got, expect in zip(job.wait(), want):
                np.testing.assert_array_equal(got, expect)
            job.release()
            assert set(stages) == {"upload", "gpu", "download"} and all(v > 0 for v in stages.values())
    finally:
        proc.close()
