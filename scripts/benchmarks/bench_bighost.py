#!/usr/bin/env python3
"""srgpu on every GPU and core of a host against plain ffmpeg, each row run as its user types it.

Each row is one command (``srgpu upscale`` through ``python3 -m srgpu``, or plain ffmpeg), run
once, with the machine sampled while it runs:

- ``fps``: output frames (counted in the output file) over the command's wall time;
- ``cpu_busy``: the share of all the host's cores busy (/proc/stat), over the whole run and in
  steady state (the middle 80 % of the run's samples);
- ``gpu_busy``: the mean of nvidia-smi's utilization.gpu over the GPUs the row uses, steady state;
- ``gpu_mib``: GPU memory: the peak of nvidia-smi's memory.used per GPU over the row, less what the
  GPU held before it, and the peak of each process's own (nvidia-smi's compute apps, by process kind;
  empty where nvidia-smi cannot see this pid namespace's processes);
- ``cpu_s_per_frame`` by process kind (ffmpeg decoders, encoders, srgpu's Python processes, ...):
  every process under the command sampled from /proc (a process counts from its last sample).

Every output is checked: its frame count equals the source's, and its video packets' timestamps
are strictly increasing.

Rows (``--rows``): ``plain`` (ffmpeg -vf scale=W:H:flags=bicubic, one process), ``plainN`` (N
equal chunks with -ss/-t at once, then the concat demuxer and the source's audio: what one
scripts by hand), ``srgpu1`` (one GPU, one pipeline: --gpus 0 --chunk-seconds 0), ``srgpuG`` (the
first G GPUs, srgpu's defaults), ``srgpuall`` (--gpus all, defaults), ``srgpuall-wN`` (--gpus all
--workers N), ``pipedN`` (plainN with each chunk's decoding and scaling in one ffmpeg and its encoding in
another, joined by a pipe of raw frames in Matroska, as srgpu's encoders are fed). A suffix ``-tT`` on a
plain, piped or srgpu row gives the x264 or x265 encoders ``-threads T``. A folder of videos (``--folder-files`` cuts of ``--folder-seconds`` each of the source,
stream copies at keyframes, with the audio): ``folder-plainN`` (plain ffmpeg over the files, N at a time,
xargs -P N), ``folder-srgpu`` (``srgpu upscale FOLDER -o OUT --gpus all``, defaults) and
``folder-srgpu-wN`` (--workers N); fps is every output's frames over the row's wall time, and every
output is checked against its own file.

    python3 scripts/benchmarks/bench_bighost.py --seconds 150 --settings libx264:veryfast \\
        --rows plain plain2 plain4 plain8 srgpu1 srgpu2 srgpuall --json out.json

The source is the Big Buck Bunny clip of ../shared/data/video looped to --seconds, scaled to
1920x1080 and encoded with x264 veryfast crf 18, its audio copied (as Opus).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_chunks import count_frames, default_source  # noqa: E402
from srgpu.video.ffmpeg import ffmpeg_exe  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all cores since boot."""
    parts = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]  # idle + iowait
    return sum(parts) - idle, sum(parts)


def process_kind(cmd: list[bytes]) -> str:
    words = [w.decode(errors="replace") for w in cmd if w]
    if not words:
        return "?"
    name = Path(words[0]).name
    if name.startswith("ffmpeg"):
        inputs = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-i"]
        last_input = max((i for i, w in enumerate(words) if w == "-i"), default=0)
        # a codec named before the last -i is a decoder (-c:v h264_cuvid -i SRC), after it an encoder
        codecs = [words[i + 1] for i, w in enumerate(words[:-1]) if i > last_input
                  and re.fullmatch(r"-c(odec)?:v(:0)?|-c(odec)?:\d+|-vcodec", w) and words[i + 1] not in ("copy", "rawvideo")]
        piped = "pipe:0" in inputs or "-" in inputs
        if codecs and "null" not in words:
            return f"ffmpeg encode {codecs[0]}" + (" (frames piped in)" if piped else "")
        if any("cuvid" in w for w in words):
            return "ffmpeg decode (NVDEC)"
        if "pipe:1" in words or words[-1] == "-":
            return "ffmpeg decode (CPU) / read-back"
        return "ffmpeg other (probe, scan, join)"
    if name.startswith("python"):
        return "srgpu python processes"
    return name


def snapshot() -> dict[int, tuple[int, list[bytes], float]]:
    """pid -> (parent pid, command line words, CPU seconds) of every process now, from /proc."""
    tree: dict[int, tuple[int, list[bytes], float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        tree[int(entry.name)] = (int(rest[1]), cmd, (int(rest[11]) + int(rest[12])) / TICK)
    return tree


class Sampler:
    """Samples the host's CPU, the GPUs and every process under one pid, every ``interval``."""

    def __init__(self, root_pid: int, gpus: list[int], interval: float = 0.5) -> None:
        self.root, self.gpus, self.interval = root_pid, gpus, interval
        self.cpu: list[float] = []
        self.gpu: list[float] = []
        self.last: dict[int, tuple[str, float]] = {}
        self.thread_last: dict[tuple[int, int], tuple[str, str, float]] = {}  # (pid, tid) of ffmpeg's -> (kind, name, CPU s)
        self.t0 = time.perf_counter()
        self.seen: dict[int, list] = {}  # pid -> [kind, parent, first seen, last seen] (s from the start)
        self._stop = threading.Event()
        self._smi = self._apps = None
        self.mem_base: dict[int, int] = {}  # GPU -> MiB used when the row started
        self.mem_peak: dict[int, int] = {}
        self.app_peak: dict[tuple[int, str], int] = {}  # (pid, GPU uuid) -> peak MiB
        if gpus:
            try:
                self._smi = subprocess.Popen(
                    ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits",
                     f"-lms={int(interval * 1000)}"], stdout=subprocess.PIPE, text=True)
                threading.Thread(target=self._read_smi, daemon=True).start()
                self._apps = subprocess.Popen(
                    ["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits",
                     f"-lms={int(interval * 1000)}"], stdout=subprocess.PIPE, text=True)
                threading.Thread(target=self._read_apps, daemon=True).start()
            except OSError:
                pass
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _read_smi(self) -> None:
        assert self._smi and self._smi.stdout
        row: dict[int, float] = {}
        for line in self._smi.stdout:
            try:
                i, u, m = (int(x) for x in line.split(","))
            except ValueError:
                continue
            if i in self.gpus:
                row[i] = u
                self.mem_base.setdefault(i, m)
                self.mem_peak[i] = max(self.mem_peak.get(i, 0), m)
            if len(row) == len(self.gpus):
                self.gpu.append(sum(row.values()) / len(row))
                row = {}

    def _read_apps(self) -> None:
        assert self._apps and self._apps.stdout
        for line in self._apps.stdout:
            try:
                pid, uuid, mib = (x.strip() for x in line.split(","))
                key = (int(pid), uuid)
                self.app_peak[key] = max(self.app_peak.get(key, 0), int(mib))
            except ValueError:
                continue

    def gpu_memory(self) -> dict:
        """Peak MiB per GPU over the row (less the GPU's use at its start), and per process kind the
        largest peak of one process on one GPU with how many such processes were seen."""
        per_gpu = {i: self.mem_peak[i] - self.mem_base.get(i, 0) for i in sorted(self.mem_peak)}
        kinds: dict[str, list[int]] = defaultdict(list)
        for (pid, _), mib in self.app_peak.items():
            kind = self.last.get(pid, ("not ours",))[0]
            kinds[kind].append(mib)
        return {"per_gpu_peak_mib": per_gpu,
                "per_process_peak_mib": {k: {"max": max(v), "min": min(v), "processes": len(v)}
                                         for k, v in sorted(kinds.items())}}

    def _run(self) -> None:
        prev = cpu_times()
        while not self._stop.wait(self.interval):
            now = cpu_times()
            if now[1] > prev[1]:
                self.cpu.append((now[0] - prev[0]) / (now[1] - prev[1]))
            prev = now
            self._processes()

    def _processes(self) -> None:
        tree = snapshot()
        kids: dict[int, list[int]] = defaultdict(list)
        for pid, (ppid, _, _) in tree.items():
            kids[ppid].append(pid)
        todo, seen = [self.root], set()
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            todo.extend(kids.get(p, []))
            if p in tree:
                kind = process_kind(tree[p][1])
                if kind == "?" and p in self.last:  # a process exiting: its name is gone, its figure is final
                    kind = self.last[p][0]
                self.last[p] = (kind, tree[p][2])
                if kind.startswith("ffmpeg"):
                    self._threads(p, kind)
                now = round(time.perf_counter() - self.t0, 2)
                self.seen.setdefault(p, [kind, tree[p][0], now, now])[3] = now

    def _threads(self, pid: int, kind: str) -> None:
        """Each thread of an ffmpeg process by its name (ffmpeg names its demuxer, decoder, filter,
        encoder and muxer threads; an encoder's own threads, x264's, take the name of the thread
        that started them)."""
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            return
        for t in tasks:
            try:
                stat = (t / "stat").read_text()
            except OSError:
                continue
            name = re.sub(r"\d+", "N", stat[stat.index("(") + 1:stat.rindex(")")])
            rest = stat[stat.rindex(")") + 2:].split()
            self.thread_last[(pid, int(t.name))] = (kind, name, (int(rest[11]) + int(rest[12])) / TICK)

    def by_thread(self) -> dict[str, dict[str, float]]:
        """CPU seconds of ffmpeg's threads, by process kind and thread name."""
        out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for kind, name, cpu in self.thread_last.values():
            out[kind][name] += cpu
        return {k: dict(v) for k, v in out.items()}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for p in (self._smi, self._apps):
            if p:
                p.terminate()

    @staticmethod
    def steady(xs: list[float]) -> float | None:
        if not xs:
            return None
        k = len(xs) // 10
        mid = xs[k:len(xs) - k] or xs
        return statistics.fmean(mid)

    def timeline(self) -> list[list]:
        """[kind, pid, parent pid, first seen, last seen, CPU seconds] of every process, by start."""
        return sorted(([k, pid, pp, a, b, round(self.last[pid][1], 2)] for pid, (k, pp, a, b) in self.seen.items()),
                      key=lambda r: r[3])

    def by_kind(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for kind, cpu in self.last.values():
            out[kind] += cpu
        return dict(out)


def run_row(name: str, commands: list[list[str]], gpus: list[int], outputs: list[tuple[Path, int]],
            log: Path, interval: float = 0.5, timeline: bool = False) -> dict:
    """Run ``commands`` one after another (a shell would: the plain chunks' concat is the last),
    sampled as one row; ``outputs``: each file the row makes and the frames of its source."""
    wrapper = [sys.executable, "-c", "import subprocess,sys,json\n"
               "for c in json.loads(sys.argv[1]):\n"
               "    r = subprocess.run(c)\n"
               "    if r.returncode: sys.exit(r.returncode)\n", json.dumps(commands)]
    t0 = time.perf_counter()
    with open(log, "a") as lf:
        lf.write(f"\n=== {name}\n")
        lf.flush()
        proc = subprocess.Popen(wrapper, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sampler = Sampler(proc.pid, gpus, interval)
        assert proc.stdout is not None
        for line in proc.stdout:  # each line with the time it came, from the command's start
            lf.write(f"{time.perf_counter() - t0:7.2f} {line.rstrip()}\n")
        rc = proc.wait()
    wall = time.perf_counter() - t0
    sampler.stop()
    row: dict = {"row": name, "rc": rc, "wall_s": round(wall, 2)}
    if rc != 0:
        return row
    counts = [count_frames(out) for out, _ in outputs]
    frames = sum(counts)
    row.update(frames_out=frames, frames_ok=all(c == want for c, (_, want) in zip(counts, outputs)),
               pts_increasing=all(pts_increasing(out) for out, _ in outputs), fps=round(frames / wall, 2),
               mbytes=round(sum(out.stat().st_size for out, _ in outputs) / 1e6, 1))
    if len(outputs) > 1:
        row["files"] = len(outputs)
    cpu_all = Sampler.steady(sampler.cpu)
    row["cpu_busy_steady"] = round(cpu_all, 3) if cpu_all is not None else None
    row["cpu_busy_mean"] = round(statistics.fmean(sampler.cpu), 3) if sampler.cpu else None
    g = Sampler.steady(sampler.gpu)
    row["gpu_busy_steady"] = round(g, 1) if g is not None else None
    if gpus:
        row["gpu_mib"] = sampler.gpu_memory()
    kinds = sampler.by_kind()
    row["cpu_s_per_frame"] = {k: round(v / frames, 4) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])}
    row["cpu_s_per_frame_total"] = round(sum(kinds.values()) / frames, 4)
    row["ffmpeg_threads_cpu_s_per_frame"] = {
        kind: {n: round(v / frames, 4) for n, v in sorted(names.items(), key=lambda kv: -kv[1]) if v / frames >= 0.0005}
        for kind, names in sampler.by_thread().items()}
    if timeline:
        row["timeline"] = sampler.timeline()
    return row


def pts_increasing(path: Path) -> bool:
    out = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(path), "-map", "0:v:0", "-c", "copy", "-f",
                          "framecrc", "-"], capture_output=True, text=True, check=True).stdout
    pts = [int(ln.split(",")[2]) for ln in out.splitlines() if ln and not ln.startswith("#")]
    # framecrc lists packets in decode order: B-frames make pts non-monotonic there; sorted and unique
    return len(set(pts)) == len(pts)


def plain_commands(src: Path, out: Path, size: tuple[int, int], codec: str, preset: str, crf: int,
                   n: int, duration: float, folder: Path, threads: int | None = None,
                   piped: bool = False) -> list[list[str]]:
    ff = [ffmpeg_exe(), "-hide_banner", "-nostdin", "-y", "-loglevel", "error"]
    enc = ["-c:v", codec, "-preset", preset, "-crf", str(crf)] + (
        ["-x265-params", "log-level=error"] if codec == "libx265" else []) + (
        ["-threads", str(threads)] if threads else [])
    scale = ["-vf", f"scale={size[0]}:{size[1]}:flags=bicubic"]
    if n == 1 and not piped:
        return [ff + ["-i", str(src), "-map", "0:v:0", "-map", "0:a?", *scale, *enc, "-c:a", "copy", str(out)]]
    step = duration / n
    name = "piped" if piped else "plain"
    parts = [folder / f"{name}{n}-{k:02d}.mkv" for k in range(n)]

    def chunk(k: int) -> str:
        window = ["-ss", f"{k * step:.6f}", "-i", str(src)] + (["-t", f"{step:.6f}"] if k < n - 1 else [])
        if not piped:
            return " ".join(_q(a) for a in ff + window + ["-map", "0:v:0", "-an", *scale, *enc, str(parts[k])])
        # decoded and scaled frames through a pipe, raw in Matroska, to an encoder of their own
        decode = ff + window + ["-map", "0:v:0", "-an", *scale, "-c:v", "rawvideo", "-f", "matroska", "pipe:1"]
        encode = ff + ["-f", "matroska", "-i", "pipe:0", "-map", "0:v:0", *enc, str(parts[k])]
        return "( " + " ".join(_q(a) for a in decode) + " | " + " ".join(_q(a) for a in encode) + " )"

    # all N at once: one bash line, as one would script it
    jobs = " & ".join(chunk(k) for k in range(n))
    listing = folder / f"{name}{n}.txt"
    listing.write_text("".join(f"file '{p}'\n" for p in parts))
    return [["bash", "-c", jobs + " & wait"],
            ff + ["-f", "concat", "-safe", "0", "-i", str(listing), "-i", str(src), "-map", "0:v", "-map", "1:a?",
                  "-c", "copy", str(out)]]


def make_folder(src: Path, folder: Path, files: int, seconds: float, duration: float) -> list[Path]:
    """``files`` cuts of ``seconds`` of ``src`` (stream copies from the keyframe at or before each start,
    audio kept), starting at spread offsets."""
    folder.mkdir(parents=True, exist_ok=True)
    span = max(0.0, duration - seconds)
    cuts = []
    for k in range(files):
        cut = folder / f"clip{k:02d}.mkv"
        start = (k * span / max(1, files - 1)) if files > 1 else 0.0
        subprocess.run([ffmpeg_exe(), "-v", "error", "-y", "-ss", f"{start:.3f}", "-i", str(src), "-t", f"{seconds}",
                        "-map", "0", "-c", "copy", str(cut)], check=True)
        cuts.append(cut)
    return cuts


def folder_plain_commands(files: list[Path], outdir: Path, size: tuple[int, int], codec: str, preset: str, crf: int,
                          n: int) -> list[list[str]]:
    """Plain ffmpeg over every file, N at a time (xargs -P N), as one would script it."""
    ff = [ffmpeg_exe(), "-hide_banner", "-nostdin", "-y", "-loglevel", "error"]
    enc = ["-c:v", codec, "-preset", preset, "-crf", str(crf)] + (
        ["-x265-params", "log-level=error"] if codec == "libx265" else [])
    one = " ".join(_q(a) for a in ff) + ' -i "$1" -map 0:v:0 -map "0:a?" ' + \
        " ".join(_q(a) for a in ["-vf", f"scale={size[0]}:{size[1]}:flags=bicubic", *enc, "-c:a", "copy"]) + \
        f' {_q(str(outdir))}/"$(basename "$1")"'
    listing = "\n".join(str(f) for f in files)
    return [["bash", "-c", f"mkdir -p {_q(str(outdir))} && printf '{listing}\\n' | "
                           f"xargs -P {n} -I{{}} bash -c {_q(one)} _ {{}}"]]


def _q(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'" if re.search(r"[^\w@%+=:,./-]", s) else s


def srgpu_command(src: Path, out: Path, codec: str, preset: str, crf: int, extra: list[str]) -> list[list[str]]:
    return [[sys.executable, "-m", "srgpu", "upscale", str(src), "-o", str(out), "--overwrite", "--codec", codec,
             "--preset", preset, "--crf", str(crf), *extra]]


def warm_up(src: Path, folder: Path, log: Path) -> float:
    """srgpu on the source's first 2 s, so that no row pays for building kernels or tuning plans
    (cached on disk, as on a user's machine after the first run)."""
    cut, out = folder / "warm.mkv", folder / "warm-out.mkv"
    subprocess.run([ffmpeg_exe(), "-v", "error", "-y", "-i", str(src), "-t", "2", "-c", "copy", str(cut)], check=True)
    t0 = time.perf_counter()
    with open(log, "ab") as lf:
        subprocess.run([sys.executable, "-m", "srgpu", "upscale", str(cut), "-o", str(out), "--overwrite", "--gpus",
                        "0", "--chunk-seconds", "0"], stdout=lf, stderr=lf, check=True)
    out.unlink()
    return round(time.perf_counter() - t0, 1)


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    except OSError:
        return 0
    return sum(1 for ln in out.splitlines() if ln.startswith("GPU "))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path)
    ap.add_argument("--seconds", type=float, default=150.0)
    ap.add_argument("--settings", nargs="+", default=["libx264:veryfast"])
    ap.add_argument("--crf", type=int, default=18)
    ap.add_argument("--rows", nargs="+", default=["plain", "plain2", "plain4", "plain8", "srgpu1", "srgpuall"])
    ap.add_argument("--srgpu-arg", action="append", default=[], help="extra argument to every srgpu row")
    ap.add_argument("--work", type=Path, default=None, help="folder for outputs (default: a temporary one)")
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between samples")
    ap.add_argument("--timeline", action="store_true", help="also list every process of each row (kind, "
                    "parent, first and last seen, CPU seconds)")
    ap.add_argument("--no-warmup", action="store_true",
                    help="do not upscale 2 s of the source first (kernels built and cached, plans tuned)")
    ap.add_argument("--folder-files", type=int, default=16, help="folder rows: how many clips")
    ap.add_argument("--folder-seconds", type=float, default=20.0, help="folder rows: each clip's length")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    ngpus = gpu_count()
    with tempfile.TemporaryDirectory(prefix="srgpu-bighost-", dir=args.work) as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        src = args.source or default_source(folder, args.seconds)
        made_s = time.perf_counter() - t0
        frames = count_frames(src)
        from srgpu.video.probe import probe

        info = probe(src)
        v = info.main_video()
        duration = info.duration or args.seconds
        size = (v.width * 2, v.height * 2)
        log = (args.json.with_suffix(".log") if args.json else folder / "log.txt")
        warm_s = warm_up(src, folder, log) if ngpus and not args.no_warmup else None
        rows = []
        clips: list[tuple[Path, int]] = []
        if any(name.startswith("folder-") for name in args.rows):
            clips = [(c, count_frames(c)) for c in make_folder(src, folder / "clips", args.folder_files,
                                                               args.folder_seconds, duration)]
        for setting in args.settings:
            codec, preset = setting.split(":")
            for name in args.rows:
                out = folder / f"{name}.mkv"
                outputs = [(out, frames)]
                if name.startswith("folder-"):
                    outdir = folder / name
                    outputs = [(outdir / c.name, f) for c, f in clips]
                if m := re.fullmatch(r"folder-plain(\d+)", name):
                    cmds = folder_plain_commands([c for c, _ in clips], outdir, size, codec, preset, args.crf,
                                                 int(m.group(1)))
                    gpus = []
                elif m := re.fullmatch(r"folder-srgpu(?:-w(\d+))?", name):
                    extra = [*(["--gpus", "all"] if ngpus else []), *(["--workers", m.group(1)] if m.group(1) else []),
                             *args.srgpu_arg]
                    cmds = srgpu_command(folder / "clips", outdir, codec, preset, args.crf, extra)
                    gpus = list(range(ngpus))
                elif m := re.fullmatch(r"(plain|piped)(\d*)(?:-t(\d+))?", name):
                    n = int(m.group(2) or 1)
                    cmds = plain_commands(src, out, size, codec, preset, args.crf, n, duration, folder,
                                          int(m.group(3)) if m.group(3) else None, m.group(1) == "piped")
                    gpus: list[int] = []
                elif name == "srgpu1":
                    cmds = srgpu_command(src, out, codec, preset, args.crf,
                                         ["--gpus", "0", "--chunk-seconds", "0", *args.srgpu_arg])
                    gpus = [0]
                elif m := re.fullmatch(r"srgpu(all|\d+)(?:-w(\d+))?(?:-t(\d+))?", name):
                    g = ngpus if m.group(1) == "all" else int(m.group(1))
                    gpus = list(range(g))
                    extra = ["--gpus", "all" if m.group(1) == "all" else ",".join(map(str, gpus))]
                    if m.group(2):
                        extra += ["--workers", m.group(2)]
                    if m.group(3):
                        extra += ["--encoder-arg=-threads", f"--encoder-arg={m.group(3)}"]
                    cmds = srgpu_command(src, out, codec, preset, args.crf, extra + args.srgpu_arg)
                else:
                    raise SystemExit(f"unknown row {name}")
                row = {"codec": codec, "preset": preset, **run_row(name, cmds, gpus, outputs, log, args.interval,
                                                                         args.timeline)}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "timeline"}), file=sys.stderr, flush=True)
                for made, _ in outputs:
                    made.unlink(missing_ok=True)
                for p in folder.glob(f"{name}-*.mkv"):
                    p.unlink()
        report = {"date": time.strftime("%Y-%m-%d %H:%M"), "host": platform.node(), "cpus": os.cpu_count(),
                  "gpus": ngpus, "source": str(args.source or f"bbb looped {args.seconds:g} s, 1080p x264 crf 18"),
                  "source_made_s": round(made_s, 1), "warmup_s": warm_s, "frames": frames, "duration_s": round(duration, 3),
                  "crf": args.crf, "rows": rows}
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
