"""SIGTERM and SIGHUP end a run as Ctrl-C does: the encoder and decoder ended, no temporary left,
exit status 128 + the signal, one line saying so. After SIGKILL (nothing can clean up), the next
run over the same output removes what the killed run left, and only that. Real processes, real
ffmpeg; the progress of a run whose stderr is a log is plain lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from srgpu import outputs

from test_video import make_clip

ROOT = Path(__file__).resolve().parents[2]
# this checkout first, then whatever the environment adds (the GPU machine's ffmpeg, for one)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


@pytest.fixture(scope="module")
def slow_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Enough frames for the CPU engine to take many seconds: a signal arrives mid-run."""
    return make_clip(tmp_path_factory.mktemp("signals") / "src.mp4", size="160x120", frames=400, codec="libx264",
                     out_args=("-preset", "ultrafast"))


def start(src: Path, dst: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "srgpu", "upscale", str(src), "-o", str(dst), "--device", "cpu"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)


def temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if ".part" in p.name]


def wait_for_temporary(proc: subprocess.Popen, folder: Path, timeout: float = 60.0) -> Path:
    """The encoder's temporary output, once it has grown (frames are being encoded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for found in temporaries(folder):
            try:  # a short-lived temporary (the output folder's write check) may go between listing and stat
                if found.stat().st_size > 0:
                    return found
            except FileNotFoundError:
                pass
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the run never started encoding")


def ffmpeg_writing(path: Path) -> list[int]:
    """Processes whose command line names ``path`` (the encoder writing it), from /proc."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(path).encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminating_signal_ends_the_run_like_ctrl_c(slow_clip: Path, tmp_path: Path, signum: int) -> None:
    dst = tmp_path / "out.mp4"
    proc = start(slow_clip, dst)
    tmp = wait_for_temporary(proc, tmp_path)
    assert ffmpeg_writing(tmp)  # the encoder is running
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum
    assert err.strip().splitlines()[-1] == f"srgpu: error: terminated ({signal.Signals(signum).name})"
    assert "Traceback" not in err
    deadline = time.monotonic() + 5
    while ffmpeg_writing(tmp) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not ffmpeg_writing(tmp), "the encoder outlived srgpu"
    assert temporaries(tmp_path) == [] and not dst.exists()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_the_next_run_removes_what_a_killed_run_left(slow_clip: Path, tmp_path: Path) -> None:
    short = make_clip(tmp_path / "short.mp4", frames=4, codec="libx264", out_args=("-preset", "ultrafast"))
    dst = tmp_path / "out.mp4"
    proc = start(slow_clip, dst)
    left = wait_for_temporary(proc, tmp_path)
    proc.kill()
    proc.communicate()  # reaped, its pipes closed
    for pid in ffmpeg_writing(left):  # orphans of the killed run, as after a power cut: gone
        os.kill(pid, signal.SIGKILL)
    assert left.exists()
    # beside it: a temporary of a live srgpu (this test process) and a user's file that looks alike
    alive = outputs.temp_path(dst)
    alive.write_bytes(b"in progress")
    lookalike = tmp_path / ".out.mp4.srgpu-mine.part.mp4"
    lookalike.write_bytes(b"mine")
    done = subprocess.run([sys.executable, "-m", "srgpu", "upscale", str(short), "-o", str(dst), "--device", "cpu",
                           "-q"], cwd=ROOT, capture_output=True, text=True, env=ENV)
    assert done.returncode == 0, done.stderr
    assert not left.exists() and alive.exists() and lookalike.exists() and dst.exists()


def test_progress_in_a_log_is_plain_lines(slow_clip: Path, tmp_path: Path) -> None:
    """stderr is a pipe here, not a terminal: lines a log can hold, no carriage returns or escapes."""
    short = make_clip(tmp_path / "short.mp4", frames=6, codec="libx264", out_args=("-preset", "ultrafast"))
    done = subprocess.run([sys.executable, "-m", "srgpu", "upscale", str(short), "-o", str(tmp_path / "o.mp4"),
                           "--device", "cpu"], cwd=ROOT, capture_output=True, text=True,
                          env=ENV)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "\x1b" not in done.stderr
    assert "0frame" not in done.stderr and "?frame/s" not in done.stderr
    assert "srgpu: short.mp4: 6/6 frames, " in done.stderr and " frame/s" in done.stderr


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_ctrl_c_in_a_folder_says_what_was_done_and_what_was_not(tmp_path: Path) -> None:
    import cv2
    import numpy as np

    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    rng = np.random.default_rng(0)
    for i in range(120):
        cv2.imwrite(str(src / f"{i:03d}.png"), rng.integers(0, 256, (120, 160, 3), dtype=np.uint8))
    proc = subprocess.Popen([sys.executable, "-m", "srgpu", "upscale", str(src), "-o", str(out), "--device", "cpu",
                             "--jobs", "1"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(out.glob("*.png")) if out.is_dir() else []) < 3:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert lines[-1] == "srgpu: error: interrupted"
    stopped = [ln for ln in lines if ln.startswith("srgpu: stopped: ")]
    assert len(stopped) == 1, err
    import re

    m = re.fullmatch(r"srgpu: stopped: (\d+) upscaled, 0 skipped \(output exists\), 0 failed in [\d.]+ s; "
                     r"(\d+) of 120 files not done \(the same command goes on with them\)", stopped[0])
    assert m, stopped[0]
    done, left = int(m.group(1)), int(m.group(2))
    assert done >= 3 and done + left == 120
    assert len(list(out.glob("*.png"))) in (done, done + 1)  # one may be published as the interrupt came
