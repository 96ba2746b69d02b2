"""The worker stores the answers it writes, so a turn's answer is kept where its snapshot is.

An ``AnswerTurn`` with ``keep`` asks for it. The keeper builds the answer's record from the very events
that go out for the request (:class:`engine.protocol.answer_record.AnswerRecord`, the same record the app
builds from them), and when the request's ``Finished`` passes, stores the answer in one transaction:
it confirms that the app's writer lock is still the conversation's (``KeepAnswer.writer_token``),
writes the message and removes the lock's row, so the next writer may come in. The ``Finished`` then
says ``answer_stored``. Where the answer cannot be stored here (no data folder, a full disk, the lock
taken over), the ``Finished`` goes out as it was, and the app stores the answer, or reports why it
could not, as it does for a remote engine.
"""

from __future__ import annotations

import logging
import sqlite3

import msgspec

from engine import protocol as p
from engine.protocol.answer_record import AnswerRecord
from engine.requests.worker_store import WorkerStore
from model_store.db import StoreError, write_transaction
from model_store.message_rows import read_message, update_message
from model_store.writer_lock import confirm_hold, remove_hold

log = logging.getLogger(__name__)


class AnswerKeeper:
    """The answers being written that the worker stores (by request id), and the storing itself."""

    def __init__(self, store: WorkerStore) -> None:
        self._store = store
        self._answers: dict[str, tuple[p.AnswerTurn, AnswerRecord]] = {}

    def begin(self, command: p.Command) -> None:
        """The worker takes ``command``: an ``AnswerTurn`` that asks to be kept gets its record."""
        if isinstance(command, p.AnswerTurn) and command.keep is not None:
            record = AnswerRecord(started=command.keep.started_at, model=command.keep.model)
            self._answers[command.request_id] = (command, record)

    def passing(self, event: p.Event) -> p.Event:
        """Record an event on its way out; a kept answer's ``Finished`` goes out once it is stored."""
        kept = self._answers.get(getattr(event, "request_id", None))
        if kept is None or not kept[1].feed(event):
            return event
        command, record = self._answers.pop(event.request_id)
        if self._stored(command, record):
            return msgspec.structs.replace(event, answer_stored=True)
        return event

    def _stored(self, command: p.AnswerTurn, record: AnswerRecord) -> bool:
        token = command.keep.writer_token
        try:
            db = self._store.db()
            with write_transaction(db):
                if token:
                    confirm_hold(db, command.conversation_id, token)
                answer = read_message(db, command.answer_id)
                if answer.conversation_id != command.conversation_id or answer.status != "generating":
                    raise StoreError(f"answer {command.answer_id} is not one being written in this conversation")
                update_message(db, command.answer_id, **record.stored_fields())
                if token:
                    remove_hold(db, command.conversation_id, token)
        except (ValueError, StoreError, sqlite3.Error, OSError) as exc:  # the app stores it, or says why not
            log.info("answer %s left for the app to store: %s", command.answer_id, exc)
            return False
        return True
