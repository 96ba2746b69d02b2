"""Hearth's folders and files are private to the user who runs it: folders 0700, files 0600.

Conversations, settings and logs say a lot about a person, and with the usual umask (022) every
file Hearth writes would be readable by every other account on the computer. So:

* **Creating.** Folders are made with mode 0700 (:func:`make_private_folder`) and files with 0600
  (:func:`open_private`, :func:`write_private`, :func:`touch_private`). The mode is passed to
  ``mkdir``/``open`` itself, so nothing is readable by others even for an instant, and is then set
  exactly with chmod, since a umask can only take bits away (one of 0277 would leave 0500).
* **Repairing.** :func:`repair` tightens what an older Hearth, a copy or a loose umask left
  behind. It only ever removes the group and other bits (it never loosens), acts on exactly the
  paths it is given (it never recurses, and never follows a symlink: a link inside Hearth's
  folders may point anywhere), and a refused chmod (a file owned by someone else, a read-only
  disk) is logged once, never raised: Hearth still runs.

SQLite gives a database's ``-wal`` and ``-shm`` files the mode of the database file, so creating
the database file 0600 before SQLite opens it (:func:`touch_private`) covers those too. Existing
files are changed by path, never opened: closing any descriptor of a file drops every POSIX lock
the process holds on it, so opening a database (or its ``-shm``) that SQLite has open in this
process and closing it again would silently release SQLite's locks.

On Windows files are protected by the profile folder's ACLs, not by these mode bits, so every
function here only creates (or opens) there and changes no permissions.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

FOLDER_MODE = 0o700
FILE_MODE = 0o600
SHARED_BITS = 0o077  # what the group and other users may do
ENFORCED = os.name == "posix"

_warned: set[str] = set()


def make_private_folder(folder: Path) -> Path:
    """Create ``folder`` and its missing parents with mode 0700, like ``mkdir(parents=True, exist_ok=True)``.

    An existing folder is left as it is (:func:`repair` tightens Hearth's own).

    Raises:
        OSError: As ``Path.mkdir`` would (``FileExistsError`` when a file is in the way).
    """
    folder = Path(folder)
    try:
        os.mkdir(folder, FOLDER_MODE)
    except FileNotFoundError:
        if folder.parent == folder:
            raise
        make_private_folder(folder.parent)
        return make_private_folder(folder)
    except OSError:
        if not folder.is_dir():
            raise
        return folder
    if ENFORCED:
        _chmod(folder, FOLDER_MODE)
    return folder


def open_private(path: Path, mode: str = "wb", **kwargs: Any) -> IO:
    """Open ``path`` for writing (``mode`` "w"/"a", text or binary), creating it with mode 0600.

    A file this call creates is 0600 exactly; an existing one loses its group and other bits.
    ``kwargs`` go to ``open`` (``encoding``, ``buffering``...).
    """
    if mode.strip("bt") not in ("w", "a"):
        raise ValueError(f"open_private writes only ('w' or 'a' modes), not {mode!r}")
    flags = os.O_WRONLY | (os.O_APPEND if "a" in mode else os.O_TRUNC) | getattr(os, "O_BINARY", 0)
    fd, created = _open_creating(Path(path), flags)
    try:
        _restrict_fd(fd, Path(path), exact=created)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def write_private(path: Path, data: bytes | str) -> None:
    """Write ``data`` (text as UTF-8) to ``path``, replacing its contents; the file is private."""
    with open_private(path, "wb") as file:
        file.write(data.encode() if isinstance(data, str) else data)


def touch_private(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if it is missing, or tighten it (:func:`repair`) if it exists.

    Best effort, for files another library then opens (SQLite): a failure is logged, and that
    library's own open then reports the real problem where the user sees it.
    """
    path = Path(path)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    except FileExistsError:
        repair([path])
        return
    except OSError as exc:
        log.debug("could not create %s beforehand: %s", path, exc)
        return
    if ENFORCED:
        _chmod(path, FILE_MODE)


def repair(paths: Iterable[Path]) -> None:
    """Remove the group and other permission bits of each existing folder or file in ``paths``.

    Missing paths and symlinks are skipped; so are devices, pipes and sockets. Nothing is raised:
    a chmod that is refused is logged once per path.
    """
    if not ENFORCED:
        return
    for path in paths:
        _tighten(Path(path))


def repair_folder(folder: Path) -> None:
    """:func:`repair` ``folder`` and everything directly in it (one level: a subfolder is tightened,
    its contents are not). Only for folders that are Hearth's own."""
    if not ENFORCED:
        return
    _tighten(Path(folder))
    try:
        with os.scandir(folder) as entries:
            names = [entry.path for entry in entries]
    except OSError:
        return  # missing, or not a folder: _tighten has said what needed saying
    repair(names)


def tighten_open_file(fd: int, path: Path) -> int:
    """Remove the group and other bits of the regular file open as ``fd`` (``path`` names it in the
    log); returns its permission bits after. For a file about to be read: its descriptor is tightened,
    so a link or another file swapped in at ``path`` since is never touched. A refused fchmod is
    logged once, never raised (as :func:`repair`): the caller sees the bits that are left."""
    _restrict_fd(fd, Path(path), exact=False)
    return stat.S_IMODE(os.fstat(fd).st_mode)


# -- internals ------------------------------------------------------------------------------------


def _open_creating(path: Path, flags: int) -> tuple[int, bool]:
    """``os.open`` creating the file 0600; also says whether this call created it."""
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE), True
    except FileExistsError:
        return os.open(path, flags | os.O_CREAT, FILE_MODE), False


def _restrict_fd(fd: int, path: Path, *, exact: bool) -> None:
    """A regular file's mode becomes 0600 (``exact``) or loses its group and other bits."""
    if not ENFORCED:
        return
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        return  # e.g. a log pointed at /dev/null: not ours to change
    current = stat.S_IMODE(info.st_mode)
    wanted = FILE_MODE if exact else current & ~SHARED_BITS
    if wanted != current:
        try:
            os.fchmod(fd, wanted)
        except OSError as exc:
            _warn(path, exc)


def _tighten(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        _warn(path, exc)
        return
    current = stat.S_IMODE(info.st_mode)
    if (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)) and current & SHARED_BITS:
        _chmod(path, current & ~SHARED_BITS)  # a symlink (S_ISLNK) is never followed


def _chmod(path: Path, mode: int) -> None:
    """chmod that refuses to follow a symlink (one swapped in since the check), where the system can."""
    try:
        os.chmod(path, mode, follow_symlinks=False)
    except NotImplementedError:  # a symlink, or a C library without AT_SYMLINK_NOFOLLOW for chmod
        try:
            if not os.path.islink(path):
                os.chmod(path, mode)
        except OSError as exc:
            _warn(path, exc)
    except OSError as exc:
        _warn(path, exc)


def _warn(path: Path, exc: OSError) -> None:
    if str(path) in _warned:
        return
    _warned.add(str(path))
    reason = exc.strerror or str(exc)
    log.warning("hearth: could not make %s private (%s), so other users of this computer may be able to "
                "read it; run `chmod go-rwx '%s'` as its owner", path, reason, path)
