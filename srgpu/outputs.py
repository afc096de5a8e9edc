"""How every srgpu output reaches its final name: written under a temporary name beside it that
says which process owns it, then published by a rename that never replaces a file the run did not
mean to replace.

- ``temp_path(final)``: ``.<name>.srgpu-<host>-<pid>-<token>.part<suffix>`` in the final folder
  (hidden, so folder runs never take it for an input; the suffix kept, so encoders and viewers
  still know the format).
- ``publish(tmp, final, replace)``: with ``replace`` (the user said --overwrite) a plain atomic
  rename; without it, a hard link to the final name (which fails if anything is there, however
  new) and then the temporary name is removed. Where the filesystem has no hard links, an
  exclusive create of the final name reserves it and a rename fills it.
- ``remove_stale_temps(final)``: what a killed srgpu (SIGKILL, power loss) left for ``final``,
  only files of srgpu's own pattern whose process on this host is gone.
- ``replace_atomically(final, write)``: srgpu's own files that are replaced whole (plan and kernel
  caches, the manifest, reference outputs): a fresh temporary per call, so two threads or two
  processes writing the same cache file never share one, then the atomic rename.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import socket
from pathlib import Path
from typing import BinaryIO, Callable

_MARK = ".srgpu-"
_HOST = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:16] or "host"
# the owner's host and pid, then a random token, between the final name and .part<suffix>
_TEMP = re.compile(r"^\.(?P<name>.+)\.srgpu-(?P<host>[A-Za-z0-9]+)-(?P<pid>\d+)-[0-9a-f]+\.part(?P<suffix>\.[^.]*)?$")
# link() is not supported here: fall back to create-exclusive + rename
_NO_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS, errno.EXDEV})


class OutputExistsError(FileExistsError):
    """The final name was taken while the run was working (another program, or a second srgpu
    writing the same output); the message says so in one line."""


def temp_path(final: str | os.PathLike) -> Path:
    """A fresh temporary name for ``final``, in its folder, owned by this process."""
    final = Path(final)
    return final.parent / f".{final.name}{_MARK}{_HOST}-{os.getpid()}-{secrets.token_hex(4)}.part{final.suffix}"


def create_temp(final: str | os.PathLike) -> tuple[Path, int]:
    """``temp_path(final)`` created exclusively, with mode 0666 less the umask (mkstemp's 0600
    would stick to the final file): (path, open file descriptor)."""
    tmp = temp_path(final)
    return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)


def publish(tmp: str | os.PathLike, final: str | os.PathLike, replace: bool) -> None:
    """Give the finished ``tmp`` its final name. ``replace``: whatever is at ``final`` is replaced
    (atomically). Otherwise a file at ``final`` is never replaced, however late it appeared:
    OutputExistsError, and ``tmp`` is removed. ``tmp`` is gone when this returns or raises."""
    tmp, final = Path(tmp), Path(final)
    try:
        if replace:
            os.replace(tmp, final)
            return
        try:
            os.link(tmp, final)
        except FileExistsError:
            raise _taken(final) from None
        except OSError as e:
            if e.errno not in _NO_LINKS:
                raise
            _publish_without_links(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def replace_atomically(final: str | os.PathLike, write: Callable[[BinaryIO], object], durable: bool = False) -> None:
    """``write(file)`` fills a fresh temporary beside ``final``, which then replaces ``final`` whole:
    a reader sees the old file or the new one, never a mix, whoever else writes it at the same time.
    ``durable``: flushed to disk before the rename. The temporary is gone however this ends."""
    tmp, fd = temp_path(final), -1
    try:  # created inside: a worker's SIGTERM (raised as KeyboardInterrupt) right after the create still removes it
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
    except BaseException as e:
        if fd != -1 or not isinstance(e, FileExistsError):  # (a file already at the fresh name is not ours)
            tmp.unlink(missing_ok=True)
        raise
    publish(tmp, final, replace=True)


def _publish_without_links(tmp: Path, final: Path) -> None:
    try:
        os.close(os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # reserve the name
    except FileExistsError:
        raise _taken(final) from None
    os.replace(tmp, final)


def _taken(final: Path) -> OutputExistsError:
    return OutputExistsError(f"{final}: a file appeared there while srgpu was working (another program, or "
                             "another srgpu writing the same output); it was not replaced (--overwrite replaces it)")


def owner_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one of another user counts as alive)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True  # cannot tell: keep its files
    return True


def stale_temps_in(folder: str | os.PathLike) -> list[Path]:
    """srgpu's own temporaries in ``folder`` whose owner on this host is gone (sorted): one look at
    the folder for a whole batch writing into it."""
    folder = Path(folder)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(folder / name for name in names
                  if (m := _TEMP.match(name)) and m.group("host") == _HOST and not owner_alive(int(m.group("pid"))))


def stale_temps(final: str | os.PathLike) -> list[Path]:
    """srgpu's own temporaries of ``final`` whose owner on this host is gone (sorted)."""
    final = Path(final)
    return [p for p in stale_temps_in(final.parent) if _TEMP.match(p.name).group("name") == final.name]  # type: ignore[union-attr]


def remove(paths: list[Path]) -> list[Path]:
    """Remove stale temporaries (from stale_temps or stale_temps_in); the paths removed."""
    removed = []
    for path in paths:
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            pass  # another srgpu cleaned it first
        except OSError:
            pass  # not ours to force: left as it is
    return removed


def remove_stale_temps(final: str | os.PathLike) -> list[Path]:
    """Remove ``stale_temps(final)``; the paths removed."""
    return remove(stale_temps(final))
