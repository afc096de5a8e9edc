"""Issue 39, "nothing lost under new abuse", the video side: names at the file system's limit,
chunked outputs' frame rate, a run killed after publishing, colour range in MP4, transport streams
whose timestamps jump, and the messages of failures. Real ffmpeg, tiny clips made with it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from srgpu import outputs
from srgpu.model import random_model
from srgpu.video import chunked
from srgpu.video.api import EncodeOptions, VideoOptions, upscale_video
from srgpu.workers import InProcess
from test_video import BicubicEngine, leftovers, make_clip

FAST = VideoOptions(EncodeOptions(preset="ultrafast"))
IDENTITY = {"scale": 2, "arch": "test", "weights": "bicubic"}
LONGEST = "a" * 251 + ".mkv"  # 255 bytes: the longest name ext4, XFS, btrfs take
JAPANESE = "長い名前の動画ファイル" * 7 + "テスト動画名" + ".mkv"  # 83 Japanese characters: 253 bytes in UTF-8


def name_max(folder: Path) -> int:
    return os.pathconf(folder, "PC_NAME_MAX")


@pytest.fixture(scope="module")
def engine() -> BicubicEngine:
    return BicubicEngine(random_model("9-1-5", seed=21), 2)


# ---------------------------------------------------------------- 8: names near the limit


@pytest.mark.parametrize("name", [LONGEST, JAPANESE], ids=["255-bytes", "japanese"])
def test_temporaries_fit_where_the_final_name_fits(tmp_path: Path, name: str) -> None:
    """A temporary of a final name at the limit can be created, published, and is found again as
    a stale one of that name once its owner is gone (and not as another name's)."""
    assert len(name.encode()) <= name_max(tmp_path)
    final = tmp_path / name
    tmp, fd = outputs.create_temp(final)
    os.write(fd, b"data")
    os.close(fd)
    assert len(tmp.name.encode()) <= name_max(tmp_path) and tmp.suffix == ".mkv"
    outputs.publish(tmp, final, replace=False)
    assert final.read_bytes() == b"data" and not tmp.exists()
    # a temporary of a killed srgpu (a pid that is gone) is recognised as this name's, not another's
    dead = tmp.with_name(re.sub(r"-(\d+)-([0-9a-f]+)\.part", "-999999999-\\2.part", outputs.temp_path(final).name))
    dead.write_bytes(b"half")
    assert outputs.stale_temps(tmp_path / ("b" + name[1:])) == []
    assert outputs.remove_stale_temps(final) == [dead] and not dead.exists()


@pytest.mark.parametrize("name", [LONGEST.replace(".mkv", ".png"), JAPANESE.replace(".mkv", ".png")],
                         ids=["255-bytes", "japanese"])
def test_an_image_with_the_longest_name_is_written(tmp_path: Path, name: str) -> None:
    import numpy as np

    from srgpu.imagefile import read_image, write_image_atomic

    image = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    write_image_atomic(tmp_path / name, image, replace=False)
    assert (read_image(tmp_path / name) == image).all() and os.listdir(tmp_path) == [name]


def test_a_video_with_the_longest_name_is_upscaled(tmp_path: Path, engine: BicubicEngine) -> None:
    src = make_clip(tmp_path / JAPANESE, frames=4)
    dst = tmp_path / "out" / LONGEST
    dst.parent.mkdir()
    result = upscale_video(src, dst, engine, FAST)
    assert result.frames == 4 and dst.is_file() and leftovers(dst.parent) == []


def test_a_chunked_video_with_the_longest_name(tmp_path: Path, engine: BicubicEngine) -> None:
    """The work folder ``.NAME.srgpu-chunks`` and its temporaries fit too."""
    src = make_clip(tmp_path / "src.mkv", frames=12, codec="libx264",
                    out_args=("-preset", "ultrafast", "-x264-params", "keyint=4:min-keyint=4:scenecut=0"))
    dst = tmp_path / "out" / JAPANESE
    dst.parent.mkdir()
    cj = chunked.plan_chunked(src, dst, 2, IDENTITY, FAST, chunk_seconds=0.16)
    assert not isinstance(cj, str), cj
    assert len(cj.work.name.encode()) <= name_max(tmp_path)
    result = chunked.upscale_chunked(cj, InProcess(engine))
    assert result.frames == 12 and dst.is_file()
    assert os.listdir(dst.parent) == [JAPANESE]
