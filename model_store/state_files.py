"""Snapshots' state blobs as files beside the database, one file per part, named by its checksum.

The two large parts of a snapshot (:data:`FILE_PARTS`: the attention KV cells and the recurrent
state) do not go into SQLite. In the database every byte is written twice (to the write-ahead log,
then to the file at a checkpoint), and a deleted conversation's pages stay in the file: SQLite
never gives space back by itself. As files, a state is written once and leaves the disk when the
last snapshot naming it goes. The database keeps the snapshot rows, with each part's size and
checksum, and the small token records.

* **Names.** ``<database folder>/states/<checksum>``: named by content, so snapshots with the same
  bytes (a document's state copied into another conversation) share one file.
* **Writing.** To a temporary name in the same folder, then renamed: a file under a checksum's
  name is whole. The file is written before the row that names it, so a crash in between leaves a
  file no row names; :meth:`StateFiles.sweep` removes those once they are old enough that no save
  can still be on its way to naming them.
* **Reading.** Opened without following a symlink, and checked against the row's size and
  checksum as it streams (:mod:`model_store.snapshots`): a missing or altered file costs a replay
  or a re-read, never a wrong state.
* **Private.** The folder is 0700 and every file 0600 (:mod:`model_store.private_files`), and
  :meth:`StateFiles.repair` makes them so again when another program loosened them (the store
  does at every open, with the database's own files). A checksum is no signature: whoever can
  write a state file could write one that matches. So only the user's own private file is read:
  a file that is a symbolic link (or in a ``states`` folder that is one), that belongs to another
  user, or that others can write and whose mode cannot be tightened (a file system that keeps
  its own modes) is refused with :class:`StateFileRefused`, which says why, and the turn rebuilds
  the state from the conversation's token record instead (the snapshot is only a speed-up).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import sqlite_utils

from model_store.part_checksum import ChecksumStream
from model_store.own_files import OWNERS_CHECKED
from model_store.private_files import ENFORCED, FILE_MODE, make_private_folder, repair_folder, tighten_open_file

FILE_PARTS = frozenset({"kv", "recurrent"})
FOLDER_NAME = "states"
READ_BYTES = 1 << 20
ORPHAN_AGE_S = 3600.0  # a file no row names, older than this, is left from a crash (a save takes seconds)
_NAME = re.compile(r"[0-9a-f]{16,64}")
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_NO_WAIT = getattr(os, "O_NONBLOCK", 0)  # a pipe planted at a file's name is refused, never waited on
OTHERS_WRITE = 0o022  # the group's and other users' write bits
OWN_FILES_ONLY = "Hearth reads only its own files"


class StateFileRefused(OSError):
    """A state file (or its folder) that is not the user's own private file; it was not read.
    ``strerror`` says why, naming the path."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(errno.EPERM, why, str(path))


class StateFiles:
    """The state files of one database."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def beside(cls, db: sqlite_utils.Database) -> StateFiles:
        """The state folder next to ``db``'s file."""
        (_, _, path) = next(row for row in db.execute("PRAGMA database_list") if row[1] == "main")
        return cls.of_database(Path(path))

    @classmethod
    def of_database(cls, database: Path) -> StateFiles:
        """The state folder next to the database file at ``database``."""
        return cls(Path(database).parent / FOLDER_NAME)

    def repair(self) -> None:
        """Make the folder 0700 and each file in it 0600 again where another program loosened them
        (only group and other bits are removed). A folder that is a link is left alone: reading
        refuses it. Nothing is raised (see :func:`~model_store.private_files.repair`)."""
        try:
            is_folder = stat.S_ISDIR(os.lstat(self.folder).st_mode)
        except OSError:
            return
        if is_folder:
            repair_folder(self.folder)

    def path(self, checksum: str) -> Path:
        """Where the part with this checksum (``xxh3-128:<hex>``) is kept."""
        name = checksum.rpartition(":")[2]
        if not _NAME.fullmatch(name):
            raise ValueError(f"not a part checksum: {checksum!r}")
        return self.folder / name

    def write(self, checksum: str, chunks: Iterable[bytes | memoryview]) -> bool:
        """Keep the bytes of ``chunks`` under their checksum; False (and nothing kept) when they do
        not match it. A file already there holds the same bytes and stays."""
        final = self.path(checksum)
        if final.exists():
            os.utime(final, follow_symlinks=False)  # a sweep sees it as new: a row naming it is on its way
            return True
        make_private_folder(self.folder)
        temporary = self.folder / f".{final.name}.{uuid.uuid4().hex}.part"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, FILE_MODE)
        try:
            check = ChecksumStream(checksum)
            with os.fdopen(fd, "wb") as file:
                for chunk in chunks:
                    check.update(chunk)
                    file.write(chunk)
            if not check.matches():
                temporary.unlink()
                return False
            os.replace(temporary, final)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return True

    def chunks(self, checksum: str) -> Iterator[tuple[int, bytes]]:
        """The file's bytes as ``(seq, chunk)``; FileNotFoundError when it is missing,
        :class:`StateFileRefused` when it is not the user's own private file."""
        fd = self._open_own(self.path(checksum))
        with os.fdopen(fd, "rb") as file:
            seq = 0
            while data := file.read(READ_BYTES):
                yield seq, data
                seq += 1

    def _open_own(self, path: Path) -> int:
        """``path`` open for reading, once it and its folder are known to be the user's own and the
        file private (tightened through its descriptor where it was not)."""
        _refuse_unless_own(self.folder, os.lstat(self.folder), folder=True)
        try:
            fd = os.open(path, os.O_RDONLY | _NO_FOLLOW | _NO_WAIT)
        except OSError:
            if os.path.islink(path):  # ELOOP (EMLINK on some systems): O_NOFOLLOW met a link
                raise StateFileRefused(path, f"{path} is a symbolic link; {OWN_FILES_ONLY}") from None
            raise
        try:
            _refuse_unless_own(path, os.fstat(fd), folder=False)
            if ENFORCED and (mode := tighten_open_file(fd, path)) & OTHERS_WRITE:
                raise StateFileRefused(path, f"other users can write {path} (mode {mode:04o}) and it could not be "
                                             "made private; Hearth does not trust a state file others can change")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def remove(self, checksums: Iterable[str]) -> None:
        """Delete these parts' files (those already gone are skipped)."""
        for checksum in checksums:
            self.path(checksum).unlink(missing_ok=True)

    def sweep(self, named: set[str], min_age_s: float = ORPHAN_AGE_S) -> int:
        """Delete the files older than ``min_age_s`` whose names are not in ``named`` (the file names
        of every part a row names), and temporary files as old; returns how many went."""
        if not self.folder.is_dir():
            return 0
        cutoff, removed = time.time() - min_age_s, 0
        for entry in os.scandir(self.folder):
            kept = entry.name in named
            if kept or not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_mtime > cutoff:
                continue
            Path(entry.path).unlink(missing_ok=True)
            removed += 1
        return removed


def _refuse_unless_own(path: Path, info: os.stat_result, *, folder: bool) -> None:
    """Raise :class:`StateFileRefused` unless ``info`` (of ``path``) is a folder (``folder``) or a
    regular file, not a link, and the user's own."""
    if stat.S_ISLNK(info.st_mode):
        raise StateFileRefused(path, f"{path} is a symbolic link; {OWN_FILES_ONLY}")
    if not (stat.S_ISDIR if folder else stat.S_ISREG)(info.st_mode):
        raise StateFileRefused(path, f"{path} is not a {'folder' if folder else 'regular file'}")
    if OWNERS_CHECKED and info.st_uid != os.getuid():
        raise StateFileRefused(path, f"{path} belongs to another user ({_owner(info.st_uid)}); {OWN_FILES_ONLY}")


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
    except (ImportError, KeyError):
        return f"uid {uid}"
