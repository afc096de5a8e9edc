"""The srgpu command as a user runs it: exit codes, one-line errors without tracebacks,
what it prints, and eval --json's schema."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import PUBLISHED_SET5
from typer.testing import CliRunner

from srgpu.cli import app
from srgpu.engine.gpuinfo import cuda_status
from srgpu.images.files import read_image, write_image_atomic
from srgpu.model import random_model, save_npz

ROOT = Path(__file__).resolve().parents[2]


def srgpu(*args: object):
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception  # an unexpected error: show its traceback in the test report
    return result


def one_error_line(result, fragment: str) -> None:
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    errors = [l for l in lines if l.startswith("srgpu: error: ")]
    assert errors and fragment in errors[-1], result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.fixture
def image(tmp_path, make_image) -> Path:
    p = tmp_path / "in.png"
    write_image_atomic(p, make_image((6, 8, 3), seed=3))
    return p


def test_upscale_one_image(image, tmp_path, random_npz):
    out = tmp_path / "out.png"
    r = srgpu("upscale", image, "-o", out, "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 0, r.stderr
    assert read_image(out).shape == (12, 16, 3)
    assert f"wrote {out}" in r.stdout
    assert "device: CPU" in r.stderr


def test_device_auto_says_which_device(image, tmp_path, random_npz):
    r = srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", random_npz)
    assert r.exit_code == 0
    gpu_engine = __import__("importlib.util").util.find_spec("srgpu.engine.gpu") is not None
    if cuda_status().usable and gpu_engine:
        assert "device: " in r.stderr and "device: CPU" not in r.stderr
    else:  # the CPU, and why not the GPU
        assert "device: CPU (GPU not used: " in r.stderr


def test_quiet_prints_nothing(image, tmp_path, random_npz):
    r = srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", random_npz, "--quiet")
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == ""


def test_folder_with_a_corrupt_file(tmp_path, make_image, random_npz):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    for name in ("a.png", "sub/b.png", "sub/c.png"):
        write_image_atomic(src / name, make_image((5, 5, 3)))
    (src / "sub" / "bad.png").write_bytes(b"garbage")
    r = srgpu("upscale", src, "-o", tmp_path / "out", "--model", random_npz)
    assert r.exit_code == 1
    assert "bad.png: not a readable image" in r.stderr and "Traceback" not in r.stderr
    assert "3 upscaled, 0 skipped (output exists), 1 failed" in r.stdout
    assert "1 of 4 files failed" in r.stderr.strip().splitlines()[-1]
    assert sorted(p.name for p in (tmp_path / "out").rglob("*.png")) == ["a.png", "b.png", "c.png"]
    assert "srgpu: upscale: 4/4 images" in r.stderr  # the progress counts images (a rate once it means something)
    again = srgpu("upscale", src, "-o", tmp_path / "out", "--model", random_npz)
    assert "0 upscaled, 3 skipped (output exists), 1 failed" in again.stdout


@pytest.mark.parametrize("args,fragment", [
    (["{image}", "-o", "{tmp}/missing/o.png"], "output directory does not exist"),
    (["{image}", "-o", "{image}", "--overwrite"], "output is the input file"),
    (["{image}", "-o", "{tmp}/taken.png"], "output exists (use --overwrite"),
    (["{image}", "-o", "{tmp}/o.png", "--scale", "5"], "scale x5 is not supported"),
    (["{image}", "-o", "{tmp}/o.png", "--scale", "3"], "trained for x2, not x3"),
    (["{tmp}/nothing.png", "-o", "{tmp}/o.png"], "no such file or directory"),
    (["{image}", "-o", "{tmp}/o.png", "--device", "tpu"], "unknown device 'tpu'"),
    (["{image}", "-o", "{tmp}/o.png", "--format", "gif"], "unsupported --format"),
])
def test_bad_input_is_one_line(image, tmp_path, random_npz, args, fragment):
    args = [a.format(image=image, tmp=tmp_path) for a in args]
    (tmp_path / "taken.png").write_bytes(b"someone's file")
    r = srgpu("upscale", *args, "--model", random_npz)
    one_error_line(r, fragment)
    assert not (tmp_path / "o.png").exists()
    assert (tmp_path / "taken.png").read_bytes() == b"someone's file"


def test_bad_model_files(image, tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 truncated")
    one_error_line(srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", bad), "not an srgpu model: expected "
                   "a .npz archive of float32 arrays conv1_weight")
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(bytes(range(256)) * 8)  # numpy would talk of pickles and allow_pickle
    r = srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", garbage)
    one_error_line(r, "(this file: not a zip archive)")
    assert "pickle" not in r.stderr
    one_error_line(srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", "9-9-9"), "unknown model '9-9-9'")


@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_model_is_an_error_not_the_default(image, tmp_path, empty):
    r = srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", empty, "-d", "cpu")
    one_error_line(r, "--model is empty: give 9-1-5, ")
    assert not (tmp_path / "o.png").exists()


def test_device_cuda_without_gpu_fails_clearly(image, tmp_path, random_npz):
    if cuda_status().usable:
        pytest.skip("a GPU is usable here")
    one_error_line(srgpu("upscale", image, "-o", tmp_path / "o.png", "--model", random_npz, "--device", "cuda"),
                   "srgpu: error:")
    assert not (tmp_path / "o.png").exists()


def test_eval_json_schema(tmp_path, make_image):
    folder = tmp_path / "hr"
    folder.mkdir()
    write_image_atomic(folder / "one.png", make_image((24, 30, 3), seed=1))
    write_image_atomic(folder / "two.png", make_image((26, 22), seed=2))
    model = tmp_path / "m.npz"
    save_npz(random_model("9-1-5", 0, 3), model)
    r = srgpu("eval", folder, "--scale", 3, "--model", model, "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert set(report) == {"scale", "model", "images", "mean"}
    assert report["scale"] == 3 and report["model"] == "random-9-1-5-seed0"
    assert [i["name"] for i in report["images"]] == ["one.png", "two.png"]
    for entry in report["images"] + [report["mean"]]:
        assert set(entry) >= {"bicubic", "srcnn"}
        for method in ("bicubic", "srcnn"):
            assert set(entry[method]) == {"psnr", "ssim"}
            assert all(isinstance(v, float) for v in entry[method].values())
    for method in ("bicubic", "srcnn"):
        for metric in ("psnr", "ssim"):
            mean = np.mean([i[method][metric] for i in report["images"]])
            assert report["mean"][method][metric] == pytest.approx(mean)


@pytest.mark.slow
def test_eval_set5_table_and_json(shared_data, reference_mat):
    set5 = shared_data / "eval" / "Set5"
    r = srgpu("eval", set5, "--scale", 3, "--model", reference_mat("9-1-5", 3), "--json")
    assert r.exit_code == 0
    mean = json.loads(r.stdout)["mean"]
    assert mean["srcnn"]["psnr"] == pytest.approx(PUBLISHED_SET5["9-1-5"][3], abs=0.03)
    assert mean["bicubic"]["psnr"] == pytest.approx(PUBLISHED_SET5["bicubic"][3], abs=0.03)
    table = srgpu("eval", set5, "--scale", 3, "--model", reference_mat("9-1-5", 3))
    assert table.exit_code == 0
    last = table.stdout.strip().splitlines()[-1].split()
    assert last[0] == "mean" and float(last[3]) == pytest.approx(PUBLISHED_SET5["9-1-5"][3], abs=0.03)


def test_eval_errors(tmp_path, random_npz):
    one_error_line(srgpu("eval", tmp_path / "nope", "--scale", 2, "--model", random_npz), "not a folder")
    one_error_line(srgpu("eval", tmp_path, "--scale", 2, "--model", random_npz), "no images")


def test_info():
    r = srgpu("info")
    assert r.exit_code == 0
    assert r.stdout.startswith("srgpu 0.1.0")
    assert "CUDA:" in r.stdout and "models" in r.stdout and "ffmpeg" in r.stdout
    nvdec = re.search(r"^  NVDEC +(.*)$", r.stdout, re.M)
    assert nvdec and re.fullmatch(r"(\w+_cuvid( \w+_cuvid)*; libnvcuvid (found|not found .*))|this ffmpeg has no NVDEC.*",
                                  nvdec.group(1)), r.stdout
    status = cuda_status()
    if not status.usable:
        assert "no usable CUDA device" in r.stdout
    # each built-in model, with the Set5 score its provenance records beside bicubic's (a file
    # chosen mid-schedule by validation records none until its schedule ends: weights/README.md)
    from srgpu.model import builtin_models, load_npz

    for arch, scale, path in builtin_models():
        meta = load_npz(path).metadata
        line = next(ln for ln in r.stdout.splitlines() if ln.startswith(f"  {arch} x{scale}") and str(path) in ln)
        if "set5_psnr" in meta:
            assert f"Set5 {meta['set5_psnr']:.2f} dB (bicubic {meta['set5_bicubic_psnr']:.2f})" in line, (arch, scale)
        else:
            assert "Set5" not in line and meta.get("validation_psnr"), (arch, scale)


def test_module_and_console_script_entry_points(tmp_path):
    r = subprocess.run([sys.executable, "-m", "srgpu", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "upscale" in r.stdout and "eval" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "srgpu", "upscale", str(tmp_path / "x.png"), "-o",
                          str(tmp_path / "y.png")], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 1
    assert bad.stderr.strip() == f"srgpu: error: {tmp_path / 'x.png'}: no such file or directory"


# ---------------------------------------------------------------- video through the CLI

needs_video = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("srgpu.video.api") is None,
    reason="srgpu.video is not part of this build")


def _ffmpeg() -> str:
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


def video_facts(path: Path) -> tuple[tuple[int, int], int, bool]:
    """((width, height), decoded frame count, has audio) straight from ffmpeg."""
    import re

    r = subprocess.run([_ffmpeg(), "-hide_banner", "-nostdin", "-i", str(path), "-map", "0:v:0", "-f", "null", "-"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-500:]
    size = re.search(r"Stream #0:\d+.*Video: .*?, (\d+)x(\d+)", r.stderr)
    frames = re.findall(r"frame=\s*(\d+)", r.stderr)
    return (int(size.group(1)), int(size.group(2))), int(frames[-1]), "Audio:" in r.stderr


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory) -> Path:
    """A 64x48, 10-frame H.264 + AAC clip rendered by ffmpeg's test source (srgpu.tools.demo)."""
    from srgpu.tools.demo import ClipSpec, render_clip

    return render_clip(tmp_path_factory.mktemp("clips") / "tiny.mp4", ClipSpec(64, 48, 25, 0.4))


def test_rendered_clip(tiny_clip):
    assert video_facts(tiny_clip) == ((64, 48), 10, True)
    assert not [p for p in tiny_clip.parent.iterdir() if p.name.startswith(".")]  # no temporary left


@needs_video
def test_upscale_a_video(tiny_clip, tmp_path, random_npz):
    out = tmp_path / "big.mkv"
    r = srgpu("upscale", tiny_clip, "-o", out, "--model", random_npz, "--codec", "libx264", "--crf", "30",
              "--preset", "ultrafast", "--pix-fmt", "yuv420p", "--encoder-arg=-tune", "--encoder-arg", "zerolatency")
    assert r.exit_code == 0, r.stderr
    assert f"wrote {out} (10 frames, 128x96, libx264 yuv420p" in r.stdout
    assert video_facts(out) == ((128, 96), 10, True)
    assert "frame/s" in r.stderr  # the frames bar


@needs_video
def test_folder_mixing_images_and_videos(tiny_clip, tmp_path, random_npz, make_image):
    src = tmp_path / "in"
    (src / "clips").mkdir(parents=True)
    (src / "clips" / "tiny.mp4").write_bytes(tiny_clip.read_bytes())
    write_image_atomic(src / "still.png", make_image((6, 6, 3)))
    r = srgpu("upscale", src, "-o", tmp_path / "out", "--model", random_npz, "--crf", "35")
    assert r.exit_code == 0, r.stderr
    assert "2 upscaled" in r.stdout
    assert video_facts(tmp_path / "out" / "clips" / "tiny.mp4")[:2] == ((128, 96), 10)
    assert read_image(tmp_path / "out" / "still.png").shape == (12, 12, 3)


@needs_video
def test_video_errors_are_one_line(tiny_clip, tmp_path, random_npz):
    out = tmp_path / "o.mp4"
    one_error_line(srgpu("upscale", tiny_clip, "-o", out, "--model", random_npz, "--codec", "nosuchcodec"),
                   "nosuchcodec")
    fake = tmp_path / "fake.mp4"
    fake.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 100)
    one_error_line(srgpu("upscale", fake, "-o", out, "--model", random_npz), "fake.mp4")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake.mp4"]  # nothing partial, no temporary


@needs_video
def test_demo(tmp_path, default_model_path):
    r = srgpu("demo", "--dir", tmp_path / "demo", "--seconds", "0.2", "--device", "cpu")
    assert r.exit_code == 0, r.stderr
    lines = dict(l.split(": ", 1) for l in r.stdout.strip().splitlines() if l.startswith(("source", "output")))
    assert video_facts(Path(lines["source"])) == ((320, 180), 5, True)
    assert video_facts(Path(lines["output"])) == ((640, 360), 5, True)
    assert re.search(r"^wrote .*testsrc2_640x360_srcnn_x2\.mp4 \(5 frames, 640x360, libx264 yuv420p, [\d.]+ fps, ",
                     r.stdout, re.M), r.stdout  # the same summary as upscale


def test_demo_without_default_model_fails_clearly(tmp_path, monkeypatch):
    import srgpu.model as model

    monkeypatch.setattr(model, "_weights_dir", lambda: tmp_path / "no-weights")
    r = srgpu("demo", "--dir", tmp_path / "demo", "--device", "cpu")
    if __import__("importlib.util").util.find_spec("srgpu.video.api") is None:
        one_error_line(r, "video support")
    else:
        one_error_line(r, "no built-in 9-1-5 model for x2")
    assert not (tmp_path / "demo").exists()


def test_unknown_precision_is_one_error_line_and_writes_nothing(image, tmp_path, random_npz):
    out = tmp_path / "p.png"
    r = srgpu("upscale", image, "-o", out, "--model", random_npz, "--device", "cpu", "--precision", "fp8")
    one_error_line(r, "unknown precision 'fp8'")
    assert not out.exists()


def test_precision_fp16_on_the_cpu_is_still_the_exact_engine(image, tmp_path, random_npz):
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    assert srgpu("upscale", image, "-o", a, "--model", random_npz, "--device", "cpu", "--precision", "fp16").exit_code == 0
    assert srgpu("upscale", image, "-o", b, "--model", random_npz, "--device", "cpu", "--precision", "fp32").exit_code == 0
    np.testing.assert_array_equal(read_image(a), read_image(b))


def test_demo_dir_that_is_a_file_is_one_error_line(tmp_path, default_model_path):
    target = tmp_path / "afile"
    target.write_text("mine")
    r = srgpu("demo", "--dir", target, "--device", "cpu")
    if __import__("importlib.util").util.find_spec("srgpu.video.api") is None:
        one_error_line(r, "video support")
    else:
        one_error_line(r, "must be a folder")
    assert target.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_pipeline_bench_needs_at_least_one_frame():
    r = srgpu("bench", "--pipeline", "--frames", 0, "--device", "cpu")
    assert r.exit_code == 2 and "--frames" in r.stderr and "Traceback" not in r.stderr


@needs_video
@pytest.mark.skipif(cuda_status().usable, reason="checks the CPU fallback of --device auto")
def test_pipeline_bench_cpu_fallback_is_one_note_not_a_python_warning(tmp_path, default_model_path):
    r = subprocess.run([sys.executable, "-m", "srgpu", "bench", "--pipeline", "--device", "auto", "--size", "32x18",
                        "--frames", "2", "--model", default_model_path], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "RuntimeWarning" not in r.stderr and "create_engine(" not in r.stderr
    assert "srgpu: device: CPU (GPU not used:" in r.stderr
    assert "bottleneck:" in r.stdout
    cpu = re.search(r"CPU per frame, end to end: srgpu ([\d.]+) ms, its ffmpeg decoder and encoder ([\d.]+) ms", r.stdout)
    assert cpu and float(cpu.group(1)) > 0 and float(cpu.group(2)) > 0
    split = re.search(r"end to end: first frame to the encoder after ([\d.]+) s, then ([\d.]+) fps, ([\d.]+) s from "
                      r"the last frame to the finished file", r.stdout)
    e2e = re.search(r"end-to-end\s+([\d.]+)", r.stdout)
    assert split and e2e, r.stdout
    startup, steady, finish = map(float, split.groups())
    # the three parts make up the end-to-end run: 2 frames = start-up + 1 / steady + finish
    assert startup > 0 and steady > 0 and finish > 0
    assert startup + 1 / steady + finish == pytest.approx(2 / float(e2e.group(1)), rel=0.05, abs=0.02)


def test_video_stream_option_picks_the_stream_to_upscale(tmp_path, random_npz):
    """--video-stream 1 upscales the second video stream; the first is copied unchanged."""
    from test_video import ff, stream_lines

    src = tmp_path / "two.mkv"
    ff("-f", "lavfi", "-i", "testsrc2=size=32x24:rate=10", "-f", "lavfi", "-i", "testsrc2=size=40x30:rate=10",
       "-frames:v", "3", "-map", "0:v", "-map", "1:v", "-c:v", "ffv1", "-pix_fmt", "yuv420p", str(src))
    out = tmp_path / "out.mkv"
    r = srgpu("upscale", src, "-o", out, "--model", random_npz, "--device", "cpu", "--codec", "ffv1",
              "--video-stream", "1", "--quiet")
    assert r.exit_code == 0, r.stderr
    sizes = [next(t for t in line.split(", ") if "x" in t and t.split("x")[0].strip().isdigit()).split()[0]
             for line in stream_lines(out, "Video")]
    assert sizes == ["32x24", "80x60"]
    bad = srgpu("upscale", src, "-o", tmp_path / "bad.mkv", "--model", random_npz, "--device", "cpu",
                "--video-stream", "2")
    one_error_line(bad, "there is no video stream 2")


def test_a_machine_without_an_nvidia_driver_is_told_so_plainly():
    """Not CUDA's 'driver version is insufficient' where there is no driver at all."""
    try:
        from cupy.cuda import runtime

        version = runtime.driverGetVersion()
    except Exception:
        pytest.skip("CuPy's runtime is not loadable here")
    if version != 0:
        pytest.skip("a CUDA driver is present")
    assert cuda_status().reason == "no NVIDIA driver is installed or visible"


def test_a_gpu_without_nvrtc_is_not_used_and_the_reason_says_what_to_install():
    from srgpu.engine.gpuinfo import CudaDevice, verdict

    gpu = CudaDevice(0, "NVIDIA H100", "9.0", 80 << 30, 79 << 30, 132)
    devices, reason = verdict([gpu], [], "Failure finding libnvrtc.so.13 or libnvrtc.so.12")
    assert devices == () and "NVRTC" in reason and "pip install nvidia-cuda-nvrtc-cu12" in reason
    assert verdict([gpu], [], None) == ((gpu,), None)
    assert verdict([], ["device 0: out of memory"], None) == ((), "device 0: out of memory")


def test_info_reports_the_nvrtc_cupy_would_use():
    try:
        from cupy_backends.cuda.libs import nvrtc

        want = "{}.{}".format(*nvrtc.getVersion())
    except Exception:
        want = None
    assert cuda_status().nvrtc == want
    assert f"nvrtc {want or '-'}" in srgpu("info").stdout


@pytest.mark.parametrize("case", ["unwritable", "folder named like a file", "output name taken by a folder"])
def test_output_problems_are_one_line_before_the_engine_starts(tmp_path, image, random_npz, read_only_dir, case):
    src = tmp_path / "photos"
    src.mkdir()
    write_image_atomic(src / "a.png", read_image(image))
    if case == "unwritable":
        args, fragment = (src, "-o", read_only_dir), f"{read_only_dir}: cannot write there"
    elif case == "folder named like a file":
        args, fragment = (src, "-o", tmp_path / "seq.mp4"), "a folder input needs an output folder"
    else:
        (tmp_path / "x.png" / "in.png").mkdir(parents=True)
        args, fragment = (image, "-o", tmp_path / "x.png", "--overwrite"), "is a folder"
    r = srgpu("upscale", *args, "--model", random_npz, "--device", "cpu")
    one_error_line(r, fragment)
    assert "device:" not in r.stderr  # refused before an engine was made
    assert not (tmp_path / "seq.mp4").exists() and list(read_only_dir.iterdir()) == []


def test_output_folder_inside_the_input_never_replaces_an_input(tmp_path, make_image, random_npz):
    """srgpu upscale t -o t/sub --overwrite, with t/a.png and t/sub/a.png: the user's t/sub/a.png stays,
    the run says it refused it, counts it and exits 1."""
    t = tmp_path / "t"
    (t / "sub").mkdir(parents=True)
    write_image_atomic(t / "a.png", make_image((5, 5, 3), seed=1))
    write_image_atomic(t / "b.png", make_image((5, 5, 3), seed=2))
    (t / "sub" / "a.png").write_bytes(b"the user's original")
    r = srgpu("upscale", t, "-o", t / "sub", "--overwrite", "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 1
    assert f"srgpu: error: {t / 'sub' / 'a.png'}: is a file of the input folder" in r.stderr
    assert "1 upscaled, 0 skipped (output exists), 1 failed" in r.stdout
    assert r.stderr.strip().splitlines()[-1] == f"srgpu: error: 1 of 2 files failed: {t / 'a.png'}"
    assert (t / "sub" / "a.png").read_bytes() == b"the user's original"
    again = srgpu("upscale", t, "-o", t / "sub", "--model", random_npz, "--device", "cpu")
    assert again.exit_code == 1 and "0 upscaled, 1 skipped (output exists), 1 failed" in again.stdout


@needs_video
def test_a_file_that_appears_while_a_single_video_is_upscaled_is_one_error_line(tiny_clip, tmp_path, random_npz,
                                                                                 monkeypatch):
    from srgpu.engine.cpu import CPUEngine

    out = tmp_path / "big.mp4"
    real = CPUEngine.upscale_frame

    def intruding(self, planes, specs, max_value):  # another program takes the name mid-run
        if not out.exists():
            out.write_bytes(b"someone else's video")
        return real(self, planes, specs, max_value)

    monkeypatch.setattr(CPUEngine, "upscale_frame", intruding)
    r = srgpu("upscale", tiny_clip, "-o", out, "--model", random_npz, "--device", "cpu", "--crf", "35")
    one_error_line(r, "a file appeared there while srgpu was working")
    assert out.read_bytes() == b"someone else's video"


def test_progress_shows_no_rate_for_files_skipped_at_once(tmp_path, random_npz):
    src = tmp_path / "in"
    src.mkdir()
    for i in range(3):
        write_image_atomic(src / f"{i}.png", make_rgb(i))
    first = srgpu("upscale", src, "-o", tmp_path / "out", "--model", random_npz, "-d", "cpu")
    assert first.exit_code == 0
    again = srgpu("upscale", src, "-o", tmp_path / "out", "--model", random_npz, "-d", "cpu")
    assert again.exit_code == 0 and "0 upscaled, 3 skipped" in again.stdout
    (line,) = [l for l in again.stderr.splitlines() if l.startswith("srgpu: upscale: ")]
    assert line == "srgpu: upscale: 3/3 images"  # not thousands of images a second


def test_progress_rate_is_this_runs_work_over_real_time(monkeypatch, capsys):
    import srgpu.cli.progress as cli

    now = [100.0]
    monkeypatch.setattr(cli.time, "monotonic", lambda: now[0])
    bar = cli._LogBar(10, "img", "upscale")
    bar.initial += 2  # two skipped: counted, not in the rate
    bar.update(2)
    now[0] += 1.0
    bar.update(1)  # one second in: too soon for a rate
    now[0] += 11.0
    bar.update(5)  # 12 s, 6 images of this run's work
    bar.close()
    quick = cli._LogBar(10, "img", "upscale")
    quick.update(1)
    now[0] += 0.001
    quick.close()  # a file a millisecond is no rate to show
    slow = cli._LogBar(3, "file", "upscale")
    now[0] += 30.0
    slow.update(1)  # a long video: 30 s a file, not "0.0 file/s"
    assert capsys.readouterr().err.splitlines() == ["srgpu: upscale: 8/10 images, 0.5 img/s, ETA 0:04",
                                                    "srgpu: upscale: 1/10 images",
                                                    "srgpu: upscale: 1/3 files, 30 s/file, ETA 1:00"]


def make_rgb(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (6, 5, 3), dtype=np.uint8)
