"""What a conversation's state should hold under a model's real chat template, computed in the test
process from the template and tokenizer alone, to check what the worker did against it."""

from __future__ import annotations

import os
from pathlib import Path

from engine.backends.llama_cpp import LlamaModel, init_backend
from engine.templates.chat_template import ChatMessage, RenderOptions
from engine.templates.prompts import render_for, rendered_tokens
from model_store.conversations import ConversationStore, Message
from model_store.snapshots import SnapshotRecord, SnapshotStore

QUESTIONS = ["Hello! Who are you?", "Tell me about rivers.", "Why is the sky blue?"]


class TemplateOracle:
    """A model's template and tokenizer, loaded in the test process."""

    def __init__(self, path: Path, now: float) -> None:
        init_backend()
        self.model = LlamaModel(path)
        self.control = set(self.model.control_tokens().values())
        self.options = RenderOptions(now=now)

    def close(self) -> None:
        self.model.close()

    def tokens(self, messages: list[Message], *, answer: bool) -> list[int]:
        chat = [ChatMessage(m.role, m.content, m.reasoning) for m in messages]
        return rendered_tokens(self.model, render_for(self.model, chat, answer=answer, options=self.options), bos=True)

    def question_tokens(self, messages: list[Message]) -> list[int]:
        """What a question's snapshot holds: the conversation up to the question (``messages[-1]``)
        and as much of the answer's cue as the template writes again before an answer in history."""
        chat = [ChatMessage(m.role, m.content, m.reasoning) for m in messages]
        cued = render_for(self.model, chat, answer=True, options=self.options)
        closed = render_for(self.model, chat, answer=False, options=self.options).text
        later = render_for(self.model, [*chat, ChatMessage("assistant", "Some answer"), ChatMessage("user", "Next")],
                           answer=False, options=self.options).text
        framing = later[len(closed):].split("Some answer")[0]
        kept = os.path.commonprefix([framing, cued.text[len(closed):]])
        return rendered_tokens(self.model, cued.prefix(len(closed) + len(kept)), bos=True)

    def text(self, messages: list[Message], *, answer: bool) -> str:
        chat = [ChatMessage(m.role, m.content, m.reasoning) for m in messages]
        return render_for(self.model, chat, answer=answer, options=self.options).text

    def most_read(self, branch: list[Message]) -> int:
        """The most a turn answering ``branch[-1]`` may read: the previous answer as the template writes
        it now, the new message and the framing (everything after the previous question's end)."""
        previous_question = max(i for i, m in enumerate(branch[:-1]) if m.role == "user")
        return len(self.tokens(branch, answer=True)) - len(self.tokens(branch[:previous_question + 1], answer=False))

    def differences(self, held: list[int], expected: list[int]) -> list[tuple[list[int], list[int]]]:
        """Where a state's tokens differ from the template's rendering other than by spelling: an
        answer's own token ids are kept (engine.state.snapshot_cursor) and may spell its text with other
        pieces than the tokenizer would, but never other bytes, and never with a control token."""
        import difflib

        found = []
        for tag, a, b, c, d in difflib.SequenceMatcher(None, held, expected, autojunk=False).get_opcodes():
            mine, theirs = held[a:b], expected[c:d]
            if tag == "equal":
                continue
            plain = not (set(mine) | set(theirs)) & self.control
            if not plain or b"".join(map(self.model.piece, mine)) != b"".join(map(self.model.piece, theirs)):
                found.append((mine, theirs))
        return found

    def detokenize(self, tokens: list[int]) -> str:
        pieces = (self.model.token_text(t).encode() if t in self.control else self.model.piece(t) for t in tokens)
        return b"".join(pieces).decode("utf-8", errors="replace")


def chain_tokens(snapshots: SnapshotStore, record: SnapshotRecord) -> list[int]:
    """Every token the snapshot's state holds, root first, as its token records say."""
    import numpy as np

    tokens: list[int] = []
    for link in reversed(snapshots.chain(record.id)):
        for part in ("prefill_tokens", "decoded_tokens"):
            tokens += np.frombuffer(bytes(snapshots.read_part(link.id, part)), dtype="<i4").tolist()
    return tokens


def question_snapshot(store: ConversationStore, message: Message) -> SnapshotRecord | None:
    found = SnapshotStore(store.db).for_message(message.id)
    return found[0] if found else None


def held_text(model_path: Path, snapshots: SnapshotStore, record: SnapshotRecord) -> str:
    """The text the snapshot's state holds, spelled from its token records (the store keeps only the
    text's length and digest, which it must match)."""
    oracle = TemplateOracle(model_path, now=0)
    try:
        text = oracle.detokenize(chain_tokens(snapshots, record))
    finally:
        oracle.close()
    assert record.holds(text), "the snapshot's tokens do not spell the text it was saved with"
    return text
