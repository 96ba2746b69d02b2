"""One conversation turn, the same for the CLI and the GUI.

A turn has three steps, so a caller can run them blocking (the CLI: :func:`answer_turn`) or spread
over events (the GUI: store calls on its store thread, events from its engine bridge):

1. :func:`begin_answer` stores an empty assistant message under the user message and builds the
   ``Generate`` command that asks the engine to answer from the conversation's snapshots and to
   snapshot the turn end under the assistant message's id;
2. :meth:`PendingTurn.feed` takes the request's events, collecting the text;
3. :func:`end_answer` stores the answer, marked ``interrupted`` if it was cancelled or the engine
   died, with the turn's statistics.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from engine import protocol as p
from engine.client import ClientEvent, EngineClient, EngineDead, new_request_id
from model_store.conversations import ConversationStore, Message


@dataclass
class TurnOptions:
    sampling: p.SamplingSpec = field(default_factory=p.SamplingSpec)
    max_tokens: int = 512
    draft: str = "off"
    draft_max: int = 4


@dataclass
class PendingTurn:
    """A turn whose answer is being written: its stored messages, command and what came back."""

    conversation_id: str
    user: Message
    answer: Message
    command: p.Generate
    started: float = field(default_factory=time.time)
    pieces: list[str] = field(default_factory=list)
    draft_spans: list[list] = field(default_factory=list)  # [characters, from a draft], merged
    finished: p.Finished | None = None
    errors: list[str] = field(default_factory=list)
    dead: EngineDead | None = None

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @property
    def done(self) -> bool:
        return self.finished is not None or self.dead is not None

    def feed(self, event: ClientEvent) -> bool:
        """Take one event of this request (or the engine's death); True once the turn has ended."""
        if isinstance(event, p.TokenDelta):
            self.pieces.append(event.text)
            for length, drafted in event.draft_spans or [(len(event.text), False)]:
                if self.draft_spans and self.draft_spans[-1][1] == drafted:
                    self.draft_spans[-1][0] += length
                else:
                    self.draft_spans.append([length, drafted])
        elif isinstance(event, p.Error):
            self.errors.append(event.message)
        elif isinstance(event, p.Finished):
            self.finished = event
        elif isinstance(event, EngineDead):
            self.dead = event
        return self.done

    @property
    def status(self) -> str:
        if self.errors and (self.finished is None or self.finished.finish_reason == "error"):
            return "error"
        if self.finished is None or self.finished.finish_reason == "cancelled":
            return "interrupted"
        return "done"

    def stats(self) -> dict:
        stats: dict = {"elapsed_s": time.time() - self.started}
        if self.finished is not None:
            stats["timings"] = msgspec.to_builtins(self.finished.timings)
            if self.finished.snapshot is not None:
                stats["snapshot"] = msgspec.to_builtins(self.finished.snapshot)
            if self.finished.draft is not None:
                stats["draft"] = msgspec.to_builtins(self.finished.draft)
        if any(drafted for _, drafted in self.draft_spans):
            stats["draft_spans"] = self.draft_spans
        if self.errors:
            stats["errors"] = self.errors
        if self.dead is not None:
            stats["interrupted_by"] = self.dead.message
        return stats


def generate_command(history: list[Message], conversation_id: str, answer_id: str,
                     options: TurnOptions) -> p.Generate:
    return p.Generate(
        request_id=new_request_id("turn"),
        messages=[p.ChatTurn(m.role, m.content, m.id) for m in history],
        sampling=options.sampling, max_tokens=options.max_tokens, draft=options.draft,
        draft_max=options.draft_max, conversation_id=conversation_id, save_snapshot_as=answer_id,
    )


def add_user_message(store: ConversationStore, conversation_id: str, text: str, *,
                     reply_to: str | None = None, from_start: bool = False) -> list[Message]:
    """Store a user message and return the history it ends.

    It follows the conversation's newest message, or ``reply_to`` (an edit answers from there), or
    nothing at all when ``from_start`` (an edit of the first message).
    """
    if from_start:
        history: list[Message] = []
    else:
        history = store.branch(reply_to) if reply_to else store.current_branch(conversation_id)
    user = store.add_message(conversation_id, "user", text, parent_id=history[-1].id if history else None)
    return [*history, user]


def begin_answer(store: ConversationStore, conversation_id: str, history: list[Message],
                 options: TurnOptions) -> PendingTurn:
    """Store an empty answer to the last message of ``history`` and build the engine's command."""
    user = history[-1]
    answer = store.add_message(conversation_id, "assistant", "", parent_id=user.id, status="generating")
    return PendingTurn(conversation_id, user, answer, generate_command(history, conversation_id, answer.id, options))


def end_answer(store: ConversationStore, turn: PendingTurn) -> PendingTurn:
    """Store what the engine wrote, with its status and statistics."""
    turn.answer = store.update_message(turn.answer.id, content=turn.text, status=turn.status, stats=turn.stats())
    return turn


def run_answer(store: ConversationStore, client: EngineClient, turn: PendingTurn,
               on_event: Callable[[ClientEvent], None] | None = None) -> PendingTurn:
    """Stream the turn's request to its end, blocking, then store the answer."""
    for event in client.stream(turn.command):
        if on_event is not None:
            on_event(event)
        turn.feed(event)
    return end_answer(store, turn)


def _options(sampling: p.SamplingSpec | None, max_tokens: int, draft: str, draft_max: int) -> TurnOptions:
    return TurnOptions(sampling or p.SamplingSpec(), max_tokens, draft, draft_max)


def send_turn(
    store: ConversationStore, client: EngineClient, conversation_id: str, text: str, *,
    reply_to: str | None = None, sampling: p.SamplingSpec | None = None, max_tokens: int = 512,
    draft: str = "off", draft_max: int = 4, on_event: Callable[[ClientEvent], None] | None = None,
) -> PendingTurn:
    """Add a user message and answer it; ``reply_to`` answers from an earlier message (an edit)."""
    history = add_user_message(store, conversation_id, text, reply_to=reply_to)
    turn = begin_answer(store, conversation_id, history, _options(sampling, max_tokens, draft, draft_max))
    return run_answer(store, client, turn, on_event)


def regenerate_turn(
    store: ConversationStore, client: EngineClient, conversation_id: str, user_message_id: str, *,
    sampling: p.SamplingSpec | None = None, max_tokens: int = 512, draft: str = "off", draft_max: int = 4,
    on_event: Callable[[ClientEvent], None] | None = None,
) -> PendingTurn:
    """A new answer to an existing user message; the earlier answers stay as other branches."""
    turn = begin_answer(store, conversation_id, store.branch(user_message_id),
                        _options(sampling, max_tokens, draft, draft_max))
    return run_answer(store, client, turn, on_event)


def answer_turn(
    store: ConversationStore, client: EngineClient, conversation_id: str, history: list[Message], *,
    sampling: p.SamplingSpec | None = None, max_tokens: int = 512, draft: str = "off", draft_max: int = 4,
    on_event: Callable[[ClientEvent], None] | None = None,
) -> PendingTurn:
    """Answer the last message of ``history`` (a user message) and store the answer as its child."""
    turn = begin_answer(store, conversation_id, history, _options(sampling, max_tokens, draft, draft_max))
    return run_answer(store, client, turn, on_event)


def open_conversation_command(store: ConversationStore, conversation_id: str) -> p.OpenConversation:
    history = store.current_branch(conversation_id)
    return p.OpenConversation(request_id=new_request_id("open"), conversation_id=conversation_id,
                              messages=[p.ChatTurn(m.role, m.content, m.id) for m in history])


def open_conversation(store: ConversationStore, client: EngineClient, conversation_id: str) -> p.SnapshotReport:
    """Have the engine restore the conversation's newest snapshot before the next message is typed."""
    for event in client.stream(open_conversation_command(store, conversation_id)):
        if isinstance(event, p.ConversationOpened):
            return event.snapshot
        if isinstance(event, (p.Error, EngineDead)):
            return p.SnapshotReport(notes=[event.message])
    return p.SnapshotReport()
