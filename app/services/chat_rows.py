"""What the chat view shows of a conversation, read on the store thread: its branch as rows.

Each row is a message on the conversation's current branch, with the other versions of it (edits
and regenerations are siblings in the store's message tree: the view offers "‹ 2/3 ›") and the
document it holds, if it is one. :func:`load_transcript` reads them in a few queries whatever the
conversation's length; it runs on the store thread (a turn's store job ends with it), and the
window's item model (:mod:`ui.item_models.messages`) shows the rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.services.context_cut import cut_totals
from model_store.conversations import ConversationStore, Message
from model_store.db import read_transaction
from model_store.documents import Document, DocumentStore


@dataclass
class MessageRow:
    message: Message
    sibling_ids: list[str] = field(default_factory=list)  # every version at this fork, oldest first
    document: Document | None = None  # the document this message holds, if it is one
    left_out: int = 0  # an answer whose turn was cut: the messages the model no longer reads, in all

    @property
    def version(self) -> int:
        """1-based position among its versions."""
        return self.sibling_ids.index(self.message.id) + 1 if self.message.id in self.sibling_ids else 1

    @property
    def versions(self) -> int:
        return max(1, len(self.sibling_ids))


def load_transcript(store: ConversationStore, conversation_id: str) -> list[MessageRow]:
    """Read the current branch with each message's versions and documents, in a few reads whatever
    the conversation's length."""
    with read_transaction(store.db):
        branch, versions = store.current_branch(conversation_id), store.versions(conversation_id)
        documents = {d.message_id: d for d in DocumentStore(store.db).for_conversation(conversation_id)}
    totals = cut_totals(branch, [d.message_id for d in documents.values()])
    return [MessageRow(m, versions.get(m.parent_id, [m.id]), documents.get(m.id) if m.role == "user" else None, n)
            for m, n in zip(branch, totals)]
