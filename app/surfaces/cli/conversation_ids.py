"""Conversation and message ids as a user types them: the whole id, or its first characters, as git
takes a commit's. An id is 32 hexadecimal characters; ``hearth send --conversation 3f9a`` is enough
when no other conversation's id starts so. A prefix that matches several, or none, is refused in one
line that says what to do.

An empty or blank id names nothing (every id starts with the empty prefix): ``--conversation ''``
and ``--reply-to ' '`` are refused by the sub-command's parser, in its usage line, before anything
opens (:func:`conversation_flag`, :func:`message_flag`), and the finders refuse one too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from app.surfaces.cli.user_error import UserError

if TYPE_CHECKING:  # the parser imports this module: the store only when a command runs
    from model_store.conversations import Conversation, ConversationStore, Message

LIST_THEM = "`hearth conversations` lists them"
WHERE_MESSAGES = "`hearth send --json` prints each answer's message_id"
SHORT_ID = 8  # how many characters of an id the commands show when they suggest one


def _empty_refusal(what: str, where: str) -> str:
    return f"an empty id names no {what}; give its id or the id's first characters ({where})"


def _typed_id(what: str, where: str, then: str = "") -> Callable[[str], str]:
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(_empty_refusal(what, where) + then)
        return text

    parse.__name__ = f"{what} id"  # argparse's "invalid <name> value" names it so
    return parse


conversation_flag = _typed_id("conversation", LIST_THEM, ", or --new TITLE to start one")  # --conversation's type
message_flag = _typed_id("message", WHERE_MESSAGES)  # --reply-to's type


def short_id(full_id: str) -> str:
    return full_id[:SHORT_ID]


def find_conversation(store: ConversationStore, typed: str) -> Conversation:
    """The conversation whose id is ``typed`` or starts with it.

    Raises:
        UserError: If none does, several do, or ``typed`` is blank (``kind``: ``not_found``,
            ``ambiguous_id`` or ``empty_id``).
    """
    _refuse_blank(typed, "conversation", LIST_THEM)
    found = _ids_starting(store, "SELECT id FROM conversations WHERE {match}", [], typed)
    return store.get(_only(found, typed, "conversation", where=LIST_THEM))


def find_message(store: ConversationStore, conversation_id: str, typed: str) -> Message:
    """The message of the conversation whose id is ``typed`` or starts with it (as :func:`find_conversation`)."""
    _refuse_blank(typed, "message", WHERE_MESSAGES)
    found = _ids_starting(store, "SELECT id FROM messages WHERE conversation_id = ? AND {match}",
                          [conversation_id], typed)
    return store.message(_only(found, typed, "message", among=" in this conversation", where=WHERE_MESSAGES))


def _ids_starting(store: ConversationStore, sql: str, params: list[str], typed: str) -> list[str]:
    typed = typed.strip()
    exact = store.db.execute(sql.format(match="id = ?"), [*params, typed]).fetchall()
    if exact:  # a whole id always names its own row
        return [exact[0][0]]
    rows = store.db.execute(sql.format(match="lower(substr(id, 1, ?)) = lower(?)"), [*params, len(typed), typed]).fetchall()
    return [row[0] for row in rows]


def _refuse_blank(typed: str, what: str, where: str) -> None:
    if not typed.strip():
        raise UserError(_empty_refusal(what, where), kind="empty_id")


def _only(found: list[str], typed: str, what: str, *, where: str, among: str = "") -> str:
    if len(found) == 1:
        return found[0]
    if not found:
        raise UserError(f"no {what} id{among} starts with '{typed.strip()}'; {where}", kind="not_found")
    raise UserError(f"'{typed.strip()}' is the start of {len(found)} {what} ids; give more of its characters "
                    f"({where})", kind="ambiguous_id")
