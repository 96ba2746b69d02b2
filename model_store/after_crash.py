"""Opening the conversation store, and tidying what a Hearth that stopped abruptly left behind.

Every window and every command opens its store through :func:`open_conversation_store`, so all of
them tidy the same way, and only what no live writer (:mod:`model_store.writer_lock`) is still
working on:

* an answer left ``generating`` by a process that was killed becomes ``interrupted``, keeping any
  text it had (prompts leave out such an answer when it is empty: :func:`app.services.turn.prompt_turns`);
* a conversation left without any message because its first message was never stored is deleted:
  at once when its writer is known to be gone, else once it is :data:`EMPTY_GRACE_S` old, since a
  program using the store may create a conversation and add its first message a moment later. One
  that had messages (all of them lost to a damaged page, say) keeps its title;
* the lock rows of writers that are gone are dropped.

A file opened read-only is not tidied; a tidy that fails for lack of space is skipped (reading
still works) and tried again at the next start.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from model_store.conversations import ConversationStore
from model_store.snapshots import SnapshotStore
from model_store.db import open_database, read_only_problem, write_transaction
from model_store.storage_problems import DatabaseReadOnly, DatabaseUnreachable, DiskFull
from model_store.writer_lock import drop, holders, is_stale

log = logging.getLogger(__name__)

EMPTY_GRACE_S = 60.0


@dataclass(frozen=True)
class Tidied:
    interrupted: int = 0  # answers marked interrupted
    emptied: int = 0  # empty conversations deleted
    locks: int = 0  # stale lock rows dropped
    state_files: int = 0  # snapshot files a crash left without their row, deleted


def open_conversation_store(path: Path, *, read_only_ok: bool = False) -> ConversationStore:
    """Open the database at ``path`` (see :func:`model_store.db.open_database`) and tidy it.

    Raises:
        StoreError: As ``open_database`` does (damaged, read-only, unreachable).
    """
    store = ConversationStore(open_database(path, read_only_ok=read_only_ok))
    if read_only_problem(store.db) is None:
        try:
            tidy_after_crash(store)
        except (DiskFull, DatabaseReadOnly, DatabaseUnreachable) as exc:
            log.info("could not tidy %s: %s", path, exc)
    return store


def tidy_after_crash(store: ConversationStore, now: float | None = None) -> Tidied:
    """Mark interrupted answers, delete empty conversations and drop stale locks, in one transaction;
    then delete the snapshot files a crash left without their row."""
    now = time.time() if now is None else now
    db = store.db
    with write_transaction(db):
        everyone = holders(db)
        gone = [h for h in everyone if is_stale(h, now)]
        live = {h.conversation_id for h in everyone if h not in gone}
        for holder in gone:
            drop(db, holder)
        interrupted = store.mark_unfinished_interrupted(keep=live)
        abandoned = {h.conversation_id for h in gone}
        emptied = 0
        for conversation in store.empty():
            never_written = conversation.updated_at == conversation.created_at  # adding a message moves updated_at
            if never_written and conversation.id not in live and (
                    conversation.id in abandoned or conversation.created_at < now - EMPTY_GRACE_S):
                store.delete(conversation.id)
                emptied += 1
    try:
        swept = SnapshotStore(db).sweep_files()
    except OSError as exc:  # the states folder unreadable: the files wait for the next start
        log.info("could not sweep the snapshot files: %s", exc)
        swept = 0
    tidied = Tidied(interrupted, emptied, len(gone), swept)
    if tidied != Tidied():
        log.info("tidied after an earlier stop: %s", tidied)
    return tidied
