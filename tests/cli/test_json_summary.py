"""``srgpu upscale --json``: one JSON object on stdout, whatever happens, with what scripts rely on
(docs/json.md): each input's output, status and why, frames made and read back from the output,
seconds, fps, device, model, encoder settings and notes, the totals and the exit status. Real
runs: real images (Set5) and clips, real ffmpeg, the CPU engine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from srgpu.cli import app
from srgpu.images.files import read_image

ROOT = Path(__file__).resolve().parents[2]
needs_video = pytest.mark.skipif(__import__("importlib.util").util.find_spec("srgpu.video.api") is None,
                                 reason="srgpu.video is not part of this build")
ENTRY_FIELDS = {"input", "output", "kind", "status", "reason", "frames", "output_frames", "seconds", "fps", "device",
                "model", "arch", "scale", "precision", "encoder", "decoder", "output_size", "chunks", "notes"}
TOTAL_FIELDS = {"inputs", "written", "redone", "skipped", "failed", "frames", "output_frames", "seconds"}


def run_json(*args: object) -> tuple[dict, object]:
    """srgpu ARGS --json: (the one JSON object stdout holds, the click result)."""
    result = CliRunner().invoke(app, [str(a) for a in (*args, "--json")])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    summary = json.loads(result.stdout)  # the whole of stdout: one object, nothing else
    assert summary["exit_status"] == result.exit_code
    assert "Traceback" not in result.stderr
    for entry in summary["inputs"]:
        assert set(entry) == ENTRY_FIELDS
    assert set(summary["totals"]) == TOTAL_FIELDS
    return summary, result


def ffmpeg_facts(path: Path) -> tuple[int, str]:
    """(decoded frame count, pixel format) of the first video stream, straight from ffmpeg."""
    from srgpu.video.ffmpeg import ffmpeg_exe

    r = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-i", str(path), "-map", "0:v:0", "-f", "null",
                        "-"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-500:]
    pix_fmt = re.search(r"Stream #0:\d+.*Video: [^,]+(?:\([^)]*\))*, (\w+)", r.stderr)
    return int(re.findall(r"frame=\s*(\d+)", r.stderr)[-1]), pix_fmt.group(1)


def by_name(summary: dict) -> dict[str, dict]:
    return {Path(e["input"]).name: e for e in summary["inputs"]}


@pytest.fixture
def set5_folder(shared_data: Path, tmp_path: Path) -> Path:
    """Three Set5 images (the small ones), a file that is not an image and one that claims to be."""
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    for name, rel in (("bird_GT.bmp", "bird.bmp"), ("butterfly_GT.bmp", "sub/butterfly.bmp"),
                      ("head_GT.bmp", "sub/head.bmp")):
        (src / rel).write_bytes((shared_data / "eval" / "Set5" / name).read_bytes())
    (src / "sub" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    (src / "readme.txt").write_text("not an image")
    return src


def test_one_image_and_stdout_holds_only_the_object(shared_data: Path, tmp_path: Path, random_npz: Path) -> None:
    src = shared_data / "eval" / "Set5" / "bird_GT.bmp"
    out = tmp_path / "bird_x2.png"
    r = subprocess.run([sys.executable, "-m", "srgpu", "upscale", str(src), "-o", str(out), "--model",
                        str(random_npz), "--device", "cpu", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)  # a real process's stdout: the object and nothing else
    assert f"wrote {out}" in r.stderr and "device: CPU" in r.stderr  # the human lines moved to stderr
    assert summary["exit_status"] == 0 and summary["error"] is None
    assert (summary["device"], summary["precision"], summary["scale"], summary["arch"]) == ("CPU", "fp32", 2, "9-1-5")
    (entry,) = summary["inputs"]
    assert (entry["input"], entry["output"], entry["kind"], entry["status"]) == (str(src), str(out), "image", "written")
    assert entry["reason"] is None and entry["frames"] == entry["output_frames"] == 1
    assert entry["seconds"] > 0 and entry["fps"] is None and entry["encoder"] is None
    assert read_image(out).shape == (576, 576, 3)
    assert summary["totals"] == {**summary["totals"], "inputs": 1, "written": 1, "failed": 0, "frames": 1}


@pytest.mark.slow
@needs_video
def test_a_video(shared_data: Path, tmp_path: Path, random_npz: Path) -> None:
    """A real 10-bit H.264 clip: the encoder as chosen (pixel format, the CRF given), and the frame
    count srgpu verified in the output, which ffmpeg confirms."""
    src = shared_data / "video" / "h264_10bit_200x200.mp4"
    out = tmp_path / "x2.mkv"
    summary, r = run_json("upscale", src, "-o", out, "--model", random_npz, "--device", "cpu", "--crf", "28",
                          "--preset", "ultrafast", "--encoder-arg=-tune", "--encoder-arg=zerolatency")
    assert r.exit_code == 0, r.stderr
    assert f"wrote {out}" in r.stderr
    (entry,) = summary["inputs"]
    frames, pix_fmt = ffmpeg_facts(out)
    assert frames == ffmpeg_facts(src)[0]
    assert entry["kind"] == "video" and entry["status"] == "written"
    assert entry["frames"] == entry["output_frames"] == frames
    assert entry["encoder"] == {"codec": "libx264", "pix_fmt": pix_fmt, "crf": 28, "preset": "ultrafast",
                                "args": ["-tune", "zerolatency"]}
    assert pix_fmt.startswith("yuv420p10")  # the source's depth kept, and reported
    assert entry["output_size"] == [400, 400] and entry["decoder"] == "software" and entry["chunks"] is None
    assert entry["fps"] > 0 and entry["seconds"] >= frames / entry["fps"] * 0.99
    assert summary["totals"]["frames"] == summary["totals"]["output_frames"] == frames


@needs_video
def test_a_video_with_the_default_encoder_reports_the_crf_it_used(tmp_path: Path, random_npz: Path) -> None:
    from srgpu.tools.demo import ClipSpec, render_clip

    src = render_clip(tmp_path / "clip.mp4", ClipSpec(64, 48, 25, 0.4))
    summary, r = run_json("upscale", src, "-o", tmp_path / "o.mp4", "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 0, r.stderr
    encoder = summary["inputs"][0]["encoder"]
    assert (encoder["codec"], encoder["crf"], encoder["preset"], encoder["args"]) == ("libx264", 18, None, [])
    assert summary["inputs"][0]["output_frames"] == ffmpeg_facts(tmp_path / "o.mp4")[0] == 10


def test_a_folder_with_failures_then_resumed(set5_folder: Path, tmp_path: Path, random_npz: Path) -> None:
    out = tmp_path / "out"
    args = ("upscale", set5_folder, "-o", out, "--model", random_npz, "--device", "cpu")
    summary, r = run_json(*args)
    assert r.exit_code == 1 == summary["exit_status"]
    assert summary["error"] is None  # the files' own failures are in their entries
    assert "srgpu: error: 2 of 5 files failed" in r.stderr and "upscaled" not in r.stdout
    entries = by_name(summary)
    assert set(entries) == {"bird.bmp", "butterfly.bmp", "head.bmp", "broken.png", "readme.txt"}
    for name in ("bird.bmp", "butterfly.bmp", "head.bmp"):
        e = entries[name]
        assert (e["status"], e["reason"], e["frames"], e["output_frames"]) == ("written", None, 1, 1)
        assert Path(e["output"]).is_file() and read_image(Path(e["output"])).shape[:2] == \
            tuple(2 * s for s in read_image(Path(e["input"])).shape[:2])
    broken, text = entries["broken.png"], entries["readme.txt"]
    assert broken["status"] == "failed" and "broken.png" in broken["reason"] and broken["frames"] is None
    assert text["status"] == "failed" and "unknown extension '.txt'" in text["reason"]
    assert not Path(broken["output"]).exists()
    assert {k: summary["totals"][k] for k in ("inputs", "written", "skipped", "failed", "frames")} == \
        {"inputs": 5, "written": 3, "skipped": 0, "failed": 2, "frames": 3}

    # resumed: the broken files removed, one output changed behind srgpu's back, one image added
    (set5_folder / "sub" / "broken.png").unlink()
    (set5_folder / "readme.txt").unlink()
    changed = out / "sub" / "head.bmp"
    changed.write_bytes(changed.read_bytes()[:-10])
    (set5_folder / "woman.bmp").write_bytes((set5_folder / "bird.bmp").read_bytes())
    summary, r = run_json(*args)
    assert r.exit_code == 0 == summary["exit_status"], r.stderr
    entries = by_name(summary)
    assert entries["bird.bmp"]["status"] == entries["butterfly.bmp"]["status"] == "skipped"
    assert "same settings" in entries["bird.bmp"]["reason"] and entries["bird.bmp"]["frames"] is None
    head = entries["head.bmp"]
    assert head["status"] == "redone" and "incomplete or was changed" in head["reason"]
    assert head["frames"] == head["output_frames"] == 1 and any(n.startswith("redone: ") for n in head["notes"])
    assert entries["woman.bmp"]["status"] == "written"
    assert {k: summary["totals"][k] for k in ("inputs", "written", "redone", "skipped", "failed", "frames")} == \
        {"inputs": 4, "written": 1, "redone": 1, "skipped": 2, "failed": 0, "frames": 2}


def test_a_request_that_fails_as_a_whole_is_still_one_object(shared_data: Path, tmp_path: Path,
                                                             random_npz: Path) -> None:
    src = shared_data / "eval" / "Set5" / "bird_GT.bmp"
    out = tmp_path / "exists.png"
    out.write_bytes(b"mine")
    summary, r = run_json("upscale", src, "-o", out, "--model", random_npz, "--device", "cpu")
    assert r.exit_code == 1 and summary["exit_status"] == 1
    assert summary["error"] == f"{out}: output exists (use --overwrite to replace it)"
    assert r.stderr.strip().splitlines()[-1] == f"srgpu: error: {summary['error']}"
    assert summary["inputs"] == [] and out.read_bytes() == b"mine"
    summary, r = run_json("upscale", tmp_path / "missing.png", "-o", tmp_path / "o.png", "--device", "cpu")
    assert r.exit_code == 1 and "no such file" in summary["error"]


def test_without_json_stdout_is_unchanged(shared_data: Path, tmp_path: Path, random_npz: Path) -> None:
    out = tmp_path / "o.png"
    r = CliRunner().invoke(app, ["upscale", str(shared_data / "eval" / "Set5" / "bird_GT.bmp"), "-o", str(out),
                                 "--model", str(random_npz), "--device", "cpu"])
    assert r.exit_code == 0 and r.stdout.startswith(f"wrote {out} (") and "{" not in r.stdout


# ---------------------------------------------------------------- a video cut into chunks


@pytest.fixture(scope="module")
def gop_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from test_video import make_clip

    return make_clip(tmp_path_factory.mktemp("chunked") / "src.mp4", frames=60, codec="libx264", audio="aac",
                     out_args=("-preset", "medium", "-x264-params",
                               "keyint=6:min-keyint=6:scenecut=0:bframes=3"))


def chunked_args(src: Path, dst: Path, model: Path) -> tuple:
    return ("upscale", src, "-o", dst, "--model", model, "--device", "cpu", "--workers", "1", "--chunk-seconds",
            "0.3", "--preset", "medium")


@needs_video
def test_a_chunked_run(gop_clip: Path, tmp_path: Path, random_npz: Path) -> None:
    dst = tmp_path / "out.mp4"
    summary, r = run_json(*chunked_args(gop_clip, dst, random_npz))
    assert r.exit_code == 0, r.stderr
    (entry,) = summary["inputs"]
    assert entry["chunks"]["count"] > 1 and entry["chunks"]["reused"] == 0 == entry["chunks"]["reused_frames"]
    assert entry["frames"] == entry["output_frames"] == ffmpeg_facts(dst)[0] == 60
    assert entry["encoder"]["preset"] == "medium" and entry["encoder"]["codec"] == "libx264"
    assert entry["status"] == "written" and entry["device"] == "CPU" and entry["fps"] > 0


@needs_video
def test_a_resumed_chunked_run(gop_clip: Path, tmp_path: Path, random_npz: Path) -> None:
    """An interrupted run left 3 verified chunks: the resumed run reports them reused, the frames it
    made itself, and the whole output's frames as read back."""
    from test_chunks_resume import _Interrupted

    from srgpu.engine.cpu import CPUEngine
    from srgpu.model import load_npz
    from srgpu.video import chunked, chunks
    from srgpu.video.options import EncodeOptions, VideoOptions
    from srgpu.batch.pool import EngineSpec

    dst = tmp_path / "out.mp4"
    model = load_npz(random_npz)
    cj = chunked.plan_chunked(gop_clip, dst, EngineSpec(model, 2).identity(),
                              VideoOptions(EncodeOptions(preset="medium")), chunk_seconds=0.3)
    assert not isinstance(cj, str)
    with pytest.raises(KeyboardInterrupt):
        chunked.upscale_chunked(cj, _Interrupted(CPUEngine(model, 2), 3))
    made = sum(c.frames for c in chunks.largest_first(cj.scan, cj.chunks)[:3])  # the order they are made in
    summary, r = run_json(*chunked_args(gop_clip, dst, random_npz))
    assert r.exit_code == 0, r.stderr
    assert "resuming: 3 of" in r.stderr
    (entry,) = summary["inputs"]
    assert entry["chunks"] == {"count": len(cj.chunks), "reused": 3, "reused_frames": made}
    assert entry["output_frames"] == ffmpeg_facts(dst)[0] == 60 and entry["frames"] == 60 - made
