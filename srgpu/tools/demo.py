"""``srgpu demo``: a sample the project makes itself (ffmpeg's built-in test source, with a tone),
ready to be upscaled with the default model. No third-party media is needed or shipped."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import outputs


class DemoError(RuntimeError):
    """The sample clip could not be rendered; the message carries ffmpeg's last lines."""


@dataclass(frozen=True)
class ClipSpec:
    width: int = 320
    height: int = 180
    fps: int = 25
    seconds: float = 2.0
    source: str = "testsrc2"  # any of ffmpeg's lavfi video sources


def ffmpeg_exe() -> str:
    from ..video import ffmpeg
    from ..video.errors import VideoError

    try:
        return ffmpeg.ffmpeg_exe()
    except VideoError as e:
        raise DemoError(f"ffmpeg is not available ({e})") from None


def render_command(dst: Path, spec: ClipSpec) -> list[str]:
    """The ffmpeg argument list (never a shell string) for an H.264 + AAC test clip."""
    video = f"{spec.source}=size={spec.width}x{spec.height}:rate={spec.fps}:duration={spec.seconds}"
    audio = f"sine=frequency=440:sample_rate=48000:duration={spec.seconds}"
    return [ffmpeg_exe(), "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
            "-f", "lavfi", "-i", video, "-f", "lavfi", "-i", audio,
            "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "veryfast", "-crf", "18",
            "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "96k", "-shortest", str(dst)]


def render_clip(dst: Path, spec: ClipSpec = ClipSpec()) -> Path:
    """Render the test clip to ``dst`` (written under a temporary name, then renamed)."""
    dst = Path(dst)
    if not dst.parent.is_dir():
        raise DemoError(f"{dst.parent}: output directory does not exist")
    tmp = outputs.temp_path(dst)
    try:
        proc = subprocess.run(render_command(tmp, spec), capture_output=True, text=True)
        if proc.returncode != 0 or not tmp.is_file():
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:]) or f"exit status {proc.returncode}"
            raise DemoError(f"ffmpeg could not render the test clip: {tail}")
        outputs.publish(tmp, dst, replace=True)  # the demo folder is its own
    finally:
        tmp.unlink(missing_ok=True)
    return dst
