"""Conversation and message ids as a user types them: the whole id, or its first characters, as git
takes a commit's. An id is 32 hexadecimal characters; ``hearth send --conversation 3f9a`` is enough
when no other conversation's id starts so. A prefix that matches several, or none, is refused in one
line that says what to do."""

from __future__ import annotations

from app.cli.user_error import UserError
from model_store.conversations import Conversation, ConversationStore, Message

LIST_THEM = "`hearth conversations` lists them"
SHORT_ID = 8  # how many characters of an id the commands show when they suggest one


def short_id(full_id: str) -> str:
    return full_id[:SHORT_ID]


def find_conversation(store: ConversationStore, typed: str) -> Conversation:
    """The conversation whose id is ``typed`` or starts with it.

    Raises:
        UserError: If none does, or several do (``kind``: ``not_found`` or ``ambiguous_id``).
    """
    found = _ids_starting(store, "SELECT id FROM conversations WHERE {match}", [], typed)
    return store.get(_only(found, typed, "conversation", where=LIST_THEM))


def find_message(store: ConversationStore, conversation_id: str, typed: str) -> Message:
    """The message of the conversation whose id is ``typed`` or starts with it (as :func:`find_conversation`)."""
    found = _ids_starting(store, "SELECT id FROM messages WHERE conversation_id = ? AND {match}",
                          [conversation_id], typed)
    return store.message(_only(found, typed, "message", among=" in this conversation",
                               where="`hearth send --json` prints each answer's message_id"))


def _ids_starting(store: ConversationStore, sql: str, params: list[str], typed: str) -> list[str]:
    typed = typed.strip()
    if not typed:
        return []
    exact = store.db.execute(sql.format(match="id = ?"), [*params, typed]).fetchall()
    if exact:  # a whole id always names its own row
        return [exact[0][0]]
    rows = store.db.execute(sql.format(match="lower(substr(id, 1, ?)) = lower(?)"), [*params, len(typed), typed]).fetchall()
    return [row[0] for row in rows]


def _only(found: list[str], typed: str, what: str, *, where: str, among: str = "") -> str:
    if len(found) == 1:
        return found[0]
    if not found:
        raise UserError(f"no {what} id{among} starts with '{typed.strip()}'; {where}", kind="not_found")
    raise UserError(f"'{typed.strip()}' is the start of {len(found)} {what} ids; give more of its characters "
                    f"({where})", kind="ambiguous_id")
