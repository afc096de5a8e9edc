"""A folder's images go through three stages at once: reader threads, the engine, writer threads.
What a user relies on: the same files as one at a time, whatever the thread count; every reader and
writer thread really working at once; outcomes in job order; a broken file not stopping the others;
memory in flight bounded; Ctrl-C leaving no partial file; the PNG level and channel order options."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import srgpu.batch.local as images
from srgpu.engine.cpu import CPUEngine
from srgpu.images.files import encode_params, read_image, read_image_data, write_image_atomic
from srgpu.batch.plan import BatchError, plan_batch
from srgpu.batch.local import ImageOptions, run_batch
from srgpu.images.upscale import upscale_image
from srgpu.manifest import JOURNAL_NAME, MANIFEST_NAME
from srgpu.batch.stages import Budget, InOrder


def folder_of(tmp_path: Path, make_image, count: int = 8) -> Path:
    """Images of several sizes, layouts, depths and formats."""
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    shapes = [(9, 7, 3), (6, 11), (8, 8, 4), (5, 13, 3), (12, 5, 3), (7, 7), (10, 6, 4), (4, 9, 3)]
    for i in range(count):
        shape = shapes[i % len(shapes)]
        dtype = np.uint16 if i % 3 == 2 else np.uint8
        ext = ".jpg" if (len(shape) == 3 and shape[2] == 3 and dtype == np.uint8 and i % 2) else ".png"
        folder = src / "sub" if i % 2 else src
        write_image_atomic(folder / f"{i:02d}{ext}", make_image(shape, dtype, seed=i))
    return src


def outputs_of(folder: Path) -> dict[str, np.ndarray]:
    return {str(p.relative_to(folder)): read_image(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def test_many_threads_write_the_same_files_as_one(tmp_path, cpu_engine, make_image):
    src = folder_of(tmp_path, make_image, count=12)
    one = run_batch(plan_batch(src, tmp_path / "one"), cpu_engine, images=ImageOptions(jobs=1))
    many = run_batch(plan_batch(src, tmp_path / "many"), cpu_engine, images=ImageOptions(jobs=6))
    assert one.exit_code == many.exit_code == 0 and len(many.done) == 12
    a, b = outputs_of(tmp_path / "one"), outputs_of(tmp_path / "many")
    assert list(a) == list(b) and len(a) == 12
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    # and each (lossless) output is the image upscaled on its own
    for name, got in b.items():
        if not name.endswith(".png"):
            continue
        source = next((src / name).parent.glob(Path(name).stem + ".*"))
        np.testing.assert_array_equal(got, upscale_image(read_image(source), cpu_engine), err_msg=name)
    assert [o.job.src for o in many.outcomes] == [j.src for j in plan_batch(src, tmp_path / "x").jobs]


class _Concurrency:
    """Wraps a function; records how many calls ran at once, each taking at least ``pause``."""

    def __init__(self, fn, pause: float) -> None:
        self.fn, self.pause = fn, pause
        self.now = self.most = 0
        self.lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(self.pause)
            return self.fn(*args, **kwargs)
        finally:
            with self.lock:
                self.now -= 1


@pytest.mark.slow
def test_readers_and_writers_work_at_once(tmp_path, cpu_engine, make_image, monkeypatch):
    """With --jobs 4, four decodes and four encodes run at the same time (the codecs release the
    GIL; here each call also sleeps, so that they overlap whatever the machine's load)."""
    src = tmp_path / "in"
    src.mkdir()
    for i in range(12):
        write_image_atomic(src / f"{i:02d}.png", make_image((5, 6, 3), seed=i))
    # a write lasts longer than three tiny upscales take even on a loaded machine, so that four overlap
    reads = _Concurrency(images.read_image_data, 0.15)
    writes = _Concurrency(images.write_image_atomic, 0.5)
    monkeypatch.setattr(images, "read_image_data", reads)
    monkeypatch.setattr(images, "write_image_atomic", writes)
    result = run_batch(plan_batch(src, tmp_path / "out"), cpu_engine, images=ImageOptions(jobs=4))
    assert result.exit_code == 0 and len(result.done) == 12
    assert reads.most == 4 and writes.most == 4
    stages = result.stages
    assert stages.threads == 4 and stages.images == 12
    assert stages.input_pixels == 12 * 30 and stages.output_pixels == 12 * 120
    assert stages.read >= 12 * 0.15 and stages.write >= 12 * 0.5 and stages.process > 0
    # one thread each: never two at once
    few = tmp_path / "few"
    few.mkdir()
    for i in range(3):
        write_image_atomic(few / f"{i}.png", make_image((5, 6, 3), seed=i))
    reads.most = writes.most = 0
    run_batch(plan_batch(few, tmp_path / "out1"), cpu_engine, images=ImageOptions(jobs=1))
    assert reads.most == 1 and writes.most == 1


def test_a_broken_file_among_many_threads_stops_nothing(tmp_path, cpu_engine, make_image):
    src = folder_of(tmp_path, make_image, count=8)
    (src / "03.5.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    (src / "sub" / "zz.jpg").write_bytes(b"\xff\xd8\xff nonsense")
    (src / "notes.txt").write_text("text")
    plan = plan_batch(src, tmp_path / "out")
    result = run_batch(plan, cpu_engine, images=ImageOptions(jobs=3))
    assert result.exit_code == 1
    assert sorted(o.job.src.name for o in result.failed) == ["03.5.png", "notes.txt", "zz.jpg"]
    assert len(result.done) == 8 and len(outputs_of(tmp_path / "out")) == 8
    assert [o.job for o in result.outcomes] == list(plan.jobs)


def test_a_tiny_memory_budget_still_upscales_everything(tmp_path, cpu_engine, make_image):
    """One image always goes through however large: a budget of one byte runs one at a time."""
    src = folder_of(tmp_path, make_image, count=6)
    result = run_batch(plan_batch(src, tmp_path / "out"), cpu_engine, images=ImageOptions(jobs=3, memory_bytes=1))
    assert result.exit_code == 0 and len(result.done) == 6
    ref = run_batch(plan_batch(src, tmp_path / "ref"), cpu_engine)
    a, b = outputs_of(tmp_path / "out"), outputs_of(tmp_path / "ref")
    assert list(a) == list(b) and all(np.array_equal(a[k], b[k]) for k in a) and ref.exit_code == 0


def test_budget_lets_one_through_and_holds_the_rest_back() -> None:
    budget = Budget(100)
    assert budget.room_for_read(500)  # nothing held: one image always goes
    budget.take_read(500)
    assert not budget.room_for_read(1)
    budget.give_read(500)
    budget.take_write(80)
    assert budget.room_for_read(20) and not budget.room_for_read(21)
    taken = threading.Event()

    def writer_waits() -> None:
        budget.take_write(30)  # 80 + 30 > 100: waits for the writer holding 80
        taken.set()

    t = threading.Thread(target=writer_waits)
    t.start()
    assert not taken.wait(0.2)
    budget.give_write(80)
    assert taken.wait(5)
    t.join()
    assert budget.writes == 30
    budget.take_read(1000)  # reads alone over the limit: a write still goes once writers hold nothing
    budget.give_write(30)
    budget.take_write(10)
    assert budget.writes == 10


def test_results_come_out_in_submission_order() -> None:
    order: InOrder[str] = InOrder()
    order.put(2, "c")
    order.put(1, "b")
    assert order.ready() == []
    order.put(0, "a")
    assert order.ready() == ["a", "b", "c"]
    order.put(4, "e")
    assert order.ready() == []
    order.put(3, "d")
    assert order.ready() == ["d", "e"] and order.ready() == []


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_an_interrupt_or_engine_error_leaves_only_whole_files(tmp_path, random_npz, make_image, error):
    """Ctrl-C (or an engine failure) in the middle of a folder with writers busy: every output
    under its final name is whole and recorded, no temporary is left, and a rerun completes the
    folder."""
    from srgpu.model import load_npz

    class Stopping(CPUEngine):
        calls = 0

        def upscale_frame(self, planes, specs, max_value):
            Stopping.calls += 1
            if Stopping.calls == 5:
                raise error("stop")
            return super().upscale_frame(planes, specs, max_value)

    src = tmp_path / "in"
    src.mkdir()
    for i in range(10):
        write_image_atomic(src / f"{i}.png", make_image((8, 9, 3), seed=i))
    out = tmp_path / "out"
    reported = []
    with pytest.raises(error):
        run_batch(plan_batch(src, out), Stopping(load_npz(random_npz), 2), on_done=reported.append,
                  images=ImageOptions(jobs=4))
    names = sorted(p.name for p in out.iterdir() if p.name not in (MANIFEST_NAME, JOURNAL_NAME))
    assert all(not n.startswith(".") for n in names), names  # no temporaries
    assert names == sorted(o.job.dst.name for o in reported if o.status == "done")
    if error is RuntimeError:  # the images upscaled before the error are written
        assert names == ["0.png", "1.png", "2.png", "3.png"]
    engine = CPUEngine(load_npz(random_npz), 2)
    for name in names:
        np.testing.assert_array_equal(read_image(out / name), upscale_image(read_image(src / name), engine))
    again = run_batch(plan_batch(src, out), engine)
    assert again.exit_code == 0 and len(again.skipped) == len(names) and len(again.done) == 10 - len(names)


def test_png_compression_changes_the_size_not_the_pixels(tmp_path, cpu_engine, make_image):
    src = tmp_path / "in"
    src.mkdir()
    image = make_image((40, 50, 3), seed=3)
    image[:, :25] = image[:, :1]  # something to compress
    write_image_atomic(src / "a.png", image)
    sizes, pixels = {}, {}
    for level in (None, 0, 9):
        out = tmp_path / f"out{level}"
        result = run_batch(plan_batch(src, out), cpu_engine, images=ImageOptions(png_compression=level))
        assert result.exit_code == 0
        sizes[level], pixels[level] = (out / "a.png").stat().st_size, read_image(out / "a.png")
    assert sizes[0] > sizes[None] and sizes[0] > sizes[9]
    assert np.array_equal(pixels[0], pixels[9]) and np.array_equal(pixels[0], pixels[None])
    assert encode_params(".png") == [] and encode_params(".png", png_compression=6)[1] == 6
    with pytest.raises(BatchError, match="zlib level from 0 to 9"):
        ImageOptions(png_compression=10)
    with pytest.raises(BatchError, match="at least 1"):
        ImageOptions(jobs=0)


def test_cli_jobs_and_png_compression(tmp_path, random_npz, make_image):
    from srgpu import cli

    src = tmp_path / "in"
    src.mkdir()
    for i in range(3):
        write_image_atomic(src / f"{i}.png", make_image((6, 5, 3), seed=i))
    runner = CliRunner()
    r = runner.invoke(cli.app, ["upscale", str(src), "-o", str(tmp_path / "out"), "--model", str(random_npz),
                                "--device", "cpu", "--jobs", "2", "--png-compression", "9", "--quiet"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == ["0.png", "1.png", "2.png"]
    for bad, message in ((["--jobs", "0"], "--jobs 0"), (["--png-compression", "12"], "--png-compression 12")):
        r = runner.invoke(cli.app, ["upscale", str(src), "-o", str(tmp_path / "bad"), "--model", str(random_npz),
                                    "--device", "cpu", *bad])
        assert r.exit_code == 1 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
        assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("shape", [(5, 7, 3), (6, 4, 4), (3, 8)])
def test_images_read_and_written_in_opencv_order(tmp_path, make_image, shape):
    """The GPU's image path reads BGR(A) as OpenCV decodes it and writes it back as it comes,
    with no channel swap on the host at either end."""
    image = make_image(shape, np.uint8, seed=4)
    write_image_atomic(tmp_path / "a.png", image)
    bgr = read_image_data(tmp_path / "a.png", order="bgr")
    assert bgr.order == "bgr"
    flipped = image if len(shape) == 2 else np.concatenate([image[..., 2::-1], image[..., 3:]], axis=-1)
    np.testing.assert_array_equal(bgr.pixels, flipped)
    pixels = bgr.pixels.copy()
    write_image_atomic(tmp_path / "b.png", pixels, order="bgr", scratch=True)
    np.testing.assert_array_equal(read_image(tmp_path / "b.png"), image)
    kept = image.copy()
    write_image_atomic(tmp_path / "c.png", kept)  # not scratch: the caller's RGB image as it was
    np.testing.assert_array_equal(kept, image)


class _LazyBgr:
    """Stands in for the GPU's image path (srgpu.engine.imageproc) on the CPU: BGR(A) in and out,
    each result computed only when waited for, ``in_flight`` images queued before the oldest is."""

    order = "bgr"
    in_flight = 2

    def __init__(self, engine) -> None:
        self.engine = engine
        self.queued = self.most_queued = 0
        self.closed = 0

    def submit(self, image, progress=None):
        assert image.flags.c_contiguous
        self.queued += 1
        self.most_queued = max(self.most_queued, self.queued)
        proc, source = self, image.copy()  # the caller may reuse its image once submit returns

        class Ticket:
            def wait(self):
                proc.queued -= 1
                swap = (lambda a: a) if source.ndim == 2 else (
                    lambda a: np.concatenate([a[..., 2::-1], a[..., 3:]], axis=-1))
                return np.ascontiguousarray(swap(upscale_image(np.ascontiguousarray(swap(source)), proc.engine)))

        return Ticket()

    def close(self) -> None:
        self.closed += 1


def test_an_image_path_in_opencv_order_with_images_in_flight_writes_the_same_files(tmp_path, random_npz,
                                                                                    make_image):
    """The GPU's shape of the image stage (BGR, several images queued, results waited for later),
    on the CPU: the same pixels as the plane path for gray, RGB, 16-bit RGBA, a sideways JPEG and an
    image with an ICC profile, the profile kept and the orientation applied once."""
    import cv2
    from test_images import encode_with, exif_with_orientation, make_icc, metadata_of

    from srgpu.model import load_npz

    class BgrEngine(CPUEngine):
        def image_processor(self):
            self.processor = _LazyBgr(self)
            return self.processor

    src = tmp_path / "in"
    src.mkdir()
    icc = make_icc()
    write_image_atomic(src / "a_gray.png", make_image((7, 9), seed=1))
    write_image_atomic(src / "b_rgb.png", make_image((8, 6, 3), seed=2))
    write_image_atomic(src / "c_rgba16.png", make_image((5, 7, 4), np.uint16, seed=3))
    (src / "d_sideways.png").write_bytes(encode_with(make_image((6, 10, 3), seed=4), ".png",
                                                     exif_with_orientation(6)))
    (src / "e_icc.png").write_bytes(encode_with(make_image((9, 5, 3), seed=5), ".png", icc=icc))
    write_image_atomic(src / "f_gray16.png", make_image((4, 11), np.uint16, seed=6))
    model = load_npz(random_npz)
    engine = BgrEngine(model, 2)
    result = run_batch(plan_batch(src, tmp_path / "bgr"), engine, images=ImageOptions(jobs=2))
    plain = run_batch(plan_batch(src, tmp_path / "rgb"), CPUEngine(model, 2))
    assert result.exit_code == plain.exit_code == 0 and len(result.done) == 6
    assert engine.processor.most_queued == 3 and engine.processor.closed >= 1
    a, b = outputs_of(tmp_path / "bgr"), outputs_of(tmp_path / "rgb")
    assert list(a) == list(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert a["d_sideways.png"].shape == (20, 12, 3)
    assert metadata_of(tmp_path / "bgr" / "e_icc.png")[cv2.IMAGE_METADATA_ICCP] == icc


@pytest.mark.parametrize("path, root", [("/a/b/c.jpg", "/a"), ("/a/bc.jpg", "/a/b"), ("/a/b", "/a/b"),
                                        ("rel/x/y.png", "rel"), ("/x.png", "/"), ("a/b", "."), ("/ab/c", "/a"),
                                        ("/a/b/../c.png", "/a"), ("/a/b c/d é.png", "/a")])
def test_a_jobs_relative_path_is_pathlibs(path, root):
    """The manifest names outputs by their path under the folder: the string shortcut gives what
    pathlib's relative_to gives, or None where that refuses."""
    from srgpu.batch.resume import Resume

    try:
        want = Path(path).relative_to(Path(root)).as_posix()
    except ValueError:
        want = None
    assert Resume._rel(Path(path), Path(root)) == want


def test_links_to_folders_are_followed_and_a_loop_is_not(tmp_path, cpu_engine, make_image):
    """A folder of links to photos kept elsewhere is walked as the user sees it; a link back up the
    tree adds nothing (it would never end)."""
    import os

    src, elsewhere = tmp_path / "in", tmp_path / "elsewhere"
    (src / "own").mkdir(parents=True)
    elsewhere.mkdir()
    write_image_atomic(src / "own" / "a.png", make_image((8, 8, 3)))
    write_image_atomic(elsewhere / "b.png", make_image((8, 8, 3)))
    os.symlink(elsewhere, src / "photos")
    os.symlink("..", src / "own" / "up")
    plan = plan_batch(src, tmp_path / "out")
    assert sorted(str(j.src.relative_to(src)) for j in plan.jobs) == ["own/a.png", "photos/b.png"]
    result = run_batch(plan, cpu_engine)
    assert [o.status for o in result.outcomes] == ["done", "done"]
    assert (tmp_path / "out" / "photos" / "b.png").is_file() and (tmp_path / "out" / "own" / "a.png").is_file()


def test_a_file_whose_output_is_another_files_output_folder_fails_alone_at_once(tmp_path, cpu_engine, make_image):
    src = tmp_path / "in"
    (src / "d.png").mkdir(parents=True)  # a folder named like an image
    write_image_atomic(src / "d.png" / "y.png", make_image((8, 8, 3)))
    write_image_atomic(src / "d.jpg", make_image((8, 8, 3)))  # --format png makes it d.png
    plan = plan_batch(src, tmp_path / "out", fmt="png")
    problems = {j.src.name: j.problem for j in plan.jobs}
    assert problems["y.png"] is None
    assert problems["d.jpg"] == (f"{src / 'd.jpg'}: its output {tmp_path / 'out' / 'd.png'} is the folder that "
                                 f"the output of {src / 'd.png' / 'y.png'} goes into")
    result = run_batch(plan, cpu_engine)
    assert {o.job.src.name: o.status for o in result.outcomes} == {"d.jpg": "failed", "y.png": "done"}
    assert (tmp_path / "out" / "d.png" / "y.png").is_file()
