"""One message row: what it holds, reading it, changing it.

:mod:`model_store.conversations` builds the tree of messages (adding, branching, listing) on top of
these. The worker needs only this part: when it stores the answer it wrote
(:mod:`engine.requests.answer_keeper`), it reads the answer's row and changes it here, without the rest of
the conversation store.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import sqlite_utils

from model_store.db import StoreError, from_json, to_json, write_transaction
from model_store.message_identity import ROOT, message_identity, row_identity

MESSAGE_STATUSES = ("done", "generating", "stopped", "interrupted", "error")
# How an answer ended (m009_message_outcome): its end of text, the answer's token limit, a full context, a
# length limit the engine did not name, the user's stop, a failure; "" while it is written, when it was cut
# short otherwise (the status says how), or before this was kept.
MESSAGE_FINISHES = ("", "stop", "max_tokens", "context", "length", "cancelled", "error", "tool_calls")


@dataclass(frozen=True)
class Message:
    """One message; ``status`` is one of :data:`MESSAGE_STATUSES`."""

    id: str
    conversation_id: str
    parent_id: str | None
    role: str
    content: str
    status: str
    created_at: float
    stats: dict[str, Any]
    reasoning: str = ""  # an answer's reasoning, apart from its text (m008_message_reasoning)
    finish: str = ""  # how an answer ended, one of MESSAGE_FINISHES (m009_message_outcome)
    error: str = ""  # why it failed, in words (m009_message_outcome)
    identity: str = ""  # its identity (model_store.message_identity), kept by the store (m014_message_identity)
    tool_part: str = ""  # the calls an answer made, or the call a tool's result answers (engine.protocol.tools.tool_part; m015)

    @property
    def cut_off(self) -> bool:
        """The answer stopped because the context was full, not because it was done."""
        return self.finish == "context"


# The record's fields are the table's columns (dict fields are JSON text). Selecting them by name
# keeps rows stable when later migrations append columns.
MESSAGE_COLUMNS = ", ".join(f.name for f in fields(Message))


def message_from_row(row: tuple) -> Message:
    """A ``SELECT MESSAGE_COLUMNS`` row as a :class:`Message`."""
    values = dict(zip(MESSAGE_COLUMNS.split(", "), row))
    return Message(**{**values, "stats": from_json(values["stats"])})


def check_status(status: str) -> None:
    if status not in MESSAGE_STATUSES:
        raise ValueError(f"message status {status!r} is not one of {', '.join(MESSAGE_STATUSES)}")


def read_message(db: sqlite_utils.Database, message_id: str) -> Message:
    """One message.

    Raises:
        StoreError: If there is no such message.
    """
    row = db.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", [message_id]).fetchone()
    if row is None:
        raise StoreError(f"no message {message_id}")
    return message_from_row(row)


def update_message(db: sqlite_utils.Database, message_id: str, *, content: str | None = None,
                   status: str | None = None, stats: dict[str, Any] | None = None, reasoning: str | None = None,
                   finish: str | None = None, error: str | None = None, tool_part: str | None = None) -> Message:
    """Change a message's content, status, stats, reasoning, finish, error and/or tool part; ``None`` leaves a
    field as it is. Returns the message as stored afterwards.

    Raises:
        StoreError: If there is no such message.
        ValueError: For a status or finish that is not one of the known ones.
    """
    changes: dict[str, Any] = {}
    if content is not None:
        changes["content"] = content
    if status is not None:
        check_status(status)
        changes["status"] = status
    if stats is not None:
        changes["stats"] = to_json(stats)
    if reasoning is not None:
        changes["reasoning"] = reasoning
    if finish is not None:
        if finish not in MESSAGE_FINISHES:
            raise ValueError(f"message finish {finish!r} is not one of {', '.join(MESSAGE_FINISHES[1:])}")
        changes["finish"] = finish
    if error is not None:
        changes["error"] = error
    if tool_part is not None:
        changes["tool_part"] = tool_part
    with write_transaction(db):
        read_message(db, message_id)
        if changes:
            assignments = ", ".join(f"{column} = ?" for column in changes)
            db.execute(f"UPDATE messages SET {assignments} WHERE id = ?", [*changes.values(), message_id])
        if content is not None or reasoning is not None or tool_part is not None:
            refresh_identities(db, message_id)
        return read_message(db, message_id)


def identity_after(db: sqlite_utils.Database, parent_id: str | None, role: str, content: str, reasoning: str,
                   tool_part: str = "") -> str:
    """The identity of a message with these fields under ``parent_id`` (None: a first message)."""
    parent = ROOT if parent_id is None else read_message(db, parent_id).identity
    return message_identity(parent, role, content, reasoning, tool_part)


def refresh_identities(db: sqlite_utils.Database, message_id: str) -> None:
    """Give ``message_id`` and every message after it the identity their fields now make (inside
    the caller's write transaction). Only an answer's text changes, before anything follows it, so
    this is one row in practice; recovery also calls it for a branch whose earlier message was lost,
    so it reads only the columns the identity is made of (:func:`model_store.message_identity.row_identity`)."""
    pending = [message_id]
    while pending:
        row = db.execute("SELECT m.id, m.role, m.content, m.reasoning, m.tool_part, m.identity, p.identity"
                         " FROM messages AS m"
                         " LEFT JOIN messages AS p ON p.id = m.parent_id WHERE m.id = ?", [pending.pop()]).fetchone()
        if row is None:
            continue
        current, role, content, reasoning, tool_part, was, parent = row
        identity = row_identity(parent or ROOT, role, content, reasoning, tool_part)
        if identity != was:
            db.execute("UPDATE messages SET identity = ? WHERE id = ?", [identity, current])
            pending += [child for (child,) in db.execute("SELECT id FROM messages WHERE parent_id = ?", [current])]

