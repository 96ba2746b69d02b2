"""The conversation store as the commands open it, and its failures as the one line a command prints.

A damaged file, a read-only one, a full disk and a conversation another window or command is
answering in each become a :class:`~app.surfaces.cli.commands.UserError` that says what happened, where, and
what to do, with a ``kind`` for ``--json``; never a traceback.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from app.surfaces.cli.commands import UserError
from app.surfaces.cli.terminal_text import visible
from app.services.settings import app_data_dir
from app.services.turn import Writer
from model_store.after_crash import open_conversation_store
from model_store.conversations import ConversationStore
from model_store.db import database_path, problem_of
from model_store.own_files import NotOwnFile
from model_store.storage_problems import (
    DatabaseDamaged, DatabaseReadOnly, DatabaseUnreachable, DiskFull, StoreError,
)
from model_store.writer_lock import ConversationBusy, Holder, WriterLockLost

WAIT_ENV = "HEARTH_WRITER_WAIT_S"  # how long a command waits for another writer of its conversation
DEFAULT_WAIT_S = 300.0
KINDS = ((DatabaseDamaged, "database_damaged"), (DatabaseReadOnly, "database_read_only"), (DiskFull, "disk_full"),
         (DatabaseUnreachable, "database_unreachable"), (ConversationBusy, "conversation_busy"),
         (WriterLockLost, "conversation_taken"), (NotOwnFile, "not_own_file"))


def open_conversations(*, read_only_ok: bool = False) -> ConversationStore:
    """The store of the data folder, tidied after an earlier crash (see :mod:`model_store.after_crash`)."""
    try:
        return open_conversation_store(database_path(app_data_dir()), read_only_ok=read_only_ok)
    except StoreError as exc:
        raise user_error(exc) from exc


def user_error(exc: StoreError) -> UserError:
    """``exc`` as the line the command prints (and the ``error`` object of ``--json``)."""
    kind = next((name for cls, name in KINDS if isinstance(exc, cls)), "store")
    path = getattr(exc, "path", None)
    return UserError(str(exc), kind=kind, **({"path": str(path)} if path is not None else {}))


@contextmanager
def store_errors(store: ConversationStore) -> Iterator[None]:
    """Turn the store's failures inside the block into :class:`UserError`s (a damaged file is
    confirmed with ``PRAGMA quick_check``, and nothing more is written to it)."""
    try:
        yield
    except StoreError as exc:
        raise user_error(exc) from exc
    except sqlite3.DatabaseError as exc:
        problem = problem_of(store.db, exc)
        if problem is None:
            raise UserError(f"the conversation database failed: {exc}", kind="store") from exc
        raise user_error(problem) from exc


def command_writer(who: str) -> Writer:
    """A command waits for another writer of its conversation (saying so on stderr after a moment)."""
    return Writer(who, wait_s=_wait_s(), on_wait=_say_waiting)


def _wait_s() -> float:
    try:
        return max(0.0, float(os.environ.get(WAIT_ENV, DEFAULT_WAIT_S)))
    except ValueError:
        return DEFAULT_WAIT_S


def _say_waiting(holder: Holder) -> None:
    print(f"hearth: waiting for {visible(holder.describe())}, which is answering in this conversation…", file=sys.stderr,
          flush=True)
