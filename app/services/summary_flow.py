"""Continuing in a new conversation that starts with a summary, in a window: the steps of
:mod:`app.services.context_summary` without waiting (``when_full="summary"``).

A window never waits, so each step continues in a callback, as a turn does (:mod:`app.services.turn_flow`):

1. :meth:`SummaryFlow.begin` reads the old conversation's branch on the store's thread and builds
   the summary request (:func:`~app.services.context_summary.summary_command`); it is sent to the
   worker like any answer, and its text streams back through :meth:`SummaryFlow.take`
   (:meth:`SummaryScreen.summary_progress`);
2. when the request ends, the new conversation that starts with the summary is made on the store's
   thread (:func:`~app.services.context_summary.start_continuation`), and the screen sends the
   user's message there (:meth:`SummaryScreen.summary_ready`);
3. or, when the model wrote no summary (or the engine died), nothing is made and the screen says why
   (:meth:`SummaryScreen.summary_failed`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import msgspec

from app.engine_clients.client import EngineDead, new_request_id
from app.services.context_summary import SummaryFailed, finished_summary, start_continuation, summary_command
from app.services.turn import TurnOptions
from engine import protocol as p
from model_store.conversations import Conversation, ConversationStore

StoreJob = Callable[[ConversationStore], Any]
Submit = Callable[[StoreJob, Callable[[Any], None] | None, Callable[[str], None] | None], None]


class CommandSink(Protocol):
    def send(self, command: p.Command) -> bool: ...


class SummaryScreen(Protocol):
    """What the window does at each step (all called on the caller's thread)."""

    def summary_progress(self, continuing: Continuing) -> None:
        """More of the summary was written (``continuing.written``)."""

    def summary_ready(self, continuing: Continuing, conversation: Conversation) -> None:
        """The new conversation is stored, starting with the summary: send ``continuing.text`` there."""

    def summary_failed(self, continuing: Continuing, why: str) -> None:
        """No summary was written (``why`` says why) and nothing new was made."""


@dataclass
class Continuing:
    """One continuation in flight: the conversation it continues, the user's message and the summary so far."""

    old_id: str
    text: str  # the message that did not fit, sent in the new conversation
    options: TurnOptions
    model: str = "default"  # the model the new conversation is made with
    old: Conversation | None = None  # read on the store's thread
    pieces: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stopped: bool = False  # the user stopped it: nothing new is made

    @property
    def written(self) -> str:
        return "".join(self.pieces)


class SummaryFlow:
    """The continuations a window has in flight (one at a time in practice), from the request to the new conversation."""

    def __init__(self, submit: Submit, engine: CommandSink, screen: SummaryScreen) -> None:
        self._submit, self._engine, self._screen = submit, engine, screen
        self.pending: dict[str, Continuing] = {}  # by request id: from begin until the new conversation is made

    @property
    def busy(self) -> bool:
        return bool(self.pending)

    def begin(self, old_id: str, text: str, options: TurnOptions, model: str = "default") -> None:
        """Have the model summarize conversation ``old_id``, then continue with ``text`` in a new conversation."""
        request_id = new_request_id("summary")
        continuing = self.pending[request_id] = Continuing(old_id, text, options, model)

        def read(store: ConversationStore) -> tuple[Conversation, p.Chat]:
            old = store.get(old_id)
            return old, msgspec.structs.replace(summary_command(store, old, options), request_id=request_id)

        self._submit(read, partial(self._send, request_id), partial(self._failed, request_id))

    def take(self, event: p.Event) -> bool:
        """Feed an engine event to the summary it belongs to; False when it is none of this flow's."""
        request_id = getattr(event, "request_id", None)
        continuing = self.pending.get(request_id)
        if continuing is None:
            return False
        if isinstance(event, p.TokenDelta) and event.text:
            continuing.pieces.append(event.text)
            self._screen.summary_progress(continuing)
        elif isinstance(event, p.Error):
            continuing.errors.append(event.message)
        if p.ends_request(event):
            self._written(request_id)
        return True

    def stop(self) -> None:
        """Stop writing the summary: its request is cancelled and nothing new is made."""
        for request_id, continuing in self.pending.items():
            continuing.stopped = True
            self._engine.send(p.Cancel(request_id=request_id))

    def engine_died(self, dead: EngineDead) -> None:
        for request_id in list(self.pending):
            self._failed(request_id, dead.message)

    def _send(self, request_id: str, read: tuple[Conversation, p.Chat]) -> None:
        continuing = self.pending.get(request_id)
        if continuing is None:
            return
        continuing.old, command = read
        if continuing.stopped:
            self._failed(request_id, "you stopped it")
        elif not self._engine.send(command):
            self._failed(request_id, "the engine is not running")

    def _written(self, request_id: str) -> None:
        continuing = self.pending[request_id]
        if continuing.stopped:
            self._failed(request_id, "you stopped it")
            return
        try:
            summary = finished_summary(continuing.written, continuing.errors)
        except SummaryFailed as failed:
            self._failed(request_id, str(failed))
            return
        assert continuing.old is not None  # the request was sent after the conversation was read
        make = partial(start_continuation, old=continuing.old, summary=summary, model=continuing.model)
        self._submit(make, partial(self._made, request_id), partial(self._failed, request_id))

    def _made(self, request_id: str, conversation: Conversation) -> None:
        continuing = self.pending.pop(request_id, None)
        if continuing is not None:
            self._screen.summary_ready(continuing, conversation)

    def _failed(self, request_id: str, why: str) -> None:
        continuing = self.pending.pop(request_id, None)
        if continuing is not None:
            self._screen.summary_failed(continuing, why)
