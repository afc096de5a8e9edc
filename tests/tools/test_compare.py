"""``srgpu compare``: one PNG with the same crop of an image or of a video's frame, side by side at
the output scale (nearest, bicubic, srgpu per model), labelled; by default where the detail is.
Held to what users rely on: the srgpu panel is what ``srgpu upscale`` makes, the nearest panel is
the source's own pixels, the frame is the one at --at. Real images (Set5), real clips, real ffmpeg,
the CPU engine."""

from __future__ import annotations

import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from srgpu.cli import app
from srgpu.tools.compare import BAND, GAP
from srgpu.images.files import read_image
from srgpu.video.ffmpeg import ffmpeg_exe

needs_video = pytest.mark.skipif(__import__("importlib.util").util.find_spec("srgpu.video.api") is None,
                                 reason="srgpu.video is not part of this build")


def srgpu(*args: object):
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def panels(picture: np.ndarray, count: int, width: int, height: int) -> list[np.ndarray]:
    """The panels of a comparison picture of ``count`` panels of ``width`` x ``height``."""
    assert picture.shape == (height + BAND + 2 * GAP, count * width + (count + 1) * GAP, 3)
    return [picture[GAP + BAND:GAP + BAND + height, GAP + i * (width + GAP):GAP + i * (width + GAP) + width]
            for i in range(count)]


def labelled(picture: np.ndarray, count: int, width: int) -> bool:
    """Every panel's band holds drawn text (more than its background colour)."""
    return all(len(np.unique(picture[GAP:GAP + BAND, GAP + i * (width + GAP):GAP + i * (width + GAP) + width]))
               > 2 for i in range(count))


def energy(image: np.ndarray, x: int, y: int, w: int, h: int) -> float:
    luma = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).astype(np.float32)
    gx, gy = cv2.Sobel(luma, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(luma, cv2.CV_32F, 0, 1, ksize=3)
    return float((gx * gx + gy * gy)[y:y + h, x:x + w].astype(np.float64).sum())


def frame_rgb(path: Path, at: float | None = None) -> np.ndarray:
    """The frame of a video at ``at`` seconds (else its first), as ffmpeg decodes it to RGB."""
    seek = ["-ss", str(at)] if at is not None else []
    data = subprocess.run([ffmpeg_exe(), "-v", "error", *seek, "-i", str(path), "-frames:v", "1", "-f", "image2pipe",
                           "-c:v", "png", "-pix_fmt", "rgb24", "-"], capture_output=True, check=True).stdout
    return cv2.cvtColor(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def test_an_image_where_the_detail_is_is_what_upscale_makes(shared_data: Path, tmp_path: Path,
                                                           random_npz: Path) -> None:
    src = shared_data / "eval" / "Set5" / "bird_GT.bmp"  # 288x288
    out = tmp_path / "compare.png"
    r = srgpu("compare", src, "-o", out, "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith(f"wrote {out} (crop 128x128+") and "device: CPU" in r.stderr
    picture = read_image(out)
    near, cubic, made = panels(picture, 3, 256, 256)  # 256x256 at the output scale by default
    assert labelled(picture, 3, 256) and not [p for p in tmp_path.iterdir() if p.name != "compare.png"]
    source = read_image(src)
    x, y = (int(v) for v in r.stdout.split("+", 1)[1].split(" ")[0].split("+"))
    # the nearest panel: the source's pixels, each repeated
    assert np.array_equal(near, np.repeat(np.repeat(source[y:y + 128, x:x + 128], 2, 0), 2, 1))
    # the srgpu panel: the same pixels as an upscale of the whole image
    whole = tmp_path / "whole.png"
    assert srgpu("upscale", src, "-o", whole, "--model", random_npz, "--device", "cpu", "-q").exit_code == 0
    assert np.array_equal(made, read_image(whole)[2 * y:2 * y + 256, 2 * x:2 * x + 256])
    assert not np.array_equal(cubic, near) and not np.array_equal(cubic, made)
    # where the detail is: no window of that size (on a grid) holds more gradient energy
    best = energy(source, x, y, 128, 128)
    assert all(energy(source, gx, gy, 128, 128) <= best for gy in range(0, 161, 8) for gx in range(0, 161, 8))
    assert best > energy(source, 0, 0, 128, 128)


def test_a_given_crop_scale_and_several_models(shared_data: Path, tmp_path: Path, default_model_path: Path) -> None:
    src = shared_data / "eval" / "Set5" / "butterfly_GT.bmp"
    out = tmp_path / "c.png"
    r = srgpu("compare", src, "-o", out, "--crop", "40x30+200+10", "--scale", "3", "--model", "9-1-5",
              "--model", "9-5-5", "--device", "cpu")
    assert r.exit_code == 0, r.stderr
    assert "srgpu 9-1-5, srgpu 9-5-5" in r.stdout
    picture = read_image(out)
    near, _, fast, sharp = panels(picture, 4, 120, 90)
    assert np.array_equal(near, np.repeat(np.repeat(read_image(src)[10:40, 200:240], 3, 0), 3, 1))
    assert not np.array_equal(fast, sharp)  # two models, two results
    assert labelled(picture, 4, 120)
    # the same again without --overwrite: refused, the picture kept
    again = srgpu("compare", src, "-o", out, "--crop", "40x30+0+0", "--device", "cpu")
    assert again.exit_code == 1 and "output exists" in again.stderr and np.array_equal(read_image(out), picture)
    assert srgpu("compare", src, "-o", out, "--crop", "40x30+0+0", "--device", "cpu", "--overwrite",
                 "--model", "9-1-5").exit_code == 0
    panels(read_image(out), 3, 80, 60)  # replaced: x2 (the default), one model


def test_a_crop_size_alone_goes_where_the_detail_is_and_small_images_are_clamped(tmp_path: Path, shared_data: Path,
                                                                                 random_npz: Path) -> None:
    small = tmp_path / "small.png"
    cv2.imwrite(str(small), cv2.imread(str(shared_data / "eval" / "Set5" / "head_GT.bmp"))[100:150, 80:170])
    r = srgpu("compare", small, "-o", tmp_path / "c.png", "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 0, r.stderr
    assert "crop 90x50+0+0 of the 90x50 source" in r.stdout  # the default 128x128, clamped to the image
    panels(read_image(tmp_path / "c.png"), 3, 180, 100)
    r = srgpu("compare", small, "-o", tmp_path / "d.png", "--crop", "20x20", "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 0 and "crop 20x20+" in r.stdout


@needs_video
def test_a_video_frame_at_a_time_is_what_upscale_makes(tmp_path: Path, random_npz: Path) -> None:
    from srgpu.tools.demo import ClipSpec, render_clip

    clip = render_clip(tmp_path / "clip.mp4", ClipSpec(96, 64, 25, 0.8))  # 20 frames, moving
    whole = tmp_path / "whole.mkv"
    r = srgpu("upscale", clip, "-o", whole, "--model", random_npz, "--device", "cpu", "--codec", "ffv1", "-q")
    assert r.exit_code == 0, r.stderr
    pictures = {}
    for at in ("0.4", "00:00:00.2"):
        out = tmp_path / f"at{at.replace(':', '_')}.png"
        r = srgpu("compare", clip, "--at", at, "-o", out, "--crop", "40x30+50+20", "--model", random_npz,
                  "--device", "cpu")
        assert r.exit_code == 0, r.stderr
        seconds = float(at.split(":")[-1])
        assert f"the frame at {seconds:.3f} s" in r.stdout
        near, _, made = panels(read_image(out), 3, 80, 60)
        source = frame_rgb(clip, seconds)
        assert np.array_equal(near, np.repeat(np.repeat(source[20:50, 50:90], 2, 0), 2, 1))
        upscaled = frame_rgb(whole, seconds)  # the frame srgpu upscale made (lossless FFV1)
        assert np.array_equal(made, upscaled[40:100, 100:180])
        pictures[at] = made
    assert not np.array_equal(pictures["0.4"], pictures["00:00:00.2"])  # two times, two frames


@needs_video
def test_a_shared_clip_by_default_where_the_detail_is(shared_data: Path, tmp_path: Path, random_npz: Path) -> None:
    src = shared_data / "video" / "h264_10bit_200x200.mp4"
    out = tmp_path / "c.png"
    r = srgpu("compare", src, "-o", out, "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 0, r.stderr
    assert "the frame at 0.500 s" in r.stdout  # the middle of the 1 s clip
    panels(read_image(out), 3, 256, 256)


@pytest.mark.parametrize("args, fragment", [
    (("--at", "3"), "--at applies to a video"),
    (("--crop", "12x"), "--crop '12x': use WxH+X+Y"),
    (("--crop", "100x100+200+0"), "goes past the edge of the 288x288 source"),
    (("--crop", "300x10"), "larger than the 288x288 source"),
    (("--at", "1:75"), "--at '1:75': use seconds"),
])
def test_bad_requests_are_one_line_and_write_nothing(shared_data: Path, tmp_path: Path, random_npz: Path,
                                                     args: tuple, fragment: str) -> None:
    r = srgpu("compare", shared_data / "eval" / "Set5" / "bird_GT.bmp", "-o", tmp_path / "c.png", "--model",
              random_npz, "--device", "cpu", *args)
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines()[-1].startswith("srgpu: error: ") and fragment in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and list(tmp_path.iterdir()) == []


@needs_video
def test_bad_video_requests(shared_data: Path, tmp_path: Path, random_npz: Path) -> None:
    src = shared_data / "video" / "h264_10bit_200x200.mp4"
    r = srgpu("compare", src, "-o", tmp_path / "c.png", "--at", "5", "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 1 and "past the end" in r.stderr and list(tmp_path.iterdir()) == []
    r = srgpu("compare", src, "-o", tmp_path / "c.jpg", "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 1 and "name it .png" in r.stderr


@pytest.mark.gpu
def test_on_the_gpu_the_srgpu_panel_is_what_the_gpu_upscale_makes(shared_data: Path, tmp_path: Path,
                                                                  random_npz: Path) -> None:
    """``--device cuda``: the same crop and the same nearest and bicubic panels as on the CPU; the
    srgpu panel within a level of what ``srgpu upscale --device cuda`` makes of the whole image and
    of the CPU engine's panel."""
    src = shared_data / "eval" / "Set5" / "bird_GT.bmp"
    on = {}
    for device in ("cuda", "cpu"):
        out = tmp_path / f"compare_{device}.png"
        r = srgpu("compare", src, "-o", out, "--model", random_npz, "--device", device)
        assert r.exit_code == 0, r.stderr
        on[device] = (r.stdout.split("(crop ")[1].split(" ")[0].rstrip(")"), panels(read_image(out), 3, 256, 256))
    assert on["cuda"][0] == on["cpu"][0]  # the same crop
    (g_near, g_cubic, g_made), (c_near, c_cubic, c_made) = on["cuda"][1], on["cpu"][1]
    assert np.array_equal(g_near, c_near)
    assert np.abs(g_cubic.astype(np.int16) - c_cubic.astype(np.int16)).max() <= 1
    assert np.abs(g_made.astype(np.int16) - c_made.astype(np.int16)).max() <= 1
    whole = tmp_path / "whole.png"
    assert srgpu("upscale", src, "-o", whole, "--model", random_npz, "--device", "cuda", "-q").exit_code == 0
    x, y = (int(v) for v in on["cuda"][0].split("+")[1:3])
    # the GPU's plan (its tiles) follows the frame size, and fp32 sums in another order land within
    # a level: the crop and the whole image are two sizes (on the CPU the two are bit-identical)
    assert np.abs(g_made.astype(np.int16) - read_image(whole)[2 * y:2 * y + 256, 2 * x:2 * x + 256]).max() <= 1


def test_engines_of_different_scales_are_refused_in_one_line(tmp_path: Path) -> None:
    """A comparison is cut at one output scale, the engines' (srgpu compare resolves every model
    for its --scale); engines of two scales, as a library caller could pass, are refused."""
    from srgpu.engine.cpu import CPUEngine
    from srgpu.model import random_model
    from srgpu.tools.compare import CompareError, compare

    image = tmp_path / "i.png"
    cv2.imwrite(str(image), np.zeros((16, 16, 3), np.uint8))
    engines = [("a", CPUEngine(random_model("9-1-5", seed=1), 2)), ("b", CPUEngine(random_model("9-1-5", seed=2), 3))]
    with pytest.raises(CompareError) as refused:
        compare(image, engines)
    assert str(refused.value) == "the engines upscale by different factors (x2, x3); a comparison is at one scale"


def test_a_video_whose_sound_outlasts_its_picture(tmp_path: Path, random_npz: Path) -> None:
    """The default frame is the picture's middle, and a time after its last frame is one line."""
    src = tmp_path / "long_sound.mp4"
    subprocess.run([ffmpeg_exe(), "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10:duration=1",
                    "-f", "lavfi", "-i", "sine=duration=4", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac",
                    str(src)], check=True)
    r = srgpu("compare", src, "-o", tmp_path / "c.png", "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 0, r.stderr
    assert "the frame at 0.450 s" in r.stdout  # frames 0 to 0.9 s; the file lasts 4 s
    r = srgpu("compare", src, "-o", tmp_path / "d.png", "--at", "2", "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 1 and "--at 2 s is past the last frame" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "d.png").exists()
