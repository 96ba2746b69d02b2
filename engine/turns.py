"""Conversation turns on top of snapshots: where the state starts, what is read, what is saved.

The token history is the source of truth, not a re-tokenized transcript: a turn starts from the
deepest snapshot on the branch whose text is a prefix of the newly rendered conversation, and only
the rest of the text is tokenized and read. The live state is reused when it already is that
snapshot, so a conversation continued after a restart reads exactly the tokens it would have read
without the restart, and produces exactly the same answer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from engine import protocol as p
from engine.chat_template import ChatMessage
from engine.generation import Generation
from engine.prompts import render_for, rendered_tokens
from engine.session import ModelSession
from engine.state.seq_state import StateFormatError
from engine.state.snapshot_keeper import Segment, SnapshotKeeper, SnapshotUnusable, model_fingerprint
from engine.worker_store import WorkerStore
from model_store.db import StoreError
from model_store.snapshots import SnapshotRecord


@dataclass
class TurnStart:
    base: SnapshotRecord | None  # the snapshot the state stands on; None: read from scratch
    new_tokens: list[int]
    text_before: str
    new_text: str
    restored_tokens: int = 0
    replayed_tokens: int = 0
    notes: list[str] = field(default_factory=list)


def snapshot_report(start: TurnStart, saved: SnapshotRecord | None = None, notes: Iterable[str] = ()) -> p.SnapshotReport:
    """What a turn did with snapshots: what it stood on, what it read, what it saved (the one place
    this report is built, for an answer, a document read and an opened conversation alike)."""
    return p.SnapshotReport(restored=start.base is not None, restored_tokens=start.restored_tokens,
                            prefilled_tokens=len(start.new_tokens) + start.replayed_tokens,
                            notes=[*start.notes, *notes], snapshot_id=saved.id if saved is not None else None,
                            saved_bytes=sum(saved.part_bytes.values()) if saved is not None else 0)


class SnapshotCursor:
    """Where the live sequence stands among a conversation's snapshots: it moves the state onto the
    deepest usable snapshot of a branch (restoring or reusing it), and saves the state at a turn's end."""

    def __init__(self, keeper: SnapshotKeeper, session: ModelSession) -> None:
        self.keeper = keeper
        self.session = session
        self.live: SnapshotRecord | None = None  # the snapshot the live state equals, if any

    def forget_live(self) -> None:
        self.live = None

    def begin(self, messages: list[p.ChatTurn], *, answer: bool = True) -> TurnStart:
        """Stand on the deepest usable snapshot of this branch, or re-read the whole conversation.

        Only the deepest snapshot whose text the conversation still starts with is tried: falling
        back to an older one would re-tokenize later turns from their text, which need not give the
        tokens the model actually read. When it cannot be used, the conversation is read again.
        ``answer=False`` reads the messages without the assistant's cue (a document being loaded).
        """
        model = self.session.model
        target = render_for(model, [ChatMessage(m.role, m.content) for m in messages], answer=answer)
        notes: list[str] = []
        snapshot = self._deepest_snapshot(messages, target.text, notes)
        if snapshot is not None and self._fits(snapshot):  # else: the whole, longer than the context, grows it
            try:
                restored, replayed = self._move_to(snapshot, notes)
            except SnapshotUnusable as exc:
                notes.append(f"the saved state was refused ({exc}); the conversation was read again")
            else:
                rest = target.suffix(len(snapshot.text))
                tokens = rendered_tokens(model, rest, bos=False)
                return TurnStart(snapshot, tokens, snapshot.text, rest.text, restored, replayed, notes)
        self.live = None
        return TurnStart(None, rendered_tokens(model, target, bos=True), "", target.text, notes=notes)

    def open(self, messages: list[p.ChatTurn]) -> TurnStart:
        """Restore the snapshot of the newest message that has one, before anything new is said."""
        model = self.session.model
        chat = [ChatMessage(m.role, m.content) for m in messages]
        target = render_for(model, chat, answer=False).text if messages else ""
        notes: list[str] = []
        snapshot = self._deepest_snapshot(messages, target, notes) if messages else None
        if snapshot is not None and not self._fits(snapshot):
            notes.append("the conversation is longer than the context; the context grows when you send")
            return TurnStart(None, [], "", "", notes=notes)
        if snapshot is None:
            return TurnStart(None, [], "", "", notes=notes)
        try:
            restored, replayed = self._move_to(snapshot, notes)
        except SnapshotUnusable as exc:
            notes.append(f"the saved state was refused ({exc}); it will be read again")
            return TurnStart(None, [], "", "", notes=notes)
        return TurnStart(snapshot, [], snapshot.text, "", restored, replayed, notes)

    def _fits(self, snapshot: SnapshotRecord) -> bool:
        """A snapshot can stand in this context (with room for the next token)."""
        return snapshot.n_tokens + 1 < self.session.n_ctx

    def _deepest_snapshot(self, messages: list[p.ChatTurn], target: str, notes: list[str]) -> SnapshotRecord | None:
        store = self.keeper.store
        for message in reversed(messages):
            if message.id is None:
                continue
            snapshot = store.find(message.id, self.keeper.fingerprint)
            if snapshot is not None and target.startswith(snapshot.text):
                return snapshot
            if snapshot is None and store.for_message(message.id):
                notes.append("the saved state was made by another model file or other settings; "
                             "the conversation was read again")
                return None
        return None

    def _move_to(self, snapshot: SnapshotRecord, notes: list[str]) -> tuple[int, int]:
        """(tokens restored without reading, tokens replayed) to make the state equal ``snapshot``."""
        if self.live is not None and self.live.id == snapshot.id and self.session.n_past == snapshot.n_tokens:
            return snapshot.n_tokens, 0
        self.live = None
        replayed = self.keeper.restore(snapshot, notes)
        self.live = snapshot
        return snapshot.n_tokens - replayed, replayed

    def finish(self, start: TurnStart, run: Generation, conversation_id: str, message_id: str) -> SnapshotRecord | None:
        """Save the state at the turn's end under ``message_id``: after the messages when the run
        only read them, else after the answer (its last sampled token decoded first, so the state
        ends exactly there). A run cancelled while reading saves nothing: the state is half a prompt."""
        self.live = None
        session, model = self.session, self.session.model
        if run.prefill_chunks is None:
            return None
        if not run.writes:
            return self._save(start, run.prefill_chunks, [], start.text_before + start.new_text, conversation_id,
                              message_id)
        if run.pending_token is None or session.n_past + 1 >= session.n_ctx:
            return None
        pending = run.pending_token
        session.feed([pending])
        ended_on_eog = model.is_eog(pending)
        decoded = run.token_ids + ([pending] if ended_on_eog else [])
        written = b"".join(model.piece(t) for t in run.token_ids).decode("utf-8", errors="replace")
        text = start.text_before + start.new_text + written + (model.token_text(pending) if ended_on_eog else "")
        return self._save(start, run.prefill_chunks or [], decoded, text, conversation_id, message_id)

    def save_end(self, save: Callable[[], SnapshotRecord | None], budget_bytes: int,
                 what: str) -> tuple[SnapshotRecord | None, list[str]]:
        """Run ``save`` (:meth:`finish`), then keep the store within
        ``budget_bytes``. A save that fails is a note (``what`` names it), never a failed turn: the
        answer or the reading stands, and the next turn reads again what the snapshot would have held."""
        try:
            record = save()
        except (StateFormatError, StoreError, sqlite3.Error) as exc:
            self.forget_live()
            return None, [f"{what} could not be saved ({exc})"]
        if record is not None:
            self.keeper.store.evict(budget_bytes)
        return record, []

    def _save(self, start: TurnStart, chunks: list[int], decoded: list[int], text: str, conversation_id: str,
              message_id: str) -> SnapshotRecord:
        record = self.keeper.save(conversation_id=conversation_id, message_id=message_id, parent=start.base,
                                  segment=Segment(start.new_tokens, decoded, tuple(chunks)), text=text)
        self.live = record
        return record


def open_turns(store: WorkerStore, session: ModelSession) -> SnapshotCursor:
    """The snapshot cursor for ``session``, on the worker's connection to the conversation database."""
    fingerprint = model_fingerprint(store.file_digest(Path(session.facts.path)), session.context.settings)
    return SnapshotCursor(SnapshotKeeper(store.snapshots(), session, fingerprint), session)
