"""Files of several frames or pages (animated WebP, APNG, multi-page TIFF, animated GIF): refused
alone, in one line saying what the file is and why, never upscaled as their first frame only while
the rest of a folder goes on. Made here with OpenCV's own writers (real files)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from srgpu.batch.plan import plan_batch
from srgpu.batch.local import run_batch
from srgpu.images.files import ImageFileError, read_image_data

from test_image_full_disk import srgpu


def frames(n: int = 3) -> list[np.ndarray]:
    return [np.full((12, 10, 3), 40 + 60 * i, np.uint8) for i in range(n)]


def animation(path: Path, n: int = 3) -> Path:
    anim = cv2.Animation()
    anim.frames = frames(n)
    anim.durations = [100] * n
    anim.loop_count = 0
    assert cv2.imwriteanimation(str(path), anim)
    return path


def pages(path: Path, n: int = 3) -> Path:
    assert cv2.imwritemulti(str(path), frames(n))
    return path


MADE = {"anim.webp": (animation, "an animated WebP of 3 frames"),
        "anim.png": (animation, "an animated PNG (APNG) of 3 frames"),
        "pages.tif": (pages, "a multi-page TIFF of 3 pages")}


@pytest.mark.parametrize("name", sorted(MADE))
def test_a_file_of_several_frames_is_refused_saying_what_it_is(name, tmp_path):
    make, what = MADE[name]
    path = make(tmp_path / name)
    with pytest.raises(ImageFileError) as e:
        read_image_data(path)
    assert str(e.value).startswith(f"{path}: {what}: ") and "only the first" in str(e.value)


def test_one_frame_files_of_those_formats_still_read(tmp_path):
    for path in (animation(tmp_path / "one.webp", 1), pages(tmp_path / "one.tif", 1)):
        assert read_image_data(path).pixels.shape == (12, 10, 3)


def test_a_folder_with_animations_and_pages_fails_them_alone_and_upscales_the_rest(tmp_path, cpu_engine):
    src = tmp_path / "in"
    src.mkdir()
    for name, (make, _) in MADE.items():
        make(src / name)
    animation(src / "anim.gif")
    cv2.imwrite(str(src / "still.png"), frames(1)[0])
    result = run_batch(plan_batch(src, tmp_path / "out"), cpu_engine)
    assert [o.job.src.name for o in result.done] == ["still.png"]
    failed = {o.job.src.name: o.message for o in result.failed}
    assert sorted(failed) == ["anim.gif", "anim.png", "anim.webp", "pages.tif"]
    for name, (_, what) in MADE.items():
        assert what in failed[name]
    assert "an animated GIF of 3 frames" in failed["anim.gif"] and "convert it to a video" in failed["anim.gif"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")) == ["still.png"]


def test_a_gif_given_alone_says_what_it_is(tmp_path, random_npz):
    gif = animation(tmp_path / "a.gif")
    r = srgpu("upscale", gif, "-o", tmp_path / "a.png", "--model", random_npz, "-d", "cpu")
    assert r.exit_code == 1 and "an animated GIF of 3 frames" in r.stderr and "not an image or video" not in r.stderr
