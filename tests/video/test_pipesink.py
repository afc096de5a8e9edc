"""The encoder pipe sink: bytes lent with vmsplice arrive exactly as they were when lent, even
though each buffer is refilled as soon as the sink gives it back; the copying path too."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from srgpu.video.pipesink import PipeSink


def _reader(fd: int, out: bytearray, delay: float) -> None:
    while True:
        chunk = os.read(fd, 1 << 15)
        if not chunk:
            return
        out += chunk
        time.sleep(delay)  # a slow consumer: lent pages sit in the pipe a while


@pytest.mark.parametrize("zero_copy", [True, False])
def test_lent_buffers_are_reused_only_after_the_reader_has_them(zero_copy: bool) -> None:
    r, w = os.pipe()
    got = bytearray()
    t = threading.Thread(target=_reader, args=(r, got, 0.0005))
    t.start()
    sink = PipeSink(w, zero_copy=zero_copy)
    size = sink.capacity + 4096 + 123  # each frame at least the pipe's capacity, as the writer lends
    ring = [np.empty(size, np.uint8) for _ in range(3)]
    free = [True, True, True]
    expected = bytearray()
    rng = np.random.default_rng(0)
    for i in range(24):
        k = i % 3
        assert free[k], f"buffer {k} reused while still lent (frame {i})"
        ring[k][:] = rng.integers(0, 256, size, dtype=np.uint8)  # overwrite at once when given back
        free[k] = False
        header = f"frame {i}|".encode()
        sink.write(header)
        sink.lend(ring[k])
        expected += header + ring[k].tobytes()

        def give_back(k: int = k) -> None:
            free[k] = True

        sink.hold(give_back, ring[k])
        if i >= 1:  # the previous frame must have been read once this one is in the pipe
            assert free[(i - 1) % 3]
    os.close(w)
    t.join()
    os.close(r)
    sink.release_all()
    assert all(free)
    assert bytes(got) == bytes(expected)


def test_lend_after_the_reader_is_gone_raises_oserror() -> None:
    r, w = os.pipe()
    os.close(r)
    sink = PipeSink(w)
    with pytest.raises(OSError):
        sink.lend(np.ones(1 << 16, np.uint8))
    os.close(w)


def test_video_frames_larger_than_the_pipe_are_lent_and_arrive_exactly(tmp_path, monkeypatch) -> None:
    """Upscaled frames of 1024x768 (1.2 MB, more than the 1 MiB pipe) go to the encoder by
    vmsplice; the lossless output equals the engine's planes bit for bit."""
    from test_video import BicubicEngine, decode, expected_frames, make_clip

    from srgpu.model import random_model
    from srgpu.video import pipesink
    from srgpu.video.api import EncodeOptions, VideoOptions, upscale_video

    lent = []
    original = pipesink.PipeSink.lend
    monkeypatch.setattr(pipesink.PipeSink, "lend", lambda self, a: (lent.append(a.nbytes), original(self, a)))
    engine = BicubicEngine(random_model("9-1-5", seed=3), 2)
    src = make_clip(tmp_path / "src.mkv", size="512x384", frames=5)
    upscale_video(src, tmp_path / "out.mkv", engine, VideoOptions(EncodeOptions(codec="ffv1")))
    assert len(lent) == 5 * 3  # every plane of every frame was lent, none copied
    want = expected_frames(engine, src, "yuv420p", 512, 384, 2)
    got = decode(tmp_path / "out.mkv", "yuv420p", 1024, 768)
    assert len(got) == len(want) == 5
    for g, e in zip(got, want):
        for gp, ep in zip(g, e):
            np.testing.assert_array_equal(gp, ep)


def test_after_release_all_a_held_frame_is_given_back_at_once() -> None:
    """A kill releases everything; a frame whose write failed afterwards must not keep its GPU
    slot (the processing stage may be waiting for one)."""
    r, w = os.pipe()
    sink = PipeSink(w)
    given = []
    sink.lend(np.ones(1000, np.uint8))
    sink.hold(lambda: given.append(1))
    assert given == []  # still possibly in the pipe
    sink.release_all()
    assert given == [1]
    sink.hold(lambda: given.append(2))
    assert given == [1, 2]
    os.close(r)
    os.close(w)
