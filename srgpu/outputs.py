"""How every srgpu output reaches its final name: written under a temporary name beside it that
says which process owns it, then published by a rename that never replaces a file the run did not
mean to replace.

- ``temp_path(final)``: ``.<name>.srgpu-<host>-<pid>-<token>.part<suffix>`` in the final folder
  (hidden, so folder runs never take it for an input; the suffix kept, so encoders and viewers
  still know the format). Where the final name is near the file system's limit on one name
  (NAME_MAX, 255 bytes on most), the name part is shortened to a prefix and a hash of the whole
  name (``fitting_name``), so a temporary fits wherever its final name fits.
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
import hashlib
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
NAME_MAX = 255  # bytes in one name on ext4, XFS, btrfs, ZFS, APFS (NTFS: 255 UTF-16 units, more bytes)
_HASHED = 12  # hex digits of the whole name's SHA-256 kept where a name is shortened
_SUFFIX_MAX = 16  # bytes of a suffix kept on a temporary (a longer "suffix" is not a format's)
# the widest a temporary's own part can be: its host (16), a pid (10 digits), the token (8)
_TEMP_OVERHEAD = len(f".{_MARK}{'h' * 16}-{'9' * 10}-{'0' * 8}.part")


class OutputExistsError(FileExistsError):
    """The final name was taken while the run was working (another program, or a second srgpu
    writing the same output); the message says so in one line."""


def name_max(folder: str | os.PathLike) -> int:
    """The longest name (bytes) ``folder``'s file system takes, NAME_MAX where it does not say."""
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return NAME_MAX
    return limit if 0 < limit <= NAME_MAX else NAME_MAX


def fitting_name(name: str, reserved: int, folder: str | os.PathLike) -> str:
    """``name``, or where it and ``reserved`` more bytes do not fit in one name of ``folder``, its
    first bytes (whole characters) then "~" and a hash of the whole name: the same for the same
    name, so a later run finds what an earlier one left under it."""
    budget = name_max(folder) - reserved
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) <= budget:
        return name
    digest = hashlib.sha256(raw).hexdigest()[:_HASHED]
    keep = max(0, budget - 1 - _HASHED)
    return raw[:keep].decode("utf-8", "ignore") + "~" + digest


def _suffix(final: Path) -> str:
    return final.suffix if len(final.suffix.encode("utf-8", "surrogateescape")) <= _SUFFIX_MAX else ""


def _temp_name_part(final: Path) -> str:
    """The final name as it stands in its temporaries' names (shortened near the limit)."""
    return fitting_name(final.name, _TEMP_OVERHEAD + len(_suffix(final).encode("utf-8", "surrogateescape")),
                        final.parent)


def temp_path(final: str | os.PathLike) -> Path:
    """A fresh temporary name for ``final``, in its folder, owned by this process; no longer than
    the longest name the folder takes, where ``final`` itself fits."""
    final = Path(final)
    return final.parent / (f".{_temp_name_part(final)}{_MARK}{_HOST}-{os.getpid()}-{secrets.token_hex(4)}"
                           f".part{_suffix(final)}")


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
    names = {final.name, _temp_name_part(final)}
    return [p for p in stale_temps_in(final.parent) if _TEMP.match(p.name).group("name") in names]  # type: ignore[union-attr]


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
