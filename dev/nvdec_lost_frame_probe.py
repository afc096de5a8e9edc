"""GPU machine: upscale the clip that came out one frame short with NVDEC taking over, and keep
what tells why: each frame's pts/duration as handed to the encoder, and every packet of the
encoded file with its flags (framecrc), before the accounting check runs.
Usage: source .ffmpeg9/setup.sh; python3 dev/nvdec_lost_frame_probe.py OUTDIR"""

import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_video import make_clip  # noqa: E402

from srgpu.engine.gpu import GPUEngine  # noqa: E402
from srgpu.model import random_model  # noqa: E402
from srgpu.video import api, verify, writer  # noqa: E402
from srgpu.video.ffmpeg import ffmpeg_exe  # noqa: E402

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
sent: list[tuple[int, int, int | None]] = []
orig_write = writer.Writer.write


def write(self, frame):  # type: ignore[no-untyped-def]
    sent.append((frame.index, frame.pts, frame.duration))
    return orig_write(self, frame)


writer.Writer.write = write
orig_check = verify.check_frames


def check(path, index, pts, tb):  # type: ignore[no-untyped-def]
    shutil.copy(path, out / "encoded.mp4")
    crc = subprocess.run([ffmpeg_exe(), "-v", "error", "-copyts", "-i", str(path), "-map", f"0:{index}", "-c", "copy",
                          "-f", "framecrc", "-"], capture_output=True, text=True).stdout
    (out / "encoded.framecrc").write_text(crc)
    return orig_check(path, index, pts, tb)


api.verify.check_frames = check
for name, pix, ts, n, rate in [("a", "yuvj420p", 15360, 280, 30), ("b", "yuv420p", 15360, 280, 30), ("c", "yuvj420p", 10240, 120, 20)]:
    src = make_clip(out / f"src_{name}.mp4", size="1280x720", rate=rate, frames=n, pix_fmt=pix, codec="libx264",
                    vf="noise=alls=12:allf=t", out_args=("-profile:v", "high", "-bf", "3", "-x264-params",
                                                         "b-pyramid=normal", "-video_track_timescale", str(ts)))
    engine = GPUEngine(random_model("9-1-5", seed=5, scale=2), 2)  # no planner: the default plan
    for hw in ("auto", "no"):
        sent.clear()
        try:
            r = api.upscale_video(src, out / f"o_{name}_{hw}.mp4", engine, api.VideoOptions(hwdec=hw))
            print(name, hw, "OK", r.frames, r.decoder, r.notes)
        except Exception as e:  # noqa: BLE001
            print(name, hw, "ERR", e)
        (out / f"sent_{name}_{hw}.txt").write_text("\n".join(map(str, sent)))
        shutil.copy(out / "encoded.framecrc", out / f"crc_{name}_{hw}.txt")
        lines = [ln for ln in (out / "encoded.framecrc").read_text().splitlines() if not ln.startswith("#")]
        print("  packets", len(lines), "last:", lines[-3:], "sent last:", sent[-2:], "flags:",
              sorted({ln.split(",")[-1].strip() for ln in lines if "F=" in ln}))
    engine.close()
