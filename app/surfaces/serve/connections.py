"""How long a client may take to send its request, and how many connections it may hold.

uvicorn's HTTP/1.1 protocol (h11) closes a kept-alive connection that stays idle
(``timeout_keep_alive``), but sets no limit on how long a request's header or body may take to
arrive: a client sending one byte a second ("slowloris") keeps its connection for ever, and enough
of them take every socket the server has. :class:`GuardedH11Protocol` is uvicorn's own protocol with
what it lacks:

- **a header deadline**: the request line and headers must have arrived ``header_s`` after the
  connection opened (or after the first byte of a kept-alive connection's next request); then the
  client gets 408 and the connection is closed (one that sent nothing, as a browser's unused
  preconnection, is closed without an answer or a log line: it made no request);
- **a body deadline**: the body must keep coming (no gap over ``body_idle_s``) and be whole within
  ``body_s``. The route reading a body enforces this itself and answers 408 (``routes.py``); the
  protocol closes the connection a moment later, which ends a body nobody reads (one sent with a
  request already refused) as well;
- **a cap on connections**: past ``max_connections``, the connection that has waited longest for a
  request (one whose request line and headers have not all come: it sent nothing, part of them, or
  it is kept alive between requests) is closed to make room, so idle sockets never keep out a
  client that sends its request (before, whoever held 64 of them, renewed every 10 s, kept the API
  from everyone). One that sent nothing is closed without a word, as at its header deadline; one
  that sent part of its headers is answered 503. Only when every connection has a request under
  way is the new one answered 503 at once and closed. (uvicorn's ``limit_concurrency`` answers 503
  only once a request's headers have arrived, so it never refuses the connections of a client that
  does not finish them.)

uvicorn's own limits stay in use: ``timeout_keep_alive`` (5 s) between requests, and h11's 16 KiB
cap on a request's line and headers (past it: 400 here).

A request malformed at the HTTP level is answered 400 in the API's JSON shape. Each answer given
here is one line in the server's log, as a request's (``on_refused``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.surfaces.serve.replies import ApiError

LIMITS_TEST_ENV = "HEARTH_TEST_SERVE_CONNECTIONS"  # "HEADER_S,BODY_IDLE_S,BODY_S,MAX_CONNECTIONS": tests, in seconds
PROTOCOL_GRACE_S = 1.0  # the protocol's body deadline comes this long after the route's, which answers first
RETRY_AFTER_S = 2


@dataclass(frozen=True)
class ConnectionLimits:
    """The one place for these limits (a test may shorten them: :func:`connection_limits`)."""

    header_s: float = 10.0  # the request line and headers, whole
    body_idle_s: float = 30.0  # the longest gap in a body
    body_s: float = 120.0  # a body, whole (4 MiB, the largest taken, at 35 KiB/s)
    max_connections: int = 64  # open at once; a browser opens 6 per server


def connection_limits() -> ConnectionLimits:
    """The limits, or those a test set in :data:`LIMITS_TEST_ENV`."""
    try:
        header, idle, whole, cap = os.environ.get(LIMITS_TEST_ENV, "").split(",")
        return ConnectionLimits(float(header), float(idle), float(whole), int(cap))
    except ValueError:
        return ConnectionLimits()


def guarded_protocol(limits: ConnectionLimits, on_refused: Callable[[int], None]) -> type[H11Protocol]:
    """The protocol class to give uvicorn (``Config(http=...)``), with these limits."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits, "on_refused": staticmethod(on_refused)})


def raw_response(error: ApiError) -> bytes:
    """``error`` as a whole HTTP/1.1 response that closes the connection, for a client whose request
    never reached the app (so h11's response state does not apply)."""
    body = json.dumps(error.body()).encode()
    head = [f"HTTP/1.1 {error.status} {h11_reason(error.status)}", "content-type: application/json",
            f"content-length: {len(body)}", "connection: close",
            *(f"{name}: {value}" for name, value in error.headers.items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def h11_reason(status: int) -> str:
    return {400: "Bad Request", 408: "Request Timeout", 503: "Service Unavailable"}.get(status, "Error")


class GuardedH11Protocol(H11Protocol):
    limits: ClassVar[ConnectionLimits] = ConnectionLimits()
    on_refused: ClassVar[Callable[[int], None]] = staticmethod(lambda status: None)

    _deadline: asyncio.TimerHandle | None = None
    _body_ends_at: float | None = None
    _heard = False  # a byte of the current request has come
    _waiting_since = 0.0  # when it began to wait for its next request (loop time)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._waiting_since = self.loop.time()
        if self._open_connections() > self.limits.max_connections and not self._make_room():
            self._refuse(self._too_many())
            return
        self._arm(self.limits.header_s, self._header_too_slow)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._waiting_since = self.loop.time()  # kept alive: it waits for its next request from now

    @property
    def waits_for_request(self) -> bool:
        """Open, and no request of it is under way: its request line and headers have not all come."""
        return (not self.transport.is_closing() and self.conn.their_state is h11.IDLE
                and (self.cycle is None or self.cycle.response_complete))

    def _open_connections(self) -> int:
        return sum(1 for connection in self.connections if not connection.transport.is_closing())

    def _make_room(self) -> bool:
        """Close the connection that has waited longest for a request; False when every other one
        has a request under way."""
        waiting = [c for c in self.connections
                   if c is not self and isinstance(c, GuardedH11Protocol) and c.waits_for_request]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda connection: connection._waiting_since)
        if oldest._heard:  # part of a request's headers came: it is told why
            oldest._refuse(oldest._too_many())
        else:
            oldest._disarm()
            oldest.transport.close()
        return True

    def _too_many(self) -> ApiError:
        return ApiError(503, f"The server already has {self.limits.max_connections} connections open: retry "
                             "shortly", code="too_many_connections", headers={"retry-after": str(RETRY_AFTER_S)})

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._deadline is None:  # a kept-alive connection's next request
            self._arm(self.limits.header_s, self._header_too_slow)
        self._heard = True
        super().data_received(data)
        self._follow_request()

    def send_400_response(self, msg: str) -> None:
        """A request h11 cannot read: the API's JSON error, one log line (no uvicorn warning)."""
        self._refuse(ApiError(400, "The request is not valid HTTP/1.1 (its request line or headers could not be "
                                   "read)", code="invalid_http"))

    def _follow_request(self) -> None:
        """After the headers, the body's deadline; after the body, none."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            now = self.loop.time()
            if self._body_ends_at is None:
                self._body_ends_at = now + self.limits.body_s + PROTOCOL_GRACE_S
            gap = min(self.limits.body_idle_s + PROTOCOL_GRACE_S, self._body_ends_at - now)
            self._arm(gap, self._body_too_slow)
        elif state is not h11.IDLE:
            self._disarm()
            self._body_ends_at, self._heard = None, False

    def _header_too_slow(self) -> None:
        self._deadline = None
        if not self._heard:  # no request was begun: nothing to answer or log
            self.transport.close()
        elif self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._refuse(ApiError(408, f"The request's headers did not arrive within {self.limits.header_s:g} s",
                                  code="header_timeout"))

    def _body_too_slow(self) -> None:
        """The route would have answered 408 if it read the body; this one nobody reads: close."""
        self._deadline = None
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            self.transport.close()

    def _refuse(self, error: ApiError) -> None:
        """Answer ``error`` and close; a request the app already has is left to it to answer and log."""
        self._disarm()
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:  # the route logs its line (499)
            if not self.cycle.response_started:
                self.transport.write(raw_response(error))
            self.transport.close()
            return
        self.on_refused(error.status)
        self.transport.write(raw_response(error))
        self.transport.close()

    def _arm(self, delay: float, callback: Callable[[], None]) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(max(0.0, delay), callback)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
