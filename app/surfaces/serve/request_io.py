"""Reading a request's body within its limits, and the one log line for whatever escapes a route.

The server's log has one line per request and never a traceback (``serve_contract.REQUEST_PREFIX``).
A route logs its own line; :class:`OneLinePerFailure` is the outermost layer, for what a route did
not expect (a bug, a send that failed): it logs the request's line with status 500 (or 499 when the
client had gone), unless the route had logged it already (:func:`note_logged`), and answers 500 in
the API's JSON shape if nothing was sent yet, instead of letting the exception reach uvicorn, which
would print its traceback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextvars import ContextVar

from starlette.requests import ClientDisconnect, Request

from app.surfaces.serve.connections import ConnectionLimits
from app.surfaces.serve.replies import ApiError

CLIENT_CLOSED = 499  # nginx's status for a client that went away before its answer: only ever logged
INTERNAL_ERROR = "The server failed to answer this request; the error is in its log"
DRAIN_BYTES = 64 * 1024 * 1024  # a body over the limit is read (and dropped) up to this, so its sender gets the 413


_logged: ContextVar[list[bool] | None] = ContextVar("hearth_request_logged", default=None)


def note_logged() -> None:
    """The current request's line is written (so a failure after it adds none)."""
    if (holder := _logged.get()) is not None:
        holder[0] = True


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than {limit // (1024 * 1024)} MiB", code="body_too_large",
                    headers={"connection": "close"})  # the rest of it is not read


async def read_body(request: Request, limit: int, limits: ConnectionLimits) -> bytes:
    """The body, at most ``limit`` bytes. Raises :class:`ApiError`: 413 when it is larger, 408 when it
    stops coming for ``limits.body_idle_s`` or is not whole after ``limits.body_s`` (the connection
    is then closed), 499 when the client went away before sending all of it."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > DRAIN_BYTES:
        raise too_large(limit)  # not read at all: the connection closes after the answer
    data, seen = bytearray(), 0
    chunks = request.stream().__aiter__()
    ends_at = time.monotonic() + limits.body_s
    while True:
        wait = max(0.0, min(limits.body_idle_s, ends_at - time.monotonic()))
        try:
            chunk = await asyncio.wait_for(chunks.__anext__(), wait)
        except StopAsyncIteration:
            break
        except TimeoutError:
            raise ApiError(408, f"the request body did not arrive in time (no gap over {limits.body_idle_s:g} s, "
                                f"whole within {limits.body_s:g} s)", code="body_timeout",
                           headers={"connection": "close"}) from None
        except ClientDisconnect:
            raise ApiError(CLIENT_CLOSED, "the client closed the connection before sending its whole request",
                           code="client_closed") from None
        seen += len(chunk)
        if seen <= limit:
            data += chunk
        elif seen > DRAIN_BYTES:
            break
    if seen > limit:
        raise too_large(limit)
    return bytes(data)


class OneLinePerFailure:
    """ASGI: an exception a route let escape becomes its request's one log line and a JSON 500."""

    def __init__(self, app, log_failure: Callable[[int, BaseException], None]) -> None:
        self.app = app
        self.log_failure = log_failure  # (status, exception): writes the request's line

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, logged = False, [False]
        token = _logged.set(logged)

        async def send_noting_start(message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_noting_start)
        except (ClientDisconnect, OSError) as exc:  # the client went away while it was answered
            if not logged[0]:
                self.log_failure(CLIENT_CLOSED, exc)
        except Exception as exc:
            if not logged[0]:
                self.log_failure(500, exc)
            if not started:
                error = ApiError(500, INTERNAL_ERROR, code="internal_error")
                try:
                    await error.response()(scope, receive, send)
                except (ClientDisconnect, OSError):
                    pass
        finally:
            _logged.reset(token)
