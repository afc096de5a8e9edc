"""What a folder run has made, kept in the output folder so that a later run resumes it honestly.

Two hidden files in the output folder (hidden: never taken for inputs, even when the output folder
lies inside the input folder):

- ``.srgpu-manifest.json``: for each output srgpu completed there (its path relative to the output
  folder), the source it was made from (relative path, size, mtime_ns), the output's size, and the
  key of the settings it was made with; and, per key, those settings (scale, model architecture
  and a hash of its weights, ...). Written whole, atomically (srgpu.outputs temp + publish), once
  at the end of a run.
- ``.srgpu-manifest.journal``: what happened since, one JSON line per event, appended as it
  happens (a write of a hundred bytes per file instead of rewriting a JSON of 10 000 entries
  10 000 times): ``begin`` before an output is written, ``done`` once it has its final name,
  ``abandon`` when writing it failed. A run killed by SIGKILL or a power cut leaves the journal; the
  next run reads it after the manifest, so every output that was finished is known, and an output
  that was being written (``begin`` without ``done``) is known to be srgpu's and redone.

Nothing here decides what to do with an output: srgpu.batch.local does (see ``Resume``).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from . import outputs

if TYPE_CHECKING:
    from .model import SRCNNModel

MANIFEST_NAME = ".srgpu-manifest.json"
JOURNAL_NAME = ".srgpu-manifest.journal"
FORMAT = "srgpu-manifest"
VERSION = 1


class ManifestError(ValueError):
    """An output folder's manifest srgpu must not rewrite (one of a newer srgpu)."""


@dataclass(frozen=True)
class Fingerprint:
    """A source file as it was when read: a later size or mtime means it changed."""

    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Record:
    """One completed output."""

    source: str  # the source's path relative to the input folder, '/'-separated
    source_size: int
    source_mtime_ns: int
    size: int  # bytes of the output as written
    settings: str  # Settings.key

    @property
    def fingerprint(self) -> Fingerprint:
        return Fingerprint(self.source_size, self.source_mtime_ns)


@dataclass(frozen=True)
class Settings:
    """What, besides its source, decides an output's content. ``label`` names the model for
    messages; it is not part of the key (the weights' hash is)."""

    values: tuple[tuple[str, Any], ...]
    label: str = ""

    @classmethod
    def of(cls, values: Mapping[str, Any], label: str = "") -> "Settings":
        return cls(tuple(sorted(values.items())), label)

    @property
    def key(self) -> str:
        text = json.dumps(dict(self.values), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def as_json(self) -> dict[str, Any]:
        return {"values": dict(self.values), "label": self.label}


# Raise when srgpu's image processing changes what the same source, model and scale give, so that
# a resumed run redoes the outputs (and chunks) made before. Device and precision are not part of
# a run's settings: every engine meets the accuracy bar (within one level of fp32 at the output's
# depth), and a resume should not redo work because it runs on another machine.
IMAGE_PIPELINE = 1


@dataclass(frozen=True)
class VideoSettings:
    """A video's encoder settings as resolved for its output: ``codec`` is the encoder it gets (the
    one named, else its container's default: srgpu.video.api.video_codec), never None for a codec
    left to srgpu. The choices made from the source (``pix_fmt``, ``video_stream``,
    ``deinterlace``) are resolved where the source was read before the record is decided (a chunked
    job: the job's own), else they are the options that decide them (a folder decides before it
    reads any source): with the source's fingerprint beside them they decide the same thing, and
    each store (a folder's manifest, a work folder's job.json) is compared only with itself."""

    codec: str | None
    crf: int | None = None
    preset: str | None = None
    pix_fmt: str | None = None
    encoder_args: tuple[str, ...] = ()
    video_stream: int | None = None
    deinterlace: str | None = None  # absent from the record where None (records made before it existed resume)


def model_identity(model: "SRCNNModel", scale: int) -> dict[str, Any]:
    """What of the model decides an output: the scale, its architecture and a hash of its weights;
    ``label`` names it in messages only (settings_fingerprint keeps it out of the key)."""
    return {"scale": scale, "arch": model.arch, "weights": weights_hash(model.arrays()), "label": model.name}


def settings_fingerprint(identity: Mapping[str, Any], video: VideoSettings | None = None) -> Settings:
    """The one fingerprint of what, besides its source, decides an output: the model (``identity``,
    model_identity's; a test may give fewer keys), srgpu's image pipeline, and for a video its
    encoder settings. Used by a folder's images and videos (srgpu.batch.resume) and a video's chunks
    (srgpu.video.chunked)."""
    values = {k: v for k, v in identity.items() if k != "label"}
    values.setdefault("pipeline", IMAGE_PIPELINE)
    if video is not None:
        values.update(codec=video.codec, crf=video.crf, preset=video.preset, pix_fmt=video.pix_fmt,
                      encoder_args=list(video.encoder_args), video_stream=video.video_stream)
        if video.deinterlace is not None:
            values["deinterlace"] = video.deinterlace
    return Settings.of(values, label=str(identity.get("label", "")))


def recorded_values(record: Any, default_codec: Callable[[], str | None]) -> dict[str, Any] | None:
    """The values of a record's settings (``{"values": {...}, ...}`` as Settings.as_json wrote it,
    by this srgpu or an earlier one) in settings_fingerprint's form, as they read back from JSON;
    None for a record srgpu cannot read. Earlier srgpus wrote two other forms, read here as what
    they mean: a chunk job's record named the model (``label``, now only for messages) and no
    pipeline (it was IMAGE_PIPELINE 1, the only one ever released before this); a folder's video
    record held the user's codec, None where srgpu chose the container's default, which
    ``default_codec()`` resolves for the output's name as it does today (None: cannot be)."""
    values = record.get("values") if isinstance(record, dict) else None
    if not isinstance(values, dict):
        return None
    values = {k: v for k, v in values.items() if k != "label"}
    values.setdefault("pipeline", 1)
    if "codec" in values and values["codec"] is None:
        values["codec"] = default_codec()
    return values


def json_form(settings: Settings) -> dict[str, Any]:
    """``settings``' values as they read back from a record (lists for tuples)."""
    return json.loads(json.dumps(dict(settings.values)))


def weights_hash(arrays: Mapping[str, Any]) -> str:
    """A short hash of a model's weights (float32 bytes, in name order): two files holding the same
    weights are the same model, a retrained one is not."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        digest.update(name.encode())
        digest.update(memoryview(arrays[name]).cast("B"))
    return digest.hexdigest()[:16]


class Manifest:
    """The manifest and journal of one output folder: ``load`` reads both, ``begin`` / ``finish`` /
    ``abandon`` append to the journal (thread-safe: images are written on a background thread),
    ``close`` folds the journal into the manifest.

    Writing either file can fail (a full disk): the outputs themselves are whole either way, so the
    run goes on; an output whose record was lost is later seen as one srgpu has no record of (left
    alone unless --overwrite), never as done."""

    def __init__(self, folder: Path, records: dict[str, Record] | None = None,
                 settings: dict[str, dict[str, Any]] | None = None, pending: set[str] | None = None) -> None:
        self.folder = Path(folder)
        self.records = records if records is not None else {}
        self.settings = settings if settings is not None else {}
        self.pending = pending if pending is not None else set()  # begun, neither done nor abandoned
        self._journal: int | None = None
        self._announced: set[str] = set()
        self._lock = threading.Lock()
        self._wrote = False

    @property
    def path(self) -> Path:
        return self.folder / MANIFEST_NAME

    @property
    def journal_path(self) -> Path:
        return self.folder / JOURNAL_NAME

    # ------------------------------------------------------------ reading

    @classmethod
    def load(cls, folder: Path) -> "Manifest":
        """The manifest of ``folder`` with its journal applied; empty where there is none (or where
        it is unreadable: then every existing output counts as one srgpu has no record of)."""
        manifest = cls(folder)
        manifest._read_manifest()
        manifest._replay_journal()
        return manifest

    def _read_manifest(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return
        version = data.get("version")
        if isinstance(version, int) and version > VERSION:  # its records would be lost on rewriting it
            raise ManifestError(f"{self.path}: written by a newer srgpu (manifest version {version}; this one "
                                f"reads {VERSION}): run that srgpu, or write into another folder")
        if version != VERSION:
            return
        settings, outputs, pending = data.get("settings"), data.get("outputs"), data.get("pending")
        for key, value in (settings.items() if isinstance(settings, dict) else ()):
            if isinstance(value, dict):
                self.settings[key] = value
        for rel, entry in (outputs.items() if isinstance(outputs, dict) else ()):
            record = _record(entry)
            if record is not None:
                self.records[rel] = record
        self.pending.update(p for p in (pending if isinstance(pending, list) else ()) if isinstance(p, str))

    def _replay_journal(self) -> None:
        try:
            lines = self.journal_path.read_bytes().splitlines()
        except OSError:
            return
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut short by a kill
            if isinstance(event, dict):
                self._apply(event)

    def _apply(self, event: dict[str, Any]) -> None:
        op, rel = event.get("op"), event.get("path")
        if op == "settings" and isinstance(event.get("key"), str) and isinstance(event.get("settings"), dict):
            self.settings[event["key"]] = event["settings"]
        elif not isinstance(rel, str):
            return
        elif op == "begin":
            self.pending.add(rel)
        elif op == "abandon":
            self.pending.discard(rel)
        elif op == "done" and (record := _record(event.get("record"))) is not None:
            self.pending.discard(rel)
            self.records[rel] = record

    # ------------------------------------------------------------ writing

    def begin(self, rel: str) -> None:
        """``rel`` is about to be written: if the run dies before ``finish``, the next one knows
        that whatever is there is srgpu's."""
        self._log({"op": "begin", "path": rel})

    def finish(self, rel: str, record: Record, settings: Settings) -> None:
        events = []
        if record.settings not in self._announced:
            self._announced.add(record.settings)
            self.settings[record.settings] = settings.as_json()
            events.append({"op": "settings", "key": record.settings, "settings": settings.as_json()})
        events.append({"op": "done", "path": rel, "record": asdict(record)})
        self.records[rel] = record
        self.pending.discard(rel)
        self._log(*events)

    def abandon(self, rel: str) -> None:
        """Writing ``rel`` failed and nothing was published: what is there is as it was."""
        self.pending.discard(rel)
        self._log({"op": "abandon", "path": rel})

    def _log(self, *events: dict[str, Any]) -> None:
        data = b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in events)
        with self._lock:
            try:
                if self._journal is None:
                    self._journal = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
                os.write(self._journal, data)  # one write: a kill leaves whole lines (a torn last one is skipped)
                self._wrote = True
            except OSError:
                pass  # see the class docstring

    def close(self) -> None:
        """Fold the journal into the manifest (read again from disk, so that what another srgpu
        writing into the same folder recorded meanwhile is kept) and remove the journal."""
        with self._lock:
            if self._journal is not None:
                os.close(self._journal)
                self._journal = None
            if not self._wrote:
                return
            self._wrote = False
        fresh = Manifest.load(self.folder)
        try:
            fresh._write()
            self.journal_path.unlink(missing_ok=True)
        except OSError:
            pass  # the journal stays and is read next time

    def _write(self) -> None:
        used = {r.settings for r in self.records.values()}
        data = {"format": FORMAT, "version": VERSION,
                "settings": {k: v for k, v in sorted(self.settings.items()) if k in used},
                "outputs": {rel: asdict(r) for rel, r in sorted(self.records.items())},
                "pending": sorted(self.pending)}
        write_json(self.path, data)


def write_json(path: Path, data: Any, durable: bool = False) -> None:
    """Write ``data`` as JSON to ``path`` atomically: a temporary name beside it (srgpu.outputs),
    then a rename over whatever is there, so a reader sees the old file or the new one, whole.
    ``durable``: flushed to disk before the rename (a record that must survive a power cut)."""
    text = json.dumps(data, separators=(",", ":")).encode()
    outputs.replace_atomically(path, lambda f: f.write(text), durable=durable)


def read_json(path: Path, fmt: str, version: int) -> dict[str, Any] | None:
    """A JSON object written with ``{"format": fmt, "version": version, ...}``, or None where the
    file is missing, unreadable, cut short or of another format."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != fmt or data.get("version") != version:
        return None
    return data


_RECORD_TYPES = {"source": str, "source_size": int, "source_mtime_ns": int, "size": int, "settings": str}


def _record(entry: Any) -> Record | None:
    """A Record from its JSON form, or None for anything else (a hand-edited or foreign file)."""
    if not isinstance(entry, dict) or set(entry) != set(_RECORD_TYPES):
        return None
    if not all(isinstance(entry[k], t) and not isinstance(entry[k], bool) for k, t in _RECORD_TYPES.items()):
        return None
    return Record(**entry)
