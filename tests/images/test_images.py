"""Image and folder upscaling as a library: planes against the CPU engine, round trips of
alpha / 16-bit / grayscale through real files, folder mirroring and skipping, bad inputs,
and no partial file under a final name."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import srgpu.images.files as imagefile
from srgpu.color import quantize, rgb_to_ycbcr, ycbcr_to_rgb
from srgpu.batch.plan import BatchError, plan_batch
from srgpu.images.upscale import fit_to_format, upscale_image
from srgpu.batch.local import run_batch
from srgpu.images.files import ImageFileError, read_image, write_image_atomic
from srgpu.manifest import JOURNAL_NAME, MANIFEST_NAME


def expected_rgb(image: np.ndarray, engine) -> np.ndarray:
    """The RGB path from the engine's own planes: Y SRCNN, Cb/Cr bicubic, BT.601 back to RGB."""
    top = np.iinfo(image.dtype).max
    out = (image.shape[0] * engine.scale, image.shape[1] * engine.scale)
    ycc = rgb_to_ycbcr(image[..., :3].astype(np.float64) / top)
    y = engine.srcnn_plane(ycc[..., 0].astype(np.float32), out, top)
    cb = engine.bicubic_plane(ycc[..., 1].astype(np.float32), out, top)
    cr = engine.bicubic_plane(ycc[..., 2].astype(np.float32), out, top)
    return quantize(ycbcr_to_rgb(np.stack([y, cb, cr], -1)), image.dtype, top)


def files_under(folder: Path) -> list[str]:
    """Every file below ``folder`` (temporaries included), but for the manifest of a folder run."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST_NAME)


def names_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != MANIFEST_NAME)


# ---------------------------------------------------------------- planes


def test_gray_goes_through_srcnn_directly(cpu_engine, make_image):
    g = make_image((9, 14), np.uint8, seed=1)
    out = upscale_image(g, cpu_engine)
    assert out.dtype == np.uint8 and out.shape == (18, 28)
    np.testing.assert_array_equal(out, cpu_engine.srcnn_plane(g, (18, 28), 255))


def test_rgb_uses_luma_srcnn_and_bicubic_chroma(cpu_engine, make_image):
    rgb = make_image((10, 12, 3), np.uint8, seed=2)
    out = upscale_image(rgb, cpu_engine)
    np.testing.assert_array_equal(out, expected_rgb(rgb, cpu_engine))
    # the luma of the result is the SRCNN plane (to rounding), the chroma the bicubic planes
    ycc_out = rgb_to_ycbcr(out / 255.0)
    ycc_in = rgb_to_ycbcr(rgb / 255.0)
    y = cpu_engine.srcnn_plane(ycc_in[..., 0].astype(np.float32), (20, 24), 255)
    cb = cpu_engine.bicubic_plane(ycc_in[..., 1].astype(np.float32), (20, 24), 255)
    cr = cpu_engine.bicubic_plane(ycc_in[..., 2].astype(np.float32), (20, 24), 255)
    unclipped = ycbcr_to_rgb(np.stack([y, cb, cr], -1))
    inside = np.all((unclipped > 0.01) & (unclipped < 0.99), axis=-1)  # away from RGB clipping
    assert inside.mean() > 0.5
    assert np.abs(ycc_out[..., 0] - y)[inside].max() < 1.0 / 255
    assert np.abs(ycc_out[..., 0] - y)[inside].mean() < 0.3 / 255


def test_gray_stored_as_rgb_stays_gray(cpu_engine, make_image):
    g = make_image((8, 11), np.uint8, seed=3)
    out = upscale_image(np.repeat(g[..., None], 3, axis=2), cpu_engine)
    assert np.abs(out.astype(int) - out[..., :1]).max() <= 1  # R = G = B to rounding
    # BT.601 studio-range luma of a gray image is 16 + 219 g: SRCNN then acts on that plane
    assert out.shape == (16, 22, 3)


def test_alpha_is_bicubic_in_its_own_depth(cpu_engine, make_image):
    rgba = make_image((7, 9, 4), np.uint16, seed=4)
    out = upscale_image(rgba, cpu_engine)
    assert out.dtype == np.uint16 and out.shape == (14, 18, 4)
    np.testing.assert_array_equal(out[..., 3], cpu_engine.bicubic_plane(rgba[..., 3], (14, 18), 65535))
    np.testing.assert_array_equal(out[..., :3], expected_rgb(rgba, cpu_engine))


# ---------------------------------------------------------------- round trips through files


def _one(tmp_path: Path, name: str, image: np.ndarray, engine, fmt: str | None = None) -> np.ndarray:
    src = tmp_path / "in" / name
    src.parent.mkdir(parents=True, exist_ok=True)
    write_image_atomic(src, image)
    plan = plan_batch(src.parent, tmp_path / "out", fmt=fmt)
    result = run_batch(plan, engine)
    assert result.exit_code == 0, result.failed
    return read_image(plan.jobs[0].dst)


def test_sixteen_bit_gray_png_round_trip(tmp_path, cpu_engine, make_image):
    g = make_image((11, 7), np.uint16, seed=5)
    out = _one(tmp_path, "g16.png", g, cpu_engine)
    assert out.dtype == np.uint16 and out.ndim == 2
    np.testing.assert_array_equal(out, cpu_engine.srcnn_plane(g, (22, 14), 65535))
    assert np.count_nonzero(out % 257) > out.size // 2  # real 16-bit values, not 8-bit scaled up


def test_sixteen_bit_rgb_png_round_trip(tmp_path, cpu_engine, make_image):
    rgb = make_image((6, 9, 3), np.uint16, seed=6)
    out = _one(tmp_path, "c16.png", rgb, cpu_engine)
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(out, expected_rgb(rgb, cpu_engine))


def test_rgba_png_and_webp_round_trip(tmp_path, cpu_engine, make_image):
    rgba = make_image((8, 10, 4), np.uint8, seed=7)
    rgba[..., 3] = np.linspace(0, 255, 10).astype(np.uint8)  # a real alpha gradient
    png = _one(tmp_path, "a.png", rgba, cpu_engine)
    np.testing.assert_array_equal(png, upscale_image(rgba, cpu_engine))
    webp = _one(tmp_path / "w", "a.png", rgba, cpu_engine, fmt="webp")  # lossless webp
    visible = png[..., 3] > 0  # libwebp drops the colour of fully transparent pixels
    np.testing.assert_array_equal(webp[..., 3], png[..., 3])
    np.testing.assert_array_equal(webp[visible], png[visible])


def test_gray_png_stays_gray(tmp_path, cpu_engine, make_image):
    g = make_image((9, 9), np.uint8, seed=8)
    out = _one(tmp_path, "g.png", g, cpu_engine)
    assert out.ndim == 2
    np.testing.assert_array_equal(out, cpu_engine.srcnn_plane(g, (18, 18), 255))


def test_format_conversions(make_image):
    deep = make_image((4, 4, 3), np.uint16)
    eight = fit_to_format(deep, ".jpg")
    assert eight.dtype == np.uint8
    np.testing.assert_array_equal(eight, quantize(deep / 65535.0, np.uint8))
    assert fit_to_format(deep, ".png") is deep
    with pytest.raises(ImageFileError, match="alpha"):
        fit_to_format(make_image((4, 4, 4), np.uint8), ".jpg")


# ---------------------------------------------------------------- folders


@pytest.fixture
def tree(tmp_path, make_image) -> Path:
    src = tmp_path / "photos"
    (src / "2024" / "summer").mkdir(parents=True)
    (src / ".cache").mkdir()
    write_image_atomic(src / "a.png", make_image((6, 5, 3), seed=1))
    write_image_atomic(src / "2024" / "b.jpg", make_image((5, 7, 3), seed=2))
    write_image_atomic(src / "2024" / "summer" / "c.png", make_image((4, 6), seed=3))
    write_image_atomic(src / ".cache" / "thumb.png", make_image((4, 4), seed=4))
    (src / ".DS_Store").write_bytes(b"junk")
    return src


def test_folder_is_mirrored(tree, tmp_path, cpu_engine):
    out = tmp_path / "big"
    result = run_batch(plan_batch(tree, out), cpu_engine)
    assert result.exit_code == 0 and len(result.done) == 3
    assert files_under(out) == ["2024/b.jpg", "2024/summer/c.png", "a.png"]  # hidden files left alone
    assert read_image(out / "2024" / "summer" / "c.png").shape == (8, 12)
    assert read_image(out / "2024" / "b.jpg").shape == (10, 14, 3)
    for p in out.rglob("*"):
        if p.is_file():
            assert oct(p.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_existing_outputs_are_skipped_unless_overwrite(tree, tmp_path, cpu_engine):
    out = tmp_path / "big"
    (out / "2024").mkdir(parents=True)
    (out / "2024" / "b.jpg").write_bytes(b"keep me")
    result = run_batch(plan_batch(tree, out), cpu_engine)
    assert [o.job.dst.name for o in result.skipped] == ["b.jpg"] and len(result.done) == 2
    assert (out / "2024" / "b.jpg").read_bytes() == b"keep me"
    assert result.exit_code == 0
    again = run_batch(plan_batch(tree, out, overwrite=True), cpu_engine)
    assert len(again.done) == 3
    assert read_image(out / "2024" / "b.jpg").shape == (10, 14, 3)


def test_format_option_changes_extensions(tree, tmp_path, cpu_engine):
    out = tmp_path / "webp"
    result = run_batch(plan_batch(tree, out, fmt="webp"), cpu_engine)
    assert result.exit_code == 0
    assert files_under(out) == ["2024/b.webp", "2024/summer/c.webp", "a.webp"]


def test_corrupt_and_foreign_files_are_reported_and_skipped(tree, tmp_path, cpu_engine):
    (tree / "2024" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    (tree / "notes.txt").write_text("not an image")
    out = tmp_path / "big"
    result = run_batch(plan_batch(tree, out), cpu_engine)
    assert result.exit_code == 1
    failed = {o.job.src.name: o.message for o in result.failed}
    assert set(failed) == {"broken.png", "notes.txt"}
    assert "broken.png" in failed["broken.png"] and "not a readable image" in failed["broken.png"]
    assert len(result.done) == 3 and files_under(out) == ["2024/b.jpg", "2024/summer/c.png", "a.png"]
    assert "3 upscaled" in result.summary() and "2 failed" in result.summary()


def test_outcomes_come_in_job_order_while_images_are_written_behind(tmp_path, cpu_engine, make_image):
    """Images are written on a background thread, but every outcome (written, failed while
    reading, skipped) is reported in the plan's order, each once, after its file is complete."""
    src = tmp_path / "in"
    src.mkdir()
    for name in ("a.png", "c.png", "e.png"):
        write_image_atomic(src / name, make_image((6, 5, 3), seed=len(name)))
    (src / "b.png").write_bytes(b"not a png")
    (src / "d.txt").write_text("text")
    out = tmp_path / "out"
    out.mkdir()
    write_image_atomic(out / "e.png", make_image((2, 2, 3)))  # exists: skipped
    started, reported = [], []

    def done(outcome):
        reported.append(outcome)
        if outcome.status == "done":  # complete under its final name when reported
            assert read_image(outcome.job.dst).shape == (12, 10, 3)

    plan = plan_batch(src, out)
    result = run_batch(plan, cpu_engine, on_start=lambda job: started.append(job), on_done=done)
    names = [j.src.name for j in plan.jobs]
    assert [j.src.name for j in started] == names == [o.job.src.name for o in reported]
    assert list(result.outcomes) == reported
    assert [o.status for o in reported] == ["done", "failed", "done", "failed", "skipped"]


def test_an_engine_error_stops_the_batch_after_the_images_before_it_are_whole(tmp_path, cpu_engine, make_image):
    from srgpu.engine.cpu import CPUEngine

    class Exploding(CPUEngine):
        calls = 0

        def upscale_frame(self, planes, specs, max_value):
            Exploding.calls += 1
            if Exploding.calls == 3:
                raise RuntimeError("the GPU fell off the bus")
            return super().upscale_frame(planes, specs, max_value)

    src = tmp_path / "in"
    src.mkdir()
    for name in "abcd":
        write_image_atomic(src / f"{name}.png", make_image((6, 5, 3), seed=ord(name)))
    out = tmp_path / "out"
    reported = []
    with pytest.raises(RuntimeError, match="fell off the bus"):
        run_batch(plan_batch(src, out), Exploding(cpu_engine.model, 2), on_done=reported.append)
    assert [(o.job.src.name, o.status) for o in reported] == [("a.png", "done"), ("b.png", "done")]
    assert names_in(out) == ["a.png", "b.png"]  # whole, no temporary files
    assert all(read_image(out / n).shape == (12, 10, 3) for n in ("a.png", "b.png"))


def test_two_inputs_never_share_one_output(tmp_path, cpu_engine, make_image):
    src = tmp_path / "in"
    src.mkdir()
    write_image_atomic(src / "a.jpg", make_image((4, 4, 3), seed=1))
    write_image_atomic(src / "a.png", make_image((4, 4, 3), seed=2))
    result = run_batch(plan_batch(src, tmp_path / "out", fmt="webp"), cpu_engine)
    assert [o.job.src.name for o in result.done] == ["a.jpg"]
    assert [o.job.src.name for o in result.failed] == ["a.png"]
    assert "already the output of" in result.failed[0].message
    np.testing.assert_array_equal(read_image(tmp_path / "out" / "a.webp"),
                                  upscale_image(read_image(src / "a.jpg"), cpu_engine))


def test_output_inside_input_is_not_walked(tree, cpu_engine):
    out = tree / "upscaled"
    first = run_batch(plan_batch(tree, out), cpu_engine)
    second = run_batch(plan_batch(tree, out), cpu_engine)
    assert len(first.done) == 3 and len(second.skipped) == 3 and not second.failed


def test_alpha_to_jpeg_fails_for_that_file_only(tmp_path, cpu_engine, make_image):
    src = tmp_path / "in"
    src.mkdir()
    write_image_atomic(src / "alpha.png", make_image((4, 4, 4)))
    write_image_atomic(src / "plain.png", make_image((4, 4, 3)))
    result = run_batch(plan_batch(src, tmp_path / "out", fmt="jpg"), cpu_engine)
    assert [o.job.src.name for o in result.failed] == ["alpha.png"]
    assert files_under(tmp_path / "out") == ["plain.jpg"]


def test_alpha_to_jpeg_fails_before_any_upscaling(tmp_path, random_npz, make_image):
    from srgpu.engine.cpu import CPUEngine
    from srgpu.model import load_npz

    class Counting(CPUEngine):
        frames = 0

        def upscale_frame(self, planes, specs, max_value):
            self.frames += 1
            return super().upscale_frame(planes, specs, max_value)

    engine = Counting(load_npz(random_npz), 2)
    write_image_atomic(tmp_path / "alpha.png", make_image((4, 4, 4)))
    result = run_batch(plan_batch(tmp_path / "alpha.png", tmp_path / "o.jpg"), engine)
    assert result.failed and "alpha" in result.failed[0].message
    assert engine.frames == 0 and not (tmp_path / "o.jpg").exists()


def test_format_with_a_dot_or_capitals_is_the_same_format(tmp_path, cpu_engine, make_image):
    img = tmp_path / "a.png"
    write_image_atomic(img, make_image((4, 4, 3)))
    for fmt in (".png", "PNG", ".Png"):
        plan = plan_batch(img, tmp_path / "o.png", fmt=fmt)
        assert plan.jobs[0].dst == tmp_path / "o.png"
    src = tmp_path / "in"
    src.mkdir()
    write_image_atomic(src / "b.jpg", make_image((4, 4, 3)))
    plan = plan_batch(src, tmp_path / "out", fmt=".WEBP")
    assert [j.dst.name for j in plan.jobs] == ["b.webp"]


# ---------------------------------------------------------------- bad requests


def test_request_errors(tmp_path, make_image):
    img = tmp_path / "a.png"
    write_image_atomic(img, make_image((4, 4, 3)))
    (tmp_path / "exists.png").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("x")
    cases = [
        (tmp_path / "missing.png", tmp_path / "o.png", {}, "no such file"),
        (img, tmp_path / "nodir" / "o.png", {}, "output directory does not exist"),
        (img, img, {"overwrite": True}, "output is the input"),
        (img, tmp_path / "exists.png", {}, "output exists"),
        (img, tmp_path / "o.gif", {}, "cannot write an image"),
        (img, tmp_path / "o.png", {"fmt": "jpg"}, "does not match --format"),
        (img, tmp_path / "o.png", {"fmt": "gif"}, "unsupported --format"),
        (tmp_path / "notes.txt", tmp_path / "o.png", {}, "not an image or video"),
        (tmp_path, tmp_path, {}, "output folder is the input folder"),
        (tmp_path, tmp_path / "no" / "such" / "dir", {}, "output directory does not exist"),
        (tmp_path, img, {}, "must be a folder"),
    ]
    for src, dst, kw, message in cases:
        with pytest.raises(BatchError, match=message):
            plan_batch(src, dst, **kw)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BatchError, match="no files"):
        plan_batch(empty, tmp_path / "out")


def test_single_file_into_existing_folder(tmp_path, make_image):
    img = tmp_path / "a.png"
    write_image_atomic(img, make_image((4, 4, 3)))
    (tmp_path / "out").mkdir()
    plan = plan_batch(img, tmp_path / "out", fmt="webp")
    assert plan.single and plan.jobs[0].dst == tmp_path / "out" / "a.webp"


# ---------------------------------------------------------------- nothing partial on failure


def test_encode_failure_leaves_nothing(tmp_path, cpu_engine, make_image):
    # WebP cannot hold a side longer than 16383 pixels: the encode fails for real
    src = tmp_path / "in"
    src.mkdir()
    write_image_atomic(src / "wide.png", make_image((1, 8500), seed=9))
    write_image_atomic(src / "ok.png", make_image((3, 3), seed=9))
    out = tmp_path / "out"
    result = run_batch(plan_batch(src, out, fmt="webp"), cpu_engine)
    assert [o.job.src.name for o in result.failed] == ["wide.png"]
    assert "cannot encode" in result.failed[0].message
    assert names_in(out) == ["ok.webp"]  # no wide.webp, no temporary file


@pytest.mark.parametrize("overwrite,publisher", [(False, "link"), (True, "replace")])
def test_failure_after_the_temp_file_is_written_leaves_nothing(tmp_path, cpu_engine, make_image, monkeypatch,
                                                               overwrite, publisher):
    """The final step fails (a full disk when the name is given): no output, no temporary.
    Without --overwrite the name is given by a hard link (never replacing), with it by a rename."""
    src = tmp_path / "a.png"
    write_image_atomic(src, make_image((4, 5, 3)))
    out = tmp_path / "out"
    out.mkdir()
    seen = []

    def failing(a, b):
        seen.append(Path(a))
        assert Path(a).is_file() and Path(a).stat().st_size > 0  # the data was really written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(imagefile.os, publisher, failing)
    result = run_batch(plan_batch(src, out / "a.png", overwrite=overwrite), cpu_engine)
    assert result.exit_code == 1 and "No space left" in result.failed[0].message
    assert seen and seen[0].parent == out and seen[0].name.startswith(".a.")
    assert list(out.iterdir()) == []

    def interrupted(a, b):
        raise KeyboardInterrupt

    monkeypatch.setattr(imagefile.os, publisher, interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_batch(plan_batch(src, out / "a.png", overwrite=overwrite), cpu_engine)
    assert list(out.iterdir()) == []


def test_video_in_folder_without_video_support_is_a_reported_failure(tmp_path, cpu_engine, make_image,
                                                                      monkeypatch):
    import srgpu.batch.plan as plan

    monkeypatch.setattr(plan, "_video", None)
    src = tmp_path / "in"
    src.mkdir()
    (src / "clip.mp4").write_bytes(b"\x00" * 64)
    write_image_atomic(src / "a.png", make_image((4, 4)))
    result = run_batch(plan_batch(src, tmp_path / "out"), cpu_engine)
    assert [o.job.kind for o in result.failed] == ["video"]
    assert "video support is not available" in result.failed[0].message
    assert len(result.done) == 1


def test_folder_videos_in_containers_srgpu_cannot_write_become_mkv(tmp_path: Path, cpu_engine) -> None:
    """A folder of .avi/.mp4 videos: the .mp4 keeps its container, the .avi (which srgpu cannot
    write) becomes .mkv instead of failing, and both are upscaled."""
    from test_video import make_clip, stream_lines

    tree = tmp_path / "in"
    tree.mkdir()
    make_clip(tree / "a.avi", size="16x12", frames=3, codec="mpeg4")
    make_clip(tree / "b.mp4", size="16x12", frames=3, codec="libx264")
    out = tmp_path / "out"
    plan = plan_batch(tree, out)
    assert sorted(j.dst.name for j in plan.jobs) == ["a.mkv", "b.mp4"]
    result = run_batch(plan, cpu_engine)
    assert result.exit_code == 0, [o.message for o in result.failed]
    assert "32x24" in stream_lines(out / "a.mkv", "Video")[0]
    assert "32x24" in stream_lines(out / "b.mp4", "Video")[0]


# ---------------------------------------------------------------- nothing lost: files that appear during a run


def _intruding_engine(cpu_engine, victim: Path, at: int = 1, content: bytes = b"someone else's file"):
    """A CPU engine that, while upscaling its ``at``-th image, puts a file of another program at
    ``victim``: the file appears after that job was planned and checked, before its output is
    published."""
    from srgpu.engine.cpu import CPUEngine

    class Intruding(CPUEngine):
        calls = 0

        def upscale_frame(self, planes, specs, max_value):
            self.calls += 1
            if self.calls == at:
                victim.write_bytes(content)
            return super().upscale_frame(planes, specs, max_value)

    return Intruding(cpu_engine.model, 2)


def test_a_file_that_appears_during_a_folder_run_is_never_replaced(tmp_path, cpu_engine, make_image):
    src = tmp_path / "in"
    src.mkdir()
    for name in ("a.png", "b.png"):
        write_image_atomic(src / name, make_image((5, 6, 3), seed=len(name)))
    out = tmp_path / "out"
    engine = _intruding_engine(cpu_engine, out / "b.png", at=2)
    result = run_batch(plan_batch(src, out), engine)
    assert [o.job.src.name for o in result.done] == ["a.png"]
    assert [o.job.src.name for o in result.failed] == ["b.png"] and result.exit_code == 1
    message = result.failed[0].message
    assert "appeared" in message and str(out / "b.png") in message and "\n" not in message
    assert (out / "b.png").read_bytes() == b"someone else's file"
    assert names_in(out) == ["a.png", "b.png"]  # no temporary left behind


def test_a_file_that_appears_during_a_single_run_is_never_replaced(tmp_path, cpu_engine, make_image):
    src = tmp_path / "a.png"
    write_image_atomic(src, make_image((5, 6, 3)))
    dst = tmp_path / "big.png"
    result = run_batch(plan_batch(src, dst), _intruding_engine(cpu_engine, dst))
    assert result.exit_code == 1 and "appeared" in result.failed[0].message
    assert dst.read_bytes() == b"someone else's file"
    # --overwrite: the user asked for the output to replace whatever is there
    dst.unlink()
    result = run_batch(plan_batch(src, dst, overwrite=True), _intruding_engine(cpu_engine, dst))
    assert result.exit_code == 0 and read_image(dst).shape == (10, 12, 3)


# ---------------------------------------------------------------- temporaries of killed runs


def _temp_owned_by(final: Path, pid: int) -> Path:
    """The temporary name srgpu gives ``final``, as if process ``pid`` had made it."""
    from srgpu import outputs

    name = outputs.temp_path(final).name.replace(f"-{os.getpid()}-", f"-{pid}-", 1)
    return final.parent / name


def test_stale_temporaries_of_dead_runs_are_removed_before_writing(tmp_path, cpu_engine, make_image, monkeypatch):
    """What a killed srgpu left in the folders a run writes into goes, once per folder: only names of
    srgpu's own pattern, of this host, whose process is gone."""
    import subprocess
    import sys

    from srgpu import outputs

    looked: list[Path] = []
    real = outputs.stale_temps_in

    def stale_temps_in(folder):  # the real function, counted
        looked.append(Path(folder))
        return real(folder)

    monkeypatch.setattr(outputs, "stale_temps_in", stale_temps_in)
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    for name in ("a.png", "c.png", "sub/b.png"):
        write_image_atomic(src / name, make_image((4, 5, 3)))
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])  # its pid is gone once it has exited
    dead.wait()
    alive = subprocess.Popen(["sleep", "60"])
    try:
        stale = [_temp_owned_by(out / "a.png", dead.pid), _temp_owned_by(out / "sub" / "b.png", dead.pid),
                 _temp_owned_by(out / "other.webp", dead.pid)]
        live = _temp_owned_by(out / "c.png", alive.pid)
        users = [out / ".a.png.srgpu-notes.part.png", out / "a.png.srgpu-x-1-ab.part.png",
                 out / ".a.png.srgpu-elsewhere-1-ab.part.png"]  # not srgpu's pattern, or another host
        for p in stale + [live] + users:
            p.write_bytes(b"partial")
        result = run_batch(plan_batch(src, out), cpu_engine)
        assert result.exit_code == 0
        assert not any(p.exists() for p in stale)
        assert live.exists() and all(p.exists() for p in users)
        assert sorted(looked) == [out, out / "sub"]
    finally:
        alive.kill()
        alive.wait()


# ---------------------------------------------------------------- fail before the work


def test_an_unwritable_output_folder_fails_before_any_upscaling(tmp_path, read_only_dir, make_image):
    src = tmp_path / "in"
    src.mkdir()
    for name in ("a.png", "b.png"):
        write_image_atomic(src / name, make_image((4, 5, 3)))
    for out in (read_only_dir, read_only_dir / "new"):  # writing into it, or creating a folder in it
        with pytest.raises(BatchError, match="cannot write") as error:
            plan_batch(src, out)
        assert str(read_only_dir) in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(BatchError, match="cannot write"):
        plan_batch(src / "a.png", read_only_dir / "a.png")
    assert list(read_only_dir.iterdir()) == []


@pytest.mark.parametrize("name", ["seq.mp4", "big.png", "frames.JPG"])
def test_a_folder_input_with_an_output_named_like_a_file_is_refused(tmp_path, make_image, name):
    src = tmp_path / "in"
    src.mkdir()
    write_image_atomic(src / "a.png", make_image((4, 5, 3)))
    with pytest.raises(BatchError, match="a folder input needs an output folder"):
        plan_batch(src, tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]
    (tmp_path / name).mkdir()  # an existing folder with such a name is a folder
    assert plan_batch(src, tmp_path / name).jobs[0].dst == tmp_path / name / "a.png"


def test_an_output_file_name_taken_by_a_folder_is_a_clear_error_before_the_work(tmp_path, cpu_engine, make_image):
    img = tmp_path / "a.png"
    write_image_atomic(img, make_image((4, 5, 3)))
    (tmp_path / "x.png" / "a.png").mkdir(parents=True)  # the output's name is a folder
    (tmp_path / "clip.mp4").write_bytes(b"\0" * 64)  # a video input: the same rule
    (tmp_path / "v" / "clip.mp4").mkdir(parents=True)
    for overwrite in (False, True):
        with pytest.raises(BatchError, match="is a folder"):
            plan_batch(img, tmp_path / "x.png", overwrite=overwrite)
        with pytest.raises(BatchError, match="is a folder"):
            plan_batch(tmp_path / "clip.mp4", tmp_path / "v", overwrite=overwrite)
    # in a folder run, that file fails before it is upscaled and the rest goes on
    src = tmp_path / "in"
    src.mkdir()
    write_image_atomic(src / "a.png", make_image((4, 5, 3)))
    write_image_atomic(src / "b.png", make_image((4, 5, 3)))
    out = tmp_path / "out"
    (out / "a.png").mkdir(parents=True)
    for overwrite in (False, True):
        result = run_batch(plan_batch(src, out, overwrite=overwrite), cpu_engine)
        assert [(o.job.src.name, o.status) for o in result.outcomes] == [("a.png", "failed"), ("b.png", "done")]
        assert "is a folder" in result.failed[0].message
        (out / "b.png").unlink()
    assert (out / "a.png").is_dir()


# ---------------------------------------------------------------- resuming a folder (the manifest)


def _engine(seed: int, scale: int, name: str | None = None):
    import dataclasses

    from srgpu.engine.cpu import CPUEngine
    from srgpu.model import random_model

    model = random_model("9-1-5", seed=seed, scale=scale)
    return CPUEngine(dataclasses.replace(model, name=name) if name else model, scale)


def _by_name(outcomes) -> dict[str, object]:
    return {o.job.src.name: o for o in outcomes}


def test_resume_skips_only_complete_outputs_made_from_the_same_sources(tree, tmp_path, cpu_engine, make_image):
    write_image_atomic(tree / "d.png", make_image((5, 4, 3), seed=4))
    out = tmp_path / "big"
    first = run_batch(plan_batch(tree, out), cpu_engine)
    assert len(first.done) == 4 and (out / MANIFEST_NAME).is_file() and not (out / JOURNAL_NAME).exists()
    c = out / "2024" / "summer" / "c.png"
    c.write_bytes(c.read_bytes()[:40])  # cut short, as a power cut can leave a file
    (out / "a.png").write_bytes(b"")  # emptied
    write_image_atomic(tree / "2024" / "b.jpg", make_image((5, 7, 3), seed=99))  # the source changed
    second = run_batch(plan_batch(tree, out), cpu_engine)
    assert second.exit_code == 0 and [o.job.src.name for o in second.skipped] == ["d.png"]
    assert "done by an earlier run" in second.skipped[0].message
    done = _by_name(second.done)
    assert set(done) == {"a.png", "b.jpg", "c.png"} and all(o.redone for o in done.values())
    assert done["a.png"].notes == ("redone: the output is incomplete or was changed "
                                   f"(0 bytes, srgpu wrote {(out / 'a.png').stat().st_size})",)
    assert "incomplete" in done["c.png"].notes[0]
    assert done["b.jpg"].notes == ("redone: the source changed since the output was made",)
    assert second.summary().startswith("3 upscaled (3 redone), 1 skipped (output exists), 0 failed")
    np.testing.assert_array_equal(read_image(c), upscale_image(read_image(tree / "2024" / "summer" / "c.png"),
                                                               cpu_engine))
    third = run_batch(plan_batch(tree, out), cpu_engine)
    assert len(third.skipped) == 4 and not third.done


def test_resume_redoes_outputs_made_with_other_settings(tmp_path, make_image):
    src = tmp_path / "in"
    src.mkdir()
    for name in ("a.png", "b.png"):
        write_image_atomic(src / name, make_image((5, 6, 3), seed=len(name)))
    out = tmp_path / "out"
    assert len(run_batch(plan_batch(src, out), _engine(1, 3)).done) == 2
    x2 = run_batch(plan_batch(src, out), _engine(1, 2))
    assert [o.redone for o in x2.done] == [True, True] and read_image(out / "a.png").shape == (10, 12, 3)
    assert x2.done[0].notes == ("redone: the output was made with scale 3 (now 2)",)  # same seed, same weights
    other = run_batch(plan_batch(src, out), _engine(2, 2))
    assert other.done[0].notes == ("redone: the output was made with another model "
                                   "(random-9-1-5-seed1; now random-9-1-5-seed2)",)
    # the same weights under another name (e.g. the model file was renamed) are the same model
    renamed = run_batch(plan_batch(src, out), _engine(2, 2, name="renamed"))
    assert len(renamed.skipped) == 2 and not renamed.done


def test_existing_files_srgpu_did_not_make_are_left_alone_unless_overwrite(tmp_path, cpu_engine, make_image):
    src = tmp_path / "in"
    src.mkdir()
    for name in ("a.png", "b.png", "c.png"):
        write_image_atomic(src / name, make_image((5, 6, 3), seed=len(name)))
    out = tmp_path / "out"
    out.mkdir()
    write_image_atomic(out / "a.png", make_image((3, 3, 3)))  # someone's image, or an older srgpu's output
    (out / "b.png").write_bytes(b"")  # an empty file
    result = run_batch(plan_batch(src, out), cpu_engine)
    left = _by_name(result.skipped)
    assert set(left) == {"a.png", "b.png"} and all(o.unrecorded for o in left.values())
    assert "srgpu has no record of making it; left as it is (--overwrite replaces it)" in left["b.png"].message
    assert result.summary().startswith("1 upscaled, 2 skipped (output exists; 2 not recorded as made by srgpu, "
                                       "left as they are: --overwrite replaces them), 0 failed")
    assert read_image(out / "a.png").shape == (3, 3, 3) and (out / "b.png").read_bytes() == b""
    replaced = run_batch(plan_batch(src, out, overwrite=True), cpu_engine)
    assert len(replaced.done) == 3 and not any(o.redone for o in replaced.done)
    assert len(run_batch(plan_batch(src, out), cpu_engine).skipped) == 3  # now srgpu's, and done


def test_the_manifest_is_written_once_per_run_and_the_journal_once_per_file(tmp_path, cpu_engine, make_image):
    import json

    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    names = ["a.png", "b.png", "sub/c.png", "sub/d.png"]
    for name in names:
        write_image_atomic(src / name, make_image((4, 5, 3), seed=len(name)))
    out = tmp_path / "out"
    seen = []

    def done(outcome):
        journal = out / JOURNAL_NAME
        seen.append(((out / MANIFEST_NAME).exists(), len(journal.read_bytes().splitlines())))

    result = run_batch(plan_batch(src, out), cpu_engine, on_done=done)
    assert result.exit_code == 0
    assert [m for m, _ in seen] == [False] * 4  # no rewrite of the manifest per file
    assert [n for _, n in seen] == sorted(n for _, n in seen) and seen[-1][1] >= 2 * 4
    assert not (out / JOURNAL_NAME).exists()
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["format"] == "srgpu-manifest" and manifest["pending"] == []
    assert sorted(manifest["outputs"]) == names
    (key, settings), = manifest["settings"].items()
    assert settings["values"]["scale"] == 2 and settings["values"]["arch"] == "9-1-5"
    for name in names:
        entry = manifest["outputs"][name]
        st = (src / name).stat()
        assert entry == {"source": name, "source_size": st.st_size, "source_mtime_ns": st.st_mtime_ns,
                         "size": (out / name).stat().st_size, "settings": key}


def test_a_killed_run_resumes_redoing_at_most_the_file_it_was_writing(tmp_path, random_npz, cpu_engine, make_image):
    """SIGKILL in the middle of a folder: the next run skips every output the killed one finished
    (its journal says so), redoes at most the one it was writing, and removes its temporaries."""
    import signal
    import subprocess
    import sys

    src = tmp_path / "in"
    src.mkdir()
    for i in range(8):
        write_image_atomic(src / f"{i}.png", make_image((6, 7, 3), seed=i))
    out = tmp_path / "out"
    script = f"""
import os, signal, time
from pathlib import Path
from srgpu.engine.cpu import CPUEngine
from srgpu.batch.local import run_batch
from srgpu.batch.plan import plan_batch
from srgpu.model import load_npz

class Killed(CPUEngine):
    calls = 0
    def upscale_frame(self, *args):
        self.calls += 1
        if self.calls == 6:
            # the writers of the first five are on other threads: on a loaded machine they may lag, so
            # wait (a few seconds at most) until three are journalled as done, then kill mid-folder
            journal = Path({str(out)!r}) / {JOURNAL_NAME!r}
            for _ in range(500):
                if journal.exists() and journal.read_text().count('"op":"done"') >= 3:
                    break
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().upscale_frame(*args)

run_batch(plan_batch(Path({str(src)!r}), Path({str(out)!r})), Killed(load_npz(Path({str(random_npz)!r})), 2))
"""
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (out / JOURNAL_NAME).exists() and not (out / MANIFEST_NAME).exists()
    result = run_batch(plan_batch(src, out), cpu_engine)
    assert result.exit_code == 0 and not any(o.unrecorded for o in result.skipped)
    assert len(result.skipped) >= 3 and sum(o.redone for o in result.done) <= 1
    assert len(result.skipped) + len(result.done) == 8
    assert files_under(out) == [f"{i}.png" for i in range(8)]  # every output, no temporary
    for i in range(8):
        np.testing.assert_array_equal(read_image(out / f"{i}.png"), upscale_image(read_image(src / f"{i}.png"),
                                                                                  cpu_engine))


def test_an_output_a_killed_run_began_but_did_not_record_is_redone(tmp_path, cpu_engine, make_image):
    src = tmp_path / "in"
    src.mkdir()
    for name in ("a.png", "b.png"):
        write_image_atomic(src / name, make_image((4, 5, 3), seed=len(name)))
    out = tmp_path / "out"
    run_batch(plan_batch(src, out), cpu_engine)
    # what a run killed between publishing a.png and recording it leaves: 'begin', then a torn line
    (out / JOURNAL_NAME).write_text('{"op":"begin","path":"a.png"}\n{"op":"done","path":"a.p')
    result = run_batch(plan_batch(src, out), cpu_engine)
    assert [(o.job.src.name, o.status) for o in result.outcomes] == [("a.png", "done"), ("b.png", "skipped")]
    assert result.done[0].notes == ("redone: an earlier run was stopped while writing it",)
    assert not (out / JOURNAL_NAME).exists()
    assert len(run_batch(plan_batch(src, out), cpu_engine).skipped) == 2


# ---------------------------------------------------------------- an input is never an output


def test_an_output_folder_inside_the_input_never_replaces_an_input(tmp_path, cpu_engine, make_image):
    """srgpu upscale t -o t/sub --overwrite, with t/a.png and t/sub/a.png: t/sub/a.png is the
    user's file (part of the input tree, not made by srgpu) and is never replaced."""
    t = tmp_path / "t"
    (t / "sub").mkdir(parents=True)
    write_image_atomic(t / "a.png", make_image((4, 5, 3), seed=1))
    write_image_atomic(t / "b.png", make_image((4, 5, 3), seed=2))
    write_image_atomic(t / "sub" / "a.png", make_image((3, 3, 3), seed=3))
    original = (t / "sub" / "a.png").read_bytes()
    for overwrite in (True, False, True):
        result = run_batch(plan_batch(t, t / "sub", overwrite=overwrite), cpu_engine)
        assert [(o.job.src.name, o.status) for o in result.outcomes] == [
            ("a.png", "failed"), ("b.png", "done" if overwrite else "skipped")]
        assert result.exit_code == 1 and "1 failed" in result.summary()
        message = result.failed[0].message
        assert message.startswith(f"{t / 'sub' / 'a.png'}: is a file of the input folder") and "never" in message
        assert (t / "sub" / "a.png").read_bytes() == original
    assert read_image(t / "sub" / "b.png").shape == (8, 10, 3)  # srgpu's own output: replaced on --overwrite


def test_an_output_that_is_one_of_the_input_files_is_refused_even_with_overwrite(tmp_path, cpu_engine, make_image):
    """Input t/sub, output t: t/sub/sub/x.png's output is t/sub/x.png, itself an input."""
    t = tmp_path / "t"
    (t / "sub" / "sub").mkdir(parents=True)
    write_image_atomic(t / "sub" / "x.png", make_image((4, 5, 3), seed=1))
    write_image_atomic(t / "sub" / "sub" / "x.png", make_image((4, 5, 3), seed=2))
    original = (t / "sub" / "x.png").read_bytes()
    result = run_batch(plan_batch(t / "sub", t, overwrite=True), cpu_engine)
    assert [(str(o.job.src.relative_to(t)), o.status) for o in result.outcomes] == [
        ("sub/x.png", "done"), ("sub/sub/x.png", "failed")]
    assert result.failed[0].message == (f"{t / 'sub' / 'x.png'}: is one of the input files; an input is never "
                                        "replaced, even with --overwrite")
    assert (t / "sub" / "x.png").read_bytes() == original and read_image(t / "x.png").shape == (8, 10, 3)
    # an output name that is a hard link to an input is that input
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    write_image_atomic(src / "a.png", make_image((4, 5, 3), seed=3))
    write_image_atomic(src / "b.png", make_image((4, 5, 3), seed=4))
    os.link(src / "a.png", out / "b.png")
    linked = run_batch(plan_batch(src, out, overwrite=True), cpu_engine)
    assert [o.status for o in linked.outcomes] == ["done", "failed"]
    assert "is one of the input files" in linked.failed[0].message
    assert (out / "b.png").samefile(src / "a.png")


# ---------------------------------------------------------------- EXIF orientation and ICC profiles


def make_icc(space: bytes = b"RGB ", text: bytes = b"srgpu test profile") -> bytes:
    """A small but valid ICC v2 display profile (libpng checks the header and tag table)."""
    import struct

    def xyz(x, y, z):
        return b"XYZ \0\0\0\0" + b"".join(struct.pack(">i", round(v * 65536)) for v in (x, y, z))

    gamma = b"curv\0\0\0\0" + struct.pack(">IH", 1, round(2.2 * 256)) + b"\0\0"
    tags = [(b"wtpt", xyz(0.9642, 1.0, 0.8249))]
    if space == b"RGB ":
        tags += [(b"rXYZ", xyz(0.4361, 0.2225, 0.0139)), (b"gXYZ", xyz(0.3851, 0.7169, 0.0971)),
                 (b"bXYZ", xyz(0.1431, 0.0606, 0.7141)), (b"rTRC", gamma), (b"gTRC", gamma), (b"bTRC", gamma)]
    else:
        tags.append((b"kTRC", gamma))
    tags.append((b"cprt", b"text\0\0\0\0" + text + b"\0"))
    at = 128 + 4 + 12 * len(tags)
    table, body = struct.pack(">I", len(tags)), b""
    for sig, data in tags:
        body += b"\0" * (-(at + len(body)) % 4)
        table += sig + struct.pack(">II", at + len(body), len(data))
        body += data
    body += b"\0" * (-(at + len(body)) % 4)
    header = (struct.pack(">I", at + len(body)) + b"none" + bytes([2, 0x10, 0, 0]) + b"mntr" + space + b"XYZ "
              + b"\0" * 12 + b"acsp" + b"\0" * 24 + struct.pack(">I", 0) + struct.pack(">iii", 63190, 65536, 54061)
              + b"\0" * 48)
    assert len(header) == 128
    return header + table + body


def exif_with_orientation(orientation: int, order: str = "<") -> bytes:
    """An EXIF block (a TIFF structure) whose only entry is the orientation."""
    import struct

    mark = b"II" if order == "<" else b"MM"
    return (mark + struct.pack(order + "HI", 42, 8) + struct.pack(order + "H", 1)
            + struct.pack(order + "HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(order + "I", 0))


def jpeg_with_app1(image_rgb: np.ndarray, exif: bytes) -> bytes:
    """A JPEG (OpenCV's encoder) with an APP1 Exif segment spliced in after SOI, as cameras write."""
    import struct

    import cv2

    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(image_rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 95])
    assert ok
    payload = b"Exif\0\0" + exif
    segment = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    data = buf.tobytes()
    return data[:2] + segment + data[2:]


def encode_with(image_rgb: np.ndarray, ext: str, exif: bytes | None = None, icc: bytes | None = None) -> bytes:
    import cv2

    kinds, blobs = [], []
    if exif is not None:
        kinds.append(cv2.IMAGE_METADATA_EXIF)
        blobs.append(np.frombuffer(exif, np.uint8))
    if icc is not None:
        kinds.append(cv2.IMAGE_METADATA_ICCP)
        blobs.append(np.frombuffer(icc, np.uint8))
    image = image_rgb if image_rgb.ndim == 2 else cv2.cvtColor(image_rgb, cv2.COLOR_RGB2BGR if image_rgb.shape[2] == 3
                                                               else cv2.COLOR_RGBA2BGRA)
    ok, buf = cv2.imencodeWithMetadata(ext, image, kinds, blobs)
    assert ok
    return buf.tobytes()


def metadata_of(path: Path) -> dict[int, bytes]:
    import cv2

    _, kinds, blobs = cv2.imdecodeWithMetadata(np.fromfile(str(path), np.uint8), flags=cv2.IMREAD_UNCHANGED)
    return {int(k): np.asarray(b).tobytes() for k, b in zip(kinds, blobs)}


@pytest.mark.parametrize("order", ["<", ">"])
def test_every_exif_orientation_reads_as_opencv_shows_it(tmp_path, make_image, order):
    """read_image applies the EXIF orientation (1-8) as OpenCV's own 8-bit decode does, and keeps
    alpha and 16 bits, which that decode cannot."""
    import cv2

    rgb = make_image((5, 8, 3), seed=11)
    for orientation in range(1, 9):
        path = tmp_path / f"o{orientation}.png"
        path.write_bytes(encode_with(rgb, ".png", exif_with_orientation(orientation, order)))
        shown = cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)  # OpenCV applies it
        assert shown.shape[:2] == ((8, 5) if orientation >= 5 else (5, 8))
        np.testing.assert_array_equal(read_image(path), shown)
        rgba16 = np.concatenate([rgb, rgb[..., :1]], axis=-1).astype(np.uint16) * 257  # alpha = red
        path.write_bytes(encode_with(rgba16, ".png", exif_with_orientation(orientation, order)))
        deep = read_image(path)
        assert deep.dtype == np.uint16 and deep.shape[2] == 4
        np.testing.assert_array_equal(deep[..., :3] // 257, shown)
        np.testing.assert_array_equal(deep[..., 3], deep[..., 0])


def test_a_sideways_camera_jpeg_is_upscaled_upright(tmp_path, cpu_engine, make_image):
    """A JPEG stored landscape with EXIF orientation 6 (a phone held upright): the output is portrait
    as a viewer shows the input, and carries no orientation tag that would turn it again."""
    import cv2

    src = tmp_path / "in"
    src.mkdir()
    (src / "phone.jpg").write_bytes(jpeg_with_app1(make_image((6, 10, 3), seed=12), exif_with_orientation(6)))
    stored = cv2.cvtColor(cv2.imread(str(src / "phone.jpg"), cv2.IMREAD_UNCHANGED), cv2.COLOR_BGR2RGB)
    assert stored.shape == (6, 10, 3)  # landscape as stored
    expected = upscale_image(np.ascontiguousarray(np.rot90(stored, -1)), cpu_engine)  # turned clockwise
    for fmt in ("png", None):
        out = tmp_path / f"out-{fmt}"
        result = run_batch(plan_batch(src, out, fmt=fmt), cpu_engine)
        assert result.exit_code == 0 and not result.done[0].notes
        dst = result.done[0].job.dst
        assert read_image(dst).shape == (20, 12, 3)
        assert cv2.IMAGE_METADATA_EXIF not in metadata_of(dst)
        assert cv2.imread(str(dst), cv2.IMREAD_COLOR).shape == (20, 12, 3)  # a viewer turns nothing
        if fmt == "png":
            np.testing.assert_array_equal(read_image(dst), expected)


@pytest.mark.parametrize("src_ext,fmt", [(".png", None), (".jpg", None), (".png", "webp"), (".webp", "jpg")])
def test_the_icc_profile_is_kept_byte_for_byte(tmp_path, cpu_engine, make_image, src_ext, fmt):
    import cv2

    icc = make_icc()
    src = tmp_path / "in"
    src.mkdir()
    (src / f"a{src_ext}").write_bytes(encode_with(make_image((5, 6, 3), seed=13), src_ext, icc=icc))
    result = run_batch(plan_batch(src, tmp_path / "out", fmt=fmt), cpu_engine)
    assert result.exit_code == 0 and not result.done[0].notes
    assert metadata_of(result.done[0].job.dst)[cv2.IMAGE_METADATA_ICCP] == icc


def test_a_gray_profile_stays_with_a_gray_image_and_is_noted_where_the_output_turns_rgb(tmp_path, cpu_engine,
                                                                                        make_image):
    import cv2

    icc = make_icc(b"GRAY")
    src = tmp_path / "in"
    src.mkdir()
    (src / "g.png").write_bytes(encode_with(make_image((5, 6), seed=14), ".png", icc=icc))
    gray = run_batch(plan_batch(src, tmp_path / "png"), cpu_engine)
    assert not gray.done[0].notes and metadata_of(tmp_path / "png" / "g.png")[cv2.IMAGE_METADATA_ICCP] == icc
    webp = run_batch(plan_batch(src, tmp_path / "webp", fmt="webp"), cpu_engine)  # WebP stores gray as RGB
    assert webp.exit_code == 0
    assert webp.done[0].notes == ("its ICC colour profile is not kept: it describes GRAY colours and the output "
                                  "is RGB",)
    assert cv2.IMAGE_METADATA_ICCP not in metadata_of(tmp_path / "webp" / "g.webp")


def test_a_format_that_cannot_hold_the_profile_says_so(make_image):
    from srgpu.images.files import encode_image_data

    encoded = encode_image_data(make_image((4, 4, 3)), ".bmp", icc=make_icc())
    assert encoded.notes == ("its ICC colour profile is not kept: .bmp files cannot hold one",)
    broken = encode_image_data(make_image((4, 4, 3)), ".png", icc=b"\0\0\0\x10" + b"x" * 12 + b"RGB " + b"y" * 20)
    assert broken.notes == ("its ICC colour profile is not kept: it is malformed",)


def make_tiff(image: np.ndarray, icc: bytes | None = None, orientation: int | None = None, order: str = "<") -> bytes:
    """A minimal uncompressed 8-bit TIFF written by hand (one strip), with the given tags."""
    import struct

    h, w = image.shape[:2]
    spp = 1 if image.ndim == 2 else image.shape[2]
    pixels = np.ascontiguousarray(image).tobytes()
    tags = 9 + (icc is not None) + (orientation is not None)
    blobs = bytearray()
    base = 8 + 2 + 12 * tags + 4

    def put(data: bytes) -> int:
        at = base + len(blobs)
        blobs.extend(data + b"\0" * (len(data) % 2))
        return at

    bits = put(struct.pack(order + "H" * spp, *[8] * spp)) if spp > 2 else None
    icc_at = put(icc) if icc is not None else None
    data_at = put(pixels)

    def entry(tag, kind, count, value):
        if kind == 3 and count == 1:
            return struct.pack(order + "HHIHH", tag, kind, count, value, 0)
        return struct.pack(order + "HHII", tag, kind, count, value)

    entries = [entry(256, 4, 1, w), entry(257, 4, 1, h), entry(258, 3, spp, bits) if bits else entry(258, 3, 1, 8),
               entry(259, 3, 1, 1), entry(262, 3, 1, 2 if spp >= 3 else 1), entry(273, 4, 1, data_at)]
    if orientation is not None:
        entries.append(entry(274, 3, 1, orientation))
    entries += [entry(277, 3, 1, spp), entry(278, 4, 1, h), entry(279, 4, 1, len(pixels))]
    if icc is not None:
        entries.append(entry(34675, 7, len(icc), icc_at))
    mark = b"II" if order == "<" else b"MM"
    return (mark + struct.pack(order + "HI", 42, 8) + struct.pack(order + "H", tags) + b"".join(entries)
            + struct.pack(order + "I", 0) + bytes(blobs))


@pytest.mark.parametrize("order", ["<", ">"])
def test_a_tiff_keeps_its_icc_profile_and_its_orientation_is_applied_once(tmp_path, cpu_engine, make_image, order):
    from srgpu.images.meta import tiff_icc

    icc = make_icc()
    rgb = make_image((5, 8, 3), seed=15)
    src = tmp_path / "in"
    src.mkdir()
    (src / "scan.tif").write_bytes(make_tiff(rgb, icc=icc, orientation=6, order=order))
    assert read_image(src / "scan.tif").shape == (8, 5, 3)  # upright (libtiff applies a TIFF's own tag)
    np.testing.assert_array_equal(read_image(src / "scan.tif"), np.rot90(rgb, -1))
    for fmt, ext in ((None, ".tif"), ("png", ".png")):
        out = tmp_path / f"out-{ext.lstrip('.')}"
        result = run_batch(plan_batch(src, out, fmt=fmt), cpu_engine)
        assert result.exit_code == 0 and not result.done[0].notes
        dst = result.done[0].job.dst
        assert dst.suffix == ext
        np.testing.assert_array_equal(read_image(dst), upscale_image(np.ascontiguousarray(np.rot90(rgb, -1)),
                                                                     cpu_engine))
        assert (tiff_icc(dst.read_bytes()) if ext == ".tif" else metadata_of(dst)[2]) == icc


def test_a_file_that_appears_during_a_video_is_kept_and_that_video_fails_in_one_line(tmp_path, cpu_engine):
    """The video's output is published by srgpu.video, which raises outputs' OutputExistsError:
    a failed outcome for that video (was an exception that stopped the batch), the rest goes on."""
    from test_video import make_clip

    src = tmp_path / "in"
    src.mkdir()
    make_clip(src / "a.mkv", size="16x12", frames=3)
    make_clip(src / "b.mkv", size="16x12", frames=3)
    out = tmp_path / "out"
    result = run_batch(plan_batch(src, out), _intruding_engine(cpu_engine, out / "a.mkv", at=2))
    assert [(o.job.src.name, o.status) for o in result.outcomes] == [("a.mkv", "failed"), ("b.mkv", "done")]
    assert "appeared" in result.failed[0].message and "\n" not in result.failed[0].message
    assert (out / "a.mkv").read_bytes() == b"someone else's file"
    assert names_in(out) == ["a.mkv", "b.mkv"]


def gray_alpha_png(gray: np.ndarray, alpha: np.ndarray) -> bytes:
    """A gray+alpha PNG (colour type 4) written by hand: OpenCV cannot write one."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))

    h, w = gray.shape
    samples = np.stack([gray, alpha], -1).astype(">u2" if gray.dtype == np.uint16 else np.uint8)
    rows = b"".join(b"\0" + samples[r].tobytes() for r in range(h))
    depth = 16 if gray.dtype == np.uint16 else 8
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, 4, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("jobs", [None, 1])
def test_gray_alpha_stays_gray_alpha(dtype, jobs, tmp_path, cpu_engine, make_image):
    from srgpu.batch.local import ImageOptions

    src = tmp_path / "in"
    src.mkdir()
    gray, alpha = make_image((23, 31), dtype, seed=5), make_image((23, 31), dtype, seed=6)
    (src / "la.png").write_bytes(gray_alpha_png(gray, alpha))
    result = run_batch(plan_batch(src, tmp_path / "out"), cpu_engine, images=ImageOptions(jobs=jobs))
    assert result.exit_code == 0
    data = (tmp_path / "out" / "la.png").read_bytes()
    assert data[24] == np.dtype(dtype).itemsize * 8 and data[25] == 4  # IHDR: same depth, gray+alpha
    rgba = read_image(tmp_path / "out" / "la.png")  # OpenCV reads it as RGBA: R = G = B exactly
    assert rgba.shape == (46, 62, 4) and rgba.dtype == dtype
    assert (rgba[..., 0] == rgba[..., 1]).all() and (rgba[..., 2] == rgba[..., 1]).all()
    made = upscale_image(read_image(src / "la.png"), cpu_engine)
    np.testing.assert_array_equal(rgba[..., 3], made[..., 3])
    assert np.abs(rgba[..., 1:2].astype(int) - made[..., :3].astype(int)).max() <= 1
