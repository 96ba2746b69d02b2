"""One conversation turn, the same for the CLI and the GUI.

Store the user message and an empty assistant message, ask the engine to answer from the
conversation's snapshots and to snapshot the turn end under the assistant message's id, then store
the answer (marked interrupted if it was cancelled or the engine died).
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
class TurnResult:
    user: Message
    answer: Message
    finished: p.Finished | None
    errors: list[str] = field(default_factory=list)
    dead: EngineDead | None = None


def generate_command(history: list[Message], conversation_id: str, answer_id: str,
                     sampling: p.SamplingSpec, max_tokens: int, draft: str = "off", draft_max: int = 4) -> p.Generate:
    return p.Generate(
        request_id=new_request_id("turn"),
        messages=[p.ChatTurn(m.role, m.content, m.id) for m in history],
        sampling=sampling, max_tokens=max_tokens, draft=draft, draft_max=draft_max,
        conversation_id=conversation_id, save_snapshot_as=answer_id,
    )


def send_turn(
    store: ConversationStore, client: EngineClient, conversation_id: str, text: str, *,
    reply_to: str | None = None, **options,
) -> TurnResult:
    """Add a user message and answer it; ``reply_to`` answers from an earlier message (an edit)."""
    history = store.branch(reply_to) if reply_to else store.current_branch(conversation_id)
    user = store.add_message(conversation_id, "user", text, parent_id=history[-1].id if history else None)
    return answer_turn(store, client, conversation_id, [*history, user], **options)


def regenerate_turn(store: ConversationStore, client: EngineClient, conversation_id: str, user_message_id: str,
                    **options) -> TurnResult:
    """A new answer to an existing user message; the earlier answers stay as other branches."""
    return answer_turn(store, client, conversation_id, store.branch(user_message_id), **options)


def answer_turn(
    store: ConversationStore, client: EngineClient, conversation_id: str, history: list[Message], *,
    sampling: p.SamplingSpec | None = None, max_tokens: int = 512, draft: str = "off", draft_max: int = 4,
    on_event: Callable[[ClientEvent], None] | None = None,
) -> TurnResult:
    """Answer the last message of ``history`` (a user message) and store the answer as its child."""
    user = history[-1]
    answer = store.add_message(conversation_id, "assistant", "", parent_id=user.id, status="generating")
    command = generate_command(history, conversation_id, answer.id, sampling or p.SamplingSpec(), max_tokens,
                               draft, draft_max)
    result = TurnResult(user, answer, None)
    started, written = time.time(), []
    for event in client.stream(command):
        if on_event is not None:
            on_event(event)
        if isinstance(event, p.TokenDelta):
            written.append(event.text)
        elif isinstance(event, p.Error):
            result.errors.append(event.message)
        elif isinstance(event, p.Finished):
            result.finished = event
        elif isinstance(event, EngineDead):
            result.dead = event
    result.answer = store.update_message(answer.id, content="".join(written), status=_status(result),
                                         stats=_stats(result.finished, time.time() - started))
    return result


def _status(result: TurnResult) -> str:
    if result.errors and (result.finished is None or result.finished.finish_reason == "error"):
        return "error"
    if result.finished is None or result.finished.finish_reason == "cancelled":
        return "interrupted"
    return "done"


def _stats(finished: p.Finished | None, elapsed_s: float) -> dict:
    stats: dict = {"elapsed_s": elapsed_s}
    if finished is not None:
        stats["timings"] = msgspec.to_builtins(finished.timings)
        if finished.snapshot is not None:
            stats["snapshot"] = msgspec.to_builtins(finished.snapshot)
    return stats


def open_conversation(store: ConversationStore, client: EngineClient, conversation_id: str) -> p.SnapshotReport:
    """Have the engine restore the conversation's newest snapshot before the next message is typed."""
    history = store.current_branch(conversation_id)
    command = p.OpenConversation(request_id=new_request_id("open"), conversation_id=conversation_id,
                                 messages=[p.ChatTurn(m.role, m.content, m.id) for m in history])
    for event in client.stream(command):
        if isinstance(event, p.ConversationOpened):
            return event.snapshot
        if isinstance(event, (p.Error, EngineDead)):
            return p.SnapshotReport(notes=[event.message])
    return p.SnapshotReport()
