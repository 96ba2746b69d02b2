"""Conversations and their messages.

Messages form a tree, not a list: each message points at the one before it (``parent_id``;
``None`` for the first). Sending a message appends a child to the current newest message. Editing
a message adds a *sibling* of it (another child of the same parent) holding the new text, and
regenerating an answer adds a sibling assistant message, so nothing is ever overwritten and every
earlier version stays reachable as its own branch. :meth:`ConversationStore.children` lists the
alternatives at a fork, oldest first.

``conversations.leaf_id`` picks the branch the conversation shows: the transcript is the path from
the root to that leaf (:meth:`ConversationStore.current_branch`). Adding a message moves the leaf
to it; :meth:`ConversationStore.set_leaf` switches branch. Deleting a conversation deletes its
messages and their state snapshots through ``ON DELETE CASCADE``.
"""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

import sqlite_utils

from model_store.db import StoreError, ancestors, from_json, read_transaction, to_json, write_transaction
from model_store.message_rows import (MESSAGE_COLUMNS, Message, check_status, identity_after, message_from_row,
                                      read_message, update_message)
from model_store.snapshots import SnapshotStore

__all__ = ["Conversation", "ConversationStore", "Message"]  # Message is message_rows', named here for the store's callers


@dataclass(frozen=True)
class Conversation:
    """One conversation row."""

    id: str
    title: str
    model: str
    settings: dict[str, Any]
    created_at: float
    updated_at: float
    leaf_id: str | None
    system_prompt: str = ""  # sent before its messages; "": none, the model's default (m010_conversation_system_prompt)


# The record's fields are the table's columns (dict fields are JSON text). Selecting them by name keeps
# rows stable when later migrations append columns (messages: model_store.message_rows).
_CONVERSATION_COLUMNS = ", ".join(f.name for f in fields(Conversation))


class ConversationStore:
    """Reads and writes conversations and messages in one database."""

    def __init__(self, db: sqlite_utils.Database):
        """Wrap an open database (see :func:`model_store.db.open_database`)."""
        self.db = db

    def create(
        self, title: str, model: str = "default", settings: dict[str, Any] | None = None, system_prompt: str = ""
    ) -> Conversation:
        """Start a new, empty conversation.

        Args:
            title: Shown in the conversation list.
            model: The model reference it uses.
            settings: Sampling and other per-conversation settings (JSON-serialisable).
            system_prompt: Sent before its messages ("": none).

        Returns:
            The new conversation.
        """
        now = time.time()
        conv = Conversation(uuid.uuid4().hex, title, model, dict(settings or {}), now, now, None, system_prompt)
        with write_transaction(self.db):
            self.db.execute(
                "INSERT INTO conversations (id, title, model, settings, created_at, updated_at,"
                " leaf_id) VALUES (?, ?, ?, ?, ?, ?, NULL)",
                [conv.id, title, model, to_json(conv.settings), now, now],
            )
            if system_prompt:  # its own statement: the column's default stands for none
                self.db.execute("UPDATE conversations SET system_prompt = ? WHERE id = ?", [system_prompt, conv.id])
        return conv

    def get(self, conversation_id: str) -> Conversation:
        """Return one conversation.

        Raises:
            StoreError: If there is no such conversation.
        """
        row = self.db.execute(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", [conversation_id]
        ).fetchone()
        if row is None:
            raise StoreError(
                f"no conversation {conversation_id}; list them with `hearth conversations`"
            )
        return _conversation(row)

    def list(self, query: str | None = None) -> builtins.list[Conversation]:
        """List conversations, most recently updated first.

        Args:
            query: If given, keep only conversations whose title or any message contains it
                (case-insensitive for ASCII letters, as SQL ``LIKE``).
        """
        sql = f"SELECT {_CONVERSATION_COLUMNS} FROM conversations AS c"
        params: builtins.list[str] = []
        if query:
            pattern = "%" + _escape_like(query) + "%"
            sql += (
                " WHERE c.title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages AS m"
                " WHERE m.conversation_id = c.id AND m.content LIKE ? ESCAPE '\\')"
            )
            params = [pattern, pattern]
        sql += " ORDER BY c.updated_at DESC, c.created_at DESC, c.rowid DESC"
        return [_conversation(row) for row in self.db.execute(sql, params)]

    def free_title(self, title: str) -> str:
        """``title``, or ``title (2)``, ``(3)``… if a conversation already has it, so two
        conversations made from the same file (or two files of one name) read apart in the list."""
        taken = {row[0] for row in self.db.execute(
            "SELECT title FROM conversations WHERE title = ? OR (substr(title, 1, ?) = ? AND title LIKE '% (%)')",
            [title, len(title) + 2, title + " ("])}
        if title not in taken:
            return title
        return next(f"{title} ({n})" for n in range(2, len(taken) + 3) if f"{title} ({n})" not in taken)

    def rename(self, conversation_id: str, title: str) -> None:
        """Change a conversation's title (and bump its ``updated_at``)."""
        with write_transaction(self.db):
            cur = self.db.execute(
                "UPDATE conversations SET title = ?, updated_at = ? WHERE id = ?",
                [title, time.time(), conversation_id],
            )
            if cur.rowcount == 0:
                self.get(conversation_id)  # raises the helpful error

    def update_settings(self, conversation_id: str, changes: dict[str, Any]) -> Conversation:
        """Set the given keys of a conversation's settings (others are kept); returns it as stored.

        Raises:
            StoreError: If there is no such conversation.
        """
        with write_transaction(self.db):
            settings = {**self.get(conversation_id).settings, **changes}
            self.db.execute("UPDATE conversations SET settings = ? WHERE id = ?",
                            [to_json(settings), conversation_id])
        return self.get(conversation_id)

    def set_system_prompt(self, conversation_id: str, text: str) -> Conversation:
        """Change the system prompt its next messages are sent with (earlier answers stay as they
        are); returns it as stored.

        Raises:
            StoreError: If there is no such conversation.
        """
        with write_transaction(self.db):
            cur = self.db.execute("UPDATE conversations SET system_prompt = ? WHERE id = ?", [text, conversation_id])
            if cur.rowcount == 0:
                self.get(conversation_id)  # raises the helpful error
        return self.get(conversation_id)

    def delete(self, conversation_id: str) -> None:
        """Delete a conversation with all its messages, snapshots and snapshot parts (their files too,
        where no other conversation's snapshot shares them)."""
        snapshots = SnapshotStore(self.db)
        with write_transaction(self.db):
            state_files = snapshots.conversation_files(conversation_id)
            cur = self.db.execute("DELETE FROM conversations WHERE id = ?", [conversation_id])
            if cur.rowcount == 0:
                self.get(conversation_id)
        snapshots.remove_unnamed_files(state_files)

    def add_message(
        self,
        conversation_id: str,
        role: str,
        content: str,
        *,
        parent_id: str | None,
        status: str = "done",
        stats: dict[str, Any] | None = None,
        message_id: str | None = None,
        reasoning: str = "",
        tool_part: str = "",
    ) -> Message:
        """Append a message under ``parent_id`` and make it the conversation's leaf.

        Args:
            conversation_id: The conversation.
            role: ``"system"``, ``"user"``, ``"assistant"``, ...
            content: The text (may be empty while an answer is still generating).
            parent_id: The message it follows; ``None`` for a first message. Pass the parent of
                an existing message to add an alternative to it (edit or regenerate).
            status: One of :data:`model_store.message_rows.MESSAGE_STATUSES`.
            stats: Timings and counters (JSON-serialisable).
            message_id: Use this id instead of a new random one.
            reasoning: An answer's reasoning, kept apart from ``content``.
            tool_part: The calls an answer made, or the call a tool's result answers (engine.protocol.tools.tool_part).

        Returns:
            The stored message.

        Raises:
            StoreError: If the conversation or the parent does not exist, or the parent belongs
                to another conversation.
        """
        check_status(status)
        with write_transaction(self.db):
            self.get(conversation_id)
            if parent_id is not None and self.message(parent_id).conversation_id != conversation_id:
                raise StoreError(f"message {parent_id} is not in conversation {conversation_id}")
            msg = Message(
                message_id or uuid.uuid4().hex, conversation_id, parent_id, role, content, status,
                time.time(), dict(stats or {}), reasoning,
                identity=identity_after(self.db, parent_id, role, content, reasoning, tool_part), tool_part=tool_part,
            )
            self.db.execute(
                "INSERT INTO messages (id, conversation_id, parent_id, role, content, status,"
                " created_at, stats, reasoning, identity, tool_part) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [msg.id, conversation_id, parent_id, role, content, status, msg.created_at,
                 to_json(msg.stats), reasoning, msg.identity, tool_part],
            )
            self.db.execute(
                "UPDATE conversations SET leaf_id = ?, updated_at = ? WHERE id = ?",
                [msg.id, msg.created_at, conversation_id],
            )
        return msg

    def update_message(self, message_id: str, **changes: Any) -> Message:
        """Change a message's fields (:func:`model_store.message_rows.update_message`); the message as stored."""
        return update_message(self.db, message_id, **changes)

    def message(self, message_id: str) -> Message:
        """Return one message.

        Raises:
            StoreError: If there is no such message.
        """
        return read_message(self.db, message_id)

    def with_identity(self, identity: str) -> Message | None:
        """The newest message with this identity (:mod:`model_store.message_identity`) that is not
        still being written, if any."""
        row = self.db.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE identity = ? AND status != 'generating'"
            " ORDER BY created_at DESC, rowid DESC LIMIT 1", [identity]).fetchone()
        return message_from_row(row) if row is not None else None

    def branch(self, leaf_id: str) -> builtins.list[Message]:
        """Return the messages from the root down to ``leaf_id``, following ``parent_id``.

        Raises:
            StoreError: If ``leaf_id`` is not a message.
        """
        rows = ancestors(self.db, "messages", MESSAGE_COLUMNS, leaf_id)[::-1]  # root first
        if not rows:
            raise StoreError(f"no message {leaf_id}")
        return [message_from_row(row) for row in rows]

    def current_branch(self, conversation_id: str) -> builtins.list[Message]:
        """Return the branch the conversation shows (root to ``leaf_id``); ``[]`` if empty."""
        with read_transaction(self.db):
            leaf_id = self.get(conversation_id).leaf_id
            return self.branch(leaf_id) if leaf_id else []

    def children(self, message_id: str) -> builtins.list[Message]:
        """Return the messages that follow ``message_id``, oldest first (its alternatives)."""
        rows = self.db.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE parent_id = ?"
            " ORDER BY created_at, rowid", [message_id]
        )
        return [message_from_row(row) for row in rows]

    def siblings(self, message_id: str) -> builtins.list[Message]:
        """Return the alternatives at ``message_id``'s fork (itself included), oldest first."""
        message = self.message(message_id)
        rows = self.db.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND parent_id IS ?"
            " ORDER BY created_at, rowid", [message.conversation_id, message.parent_id]
        )
        return [message_from_row(row) for row in rows]

    def versions(self, conversation_id: str) -> dict[str | None, builtins.list[str]]:
        """Every fork of the conversation in one read: parent id (None: the start) -> the ids of its
        children, oldest first (:meth:`siblings` for each message at once)."""
        forks: dict[str | None, builtins.list[str]] = {}
        for message_id, parent_id in self.db.execute(
                "SELECT id, parent_id FROM messages WHERE conversation_id = ? ORDER BY created_at, rowid",
                [conversation_id]):
            forks.setdefault(parent_id, []).append(message_id)
        return forks

    def newest_leaf(self, message_id: str) -> str:
        """Follow the newest child from ``message_id`` down to a leaf; return the leaf's id.

        Switching to another version of a message shows the latest thing said after it.
        """
        row = self.db.execute(
            """WITH RECURSIVE down(id, depth) AS (
                   SELECT ?, 0
                   UNION ALL
                   SELECT (SELECT c.id FROM messages AS c WHERE c.parent_id = down.id
                           ORDER BY c.created_at DESC, c.rowid DESC LIMIT 1), depth + 1
                   FROM down WHERE EXISTS (SELECT 1 FROM messages AS c WHERE c.parent_id = down.id)
               )
               SELECT id FROM down ORDER BY depth DESC LIMIT 1""",
            [message_id],
        ).fetchone()
        self.message(message_id)  # raises the helpful error for an unknown id
        return row[0]

    def mark_unfinished_interrupted(self, keep: Iterable[str] = (), only: str | None = None) -> int:
        """Mark answers left ``generating`` by an app that stopped mid-answer as ``interrupted``.

        Their text (empty, or whatever was stored) is kept.

        Args:
            keep: Conversations whose answers are still being written (another writer holds them).
            only: Mark only in this conversation.

        Returns:
            How many messages were marked.
        """
        keep = builtins.list(keep)
        where = f"status = 'generating' AND conversation_id NOT IN ({', '.join('?' * len(keep))})"
        if only is not None:
            where, keep = where + " AND conversation_id = ?", [*keep, only]
        with write_transaction(self.db):
            return self.db.execute(f"UPDATE messages SET status = 'interrupted' WHERE {where}", keep).rowcount

    def empty(self) -> builtins.list[Conversation]:
        """Conversations without a single message (a first message was never stored)."""
        rows = self.db.execute(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations AS c"
            " WHERE NOT EXISTS (SELECT 1 FROM messages AS m WHERE m.conversation_id = c.id)"
        )
        return [_conversation(row) for row in rows]

    def set_leaf(self, conversation_id: str, message_id: str) -> None:
        """Show the branch ending at ``message_id``.

        Raises:
            StoreError: If the message does not exist or belongs to another conversation.
        """
        with write_transaction(self.db):
            if self.message(message_id).conversation_id != conversation_id:
                raise StoreError(f"message {message_id} is not in conversation {conversation_id}")
            self.db.execute(
                "UPDATE conversations SET leaf_id = ? WHERE id = ?", [message_id, conversation_id]
            )


def _conversation(row: tuple) -> Conversation:
    values = dict(zip(_CONVERSATION_COLUMNS.split(", "), row))
    return Conversation(**{**values, "settings": from_json(values["settings"])})


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
