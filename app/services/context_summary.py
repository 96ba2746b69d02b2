"""Continuing a conversation the model can no longer read in a new one that starts with a summary
(``when_full="summary"``).

The turn that does not fit is refused by the worker (``context_full``: its question stays in the old
conversation, marked with the reason, and is left out of what that conversation sends later). Then
the model writes a summary of the old conversation (as much of it as it can read: the request
leaves the oldest exchanges out itself, :mod:`engine.protocol.context_cut`), a new conversation is made with
the old one's system prompt whose first message is that summary, and the message is sent there.
The summary is a user message, as a loaded document is: every template takes it before a question;
its stats say which conversation it continues (:data:`CONTINUES_STAT`), so the window shows
:func:`continued_notice` above it. The CLI runs these steps blocking (:func:`continue_with_summary`);
the window runs the same steps without waiting (:mod:`app.services.summary_flow`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from app.engine_clients.client import ClientEvent, EngineClient, EngineDead, new_request_id
from app.services.turn import (PendingTurn, TurnOptions, Writer, conversation_turns, hold_conversation, run_answer,
                               start_turn, template_spec)
from engine import protocol as p
from model_store.conversations import Conversation, ConversationStore

SUMMARY_REQUEST = ("Summarize our conversation so far in a short paragraph: the facts, names, numbers and decisions "
                   "someone would need to continue it. Write only the summary.")
SUMMARY_MAX_TOKENS = 256
SUMMARY_HEADING = "Summary of the earlier conversation"  # the new conversation's first message starts with it
CONTINUES_STAT = "continues"  # the summary message's stats key: {"conversation_id": ..., "title": ...}


class SummaryFailed(RuntimeError):
    """The model could not write the summary (the message says why); nothing new was made."""


def summary_command(store: ConversationStore, conversation: Conversation, options: TurnOptions) -> p.Chat:
    """The request for a summary of the conversation's current branch (its refused questions left out)."""
    history = store.current_branch(conversation.id)
    messages = [*conversation_turns(history, conversation), p.WireMessage("user", SUMMARY_REQUEST, "summary-request")]
    return p.Chat(request_id=new_request_id("summary"), messages=messages, sampling=options.sampling,
                  max_tokens=SUMMARY_MAX_TOKENS, draft=p.DraftSpec("off"), template=template_spec(conversation),
                  when_full="drop-oldest")


def write_summary(client: EngineClient, command: p.Chat) -> str:
    """The model's summary. Raises :class:`SummaryFailed` when it wrote none."""
    text, errors = [], []
    for event in client.stream(command):
        if isinstance(event, p.TokenDelta):
            text.append(event.text)
        elif isinstance(event, p.Error):
            errors.append(event.message)
        elif isinstance(event, EngineDead):
            errors.append(event.message)
    return finished_summary("".join(text), errors)


def finished_summary(text: str, errors: list[str]) -> str:
    """The summary the model wrote (``text``), or :class:`SummaryFailed` with ``errors`` when it wrote none."""
    if not text.strip():
        raise SummaryFailed("; ".join(errors) or "the model wrote no summary")
    return text.strip()


def summary_message(conversation: Conversation, summary: str) -> str:
    return f'{SUMMARY_HEADING} ("{conversation.title}"):\n\n{summary}'


def continued_notice(title: str) -> str:
    """The sentence a conversation made by :func:`start_continuation` shows above its first message."""
    return (f"This conversation continues “{title}”, which became longer than the model can read; "
            "it starts with a summary of it.")


def start_continuation(store: ConversationStore, old: Conversation, summary: str, *,
                       model: str = "default") -> Conversation:
    """The new conversation "TITLE (continued)", with ``old``'s system prompt, whose first message is
    the summary (made in one transaction: all of it or nothing)."""
    def fill(held_id: str) -> None:
        store.add_message(held_id, "user", summary_message(old, summary), parent_id=None,
                          stats={CONTINUES_STAT: {"conversation_id": old.id, "title": old.title}})

    created, _, _ = hold_conversation(store, None, None, fill, title=f"{old.title} (continued)", model=model,
                                      system_prompt=old.system_prompt)
    return created


def continue_with_summary(store: ConversationStore, client: EngineClient, old: Conversation, text: str,
                          options: TurnOptions, writer: Writer, *, model: str = "default",
                          on_event: Callable[[ClientEvent], None] | None = None) -> tuple[Conversation, PendingTurn]:
    """Summarize ``old``, make the new conversation that starts with the summary, and answer ``text`` there."""
    summary = write_summary(client, summary_command(store, old, options))
    created = start_continuation(store, old, summary, model=model)
    conversation, turn = start_turn(store, created.id, text, replace(options, system_prompt=old.system_prompt),
                                    writer, model=model)
    return conversation, run_answer(store, client, turn, on_event)
