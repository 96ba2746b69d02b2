"""One writer per conversation at a time, across processes: every Hearth window and every command.

A turn reads the conversation's current branch, stores the user's message and an empty answer, has
the engine write the answer (and snapshot its end under the answer's id), and stores the text. The
worker that writes the answer stores it on the writer's behalf: it names the hold by its token, and
confirms it and removes the row in the transaction that stores the answer (:func:`confirm_hold`,
:func:`remove_hold`).
Two writers interleaving there would hang the second message under the first one's still-empty
answer, and the engine would compute the second answer (and its snapshot) from a transcript the
store never shows. So a writer first takes the conversation's row in ``writer_locks`` and keeps it
until its answer is stored. The lock lives in the database, not in one process, because the
windows and commands that write are separate processes.

A row names its holder: the process id, the host, the process's start time (so that a process id
the system has since given to another program is not mistaken for the holder) and, for messages,
what it is ("a `hearth send` command"). Each hold has its own random token; a heartbeat thread
refreshes the row every :data:`HEARTBEAT_S` seconds on a connection of its own. A row is *stale*,
and the next writer takes it over, only when its holder is known to have ended:

* on this computer, when no process with its id and start time is running. A holder that is
  alive is never taken over, however old its heartbeat: a process stopped with SIGSTOP or Ctrl+Z,
  or a laptop that slept, writes no heartbeat, yet resumes where it was and goes on writing;
* on another computer sharing the folder (its processes cannot be seen from here), when its
  heartbeat is older than :data:`STALE_AFTER_S`.

Taking and releasing are write transactions, so two writers can never both succeed. Since a row
can still be taken (a holder on another computer that was only slow, a row removed by hand), a
writer confirms it still holds the conversation (:meth:`WriterLock.confirm`, its token still in
the row) inside the transaction of each write of its turn, and writes nothing if it does not.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

import psutil
import sqlite_utils

from model_store.db import StoreError, database_file, open_database, write_transaction

log = logging.getLogger(__name__)

HEARTBEAT_S = 5.0
STALE_AFTER_S = 60.0
POLL_S = 0.2
SAY_WAITING_AFTER_S = 1.0


@dataclass(frozen=True)
class Holder:
    """One row of ``writer_locks``: who writes in a conversation."""

    conversation_id: str
    token: str
    who: str
    pid: int
    host: str
    process_started: float
    taken_at: float
    heartbeat_at: float

    def describe(self) -> str:
        """"a `hearth send` command (process 4242)", naming the host when it is another one."""
        where = "" if self.host == socket.gethostname() else f" on {self.host}"
        return f"{self.who} (process {self.pid}{where})"


_COLUMNS = ", ".join(f.name for f in fields(Holder))


class WriterLockLost(StoreError):
    """This writer no longer holds its conversation (``holder``: who does now, if anyone), so the
    write it was about to make was not made."""

    def __init__(self, conversation_id: str, holder: Holder | None) -> None:
        self.conversation_id, self.holder = conversation_id, holder
        taken = (f"{holder.describe()} took over conversation {conversation_id} while this writer was stopped"
                 if holder is not None else f"this writer's hold on conversation {conversation_id} was removed "
                 "while it was writing")
        super().__init__(f"{taken}, so this answer was not saved (the conversation is not mixed up with another "
                         "writer's); send the message again")


class ConversationBusy(StoreError):
    """Another writer holds the conversation; ``holder`` says who."""

    def __init__(self, holder: Holder, waited_s: float = 0.0) -> None:
        self.holder, self.waited_s = holder, waited_s
        after = f" after waiting {waited_s:.0f} s" if waited_s >= 1 else ""
        super().__init__(f"{holder.describe()} is still answering in conversation {holder.conversation_id}{after}, "
                         "so this message was not sent; send it again when that answer has finished")


def process_started(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None if there is no such process."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:  # ended, not yet waited for
            return None
        return process.create_time()
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:  # someone else's process: it exists
        return 0.0


def is_stale(holder: Holder, now: float | None = None) -> bool:
    """Whether ``holder`` no longer writes. On this computer: its process is gone (a live one, even
    stopped or asleep for hours, still holds). On another: its heartbeat stopped."""
    if holder.host != socket.gethostname():
        now = time.time() if now is None else now
        return now - holder.heartbeat_at > STALE_AFTER_S
    started = process_started(holder.pid)
    return started is None or (started != 0.0 and abs(started - holder.process_started) > 1.0)


def holder_of(db: sqlite_utils.Database, conversation_id: str) -> Holder | None:
    """The row holding ``conversation_id``, stale or not; None if nobody does."""
    row = db.execute(f"SELECT {_COLUMNS} FROM writer_locks WHERE conversation_id = ?", [conversation_id]).fetchone()
    return Holder(*row) if row else None


def holders(db: sqlite_utils.Database) -> list[Holder]:
    """Every row, stale or not."""
    return [Holder(*row) for row in db.execute(f"SELECT {_COLUMNS} FROM writer_locks")]


def confirm_hold(db: sqlite_utils.Database, conversation_id: str, token: str) -> None:
    """Check that the hold ``token`` is still the conversation's row, inside the write's transaction
    (:meth:`WriterLock.confirm`; the worker does it by the token alone when it stores an answer).

    Raises:
        WriterLockLost: If the row is gone or another writer's.
    """
    holder = holder_of(db, conversation_id)
    if holder is None or holder.token != token:
        raise WriterLockLost(conversation_id, holder)


def remove_hold(db: sqlite_utils.Database, conversation_id: str, token: str) -> None:
    """Delete the conversation's row if the hold ``token`` still has it (inside a write transaction)."""
    db.execute("DELETE FROM writer_locks WHERE conversation_id = ? AND token = ?", [conversation_id, token])


def drop(db: sqlite_utils.Database, holder: Holder) -> None:
    """Delete ``holder``'s row (if it still holds)."""
    with write_transaction(db):
        remove_hold(db, holder.conversation_id, holder.token)


class WriterLock:
    """A held conversation: keeps its row fresh until :meth:`release`."""

    def __init__(self, db: sqlite_utils.Database, conversation_id: str, token: str) -> None:
        self.conversation_id, self.token = conversation_id, token
        self._path = database_file(db)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self._path is not None:
            self._thread = threading.Thread(target=self._beat, name="writer-lock", daemon=True)
            self._thread.start()

    def release(self, db: sqlite_utils.Database) -> None:
        """Let the next writer in (``db``: a connection of the calling thread). Never raises: a row
        that cannot be deleted (a full disk) goes stale when this process ends."""
        self._stop.set()
        try:
            with write_transaction(db):
                remove_hold(db, self.conversation_id, self.token)
        except (StoreError, sqlite3.Error) as exc:
            log.info("could not release the writer lock of conversation %s: %s", self.conversation_id, exc)

    def let_go(self) -> None:
        """Stop keeping the row fresh: another process (the worker that stored the answer) removed it."""
        self._stop.set()

    def confirm(self, db: sqlite_utils.Database) -> None:
        """Check that this hold's token is still in the conversation's row, before a write of the turn.

        Call it inside the write's transaction (``write_transaction``), so that nobody can take the
        row between the check and the write.

        Raises:
            WriterLockLost: If the row is gone or another writer's; nothing should be written then.
        """
        try:
            confirm_hold(db, self.conversation_id, self.token)
        except WriterLockLost:
            self._stop.set()
            raise

    def _beat(self) -> None:
        db = None
        try:
            while not self._stop.wait(HEARTBEAT_S):
                try:
                    db = db or open_database(self._path)
                    with write_transaction(db):
                        kept = db.execute("UPDATE writer_locks SET heartbeat_at = ? WHERE conversation_id = ? "
                                          "AND token = ?", [time.time(), self.conversation_id, self.token]).rowcount
                    if not kept:
                        return  # released, or taken over after this process stalled
                except (StoreError, sqlite3.Error) as exc:
                    log.info("writer lock heartbeat of conversation %s: %s", self.conversation_id, exc)
        finally:
            if db is not None:
                db.close()


def take_writer_lock(db: sqlite_utils.Database, conversation_id: str, who: str, *, wait_s: float = 0.0,
                     on_wait: Callable[[Holder], None] | None = None) -> WriterLock:
    """Become the conversation's one writer, waiting up to ``wait_s`` seconds for another to finish.

    Args:
        db: The database (a connection of the calling thread). Inside a write transaction only
            ``wait_s=0`` makes sense: the transaction holds SQLite's write lock while it waits.
        conversation_id: The conversation.
        who: What the caller is, for other writers' messages ("a `hearth send` command").
        wait_s: How long to wait for another writer; 0 refuses at once.
        on_wait: Called once, about a second into a wait, with the writer being waited for.

    Returns:
        The lock; call :meth:`WriterLock.release` when the answer is stored (also on errors).

    Raises:
        ConversationBusy: If another writer still holds it when the wait is over.
    """
    started = time.monotonic()
    said = False
    while True:
        try:
            return WriterLock(db, conversation_id, _take(db, conversation_id, who))
        except ConversationBusy as busy:
            waited = time.monotonic() - started
            if waited >= wait_s:
                raise ConversationBusy(busy.holder, waited) from None
            if on_wait is not None and not said and waited >= SAY_WAITING_AFTER_S:
                said = True
                on_wait(busy.holder)
            time.sleep(min(POLL_S, max(0.0, wait_s - waited)))


def _take(db: sqlite_utils.Database, conversation_id: str, who: str) -> str:
    token = secrets.token_hex(16)
    now = time.time()
    pid = os.getpid()
    with write_transaction(db):
        holder = holder_of(db, conversation_id)
        if holder is not None and not is_stale(holder, now):
            raise ConversationBusy(holder)
        db.execute(
            f"INSERT OR REPLACE INTO writer_locks ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [conversation_id, token, who, pid, socket.gethostname(), process_started(pid) or 0.0, now, now],
        )
    return token
