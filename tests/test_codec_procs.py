"""Image files decoded and encoded in worker processes (srgpu.codec_procs): what a user relies on is
that the files are the same as with threads (every layout, depth and format), failures are per
file, a resumed run knows what was written, and a worker that dies mid-batch loses nothing: the
batch finishes on threads and leaves no temporary file behind."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from srgpu import codec_procs
from srgpu.codec_procs import Arena, ArenaFull
from srgpu.imagefile import read_image
from srgpu.images import ImageOptions, plan_batch, run_batch

from test_folder_pipeline import folder_of, outputs_of

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="codec processes need Linux")


def test_arena_first_fit_joins_freed_neighbours():
    arena = Arena(10 * codec_procs.ALIGN)
    try:
        a, b, c = (arena.alloc(codec_procs.ALIGN) for _ in range(3))
        big = arena.alloc(5 * codec_procs.ALIGN + 1)  # rounded up to 6 pages
        assert (a, b, c, big) == (0, 4096, 8192, 12288)
        with pytest.raises(ArenaFull):
            arena.alloc(codec_procs.ALIGN + 1)  # one page left
        arena.free(b)
        arena.free(a)
        assert arena.alloc(2 * codec_procs.ALIGN) == 0  # a and b joined
        arena.free(0)
        arena.free(c)  # a, b, c joined into one block of three pages
        assert arena.alloc(3 * codec_procs.ALIGN) == 0
        arena.free(0)
        arena.free(big)
        assert arena.used == 0 and arena.alloc(10 * codec_procs.ALIGN) == 0
        view = arena.view(0, (4, 5), np.uint16)
        view[...] = np.arange(20).reshape(4, 5)
        assert np.array_equal(arena.view(0, (4, 5), np.uint16), np.arange(20).reshape(4, 5))
    finally:
        arena.close()


def test_processes_write_the_same_files_as_threads(tmp_path, cpu_engine, make_image):
    src = folder_of(tmp_path, make_image, count=12)
    (src / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    threads = run_batch(plan_batch(src, tmp_path / "threads"), cpu_engine, images=ImageOptions(jobs=3, processes=False))
    procs = run_batch(plan_batch(src, tmp_path / "procs"), cpu_engine, images=ImageOptions(jobs=3, processes=True))
    assert len(procs.done) == len(threads.done) == 12 and len(procs.failed) == len(threads.failed) == 1
    assert "broken.png" in procs.failed[0].message
    assert [o.status for o in procs.outcomes] == [o.status for o in threads.outcomes]
    a, b = outputs_of(tmp_path / "threads"), outputs_of(tmp_path / "procs")
    assert list(a) == list(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        assert a[name].dtype == b[name].dtype
    assert codec_procs._shared is not None and codec_procs._shared.arena.used == 0  # every block given back
    assert procs.stages is not None and procs.stages.read > 0 and procs.stages.write > 0
    # the manifest knows what the processes wrote: a second run skips every file
    again = run_batch(plan_batch(src, tmp_path / "procs"), cpu_engine, images=ImageOptions(jobs=3, processes=True))
    assert len(again.skipped) == 12 and not again.done


def test_a_16_bit_image_to_jpeg_and_alpha_to_jpeg_in_processes(tmp_path, cpu_engine, make_image):
    from srgpu.imagefile import write_image_atomic

    src = tmp_path / "in"
    src.mkdir()
    write_image_atomic(src / "deep.png", make_image((7, 9, 3), np.uint16, seed=1))
    write_image_atomic(src / "alpha.png", make_image((7, 9, 4), np.uint8, seed=2))
    result = run_batch(plan_batch(src, tmp_path / "out", fmt="jpg"), cpu_engine,
                       images=ImageOptions(jobs=2, processes=True))
    assert [o.status for o in result.outcomes] == ["failed", "done"]
    assert "alpha" in result.outcomes[0].message
    out = read_image(tmp_path / "out" / "deep.jpg")
    assert out.dtype == np.uint8 and out.shape == (14, 18, 3)


def test_a_worker_killed_mid_batch_loses_nothing(tmp_path, cpu_engine, make_image):
    src = folder_of(tmp_path, make_image, count=24)
    reference = run_batch(plan_batch(src, tmp_path / "ref"), cpu_engine, images=ImageOptions(jobs=2, processes=False))
    killed: list[int] = []

    def kill_one(outcome) -> None:
        if not killed and codec_procs._shared is not None:
            pid = next(iter(codec_procs._shared._pool._processes))  # a worker of the pool in use
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    result = run_batch(plan_batch(src, tmp_path / "out"), cpu_engine, on_done=kill_one,
                       images=ImageOptions(jobs=2, processes=True))
    assert killed and len(result.done) == 24, [o.message for o in result.failed]
    a, b = outputs_of(tmp_path / "ref"), outputs_of(tmp_path / "out")
    assert list(a) == list(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    leftovers = [p for p in (tmp_path / "out").rglob("*") if p.is_file() and ".part" in p.name]
    assert not leftovers
    # the next batch starts new workers
    again = run_batch(plan_batch(src, tmp_path / "next"), cpu_engine, images=ImageOptions(jobs=2, processes=True))
    assert len(again.done) == 24 and not codec_procs._shared.is_broken


def test_auto_keeps_threads_for_the_cpu_engine_and_small_batches(tmp_path, cpu_engine, make_image, monkeypatch):
    from srgpu import images

    started = []
    monkeypatch.setattr(codec_procs, "codec_processes", lambda *a: started.append(a))
    src = folder_of(tmp_path, make_image, count=4)
    run_batch(plan_batch(src, tmp_path / "out"), cpu_engine, images=ImageOptions(jobs=2))
    assert not started  # the CPU engine's codecs are a sliver of its time
    assert images.MIN_PROCESS_FILES >= 16
