"""Conversation turns on top of snapshots: where the state starts, what is read, what is saved.

The token history is the source of truth, not a re-tokenized transcript: a turn starts from the
deepest snapshot on the branch whose text is a prefix of the newly rendered conversation, and only
the rest of the text is tokenized and read. The live state is reused when it already is that
snapshot, so a conversation continued after a restart reads exactly the tokens it would have read
without the restart, and produces exactly the same answer.

Templates do not always render an answer again as it was written: Qwen3.5's opens every answer
with ``<think>`` and writes earlier answers without their reasoning; others trim it. Then the
state after the answer holds text the next rendering does not, and cannot be used. So when a turn
ends, the template is asked how it will write the conversation once another message follows
(:meth:`SnapshotCursor._answer_reusable`): if the answer's state starts that, it is saved as ever;
if not, the state where the question ended is saved instead (a *question snapshot*, under the
question's message, taken in memory while the prompt was read), and the next turn stands on it
and reads the answer as the template writes it now, the new message and the framing, never the
whole conversation. The answer's own token ids are kept (fewer tokens read than a re-tokenized
transcript), so long as they spell its stored text byte for byte.

The question snapshot ends where the template's writing of this turn and of the next part: after
as much of the answer's cue as the template writes again before that answer once it is history
(:meth:`SnapshotCursor._kept_cue`; Qwen3.5 cues ``<|im_start|>assistant\n<think>\n`` and writes
history answers after ``<|im_start|>assistant\n``). Only the rest of the cue is read apart, a
second decode that costs about what as many single tokens do (docs/performance.md, "Measurements behind the design";
``tests/bench/bench_small_batches.py``). A
template that writes the whole cue again (ChatML) needs no second decode: the state is kept
after the prompt. A turn keeps a question snapshot only while the template is not known to write
this model's answers back as they were read (``_written_back``, learnt from the last answer): it
would not be kept otherwise. A wrong guess costs speed once, never a token: that turn's next turn
reads the answer again from the snapshot before it.

A request always reads at least one token: the logits of the prompt's last token are what the
first answer token is sampled from, and a saved state does not keep them. A question snapshot
that ends after the whole cue holds the whole prompt of a regenerated answer (the same question
rendered again), so :meth:`SnapshotCursor.begin` never stands on a snapshot that leaves nothing to
read: it stands on the deepest one before it, which is where the question's first answer stood,
and reads the same tokens in the same parts, so the new answer at temperature 0 is that answer
token for token (rewinding such a state by one token would read its last token alone, which is
not the same arithmetic, and a recurrent state cannot be rewound at all).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from engine import protocol as p
from engine.templates.chat_template import ChatMessage, ChatTemplateError, RenderedChat, RenderOptions
from engine.decoding.generation import Generation
from engine.templates.prompts import render_for, rendered_tokens
from engine.templates.request_chat import chat_messages, render_options
from engine.decoding.reasoning import ReasoningStart, reasoning_start
from engine.models.session import ModelSession
from engine.state.seq_state import StateFormatError
from engine.state.snapshot_keeper import (Captured, Checkpoint, HeldState, Segment, SnapshotKeeper, SnapshotUnusable,
                                          model_fingerprint)
from engine.requests.worker_store import WorkerStore
from model_store.db import StoreError
from model_store.message_identity import ROOT, message_identity
from model_store.snapshots import SnapshotRecord


NEXT_MESSAGE = ChatMessage("user", "?")  # stands for the message that will follow an answer


def next_message(answer: ChatMessage) -> ChatMessage:
    """What will follow ``answer``: a question, or for an answer that called tools, the first call's
    result (templates write an answer differently before each: Qwen3.5 keeps its reasoning before a result)."""
    return ChatMessage("tool", "?", tool_call_id=answer.tool_calls[0].id) if answer.tool_calls else NEXT_MESSAGE
PROBE_ANSWER = "Hearth probe answer"  # stands for an answer, to see how the template frames it as history


@dataclass(frozen=True)
class Cue:
    """What the template writes after a conversation to cue the answer, and how much of it it
    writes again before that answer once it is history (a question snapshot keeps that much)."""

    text: str
    kept: str = ""


@dataclass
class Question:
    """Where the question ends among a turn's new tokens, and the state there once it is read."""

    message_id: str
    identity: str  # of the branch up to the question (model_store.message_identity)
    n_new: int  # of the turn's new tokens, how many come before the cue's part read apart (all: none is)
    text: str  # the new text up to there
    chunks: list[int] | None = None  # how those tokens were read (set at the checkpoint)
    point: Checkpoint | None = None
    saved: SnapshotRecord | None = None  # its snapshot, once saved


@dataclass
class ReadingStart:
    base: SnapshotRecord | None  # the snapshot the state stands on; None: read from scratch
    new_tokens: list[int]
    text_before: str
    new_text: str
    restored_tokens: int = 0
    replayed_tokens: int = 0
    notes: list[str] = field(default_factory=list)
    question: Question | None = None  # a question snapshot this turn can save (see the module's docstring)
    reasoning: ReasoningStart = "detect"  # whether the answer starts inside a reasoning block
    messages: list[ChatMessage] = field(default_factory=list)
    options: RenderOptions = RenderOptions()
    identity: str = ROOT  # the identity of the branch's last stored message (see stored_identities)
    answers: bool = True  # the run writes an answer after the messages (else it only reads them)


def snapshot_report(start: ReadingStart, saved: SnapshotRecord | None = None, notes: Iterable[str] = ()) -> p.SnapshotReport:
    """What a turn did with snapshots: what it stood on, what it read, what it saved (the one place
    this report is built, for an answer, a document read and an opened conversation alike)."""
    question = start.question.saved if start.question is not None else None
    saved_bytes = sum(sum(r.part_bytes.values()) for r in (saved, question) if r is not None)
    return p.SnapshotReport(restored=start.base is not None, restored_tokens=start.restored_tokens,
                            prefilled_tokens=len(start.new_tokens) + start.replayed_tokens,
                            notes=[*start.notes, *notes], snapshot_id=saved.id if saved is not None else None,
                            saved_bytes=saved_bytes)


class SnapshotCursor:
    """Where the live sequence stands among a conversation's snapshots: it moves the state onto the
    deepest usable snapshot of a branch (restoring or reusing it), and saves the state at a turn's end."""

    def __init__(self, keeper: SnapshotKeeper, session: ModelSession) -> None:
        self.keeper = keeper
        self.session = session
        self.live: SnapshotRecord | None = None  # the snapshot the live state equals, if any
        # Per thinking switch: whether the template wrote this model's last answer back as it was
        # read. Then the next turn reads its prompt in one part (a question snapshot would not be
        # kept); unknown or not, in two, keeping the question's state at the checkpoint.
        self._written_back: dict[bool | None, bool] = {}
        self._cues: dict[bool | None, Cue] = {}  # per thinking switch: the answer's cue the template wrote last
        self._held: HeldState | None = None  # the last question snapshot, while the live state still holds it

    def forget_live(self) -> None:
        self.live = None

    def begin(self, messages: list[p.WireMessage], *, answer: bool = True,
              template: p.TemplateSpec = p.TemplateSpec()) -> ReadingStart:
        """Stand on the deepest usable snapshot of this branch, or re-read the whole conversation.

        The deepest snapshot whose text the new rendering still starts with is used (an answer the
        template writes differently now falls back to its question's snapshot). When it cannot be
        used, the conversation is read again. ``answer=False`` reads the messages without the
        assistant's cue (a document being loaded).
        """
        model = self.session.model
        chat = chat_messages(messages)
        options = render_options(template)
        target = render_for(model, chat, answer=answer, options=options)
        notes: list[str] = []
        identities = stored_identities(messages)
        snapshot = self._deepest_snapshot(messages, identities, target.text, notes, leave_unread=True)
        start = None
        if snapshot is not None and self._fits(snapshot):  # else: the whole, longer than the context, grows it
            try:
                restored, replayed = self._move_to(snapshot, notes)
            except SnapshotUnusable as exc:
                notes.append(f"the saved state was refused ({exc}); the conversation was read again")
            else:
                rest = target.suffix(snapshot.text_chars)
                tokens = rendered_tokens(model, rest, bos=False)
                if tokens:  # text that spells no token leaves nothing to read either: read it all again
                    start = ReadingStart(snapshot, tokens, target.text[:snapshot.text_chars], rest.text, restored,
                                      replayed, notes)
        if start is None:
            self.live = None
            start = ReadingStart(None, rendered_tokens(model, target, bos=True), "", target.text, notes=notes)
        start.messages, start.options, start.answers = chat, options, answer
        start.identity = next((i for i in reversed(identities) if i is not None), ROOT)
        if answer:
            closed = self._closed(chat, options, target)
            start.reasoning = reasoning_start(target.text[len(closed.text):]) if target.text.startswith(
                closed.text) else "detect"
            if not self._written_back.get(options.enable_thinking, False):
                start.question = self._question(messages[-1].id, identities[-1], start, target, closed)
        return start

    def _closed(self, chat: list[ChatMessage], options: RenderOptions, target: RenderedChat) -> RenderedChat:
        """The conversation as the template writes it without the answer's cue. The cue is the same
        after any conversation in every template seen, so the one learnt last is cut off ``target``
        instead of rendering it all again (tens of ms for Qwen3.5's template at 5k tokens); it is
        learnt again whenever ``target`` does not end with it. A wrong cut costs no token: the
        question's tokens are checked against the prompt's, and a snapshot is stood on only where
        the next rendering starts with its text."""
        cue = self._cues.get(options.enable_thinking)
        if cue and target.text.endswith(cue.text):
            return target.prefix(len(target.text) - len(cue.text))
        closed = render_for(self.session.model, chat, answer=False, options=options)
        if target.text.startswith(closed.text):
            text = target.text[len(closed.text):]
            self._cues[options.enable_thinking] = Cue(text, self._kept_cue(chat, options, closed.text, text))
        return closed

    def _kept_cue(self, chat: list[ChatMessage], options: RenderOptions, closed: str, cue: str) -> str:
        """How much of ``cue`` the template writes again before the answer once another message
        follows it: the framing before a stand-in answer, as far as it agrees with the cue (one more
        rendering, when a cue is learnt). "" when the template will not say."""
        try:
            later = render_for(self.session.model, [*chat, ChatMessage("assistant", PROBE_ANSWER), NEXT_MESSAGE],
                               answer=False, options=options).text
        except ChatTemplateError:
            return ""
        if not later.startswith(closed):
            return ""
        framing, found, _ = later[len(closed):].partition(PROBE_ANSWER)
        return os.path.commonprefix([framing, cue]) if found else ""

    def _question(self, message_id: str | None, identity: str | None, start: ReadingStart, target: RenderedChat,
                  closed: RenderedChat) -> Question | None:
        """Where the question's snapshot ends among the turn's new tokens, if the state there can be
        kept: after the question and the part of the cue an answer in history keeps, or else right
        after the question; the rendering without the cue starts the one with it, and reading the
        prompt in two parts there gives the same tokens as in one (the cue's parts start at control
        tokens in every template seen)."""
        model, before = self.session.model, len(start.text_before)
        if message_id is None or identity is None or not target.text.startswith(closed.text):
            return None
        cue = self._cues.get(start.options.enable_thinking)
        kept = cue.kept if cue is not None and target.text.startswith(cue.kept, len(closed.text)) else ""
        for end in dict.fromkeys((len(closed.text) + len(kept), len(closed.text))):
            if end <= before:
                continue
            question = rendered_tokens(model, target.prefix(end).suffix(before), bos=start.base is None)
            rest = rendered_tokens(model, target.suffix(end), bos=False) if end < len(target.text) else []
            if question + rest == start.new_tokens:
                return Question(message_id, identity, len(question), target.text[before:end])
        return None

    def mark_question(self, start: ReadingStart, chunks: list[int]) -> None:
        """The turn has read its question (the generation's checkpoint): keep that state's recurrent part."""
        if start.question is not None:
            start.question.chunks = chunks
            start.question.point = Checkpoint(self.session.n_past, self.keeper.capture_recurrent())

    def open(self, messages: list[p.WireMessage], template: p.TemplateSpec = p.TemplateSpec()) -> ReadingStart:
        """Restore the snapshot the next message will stand on, before anything new is said: the
        deepest one whose text starts the conversation as the template will write it then (with a
        message after the last answer: a template may write an answer differently once it is history)."""
        model = self.session.model
        chat = chat_messages(messages)
        options = render_options(template)
        if chat and chat[-1].role == "assistant":
            chat.append(NEXT_MESSAGE)
        target = render_for(model, chat, answer=False, options=options).text if messages else ""
        notes: list[str] = []
        snapshot = self._deepest_snapshot(messages, stored_identities(messages), target, notes) if messages else None
        if snapshot is not None and not self._fits(snapshot):
            notes.append("the conversation is longer than the context; the context grows when you send")
            return ReadingStart(None, [], "", "", notes=notes)
        if snapshot is None:
            return ReadingStart(None, [], "", "", notes=notes)
        try:
            restored, replayed = self._move_to(snapshot, notes)
        except SnapshotUnusable as exc:
            notes.append(f"the saved state was refused ({exc}); it will be read again")
            return ReadingStart(None, [], "", "", notes=notes)
        return ReadingStart(snapshot, [], target[:snapshot.text_chars], "", restored, replayed, notes)

    def _fits(self, snapshot: SnapshotRecord) -> bool:
        """A snapshot can stand in this context (with room for the next token)."""
        return snapshot.n_tokens + 1 < self.session.n_ctx

    def _deepest_snapshot(self, messages: list[p.WireMessage], identities: list[str | None], target: str,
                          notes: list[str], *, leave_unread: bool = False) -> SnapshotRecord | None:
        """The deepest snapshot of the branch whose text starts ``target``; with ``leave_unread``, one
        that leaves some of ``target`` to read (see the module's docstring), the one before it otherwise.
        Each is found by the identity of the branch it ends with; the text check is this one."""
        store, fingerprint = self.keeper.store, self.keeper.fingerprint
        for identity in reversed(identities):
            if identity is None:
                continue
            snapshot = store.find(identity, fingerprint)
            if snapshot is not None and snapshot.starts(target):
                if leave_unread and snapshot.text_chars >= len(target):
                    continue
                return snapshot
            if snapshot is None and store.made_for_other_models(identity, fingerprint):
                notes.append("the saved state was made by another model file or other settings; "
                             "the conversation was read again")
                return None
        return None

    def _move_to(self, snapshot: SnapshotRecord, notes: list[str]) -> tuple[int, int]:
        """(tokens restored without reading, tokens replayed) to make the state equal ``snapshot``."""
        if self.live is not None and self.live.id == snapshot.id and self.session.n_past == snapshot.n_tokens:
            return snapshot.n_tokens, 0
        self.live = None
        if self._held is not None and self.keeper.rewind(self._held, snapshot):
            self.live = snapshot
            return snapshot.n_tokens, 0
        replayed = self.keeper.restore(snapshot, notes)
        self.live = snapshot
        return snapshot.n_tokens - replayed, replayed

    def finish(self, start: ReadingStart, run: Generation, conversation_id: str, message_id: str) -> SnapshotRecord | None:
        """Save the state at the turn's end under ``message_id``: after the messages when the run
        only read them, else after the answer (its last sampled token decoded first, so the state
        ends exactly there) when the next turn can stand on it, or else the question's snapshot
        instead. A run cancelled before its question was read saves nothing: the state is half a
        prompt. Returns the answer's snapshot (None when there is none)."""
        self.live = None
        session, model = self.session, self.session.model
        question = start.question if start.question is not None and start.question.point is not None else None
        if run.prefill_chunks is None and question is None:
            return None
        identity = answer_identity(start, run) if start.answers else start.identity
        if not run.writes:
            return self._save(start, run.prefill_chunks, [], start.text_before + start.new_text, conversation_id,
                              message_id, identity)
        answer_ends = run.prefill_chunks is not None and run.pending_token is not None \
            and session.n_past + 1 < session.n_ctx
        if not answer_ends and question is None:
            return None
        written, spelled = "", False
        if answer_ends:
            pending = run.pending_token
            session.feed([pending])
            ended_on_eog = model.is_eog(pending)
            raw = b"".join(model.piece(t) for t in run.token_ids)
            written = raw.decode("utf-8", errors="replace")
            # Bytes that are no character (a random or cut-off answer's) are stored as U+FFFD: the
            # state would hold what the stored text does not say, so the next turn reads it again.
            spelled = written.encode() == raw
            written += model.token_text(pending) if ended_on_eog else ""
        reusable = answer_ends and spelled and self._answer_reusable(start, run, written)
        if answer_ends and spelled:
            self._written_back[start.options.enable_thinking] = reusable
        captured = self.keeper.capture()
        if question is not None and not reusable:
            self._save_question(start, question, conversation_id, captured)
            return None  # the answer's own state would never be stood on: the next turn reads it again
        if question is not None and run.tool_calls and not self._answer_reusable(start, run, written, NEXT_MESSAGE):
            # the round goes on from the answer's state, but once a question follows the round the template
            # writes this answer differently (Qwen3.5 drops its reasoning): that turn stands on the question's
            self._save_question(start, question, conversation_id, captured)
        decoded = run.token_ids + ([run.pending_token] if model.is_eog(run.pending_token) else [])
        segment = Segment(start.new_tokens, decoded, tuple(run.prefill_chunks))
        record = self.keeper.save(conversation_id=conversation_id, message_id=message_id, identity=identity,
                                  parent=start.base, segment=segment, text=start.text_before + start.new_text + written,
                                  captured=captured)
        self.live = record
        return record

    def _save_question(self, start: ReadingStart, question: Question, conversation_id: str, captured: Captured) -> None:
        segment = Segment(start.new_tokens[:question.n_new], [], tuple(question.chunks))
        question.saved = self.keeper.save(conversation_id=conversation_id, message_id=question.message_id,
                                          identity=question.identity, parent=start.base, segment=segment, text=start.text_before + question.text,
                                          captured=captured, point=question.point)
        self._held = self.keeper.hold(question.saved, question.point)

    def _answer_reusable(self, start: ReadingStart, run: Generation, written: str,
                         following: ChatMessage | None = None) -> bool:
        """Whether the next turn will stand on the answer's snapshot: the template, given the answer
        as it is stored and a following message (``following``; None: the one that will follow it, a
        question or the first call's result), writes the conversation so far exactly as read."""
        answer = ChatMessage("assistant", run.text, run.reasoning.strip(), tuple(run.tool_calls))
        try:
            after = render_for(self.session.model, [*start.messages, answer, following or next_message(answer)],
                               options=start.options).text
        except ChatTemplateError:
            return False
        return after.startswith(start.text_before + start.new_text + written)

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
        self.keeper.store.evict(budget_bytes)  # also after a question's snapshot alone
        return record, []

    def _save(self, start: ReadingStart, chunks: list[int], decoded: list[int], text: str, conversation_id: str,
              message_id: str, identity: str) -> SnapshotRecord:
        record = self.keeper.save(conversation_id=conversation_id, message_id=message_id, identity=identity,
                                  parent=start.base,
                                  segment=Segment(start.new_tokens, decoded, tuple(chunks)), text=text)
        self.live = record
        return record


def stored_identities(messages: list[p.WireMessage]) -> list[str | None]:
    """The identity of each stored message of the branch, as the store keeps it with the message
    (model_store.message_identity), chained over the stored messages only; None for one that is not
    stored (the conversation's system prompt, sent before its messages), which only the text check sees."""
    identities: list[str | None] = []
    parent = ROOT
    for message in messages:
        if message.id is None:
            identities.append(None)
            continue
        parent = message_identity(parent, message.role, message.content, message.reasoning, message.tool_part)
        identities.append(parent)
    return identities


def answer_identity(start: ReadingStart, run: Generation) -> str:
    """The identity the answer ``run`` wrote will have once stored (engine.protocol.answer_record)."""
    return message_identity(start.identity, "assistant", run.text, run.reasoning.strip(), p.tool_part(run.tool_calls, ""))


def open_snapshot_cursor(store: WorkerStore, session: ModelSession) -> SnapshotCursor:
    """The snapshot cursor for ``session``, on the worker's connection to the conversation database."""
    fingerprint = model_fingerprint(store.file_digest(Path(session.facts.path)), session.context.settings)
    return SnapshotCursor(SnapshotKeeper(store.snapshots(), session, fingerprint), session)
