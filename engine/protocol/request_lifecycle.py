"""In the worker, each request ends with exactly one event that says so (``protocol.ends_request``).

A request opens when the worker takes it and closes with the first event that ends it. Every event
the worker sends passes :meth:`Requests.emit`, which is the one place that applies the protocol's rule:

* an ``Error`` of an answer or a document read is marked not final (``Error.final``), since the
  request's own closing event follows it (``Finished``, ``DocumentRead``);
* when the worker is done with a request (:meth:`Requests.end`), whatever is missing is sent: the
  closing event of an answer or a read that failed before sending one, or an internal ``Error`` for
  any other request that ended without a word. A request that was never run (dropped from the queue
  by an abort, or refused before it was taken) ends the same way (:meth:`Requests.fail`).

So a client never waits for an event that is not coming, whatever the engine core did. Every event
also passes the answer keeper on its way out (:mod:`engine.requests.answer_keeper`), which stores a kept
answer before its ``Finished`` leaves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal, Protocol

import msgspec

from engine import protocol as p

class Outgoing(Protocol):
    """What takes each request as it opens and each event on its way out (the worker's answer keeper,
    :class:`engine.requests.answer_keeper.AnswerKeeper`); the remote client has none."""

    def begin(self, command: p.Command) -> None: ...

    def passing(self, event: p.Event) -> p.Event: ...


SILENT_END = "the worker ended this request without an answer (a bug); try again"


def request_kind(command: p.Command) -> str:
    return command.__struct_config__.tag


class Requests:
    """The worker's open requests (by id, with their kind); every event goes out through :meth:`emit`."""

    def __init__(self, send: Callable[[p.Event], None], keeper: Outgoing | None = None) -> None:
        self._sink = send
        self._keeper = keeper
        self._lock = threading.RLock()  # one event at a time: they come from the engine's and the telemetry thread
        self._open: dict[str, str] = {}
        self._errored: set[str] = set()  # open requests whose Error was sent (their closing event is not)

    def begin(self, command: p.Command) -> None:
        """The worker takes ``command`` now."""
        with self._lock:
            self._open[command.request_id] = request_kind(command)
            if self._keeper is not None:
                self._keeper.begin(command)

    def emit(self, event: p.Event) -> None:
        rid = getattr(event, "request_id", None)
        with self._lock:
            kind = self._open.get(rid) if rid is not None else None
            if isinstance(event, p.Error) and kind is not None and p.closes_with_its_own_event(kind):
                event = msgspec.structs.replace(event, final=False)
                self._errored.add(rid)
            if kind is not None and p.ends_request(event):
                self._close(rid)
            self._send(event)

    def end(self, command: p.Command, reason: Literal["error", "cancelled"] = "error") -> None:
        """The worker is done with ``command``: close it with ``reason`` if no event has."""
        rid, kind = command.request_id, request_kind(command)
        with self._lock:
            if rid not in self._open:
                return
            errored = rid in self._errored
            self._close(rid)
            if errored:  # its Error said why: only the closing event is missing
                self._send(p.closing_event(kind, rid, reason))
            else:
                self.fail(kind, rid, "internal", SILENT_END, reason)

    def fail(self, kind: str, rid: str, code: p.ErrorCode, message: str,
             reason: Literal["error", "cancelled"] = "error") -> None:
        """End a request that failed before it was taken: its Error, then its closing event if it has one."""
        with self._lock:
            for event in p.failure_events(kind, rid, code, message, reason):
                self._send(event)

    def drop(self, command: p.Command) -> None:
        """End a queued request that will never run (an abort): an answer or a read ends cancelled, any
        other request with an Error saying so."""
        kind, rid = request_kind(command), command.request_id
        with self._lock:
            if p.closes_with_its_own_event(kind):
                self._send(p.closing_event(kind, rid, "cancelled"))
            else:
                self._send(p.Error(code="cancelled", message="the worker stopped before it could run this request",
                                   request_id=rid))

    def _send(self, event: p.Event) -> None:
        self._sink(self._keeper.passing(event) if self._keeper is not None else event)

    def _close(self, rid: str) -> None:
        del self._open[rid]
        self._errored.discard(rid)
