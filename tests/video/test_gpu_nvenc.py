"""NVENC on the GPU machine. Where the GPU has no NVENC (H100, H200, A100): `srgpu upscale ...
--codec h264_nvenc` on the GPU engine exits 1 with one line naming the GPU, and writes nothing.
Where it has NVENC (a GeForce/RTX, L4, L40): the same command encodes every frame, on that GPU, in
each container that holds it. Each case is skipped, saying why, on the other kind of GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from srgpu.video.ffmpeg import ffmpeg_exe
from test_video import make_clip

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def nvenc_here(codec: str = "h264_nvenc") -> bool:
    """Whether ffmpeg encodes a frame with ``codec`` on GPU 0 (256x256: NVENC's minimum is 145)."""
    run = subprocess.run([ffmpeg_exe(), "-v", "error", "-f", "lavfi", "-i", "color=s=256x256:d=0.04", "-c:v", codec,
                          "-gpu", "0", "-f", "null", "-"], capture_output=True, text=True)
    return run.returncode == 0


def srgpu(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-m", "srgpu", *args], env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_clip(tmp_path_factory.mktemp("nvenc") / "clip.mp4", size="160x96", codec="libx264", frames=10)


def test_a_gpu_without_nvenc_is_named_in_one_line(clip: Path, tmp_path: Path) -> None:
    if nvenc_here():
        pytest.skip("this GPU has NVENC (test_nvenc_encodes_every_frame covers it)")
    out = tmp_path / "out.mp4"
    run = srgpu("upscale", str(clip), "-o", str(out), "--codec", "h264_nvenc", "--device", "cuda:0")
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and len(lines) == 1, run.stderr
    assert lines[0].startswith("srgpu: error: cuda:0 (NVIDIA ") and lines[0].endswith(
        "choose a software encoder such as libx264"), lines[0]
    # the GPU without NVENC, or (the H200 machine, 2026-11-28) a driver whose NVENC API is older than ffmpeg's
    assert "has no NVENC encoder (h264_nvenc)" in lines[0] or "the NVIDIA driver is too old" in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("codec, suffix", [("h264_nvenc", ".mp4"), ("hevc_nvenc", ".mov"), ("av1_nvenc", ".webm")])
def test_nvenc_encodes_every_frame(clip: Path, tmp_path: Path, codec: str, suffix: str) -> None:
    if not nvenc_here(codec):
        pytest.skip(f"no {codec} on this GPU")
    out = tmp_path / f"out{suffix}"
    run = srgpu("upscale", str(clip), "-o", str(out), "--codec", codec, "--device", "cuda:0")
    assert run.returncode == 0, run.stderr
    probe = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(out), "-map", "0:v:0", "-f", "framemd5", "-"],
                           capture_output=True, text=True, check=True).stdout
    assert len([ln for ln in probe.splitlines() if ln and not ln.startswith("#")]) == 10
