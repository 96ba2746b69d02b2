"""Hearth opens only its own files: never through a symbolic link, never a file another user owns.

The database, ``settings.json`` and ``engines.json`` sit in folders that are usually private, but
not always (a data folder the user chose on a shared disk, one an older Hearth or a copy left
writable by others). Whoever can write such a folder can plant a link ``hearth.db -> somewhere``
and have Hearth write the user's conversations into a file they can read, or plant a
``settings.json`` of their own that points the data folder or the API server where they like. So
before one of those files is opened, :func:`check_own_file` looks at the path itself (``lstat``,
which does not follow links) and refuses, with :class:`NotOwnFile`, a symbolic link or a file whose
owner is not the user running Hearth. :func:`read_own_bytes` reads a file with ``O_NOFOLLOW``, so
a link swapped in after the check is refused as well, and checks the owner of what it opened.

A missing file is fine: Hearth creates its own. Windows has no such owners here (the profile
folder's ACLs protect it), so only links are refused there.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from model_store.storage_problems import StoreError

OWNERS_CHECKED = hasattr(os, "getuid")
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class NotOwnFile(StoreError):
    """One of Hearth's files is a symbolic link or belongs to another user; it was not opened."""

    def __init__(self, path: Path, why: str, what_to_do: str) -> None:
        self.path, self.why = Path(path), why
        super().__init__(f"Refused to open {path}: {why}; Hearth only opens its own files. {what_to_do}")


def check_own_file(path: Path) -> os.stat_result | None:
    """The file's ``lstat``, or None when there is no file at ``path``.

    Raises:
        NotOwnFile: If ``path`` is a symbolic link (followed or dangling), or owned by another user.
    """
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise NotOwnFile(path, f"it is a symbolic link to {_target(path)}", "Remove the link and start again.")
    refuse_other_owner(path, info)
    return info


def check_own_files(paths: list[Path]) -> None:
    """:func:`check_own_file` for each path (a database and its ``-wal``, ``-shm``, ``-journal``)."""
    for path in paths:
        check_own_file(path)


def refuse_other_owner(path: Path, info: os.stat_result) -> None:
    """Raise :class:`NotOwnFile` if ``info`` (of ``path``) shows another user as the owner."""
    if OWNERS_CHECKED and info.st_uid != os.getuid():
        raise NotOwnFile(path, f"it belongs to another user ({_owner(info.st_uid)})",
                         "Move it out of the way (its owner or an administrator can) and start again.")


def read_own_bytes(path: Path) -> bytes:
    """The contents of ``path``, opened without following a link and checked to be the user's.

    Raises:
        NotOwnFile: A link, or another user's file.
        FileNotFoundError: No file there.
        OSError: It cannot be read, or it is not a regular file (a folder, a pipe: never waited on).
    """
    path = Path(path)
    check_own_file(path)
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link put there since the check
            check_own_file(path)
        raise
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        refuse_other_owner(path, info)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "it is not a regular file")
        return file.read()


def same_file(before: os.stat_result, path: Path) -> bool:
    """Whether ``path`` is still the file ``before`` described (not swapped for another since)."""
    try:
        now = os.lstat(path)
    except OSError:
        return False
    return not stat.S_ISLNK(now.st_mode) and (now.st_dev, now.st_ino) == (before.st_dev, before.st_ino)


def _target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "another file"


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
    except (ImportError, KeyError):
        return f"uid {uid}"
