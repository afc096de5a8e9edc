"""Images on a full disk: a write that fails (even only at close, OpenCV's last buffered write) is
one error line naming the file and "no space left on device", nothing incomplete gets the final
name or a manifest record, and a rerun after space is freed makes the file whole.

The disk is a real tmpfs of a few MB, filled with a file to leave the room the test wants, where
the test may mount one (root on Linux); elsewhere a write to a file in that folder that would pass
the room fails with ENOSPC, as the kernel's would."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

from srgpu.cli import app
from srgpu.manifest import MANIFEST_NAME, Manifest

PAGE = os.sysconf("SC_PAGE_SIZE")  # tmpfs hands out whole pages
TMPFS_BYTES = 8 * 2**20
# SRGPU_TEST_NO_TMPFS=1: the writes that fail, as where no tmpfs can be mounted


def srgpu(*args: object):
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


class SmallDisk:
    """``folder`` with ``room`` bytes free; ``free()`` gives the space back. Without a mount, no
    file there may grow past ``file_room`` bytes (default ``room``)."""

    def __init__(self, folder: Path, room: int, monkeypatch: pytest.MonkeyPatch, file_room: int | None = None) -> None:
        self.folder, self.room, self._monkeypatch = folder, room, monkeypatch
        self.file_room = room if file_room is None else file_room
        folder.mkdir()
        self.mounted = not os.environ.get("SRGPU_TEST_NO_TMPFS") and subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(folder)],
                                      capture_output=True).returncode == 0
        self.filler = folder / ".filler"
        if self.mounted:
            fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.posix_fallocate(fd, 0, TMPFS_BYTES - room)
            finally:
                os.close(fd)
            st = os.statvfs(folder)
            assert st.f_bavail * st.f_frsize == room
        else:
            self._fail_writes()

    def _fail_writes(self) -> None:
        """No mount here: no file in the folder may grow past ``file_room`` bytes (what a file can
        hold on a disk with that room); the write that would is cut short and then fails, as the kernel's."""
        real_write = os.write
        folder = str(self.folder.resolve())
        room = self.file_room

        def write(fd: int, data) -> int:
            try:
                name = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                name = ""
            if not name.startswith(folder + os.sep):
                return real_write(fd, data)
            left = room - os.fstat(fd).st_size  # written in order, or appended: the size is where it writes
            if left <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_write(fd, bytes(memoryview(data).cast("B")[:left]))

        self._monkeypatch.setattr(os, "write", write)

    def free(self) -> None:
        if self.mounted:
            self.filler.unlink()
        else:
            self._monkeypatch.undo()

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.folder)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path, monkeypatch):
    disks: list[SmallDisk] = []

    def make(room: int, file_room: int | None = None) -> SmallDisk:
        disks.append(SmallDisk(tmp_path / "disk", room, monkeypatch, file_room))
        return disks[-1]

    yield make
    for disk in disks:
        disk.close()


def noise(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Pixels that do not compress: the output's size is about its pixels' bytes."""
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def just_short(size: int) -> int:
    """Room for all but the last page of a file of ``size`` bytes: the encoder's buffered writes
    all succeed, only the last one (at close) finds no room."""
    return (size - 1) // PAGE * PAGE


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in (".filler", MANIFEST_NAME))


@pytest.mark.parametrize("ext", [".png", ".webp", ".bmp"])
def test_one_image_on_a_full_disk_fails_in_one_line_and_publishes_nothing(ext, tmp_path, random_npz, small_disk):
    src = tmp_path / "in.png"
    cv2.imwrite(str(src), noise((120, 160, 3), seed=1))
    whole = tmp_path / f"whole{ext}"
    assert srgpu("upscale", src, "-o", whole, "--model", random_npz, "-d", "cpu", "-q").exit_code == 0
    disk = small_disk(just_short(whole.stat().st_size))
    out = disk.folder / f"one{ext}"
    r = srgpu("upscale", src, "-o", out, "--model", random_npz, "-d", "cpu")
    assert r.exit_code == 1, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("srgpu: error: ")]
    assert len(errors) == 1 and str(out) in errors[0] and "no space left on device" in errors[0], r.stderr
    assert "libpng" not in r.stderr and "wrote" not in r.stdout
    assert files_in(disk.folder) == []  # neither the output nor its temporary
    disk.free()
    assert srgpu("upscale", src, "-o", out, "--model", random_npz, "-d", "cpu", "-q").exit_code == 0
    assert out.read_bytes() == whole.read_bytes()


def test_a_folder_on_a_full_disk_records_nothing_incomplete_and_a_rerun_completes_it(tmp_path, random_npz,
                                                                                    small_disk):
    src = tmp_path / "in"
    src.mkdir()
    cv2.imwrite(str(src / "a.png"), noise((120, 160, 3), seed=2))  # does not fit
    cv2.imwrite(str(src / "b.png"), np.full((8, 8, 3), 7, np.uint8))  # fits
    whole = tmp_path / "whole"
    assert srgpu("upscale", src, "-o", whole, "--model", random_npz, "-d", "cpu", "-q").exit_code == 0
    # the manifest's journal takes a page, then a's last buffered write finds no room; b fits once
    # a's temporary is gone (before the fix: b found the disk full of a truncated a)
    a_size = (whole / "a.png").stat().st_size
    disk = small_disk(PAGE + just_short(a_size), file_room=a_size - 1)
    out = disk.folder / "out"
    r = srgpu("upscale", src, "-o", out, "--model", random_npz, "-d", "cpu", "--jobs", "1")
    assert r.exit_code == 1
    assert "1 upscaled, 0 skipped (output exists), 1 failed" in r.stdout
    errors = [line for line in r.stderr.splitlines() if line.startswith("srgpu: error: ")]
    assert any(str(out / "a.png") in e and "no space left on device" in e for e in errors), r.stderr
    assert files_in(out) == ["b.png"]
    assert set(Manifest.load(out).records) == {"b.png"}
    disk.free()
    again = srgpu("upscale", src, "-o", out, "--model", random_npz, "-d", "cpu", "--jobs", "1")
    assert again.exit_code == 0 and "1 upscaled, 1 skipped" in again.stdout, again.stdout + again.stderr
    for name in ("a.png", "b.png"):
        assert (out / name).read_bytes() == (whole / name).read_bytes()
    assert (out / MANIFEST_NAME).is_file()
