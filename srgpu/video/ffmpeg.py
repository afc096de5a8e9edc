"""The ffmpeg that imageio-ffmpeg ships: where it is, what it can encode, and running it.

ffmpeg is always run with argument lists (never a shell), in its own process group so that a
Ctrl-C reaches only srgpu, which then ends the children itself.
"""

from __future__ import annotations

import collections
import functools
import os
import re
import signal
import subprocess
import threading
from pathlib import Path
from typing import IO, Callable, Sequence

from .errors import VideoError

# ffmpeg's log lines carry their level when run with -loglevel level+...: "[h264 @ 0x..] [error] ..."
_LEVEL = re.compile(r"\[(panic|fatal|error|warning|info|verbose|debug|trace)\] ")
ERROR_LEVELS = frozenset({"panic", "fatal", "error"})


@functools.lru_cache(maxsize=1)
def ffmpeg_exe() -> str:
    """Path of the bundled ffmpeg (imageio-ffmpeg honours $IMAGEIO_FFMPEG_EXE to use another one)."""
    try:
        import imageio_ffmpeg
    except ImportError as e:  # pragma: no cover - a runtime dependency
        raise VideoError(f"imageio-ffmpeg is not installed ({e})") from None
    try:
        return imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError as e:
        raise VideoError(f"no ffmpeg available: {e}") from None


def file_arg(path: str | os.PathLike) -> str:
    """A local file as ffmpeg is to open it, input or output: through its file protocol by the
    absolute path, so that a name such as ``concat:a.mp4|b.mp4`` or ``x:y.mp4`` is that file and
    never a protocol ffmpeg reads something else through."""
    return "file:" + os.path.abspath(path)


PIPE_BYTES = 1 << 20  # raw 4K frames are 12 MB: 64 KiB pipes cost ~200 wake-ups per frame each way


def popen(args: Sequence[str], **kwargs: object) -> subprocess.Popen:
    """Start ffmpeg with ``args`` (without the executable) in a new process group; its frame
    pipes are enlarged where the OS allows."""
    extra: dict = {"start_new_session": True} if os.name == "posix" else {}
    proc = subprocess.Popen([ffmpeg_exe(), *args], **extra, **kwargs)  # type: ignore[call-overload]
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            _enlarge_pipe(pipe.fileno())
    return proc


def _enlarge_pipe(fd: int) -> None:
    """Linux F_SETPIPE_SZ, best effort: up to PIPE_BYTES or the system's pipe-max-size."""
    try:
        import fcntl

        setsize = getattr(fcntl, "F_SETPIPE_SZ", 1031)
        try:
            limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
        except (OSError, ValueError):
            limit = PIPE_BYTES
        fcntl.fcntl(fd, setsize, min(PIPE_BYTES, limit))
    except (ImportError, OSError):
        pass  # not Linux, or not allowed: the default pipe still works


def run(args: Sequence[str], timeout: float = 60.0, cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """Run ffmpeg to completion, capturing text output (probes and queries)."""
    try:
        return subprocess.run([ffmpeg_exe(), *args], capture_output=True, text=True, errors="replace",
                              timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise VideoError(f"ffmpeg did not answer within {timeout:.0f} s ({' '.join(args[:6])} ...)") from None


def decoder_args(stream_index: int, decoder: str | None, options: Sequence[str] = ()) -> list[str]:
    """Input options that decode stream ``stream_index`` with ``decoder`` (None: ffmpeg's choice).
    The decoder is named for that stream alone: ``-c:v`` would force it on every video stream of
    the file, and an H.264 decoder probing a cover image logs errors that fail the decode.
    ``options``: the decoder's own, already specific to the stream (e.g. ``-gpu:3 0``)."""
    return ["-c:" + str(stream_index), decoder, *options] if decoder else []


# signals that end a process from outside (the user, the OOM killer, a service manager): not a crash
_KILLS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT})


def describe_exit(rc: int) -> str:
    """'exit status 1'; 'killed by SIGKILL' for a child ended from outside, 'crashed (SIGSEGV)'
    for one that a fault ended."""
    if rc < 0:
        try:
            sig = signal.Signals(-rc)
        except ValueError:
            return f"crashed (signal {-rc})"
        return f"killed by {sig.name}" if sig in _KILLS else f"crashed ({sig.name})"
    return f"exit status {rc}"


def split_level(line: str) -> tuple[str | None, str]:
    """'[h264 @ 0x1] [error] bad' -> ('error', '[h264] bad'); lines without a level -> (None, line)."""
    m = _LEVEL.search(line)
    if not m:
        return None, line
    text = line[:m.start()] + line[m.end():]
    text = re.sub(r" @ 0x[0-9a-f]+\]", "]", text)  # "[h264 @ 0x55d0]" -> "[h264]"
    return m.group(1), re.sub(r"\[[a-z]+#[\d:]+/", "[", text).strip()  # "[in#0/mov,mp4]" -> "[mov,mp4]"


class Child:
    """One ffmpeg child of a pipeline stage (the decoder or the encoder): started once, killed from
    any thread (another stage's failure, Ctrl-C) without racing the start."""

    role = "ffmpeg"  # what the child does, for messages: "encoder", "decoder", "join"

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._log: StderrLog | None = None
        self._lock = threading.Lock()
        self._killed = False

    def _launch(self, args: Sequence[str], what: str, on_line: Callable[[str], bool] | None = None,
                **kwargs: object) -> subprocess.Popen:
        """Start ffmpeg with its stderr read by a StderrLog; VideoError '<what>: stopped' if the
        stage was killed first."""
        with self._lock:
            if self._killed:
                raise VideoError(f"{what}: stopped")
            self._proc = popen(args, stderr=subprocess.PIPE, **kwargs)
            self._log = StderrLog(self._proc.stderr, on_line=on_line)  # type: ignore[arg-type]
            self._started(self._proc)
        return self._proc

    def detail(self) -> str:
        """Why the child failed, for a message: its first error line, else how a signal ended it
        ("ffmpeg (encoder) was killed by SIGKILL": it printed nothing then), else its last lines."""
        log = self._log
        if log is not None and log.first_error:
            return log.first_error
        rc = self._proc.poll() if self._proc is not None else None
        if rc is not None and rc < 0 and not self._killed:
            how = describe_exit(rc)
            return f"ffmpeg ({self.role}) {'was ' if how.startswith('killed') else ''}{how}"
        return log.summary() if log is not None else ""

    def stderr_read(self, timeout: float = 5.0) -> None:
        """Wait until the child's stderr is read to its end: a child that just failed has said why,
        and ``detail`` should have it."""
        if self._log is not None:
            self._log.join(timeout)

    def _started(self, proc: subprocess.Popen) -> None:
        """Called under the start lock (e.g. to wrap the child's stdin)."""

    def _on_kill(self) -> None:
        """Called after the child is gone (e.g. to give back what was lent to its pipe)."""

    def kill(self) -> None:
        with self._lock:
            self._killed = True
        stop_process(self._proc)
        self._on_kill()
        if self._log is not None:
            self._log.join(1.0)


class StderrLog:
    """Reads a child's stderr on its own thread: keeps the last lines for error messages, remembers
    the first error-level line, and hands every line to ``on_line`` (e.g. a showinfo parser)."""

    def __init__(self, stream: IO[bytes], on_line: Callable[[str], bool] | None = None,
                 keep: int = 12) -> None:
        self._stream = stream
        self._on_line = on_line
        self.tail: collections.deque[str] = collections.deque(maxlen=keep)
        self.first_error: str | None = None
        self.error_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ffmpeg-stderr", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for raw in self._stream:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if self._on_line is not None and self._on_line(line):
                continue  # consumed (showinfo frame lines are not worth keeping)
            level, text = split_level(line)
            if not text.strip():
                continue
            self.tail.append(text)
            if level in ERROR_LEVELS and self.first_error is None:
                self.first_error = text
                self.error_event.set()
        self._stream.close()

    def join(self, timeout: float = 5.0) -> None:
        self.thread.join(timeout)

    def summary(self, lines: int = 3) -> str:
        """The last few lines on one line, for a VideoError message."""
        picked = list(self.tail)[-lines:]
        return " | ".join(" ".join(s.split()) for s in picked) or "(ffmpeg printed nothing)"


def stop_process(proc: subprocess.Popen | None, grace: float = 2.0) -> None:
    """End a child: close its pipes' our ends, kill it, reap it. Safe to call twice."""
    if proc is None:
        return
    if proc.poll() is None:
        try:
            proc.kill()
        except OSError:
            pass
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:  # pragma: no cover - a kill that did not take
        pass


@functools.lru_cache(maxsize=None)
def encoder_pix_fmts(codec: str) -> tuple[str, ...]:
    """The pixel formats a video encoder of this ffmpeg accepts; VideoError for an unknown encoder
    or one that is not a video encoder."""
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", codec):
        raise VideoError(f"unknown video codec {codec!r}")
    out = run(["-hide_banner", "-h", f"encoder={codec}"]).stdout
    if not out.lstrip().startswith("Encoder "):
        raise VideoError(f"unknown video codec {codec!r}: this ffmpeg has no such encoder "
                         f"(known here: {', '.join(available_video_encoders())})")
    m = re.search(r"Supported pixel formats:(.*)", out)
    if m is None:
        if re.search(r"Supported sample (formats|rates)|Supported channel layouts", out):
            raise VideoError(f"{codec!r} is an audio encoder, not a video encoder")
        return ()  # a video encoder that does not list formats: let ffmpeg choose
    return tuple(m.group(1).split())


TRIAL_SIZE = (128, 96)  # a trial frame: any encoder's minimum, and ~20-50 ms to encode (a 4K one takes seconds)
_UNUSED = re.compile(r"Codec AVOption \S+ .*has not been used for any stream")  # an option no encoder takes
_OUTPUT = re.compile(r"^Output #\d+, [^,]+, to '(.*)':$")
_EXISTS = re.compile(r"^File '(.*)' already exists\. Exiting\.$")
_OWN_ERROR = re.compile(r"^(x264|x265|Svt)\s*\[(error|fatal)\]")  # libraries that print their own lines


class EncoderRefused(VideoError):
    """The trial encode failed; ``lines``: every (level, text) line ffmpeg printed, for a caller
    that words some failures itself (srgpu.video.nvenc)."""

    def __init__(self, message: str, lines: Sequence[tuple[str | None, str]]) -> None:
        super().__init__(message)
        self.lines = tuple(lines)


@functools.lru_cache(maxsize=None)
def check_encoder(codec: str, options: tuple[str, ...], muxer: str, size: tuple[int, int] = TRIAL_SIZE,
                  loglevel: str = "warning") -> None:
    """Encode one small frame (``size``) with ``codec`` and ``options`` (output options as ffmpeg takes them:
    pixel format, quality, preset, the user's own) into ``muxer``: EncoderRefused (a VideoError) with
    ffmpeg's own words where this ffmpeg refuses them, so that a bad setting fails before any frame is
    decoded. The encoder wrappers' warnings about an option they ignored (x264-params and the like), and
    ffmpeg's about an option no encoder used (``--crf`` for mjpeg, ``--preset`` for ffv1), count as
    refusals. ``loglevel``: what ffmpeg prints besides (e.g. "verbose": NVENC names the GPUs).
    Cached: each combination is tried once per process."""
    import tempfile

    w, h = size
    # -n and the trial's own folder as the working directory: an option that makes ffmpeg write one
    # more output file (the value of an option that takes none) can replace nothing, and where
    # it names a new file, that file is the trial's and goes (the outputs are listed at level info)
    shown = loglevel if loglevel in ("verbose", "debug", "trace") else "info"
    with tempfile.TemporaryDirectory(prefix="srgpu-trial-") as tmp:
        trial = str(Path(tmp) / "trial")
        proc = run(["-nostdin", "-hide_banner", "-loglevel", f"level+{shown}", "-f", "lavfi", "-i",
                    # one frame from the source, not -frames:v, which the user's options may set too
                    f"color=black:size={w}x{h}:rate=25:duration=0.04", "-c:v", codec, *options,
                    "-f", muxer, "-n", trial], cwd=tmp)
        lines = [split_level(line) for line in proc.stderr.splitlines() if line.strip()]
        others = [m.group(1) for _, text in lines if (m := _OUTPUT.match(text)) and m.group(1) != trial]
        for name in others:
            made = Path(tmp) / name  # (absolute names stay absolute)
            if made.is_file() and not made.is_relative_to(tmp):
                made.unlink()  # made by this trial: -n refuses a file that exists
        exists = next((t for _, t in lines if _EXISTS.match(t)), None)
    if others or exists:
        name = others[0] if others else _EXISTS.match(exists).group(1)  # type: ignore[union-attr]
        raise EncoderRefused(f"encoder settings {' '.join(options)!r} name another output file ({name}): an option "
                             "that takes no value was given one", lines)
    refusals = [text for level, text in lines
                if level in ERROR_LEVELS or _OWN_ERROR.match(text)
                or (level == "warning" and text.startswith(f"[{codec}]") and "option" in text.lower())
                or (level == "warning" and _UNUSED.search(text))]  # (-crf for mjpeg, -preset for ffv1)
    if proc.returncode != 0 or refusals:
        detail = "; ".join(list(dict.fromkeys(" ".join(t.split()) for t in refusals))[:2])
        detail = detail or describe_exit(proc.returncode)
        raise EncoderRefused(f"encoder {codec} refuses the settings {' '.join(options)!r}: {detail}", lines)


@functools.lru_cache(maxsize=1)
def pix_fmt_depths() -> dict[str, int]:
    """Each pixel format this ffmpeg knows, with its deepest component in bits (``-pix_fmts``'s
    BIT_DEPTHS column, e.g. gbrp12le 12, rgb48le 16, pal8 8)."""
    out = run(["-hide_banner", "-pix_fmts"]).stdout
    rows = re.finditer(r"^[IOHPB.]{5}\s+(\S+)\s+\d+\s+\d+\s+([\d-]+)\s*$", out, re.M)
    return {m.group(1): max(int(b) for b in m.group(2).split("-")) for m in rows}


@functools.lru_cache(maxsize=None)
def video_codecs(kind: str) -> frozenset[str]:
    """The video ``kind`` ("encoders" or "decoders") this ffmpeg has (its -encoders / -decoders list)."""
    out = run(["-hide_banner", f"-{kind}"]).stdout
    return frozenset(m.group(1) for m in re.finditer(r"^ V\S*\s+(\S+)", out, re.M))


@functools.lru_cache(maxsize=1)
def available_video_encoders() -> tuple[str, ...]:
    """The encoders srgpu documents, those this ffmpeg has."""
    have = video_codecs("encoders")
    wanted = ("libx264", "libx265", "libsvtav1", "ffv1", "prores_ks", "libvpx-vp9", "libaom-av1")
    return tuple(c for c in wanted if c in have)
