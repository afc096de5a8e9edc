"""A long video upscaled in chunks: each chunk decoded frame-exactly, upscaled, encoded into its
own file and checked on its own (by any worker: a process of this machine, a Dask worker), then
joined without re-encoding, every frame at its source timestamp, with the source's other streams
muxed once. The work lives in a hidden folder beside the output, so that a run interrupted in
any way resumes where it stopped.

The work folder ``.NAME.srgpu-chunks`` (beside the output NAME) holds:

- ``job.json``: the source's fingerprint (path, size, mtime, a digest of its video packets'
  timing), the settings (scale, model weights, encoder settings) and the chunk list, written
  atomically before any chunk. A rerun with the same source and settings takes it as it is (the
  chunk list too, whatever the number of workers now); another source or other settings start
  over, with a note saying why.
- per chunk, ``chunk-00012.mkv`` and its certificate ``chunk-00012.json``: the frames the chunk
  holds (their source timestamps and durations, checked against the source's packets and read
  back from the encoded file), the file's size and SHA-256, and the key of the job. The
  certificate is written before the chunk file gets its name, and both atomically, so a chunk
  file under its name was verified whole; a rerun keeps a chunk only if its certificate is this
  job's and the file's size and hash are still the certificate's (a truncated or corrupt file is
  redone, with a note).
- ``lock``: held (flock) by the run that coordinates the job.

Chunks are Matroska files (any codec fits) whose millisecond timestamps are not the source's
ticks; the join does not need them to be: it knows each chunk's frames exactly (its certificate)
and gives each coded frame, in presentation order, its source timestamp and duration, in a
Matroska stream with 1 ns ticks written here (srgpu.video.mkv), which one ffmpeg remuxes with
the source's audio, subtitles, chapters, attachments and metadata (``EncodePlan.command`` with
``copy_video``). ffmpeg derives the decoding timestamps of the whole stream from the
presentation order, so they run on across the joins (B-frames included). The result is checked
like any srgpu video (srgpu.video.verify: every frame, at its time) before it is published. The
join runs in a thread of its own beside the workers and takes each chunk as soon as those before it
are made (Arrivals): at the end only the last chunks are left to join, whatever the video's length.
"""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from .. import outputs
from ..manifest import Settings, VideoSettings, json_form, read_json, recorded_values, settings_fingerprint, write_json
from ..engine.plans import output_bits
from . import chunks as chunking
from . import discont, ffmpeg, hwdecode, mkv, nvdec_trial, nvenc, verify
from .api import (VideoJob, VideoResult, check_complete, check_engine_scale, concealment_notes, engine_gpu,
                  plan_video, planned_kinds, threads_option, video_codec)
from .chunks import Chunk, SourceScan
from .errors import VideoError
from .handover import HandoverReader
from .options import EncodeOptions, VideoOptions
from .pipeline import run_pipeline
from .reader import Reader
from .writer import MUXER_OPTIONS, OutputStream, Writer, pipe_origin

WORK_SUFFIX = ".srgpu-chunks"
JOB_FORMAT, CHUNK_FORMAT, VERSION = "srgpu-chunks", "srgpu-chunk", 1
_CHUNK_NAME = re.compile(r"^chunk-\d{5}\.(mkv|json)$")
_HASH_BLOCK = 1 << 20


class ChunkMismatch(VideoError):
    """A chunk's decoded or encoded frames are not the source's frames of that stretch."""


class SourceMismatch(VideoError):
    """The file a worker opened under the source's path is not the one the coordinator planned from."""


class DamagedChunk(VideoError):
    """A chunk file on disk is no longer the one its certificate describes."""

    def __init__(self, index: int, why: str) -> None:
        super().__init__(f"chunk {index} {why}")
        self.index = index


# ---------------------------------------------------------------- one chunk (any worker)


@dataclass(frozen=True)
class ChunkTask:
    """Everything a worker needs to make one chunk: the job (decided once, by plan_video), the
    chunk, the source's timestamps of its frames, where its file goes and the job's key."""

    job: VideoJob
    chunk: Chunk
    expected: tuple[int, ...]
    time_base: Fraction
    path: Path
    key: str
    encoder_threads: int | None = None
    frame_duration: int = 1  # ticks: the source's typical frame duration, what every chunk's encoder is told
    nvdec: str | None = None  # the NVDEC decoder (h264_cuvid, ...) that decodes it on a GPU engine's device
    durations: tuple[int, ...] = ()  # the source's durations of its frames (NVDEC reports none)
    source: Mapping[str, Any] | None = None  # the coordinator's fingerprint of the source (ChunkedJob.fingerprint)
    # the coordinator's host and stat identity of the source (host, device, inode, size, mtime): a
    # worker that finds the same file there trusts the fingerprint's digest (check_source)
    source_at: tuple[Any, ...] | None = None
    # where NVDEC's verdict on the source appears while the coordinator's trial runs beside the
    # first chunks (srgpu.video.nvdec_trial); None: ``nvdec`` was decided when the job was planned
    nvdec_verdict: Path | None = None

    @property
    def certificate(self) -> Path:
        return self.path.with_suffix(".json")

    @property
    def frames(self) -> int:
        return len(self.expected)

    # a worker may start its next task on the engine while this one's encoder drains (srgpu.batch.pool)
    overlaps = True

    def execute(self, engine: Any, progress: Callable[[int], None] | None = None,
                turn: Any = None) -> "ChunkResult":
        return run_chunk(self, engine, progress, turn)


@dataclass(frozen=True)
class ChunkResult:
    """A verified chunk, as its certificate says."""

    index: int
    pts: tuple[int, ...]
    durations: tuple[int | None, ...]
    size: int
    sha256: str
    seconds: float = 0.0
    concealed: int = 0
    from_start: bool = False  # decoded from the start of the file (seeking did not give its frames)
    decoder: str | None = None  # the NVDEC decoder that decoded it, None: the CPU's
    handover_at: int | None = None  # the frames the CPU decoded before NVDEC took over (an engine's first chunk)

    @property
    def frames(self) -> int:
        """Frames made (what a runner that cannot report progress while a task runs counts)."""
        return len(self.pts)

    def as_json(self, key: str) -> dict[str, Any]:
        return {"format": CHUNK_FORMAT, "version": VERSION, "key": key, "index": self.index, "pts": list(self.pts),
                "durations": list(self.durations), "size": self.size, "sha256": self.sha256,
                "seconds": self.seconds, "concealed": self.concealed, "from_start": self.from_start,
                "decoder": self.decoder, "handover_at": self.handover_at}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "ChunkResult | None":
        if data is None:
            return None
        try:
            pts = tuple(int(p) for p in data["pts"])
            durations = tuple(None if d is None else int(d) for d in data["durations"])
            result = cls(int(data["index"]), pts, durations, int(data["size"]), str(data["sha256"]),
                         float(data.get("seconds", 0.0)), int(data.get("concealed", 0)),
                         bool(data.get("from_start", False)),
                         data.get("decoder") if isinstance(data.get("decoder"), str) else None,
                         data.get("handover_at") if isinstance(data.get("handover_at"), int) else None)
        except (KeyError, TypeError, ValueError):
            return None
        return result if len(result.pts) == len(result.durations) else None


def run_chunk(task: ChunkTask, engine: Any, progress: Callable[[int], None] | None = None,
              turn: Any = None) -> ChunkResult:
    """Decode the chunk's frames, upscale and encode them into the chunk's file, check them, write
    the certificate, then give the file its name. Where seeking does not give exactly the
    chunk's frames (an unusual file), the chunk is decoded again from the start of the file.
    VideoError if it cannot be made; SourceMismatch, before any frame is decoded, where the file
    under the source's path here is not the coordinator's. A chunk already verified on disk (made
    by a run or a worker before) is returned as it is: a verified chunk is never rewritten.
    ``turn`` (a pool worker's srgpu.batch.pool.EngineTurn): taken before each attempt uses the
    engine, given up once its last frame is processed; its ``cancel`` stops the pipeline."""
    check_engine_scale(task.job, engine)  # a worker's engine of another scale than the plan's: refused
    found, _ = check_chunk(task)
    if found is not None:  # its frames count now: a pool takes back what a worker that died had counted
        if progress is not None:
            progress(len(found.pts))
        return found
    check_source(task)
    sent = [0]

    def counted(n: int, total: int | None = None) -> None:
        sent[0] += n
        if progress is not None:
            progress(n)

    def rewind() -> None:
        if sent[0] and progress is not None:
            progress(-sent[0])
        sent[0] = 0

    # NVDEC (where the job has it and the engine is on a GPU) after a seek, then the CPU's decoder
    # after a seek, then the CPU's decoder from the start of the file: the first that gives exactly
    # the chunk's frames. An engine's first chunk starts on the CPU's decoder and hands over to NVDEC
    # once NVDEC is up and agrees (srgpu.video.handover): the workers' first chunks start together,
    # the run's critical path, and 4 NVDEC decoders starting at once took 0.83 s to their first frame
    # against the CPU's 0.14 s (BENCHMARKS.md, session 32); a later chunk's NVDEC starts while the
    # chunk before drains its encoder
    gpu = engine_gpu(engine)
    _check_nvenc(task, gpu)
    first_here = engine not in _engines_with_a_chunk
    _engines_with_a_chunk.add(engine)
    nvdec = task.nvdec if gpu is not None else None
    if nvdec is not None and task.nvdec_verdict is not None:
        # a first chunk starts on the CPU's decoder whatever the verdict: it need not wait for one;
        # a later chunk decodes on NVDEC from its first frame, or not at all, as the verdict says
        verdict = (nvdec_trial.read(task.nvdec_verdict, task.key) if first_here
                   else nvdec_trial.wait(task.nvdec_verdict, task.key))
        if verdict is not None and not verdict.same:
            nvdec = None
    attempts = [(nvdec, False)] if nvdec is not None else []
    attempts += [(None, False)] if task.chunk.seek_us is not None else []
    attempts += [(None, True)]
    try:
        for k, (nvdec, from_start) in enumerate(attempts):
            if turn is not None:
                turn.acquire()
            try:
                return _make_chunk(task, engine, counted, from_start, nvdec, gpu, turn,
                                   handover=first_here and nvdec is not None)
            except VideoError:
                if k == len(attempts) - 1:
                    raise
                rewind()
        raise AssertionError("unreachable")
    except OSError as e:  # the work folder: full, gone, not writable
        raise VideoError(f"{task.job.src}: chunk {task.chunk.index}: {e.strerror or e} "
                         f"({e.filename or task.path.parent})") from None


# the engines that have started a chunk (a worker's, or this process's): the first decodes on the CPU at its start
_engines_with_a_chunk: "weakref.WeakSet[Any]" = weakref.WeakSet()

# the packet-timing digests this process found, by the file's identity: a worker scans a source once
_source_digests: dict[tuple[Any, ...], str] = {}


def check_source(task: ChunkTask) -> None:
    """SourceMismatch (one line naming both files) where the file this worker finds at the source's
    path differs from the coordinator's (task.source): size, modification time (within a second: a
    shared filesystem may keep coarser times) or the digest of its video packets' timing."""
    want, src = task.source, task.job.src
    if not want:
        return
    where = f"the worker on {socket.gethostname()}"
    try:
        st = src.stat()
    except OSError as e:
        raise SourceMismatch(f"{src}: chunk {task.chunk.index}: {where} cannot open it ({e.strerror}); the "
                             f"coordinator read {want.get('path')}") from None
    here = os.path.realpath(src)
    key = (here, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if task.source_at is not None and task.source_at == _stat_identity(st):
        return  # the very file the coordinator scanned (this host, its inode, unchanged): no second scan
    why = []
    if st.st_size != want.get("size"):
        why.append(f"{st.st_size} bytes, not {want.get('size')}")
    if abs(st.st_mtime_ns - int(want.get("mtime_ns") or 0)) >= 1_000_000_000:
        why.append(f"modified at {_when(st.st_mtime_ns)}, not {_when(int(want.get('mtime_ns') or 0))}")
    if not why and key not in _source_digests:
        found = chunking.scan(src, task.job.stream.index)
        _source_digests[key] = found.digest if isinstance(found, SourceScan) else ""
    if not why and _source_digests[key] != want.get("digest"):
        why.append("its video packets' timing differs")
    if why:
        raise SourceMismatch(f"{src}: chunk {task.chunk.index}: {where} opened {here}, which is not the file the "
                             f"coordinator planned from ({want.get('path')}): {', '.join(why)}")


def _stat_identity(st: os.stat_result) -> tuple[Any, ...]:
    """This host and the file's device, inode, size and modification time: another file, or the
    same one changed or seen from another host, differs in one of them. Each local worker scanned
    every packet of the source again before its first chunk (seconds for a long film, all workers
    at once) to check what the coordinator had checked."""
    return (socket.gethostname(), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _when(ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns / 1e9)) + f".{ns % 1_000_000_000:09d}"


def nvdec_options(stream_index: int, gpu: int) -> tuple[str, ...]:
    """The NVDEC decoder's options: the GPU it decodes on (the worker's engine's)."""
    return (f"-gpu:{stream_index}", str(gpu))


class KnownDurations:
    """The source's own timing of a chunk's frames, for a decoder that reports no durations (NVDEC)
    and for the check of NVDEC's frames after a handover: what srgpu.video.verify.SourceTiming
    gives, from the scan instead of a second read, and of the chunk's frames alone."""

    def __init__(self, time_base: Fraction, pts: Sequence[int], durations: Sequence[int]) -> None:
        self._frames = sorted((p * time_base, d * time_base) for p, d in zip(pts, durations))
        self._by_time = dict(self._frames)

    def duration_at(self, time: Fraction) -> Fraction | None:
        return self._by_time.get(time)

    def ready(self) -> bool:
        return True  # known from the scan

    def packets(self) -> None:
        return None

    def frames_after(self, time: Fraction) -> list[tuple[Fraction, Fraction]]:
        """(time, duration) in seconds of the chunk's frames presented after ``time`` seconds."""
        return [f for f in self._frames if f[0] > time]


def _make_chunk(task: ChunkTask, engine: Any, progress: Callable[[int, int | None], None],
                from_start: bool, nvdec: str | None = None, gpu: int | None = None,
                turn: Any = None, handover: bool = False) -> ChunkResult:
    """One attempt at the chunk: decoded by ``nvdec`` (None: the CPU), after a seek or from the
    start of the file; ``handover``: by the CPU's decoder until NVDEC is up and agrees."""
    job, chunk = task.job, task.chunk
    started = time.perf_counter()
    _choose_plan(task, engine)
    tmp = outputs.temp_path(task.path)
    plan = replace(job.plan, tmp=tmp, muxer="matroska", rotation=0.0, source_streams=False,
                   streams=(_chunk_stream(job, task.encoder_threads, gpu),),
                   # the rate the single pipeline tells the encoder (the source's), else the typical step
                   frame_duration_ns=job.plan.frame_duration_ns
                   or round(task.frame_duration * task.time_base * 1_000_000_000))
    args: dict[str, Any] = dict(job.reader_args)
    timing = None
    if nvdec is not None:
        args.update(decoder=nvdec, decoder_options=nvdec_options(job.stream.index, gpu or 0))
        timing = KnownDurations(task.time_base, task.expected, task.durations)
    window = chunk.window(from_start)
    reader: Reader | HandoverReader = Reader(job.src, job.stream.index, job.layout, **args, window=window,
                                             timing=timing)  # type: ignore[arg-type]
    if handover:
        reader = HandoverReader(Reader(job.src, job.stream.index, job.layout, **job.reader_args, window=window),
                                reader, second_name=nvdec, timing=timing)  # type: ignore[arg-type]
    reader.duration, reader.fps = job.info.duration, job.stream.fps
    writer = Writer(plan)
    try:
        stats = run_pipeline(reader, engine, job.specs, job.layout.max_value, writer, progress, task.frames,
                             engine_free=turn.release if turn is not None else None,
                             cancel=turn.cancel if turn is not None else None)
        sent = tuple(writer.sent_pts)
        if reader.time_base != task.time_base:
            raise ChunkMismatch(f"{job.src}: chunk {chunk.index} decodes in time base {reader.time_base}, "
                                f"not the container's {task.time_base}")
        if stats.frames != reader.frames_read or sent != task.expected:
            raise ChunkMismatch(f"{job.src}: chunk {chunk.index}: {_difference(sent, task.expected)}")
        verify.check_frames(tmp, 0, sent, task.time_base)
        size, digest = file_digest(tmp)
        took_over = reader.handover_at if isinstance(reader, HandoverReader) else None
        decoder = nvdec if not isinstance(reader, HandoverReader) or took_over is not None else None
        if decoder is not None and task.nvdec_verdict is not None:
            verdict = nvdec_trial.wait(task.nvdec_verdict, task.key)  # NVDEC's frames stand only under a yes
            if not verdict.same:
                raise ChunkMismatch(f"{job.src}: chunk {chunk.index}: NVDEC's check on the source's first frames "
                                    f"said no ({verdict.why})")
        result = ChunkResult(chunk.index, sent, tuple(writer.sent_durations), size, digest,
                             time.perf_counter() - started, reader.concealed,
                             from_start and chunk.seek_us is not None, decoder, took_over)
        again, _ = check_chunk(task)  # the same task run twice at once (a worker presumed lost): the first stays
        if again is not None:
            return again
        write_json(task.certificate, result.as_json(task.key), durable=True)
        _fsync(tmp)
        outputs.publish(tmp, task.path, replace=True)
        return result
    finally:
        tmp.unlink(missing_ok=True)


def _choose_plan(task: ChunkTask, engine: Any) -> None:
    """A GPU engine chooses its plan for the frame size before the first chunk, one worker at a
    time (a lock in the work folder): on a machine without a cached plan the first measures it and
    caches it, and the others then load it, instead of all measuring at once on the same GPU."""
    plan_for = getattr(engine, "plan_for", None)
    if plan_for is None:
        return
    in_shape = task.job.layout.plane_shapes(*task.job.reader_args["size"])[0]
    out_shape = tuple(task.job.specs[0].out_shape)
    bits = output_bits(task.job.layout.dtype, task.job.layout.max_value)
    try:
        fd = os.open(task.path.parent / "plan.lock", os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        plan_for(in_shape, out_shape, bits)
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass  # a filesystem without locks: measure anyway
        plan_for(in_shape, out_shape, bits)
    finally:
        os.close(fd)


def _chunk_stream(job: VideoJob, threads: int | None, gpu: int | None = None) -> OutputStream:
    """The upscaled stream as a chunk encodes it: the job's encoder and options, less the muxer's
    (they are the final file's, applied at the join), with a share of the CPU for the encoder, and
    NVENC on this worker's GPU (``gpu``, its engine's), not the coordinator's."""
    s = job.plan.streams[job.plan.video_index]
    options = tuple(o for o in s.options if o[0] not in MUXER_OPTIONS and o[0] != "-gpu")
    options += threads_option(job.codec, job.plan.extra_args, threads) + nvenc.gpu_option(job.codec, gpu)
    return OutputStream(s.src_index, True, s.codec, options)


def _check_nvenc(task: ChunkTask, gpu: int | None) -> None:
    """NVENC's trial encode on this worker's GPU, before its first chunk decodes (once per worker
    and GPU: check_encoder remembers it): the coordinator tried only the first GPU, and a driver may
    refuse a session here (srgpu.video.nvenc.explain says which, in one line)."""
    job = task.job
    if not nvenc.is_nvenc(job.codec):
        return
    options = tuple(x for pair in _chunk_stream(job, None, gpu).options for x in pair) + tuple(job.plan.extra_args)
    nvenc.check(job.codec, options, "matroska", gpu, job.plan.enc_size)


def _difference(got: Sequence[int], want: Sequence[int]) -> str:
    if len(got) != len(want):
        return f"{len(got)} frames decoded where the source has {len(want)}"
    i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    if i is None:
        return "the decoder and the encoder counted different frames"
    return f"frame {i} decoded at pts {got[i]} where the source has {want[i]}"


def _fsync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def file_digest(path: Path) -> tuple[int, str]:
    """(size, SHA-256 hex) of a file."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while block := f.read(_HASH_BLOCK):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


# ---------------------------------------------------------------- the job (the coordinator)


class Runner(Protocol):
    """Runs tasks (``task.execute(engine, progress)``) somewhere: in this process, in worker
    processes of this machine (srgpu.batch.pool), on a Dask cluster (srgpu.batch.cluster)."""

    workers: int

    def run(self, tasks: Sequence[ChunkTask], on_frames: Callable[[int], None],
            on_result: Callable[[ChunkResult], None]) -> None: ...

    def release(self) -> None:
        """No task comes for now: the workers may end while the caller goes on (a later run starts
        them again)."""
        ...


class ChunkProgress(Protocol):
    def begin(self, frames: int, chunks: int, frames_done: int, chunks_done: int) -> None: ...

    def frames(self, n: int) -> None: ...

    def chunk_done(self, done: int, total: int) -> None: ...

    def joining(self) -> None: ...


@dataclass(frozen=True)
class ChunkedJob:
    """Every decision about a chunked upscale, made before any chunk runs."""

    job: VideoJob
    scan: SourceScan
    chunks: tuple[Chunk, ...]
    work: Path
    key: str
    settings: Settings
    fingerprint: dict[str, Any]
    notes: tuple[str, ...] = ()
    nvdec: str | None = None  # NVDEC decodes the chunks on the workers' GPUs (where nvdec_check passes)
    source_at: tuple[Any, ...] | None = None  # ChunkTask.source_at
    nvdec_check: "NvdecCheck | None" = None  # NVDEC's trial, run beside the first chunks; None: nvdec is decided

    def task(self, chunk: Chunk, encoder_threads: int | None = None) -> ChunkTask:
        expected = self.scan.pts[chunk.first:chunk.last]
        return ChunkTask(self.job, chunk, expected, self.scan.time_base, chunk_path(self.work, chunk.index),
                         self.key, encoder_threads, self.scan.typical_duration(), self.nvdec,
                         self.scan.durations[chunk.first:chunk.last], self.fingerprint, self.source_at,
                         nvdec_verdict=(nvdec_trial.verdict_path(self.work)
                                        if self.nvdec is not None and self.nvdec_check is not None else None))


@dataclass(frozen=True)
class NvdecCheck:
    """NVDEC's trial on the source's first frames, still to run (upscale_chunked runs it beside the
    first chunks: srgpu.video.nvdec_trial): the decoder's options on the workers' GPU, and whether
    a no is said (``--hwdec nvdec`` asked for NVDEC; ``auto`` falls back to the CPU silently)."""

    options: tuple[str, ...]
    said: bool


def work_folder(dst: Path) -> Path:
    """The hidden work folder of output ``dst``: beside it, named after it (shortened where the
    name is near the file system's limit, srgpu.outputs.fitting_name)."""
    return dst.parent / f".{outputs.fitting_name(dst.name, 1 + len(WORK_SUFFIX), dst.parent)}{WORK_SUFFIX}"


def chunk_path(work: Path, index: int) -> Path:
    return work / f"chunk-{index:05d}.mkv"


def video_settings(job: VideoJob, options: VideoOptions, identity: Mapping[str, Any]) -> Settings:
    """What decides the upscaled video's content besides the source (srgpu.manifest.settings_fingerprint):
    the model (``identity``: srgpu.manifest.model_identity), the encoder's settings as decided for
    this job (the job is planned before its record is written), and how it is deinterlaced where
    it is (absent where it is not, as before srgpu could: the work folders of those runs still resume)."""
    enc = options.encode
    # the filter itself where it is deinterlaced: auto and frame differ on a mixed stream (deint=)
    deinterlaced = job.reader_args.get("vf_pre") if job.deinterlace is not None else None
    return settings_fingerprint(identity, VideoSettings(job.codec, enc.crf, enc.preset, job.pix_fmt,
                                                        tuple(enc.extra_args), job.stream.index, deinterlaced))


def plan_chunked(src: str | os.PathLike, dst: str | os.PathLike, identity: Mapping[str, Any],
                 options: VideoOptions = VideoOptions(), overwrite: bool = False, workers: int = 1,
                 chunk_seconds: float | None = None, gpu: int | None = None,
                 when_long: Callable[[], None] | None = None) -> ChunkedJob | str:
    """plan_chunked_or_single, with only the reason where the video keeps the single pipeline."""
    planned = plan_chunked_or_single(src, dst, identity, options, overwrite, workers, chunk_seconds, gpu, when_long)
    return planned.reason if isinstance(planned, SinglePipeline) else planned


@dataclass(frozen=True)
class SinglePipeline:
    """A video that keeps the single pipeline: why, and its job as planned here (decoded on the CPU;
    srgpu.video.api.for_engine makes it the pipeline's, so that a run plans its video once)."""

    reason: str
    job: VideoJob


def plan_chunked_or_single(src: str | os.PathLike, dst: str | os.PathLike, identity: Mapping[str, Any],
                           options: VideoOptions = VideoOptions(), overwrite: bool = False, workers: int = 1,
                           chunk_seconds: float | None = None, gpu: int | None = None,
                           when_long: Callable[[], None] | None = None) -> ChunkedJob | SinglePipeline:
    """Plan a chunked upscale of ``src`` into ``dst``, or say (SinglePipeline) why the video keeps the
    single pipeline: too short for chunks to pay (the cost model, srgpu.video.chunks), or a stream
    that cannot be cut frame-exactly. ``identity``: what of the workers' engines decides the output
    (srgpu.manifest.model_identity, as EngineSpec.identity gives it), the scale included: the video
    is planned for that scale. VideoError for bad input, as plan_video. Resumes: where a
    work folder of an interrupted run with the same source and settings exists, its chunk list is
    taken (upscale_chunked then keeps its verified chunks). ``gpu``: the CUDA device of the workers'
    engines (None: CPU engines, or a cluster): with hwdec "auto" or "nvdec" the chunks are decoded
    on NVDEC where its first frames come out exactly as the CPU decoder's (srgpu.video.hwdecode);
    every chunk's frames are then the source's own, each timestamp checked, else that chunk is
    decoded on the CPU. ``when_long`` is called as soon as the video is known to be long enough for
    chunks, before its packets are scanned (the caller starts its workers then: they come up while
    the source is scanned, BENCHMARKS.md issue 40)."""
    notes: list[str] = []
    # absolute: a task names files, and a worker (a Dask worker) opens them from its own directory
    src, dst = Path(os.path.abspath(src)), Path(os.path.abspath(dst))
    _forget_finished(dst)
    hwdec = hwdecode.decide(options.hwdec, options.strict, gpu)  # the workers' engines are on ``gpu``
    # planned for the CPU decoder (NVDEC is decided below, per chunk; a short video's single pipeline
    # decides its own from this job: srgpu.video.api.for_engine); ``gpu``: NVENC's trial runs there
    # the scale is the identity's, the one the chunks are recorded under (it was also passed beside
    # it, kept in step by hand): the plan and the record cannot disagree
    job = plan_video(src, dst, identity["scale"], replace(options, hwdec="no"), overwrite=overwrite, gpu=gpu)
    seconds = job.info.duration or 0.0
    if chunk_seconds is None and not chunking.worth_chunking(seconds, workers):
        return SinglePipeline("a short video keeps the single pipeline", job)
    if job.deinterlace is not None:
        # bwdif looks at the frames before and after each one: a chunk's first frame (and its last)
        # would not be the single pipeline's; field mode also makes two frames of each packet
        return SinglePipeline(f"not cut into chunks: it is deinterlaced ({job.deinterlace} mode), and bwdif needs "
                              "the frame before a chunk's first", job)
    if when_long is not None:
        when_long()
    if discont.find(job.src, job.info) is not None:
        return SinglePipeline("not cut into chunks: its timestamps jump (the single pipeline makes them continuous)",
                              job)
    scan = chunking.chunkable(job.src, job.stream.index, job.reader_args.get("decoder"))
    if isinstance(scan, str):
        return SinglePipeline(f"not cut into chunks: {scan}", job)
    nvdec = _nvdec(job, hwdec, gpu, notes)
    check = NvdecCheck(nvdec_options(job.stream.index, gpu or 0), hwdec == "nvdec") if nvdec is not None else None
    settings = video_settings(job, options, identity)
    st = job.src.stat()
    fingerprint = {"path": str(job.src.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                   "digest": scan.digest}
    _source_digests[(str(job.src.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)] = scan.digest
    work = work_folder(job.dst)
    existing = read_json(work / "job.json", JOB_FORMAT, VERSION) if work.is_dir() else None
    planned = None
    settings_key = settings.key  # what the job's key is made of (an earlier srgpu's key for its own record)
    if existing is not None:
        why, settings_key = _why_not_resumable(existing, fingerprint, settings, job.dst)
        if why is None:
            try:
                planned = tuple(Chunk.from_json(c) for c in existing["chunks"])
            except (KeyError, TypeError, ValueError):
                why = "its record is damaged"
            if planned is not None and not _covers(planned, scan):
                planned, why = None, "its chunk list does not fit the source"
        if why is not None:
            notes.append(f"the interrupted run's chunks were not kept: {why}; starting over")
            settings_key = settings.key
    if planned is None:
        planned = chunking.plan(scan, workers, chunk_seconds)
        if len(planned) < 2:
            return SinglePipeline("too short to cut into chunks (one chunk)", job)
    key = Settings.of({"settings": settings_key, "source": fingerprint, "time_base": str(scan.time_base),
                       "chunks": [c.as_json() for c in planned]}).key
    return ChunkedJob(job, scan, planned, work, key, settings, fingerprint, tuple(notes), nvdec=nvdec,
                      source_at=_stat_identity(st), nvdec_check=check)


def _nvdec(job: VideoJob, hwdec: str, gpu: int | None, notes: list[str]) -> str | None:
    """The NVDEC decoder for the chunks, its trial still to run (NvdecCheck), or None (the CPU
    decodes them; said where it was asked for). ``hwdec``: the mode as srgpu.video.hwdecode.decide
    made it for the workers' engines."""
    if hwdec == "no":
        return None
    if gpu is None:
        if hwdec == "nvdec":
            notes.append("chunks are decoded on the CPU: NVDEC serves GPU engines of this machine only")
        return None
    args = job.reader_args
    choice = hwdecode.CUVID_DECODERS.get(job.stream.codec or "")
    why = None
    if job.deinterlace is not None:  # not cut into chunks (plan_chunked): never asked; kept for safety
        why = "bwdif deinterlaces in the CPU decoder's filters"
    elif args.get("decoder") is not None:
        why = f"the stream needs the {args['decoder']} decoder"
    elif choice is None or choice not in ffmpeg.video_codecs("decoders") or not hwdecode.nvcuvid_loadable():
        why = f"no NVDEC decoder for {job.stream.codec} here"
    else:
        return choice
    if hwdec == "nvdec":
        notes.append(f"chunks are decoded on the CPU: {why}")
    return None


def _forget_finished(dst: Path) -> None:
    forget_finished(work_folder(dst), dst)


def forget_finished(work: Path, dst: Path | None = None) -> Path | None:
    """A run killed after publishing its output but before removing its work folder: the folder
    goes where the file at the output's name is the one that run verified and published (the same
    file: device, inode, size and modification time, recorded just before the rename, which keeps
    them). The output it belonged to, or None where the folder stays."""
    record = read_json(work / "job.json", JOB_FORMAT, VERSION) if work.is_dir() else None
    joined = record.get("joined") if record is not None else None
    if isinstance(joined, dict) and dst is None and isinstance(joined.get("output"), str):
        dst = work.parent / joined["output"]
    if dst is None:
        return None
    try:
        st = dst.stat()
    except OSError:
        return None
    if isinstance(joined, dict):
        same = joined.get("file") == _identity(st)
    else:
        same = joined == st.st_size  # recorded by an earlier srgpu: the size only
    if not same:
        return None
    shutil.rmtree(work, ignore_errors=True)
    return dst


def forget_finished_in(folder: Path) -> list[Path]:
    """forget_finished for every work folder in ``folder`` (one look at it): the outputs whose
    leftover work folders were removed. For the CLI, before it looks for existing outputs."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith(".") and n.endswith(WORK_SUFFIX)]
    except OSError:
        return []
    return [dst for n in sorted(names) if (dst := forget_finished(folder / n)) is not None]


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _covers(planned: Sequence[Chunk], scan: SourceScan) -> bool:
    if not planned or planned[0].first != 0 or planned[-1].last != scan.frames:
        return False
    return all(a.last == b.first for a, b in zip(planned, planned[1:]))


def _why_not_resumable(existing: dict, fingerprint: dict, settings: Settings,
                       dst: Path) -> tuple[str | None, str]:
    """Why an interrupted run's work folder is not this job's (None where it is), and the settings'
    key its job key was made with: this run's, or an earlier srgpu's for the same settings in its
    form (srgpu.manifest.recorded_values), whose chunks are then kept."""
    source = existing.get("source")
    if not isinstance(source, dict):
        return "its record is damaged", settings.key
    if source.get("path") != fingerprint["path"]:
        return f"it was made from {source.get('path')}", settings.key
    if source != fingerprint:
        changed = [k for k in ("size", "mtime_ns", "digest") if source.get(k) != fingerprint[k]]
        return f"the source changed since ({', '.join(changed)})", settings.key
    old = existing.get("settings")
    if isinstance(old, dict) and old.get("key") == settings.key:
        return None, settings.key
    values = recorded_values(old, lambda: video_codec(dst, EncodeOptions()))  # a codec None: the container's default
    if values is not None and values == json_form(settings) \
            and isinstance(old, dict) and isinstance(old.get("key"), str):
        return None, old["key"]
    return "they were made " + _settings_difference(values, settings), settings.key


def _settings_difference(values: dict | None, new: Settings) -> str:
    if not isinstance(values, dict):
        return "with settings srgpu has no record of"
    now = json_form(new)
    changed = [f"{k} {values.get(k)!r} (now {now.get(k)!r})" for k in sorted(set(values) | set(now))
               if values.get(k) != now.get(k)]
    return "with " + ", ".join(changed) if changed else "with other settings"


class WorkFolder:
    """The work folder of one chunked job, held (flock) while this run coordinates it."""

    def __init__(self, cj: ChunkedJob) -> None:
        self.cj = cj
        self.path = cj.work
        self._lock_fd: int | None = None

    def open(self) -> tuple[dict[int, ChunkResult], list[str]]:
        """Take the folder (create it, lock it, start it over where its job is not this one) and
        find the verified chunks in it: (results by index, notes)."""
        cj = self.cj
        try:
            self.path.mkdir(exist_ok=True)
        except OSError as e:
            raise VideoError(f"{self.path}: cannot create the work folder ({e.strerror})") from None
        self._lock()
        outputs.remove(outputs.stale_temps_in(self.path))
        record = read_json(self.path / "job.json", JOB_FORMAT, VERSION)
        notes: list[str] = []
        if record is None or record.get("key") != cj.key:
            self._clear()
            write_json(self.path / "job.json", {
                "format": JOB_FORMAT, "version": VERSION, "key": cj.key, "source": cj.fingerprint,
                "settings": {"key": cj.settings.key, **cj.settings.as_json()}, "time_base": str(cj.scan.time_base),
                "chunks": [c.as_json() for c in cj.chunks]}, durable=True)
            return {}, notes
        done: dict[int, ChunkResult] = {}
        for chunk in cj.chunks:
            task = cj.task(chunk)
            result, why = check_chunk(task)
            if result is not None:
                done[chunk.index] = result
            elif why:
                notes.append(f"chunk {chunk.index} redone: {why}")
                task.path.unlink(missing_ok=True)
                task.certificate.unlink(missing_ok=True)
        return done, notes

    def joined(self, tmp: Path) -> None:
        """The verified output ``tmp`` is about to get its name: the file recorded (forget_finished),
        for a run that finds the folder still there after that (killed before removing it)."""
        record = read_json(self.path / "job.json", JOB_FORMAT, VERSION)
        if record is not None:
            joined = {"output": self.cj.job.dst.name, "file": _identity(tmp.stat())}
            write_json(self.path / "job.json", {**record, "joined": joined}, durable=True)

    def _lock(self) -> None:
        fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise VideoError(f"{self.cj.job.dst}: another srgpu is working on this output (its work folder "
                             f"{self.path} is locked)") from None
        self._lock_fd = fd

    def _clear(self) -> None:
        for p in self.path.iterdir():
            if _CHUNK_NAME.match(p.name):
                p.unlink(missing_ok=True)

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def remove(self) -> None:
        """The job is done: the folder goes."""
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)


def check_chunk(task: ChunkTask) -> tuple[ChunkResult | None, str]:
    """A chunk of an interrupted run: its result where its file is whole and its certificate is
    this job's, else (None, why it is redone; '' where it was simply never finished)."""
    data = read_json(task.certificate, CHUNK_FORMAT, VERSION)
    exists = task.path.is_file()
    if data is None:
        return None, "its file has no certificate" if exists else ""
    result = ChunkResult.from_json(data)
    if data.get("key") != task.key or result is None or result.index != task.chunk.index:
        return None, "its certificate is not this job's"
    if not exists:
        return None, ""  # killed between the certificate and the file's rename
    if result.pts != task.expected:
        return None, "its certificate does not list the source's frames"
    size, digest = file_digest(task.path)
    if size != result.size:
        return None, f"its file is {size} bytes, not the {result.size} written (truncated?)"
    if digest != result.sha256:
        return None, "its file changed since it was written (damaged on disk?)"
    return result, ""


def upscale_chunked(cj: ChunkedJob, runner: Runner, overwrite: bool = False,
                    progress: ChunkProgress | None = None, encoder_threads: int | None = None) -> VideoResult:
    """Run a planned chunked job on ``runner`` and join it. VideoError (one line) when a chunk or
    the join fails; the work folder then stays for the next run to resume."""
    try:
        return _upscale_chunked(cj, runner, overwrite, progress, encoder_threads)
    except outputs.OutputExistsError as e:
        raise VideoError(str(e)) from None
    except OSError as e:  # the work folder or the output's folder: full, gone, not writable
        raise VideoError(f"{cj.job.src}: {e.strerror or e} ({e.filename or cj.work})") from None


def _upscale_chunked(cj: ChunkedJob, runner: Runner, overwrite: bool, progress: ChunkProgress | None,
                     encoder_threads: int | None) -> VideoResult:
    started = time.perf_counter()
    folder = WorkFolder(cj)
    outputs.remove_stale_temps(cj.job.dst)
    done, notes = folder.open()
    notes = list(cj.notes) + notes
    trial = _nvdec_trial(cj)
    try:
        total = cj.scan.frames
        if progress is not None:
            progress.begin(total, len(cj.chunks), sum(len(r.pts) for r in done.values()), len(done))
        new_frames = 0
        for attempt in range(3):
            todo = [cj.task(c, encoder_threads) for c in chunking.largest_first(cj.scan, cj.chunks)
                    if c.index not in done]
            made = Arrivals(cj.chunks, done)

            def on_result(result: ChunkResult) -> None:
                done[result.index] = result
                made.add(result)
                if progress is not None:
                    progress.chunk_done(len(done), len(cj.chunks))

            def on_frames(n: int) -> None:
                nonlocal new_frames
                new_frames += n
                if progress is not None:
                    progress.frames(n)

            # the join takes each chunk as soon as those before it are made, while the rest are being
            # made: what is left to join at the end is the last chunks (the last round is the
            # shortest: srgpu.video.chunks), not the whole video
            try:
                with ThreadPoolExecutor(1, thread_name_prefix="srgpu-join") as joining:
                    joined = joining.submit(join, cj, made.in_order(), overwrite, folder.joined)
                    try:
                        if todo:
                            runner.run(todo, on_frames, on_result)
                        missing = [c.index for c in cj.chunks if c.index not in done]
                        if missing:
                            raise VideoError(f"{cj.job.src}: chunks {missing[:5]} were not made")
                        runner.release()  # they end while the last chunks are joined
                        if progress is not None:
                            progress.joining()
                        frames = joined.result()
                    finally:
                        made.cancel()  # a join still waiting for chunks ends: its joiner killed, its file removed
                break
            except DamagedChunk as e:
                if attempt == 2:
                    raise
                notes.append(f"{e}: redone")
                del done[e.index]
                chunk_path(cj.work, e.index).unlink(missing_ok=True)
                chunk_path(cj.work, e.index).with_suffix(".json").unlink(missing_ok=True)
    finally:
        verdict = trial.result() if trial is not None else None  # it writes in the work folder: ended first
        folder.close()
    folder.remove()
    seconds = time.perf_counter() - started
    if verdict is not None and not verdict.same and cj.nvdec_check is not None and cj.nvdec_check.said:
        notes.append(f"chunks are decoded on the CPU: {verdict.why}")
    concealed = sum(r.concealed for r in done.values())
    if concealed:
        notes += _concealment(cj, concealed)
    if any(r.from_start for r in done.values()):
        notes.append("some chunks could not be decoded from their keyframe and were decoded from the start of "
                     "the file")
    decoders = {r.decoder or "software" for r in done.values()}
    handed = sum(r.handover_at is not None for r in done.values())
    first_frames = f" (the first frames of {handed} chunk{'s' * (handed > 1)} by software while NVDEC started)" if handed else ""
    return VideoResult(output=cj.job.dst, frames=frames, seconds=seconds,
                       fps=new_frames / seconds if seconds > 0 else 0.0,
                       input_size=(cj.job.stream.width, cj.job.stream.height),  # type: ignore[arg-type]
                       output_size=cj.job.plan.enc_size, codec=cj.job.codec, pix_fmt=cj.job.pix_fmt,
                       notes=cj.job.notes + tuple(notes), decoder=" and ".join(sorted(decoders)) + first_frames)


def _nvdec_trial(cj: ChunkedJob) -> nvdec_trial.Trial | None:
    """NVDEC's trial on the source's first frames, started beside the chunks (srgpu.video.nvdec_trial)."""
    check, job = cj.nvdec_check, cj.job
    if check is None or cj.nvdec is None:
        return None
    args, decoder = job.reader_args, cj.nvdec
    return nvdec_trial.Trial(nvdec_trial.verdict_path(cj.work), cj.key, lambda: hwdecode.decodes_like_software(
        job.src, job.stream.index, args["pipe_pix_fmt"], args["vf_extra"], decoder, check.options)).start()


def _concealment(cj: ChunkedJob, count: int) -> tuple[str, ...]:
    reader = Reader(cj.job.src, cj.job.stream.index, cj.job.layout, **cj.job.reader_args)
    reader.concealed = count
    return concealment_notes(reader)


# ---------------------------------------------------------------- the join


class _Joiner(ffmpeg.Child):
    role = "join"

    def run(self, cmd: list[str], what: str) -> subprocess.Popen:
        return self._launch(cmd, what, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)


class JoinCancelled(Exception):
    """The run stopped before every chunk was made: the join waiting for them ends (not an error of its own)."""


class Arrivals:
    """The verified chunks of one job as they are made (``add``, from any thread), handed to the join
    in the chunks' order (``in_order`` waits for each); ``cancel`` ends the wait."""

    def __init__(self, chunks: Sequence[Chunk], made: Mapping[int, ChunkResult]) -> None:
        self._chunks = tuple(chunks)
        self._made = dict(made)
        self._cancelled = False
        self._changed = threading.Condition()

    def add(self, result: ChunkResult) -> None:
        with self._changed:
            self._made[result.index] = result
            self._changed.notify_all()

    def cancel(self) -> None:
        with self._changed:
            self._cancelled = True
            self._changed.notify_all()

    def in_order(self) -> Iterator[ChunkResult]:
        for chunk in self._chunks:
            with self._changed:
                self._changed.wait_for(lambda: chunk.index in self._made or self._cancelled)
                if chunk.index not in self._made:
                    raise JoinCancelled()
                result = self._made[chunk.index]
            yield result


def join(cj: ChunkedJob, results: Iterable[ChunkResult], overwrite: bool,
         before_publish: Callable[[Path], None] | None = None) -> int:
    """Join the verified chunks, every chunk's in order (``results`` may wait for each: Arrivals), into
    the output: every coded frame with its source timestamp and duration, the other streams from the
    source; check the frames the file holds and publish it. The number of frames. DamagedChunk where
    a chunk file is not its certificate's any more."""
    job = cj.job
    tb = cj.scan.time_base
    source_pts = cj.scan.pts
    origin, pipe_offset = pipe_origin(job.plan.source_start, tb, source_pts[0])
    ns_per_tick = tb * 1_000_000_000
    joiner = _Joiner()
    proc = joiner.run(job.plan.command(tb, pipe_offset, copy_video=True), str(job.src))
    ok = False
    try:
        stdin = proc.stdin
        assert stdin is not None
        first_track: mkv.CodedTrack | None = None
        at = 0  # the frames joined so far
        try:
            for result in results:
                if tuple(result.pts) != source_pts[at:at + len(result.pts)]:
                    raise VideoError(f"{job.src}: the chunks do not hold the source's frames")
                first_track = _send_chunk(cj, result, stdin, first_track, origin, ns_per_tick)
                at += len(result.pts)
            if at != len(source_pts):
                raise VideoError(f"{job.src}: the chunks do not hold the source's frames")
            stdin.close()
        except (BrokenPipeError, OSError):
            rc = proc.wait()
            raise _join_failure(cj, joiner, f"the join stopped accepting frames ({ffmpeg.describe_exit(rc)})") from None
        rc = proc.wait()
        joiner.stderr_read()
        if rc != 0:
            raise _join_failure(cj, joiner, f"the join failed ({ffmpeg.describe_exit(rc)})")
        last = float(source_pts[-1] * tb)
        check_complete(job, len(source_pts), last)
        frames = verify.check_frames(job.plan.tmp, job.plan.video_index, list(source_pts), tb)
        verify.check_layout(job.plan.tmp, planned_kinds(job), job.plan.video_index, job.plan.enc_size)
        if before_publish is not None:
            before_publish(job.plan.tmp)
        outputs.publish(job.plan.tmp, job.dst, replace=overwrite)
        ok = True
        return frames
    finally:
        if not ok:
            joiner.kill()
            job.plan.tmp.unlink(missing_ok=True)


def _join_failure(cj: ChunkedJob, joiner: _Joiner, what: str) -> VideoError:
    """One line naming the source and the output the join was writing, then ffmpeg's words (its
    stderr read to the end first: a join that stopped taking frames has just said why, e.g. a full
    disk, and its reader thread may not have the line yet)."""
    joiner.stderr_read(2.0)
    detail = joiner.detail()
    head = f"{cj.job.src}: joining its chunks into {cj.job.dst}: {what}"
    return VideoError(f"{head}: {detail}" if detail else head)


def _send_chunk(cj: ChunkedJob, result: ChunkResult, out: Any, first: mkv.CodedTrack | None, origin: int,
                ns_per_tick: Fraction) -> mkv.CodedTrack:
    path = chunk_path(cj.work, result.index)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DamagedChunk(result.index, f"cannot be read ({e.strerror})") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size != result.size:
            raise DamagedChunk(result.index, f"is {size} bytes, not the {result.size} written")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            view = memoryview(data)
            try:
                if hashlib.sha256(view).hexdigest() != result.sha256:
                    raise DamagedChunk(result.index, "changed since it was written (damaged on disk?)")
                try:
                    track, scale, frames = mkv.read_coded(view)
                except mkv.MatroskaError as e:
                    raise DamagedChunk(result.index, f"cannot be read: {e}") from None
                if len(frames) != len(result.pts):
                    raise DamagedChunk(result.index, f"holds {len(frames)} frames, not {len(result.pts)}")
                if first is None:
                    first = track
                    # a Matroska output's header rate and frame durations follow the track's default
                    # duration: the single pipeline's; MP4 has no rate field (it counts its samples'
                    # durations, which a default duration in the pipe would shift by a tick)
                    default = cj.job.plan.frame_duration_ns if cj.job.plan.muxer in ("matroska", "webm") else None
                    out.write(mkv.coded_header(track, default))
                elif (track.codec_id, track.codec_private) != (first.codec_id, first.codec_private):
                    raise VideoError(f"{cj.job.src}: chunk {result.index} was encoded with other codec parameters "
                                     "than chunk 0; they cannot be joined without re-encoding")
                # the coded frames in presentation order take the source's timestamps in order
                order = sorted(range(len(frames)), key=lambda i: frames[i].time_ns)
                rank = {i: k for k, i in enumerate(order)}
                t0 = frames[order[0]].time_ns
                for k, i in enumerate(order):
                    want = round((result.pts[k] - result.pts[0]) * ns_per_tick)
                    if abs(frames[i].time_ns - t0 - want) > scale:
                        raise DamagedChunk(result.index, f"has frame {k} at {(frames[i].time_ns - t0) / 1e9:.6f} s, "
                                                         f"not {want / 1e9:.6f} s")
                for i, frame in enumerate(frames):
                    k = rank[i]
                    pts, duration = result.pts[k], result.durations[k]
                    before, after = mkv.frame_prefix(round((pts - origin) * ns_per_tick),
                                                     round(duration * ns_per_tick) if duration else None,
                                                     frame.size, frame.keyframe)
                    out.write(before)
                    out.write(view[frame.offset:frame.offset + frame.size])
                    out.write(after)
            finally:
                view.release()
    return first
