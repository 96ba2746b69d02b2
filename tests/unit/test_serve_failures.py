"""What a route lets escape is its request's one log line and a JSON 500, never uvicorn's traceback
(issue 32, point 4): the API's outermost layer around a real Starlette app whose route fails."""

from __future__ import annotations

import asyncio
import json

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.routing import Route

from app.surfaces.serve.replies import ApiError
from app.surfaces.serve.request_io import CLIENT_CLOSED, INTERNAL_ERROR, OneLinePerFailure, note_logged


def call(route, path: str = "/x") -> tuple[list[tuple[int, str]], list[dict]]:
    """One GET through the layer; what it logged (status, error) and what it sent."""
    logged: list[tuple[int, str]] = []
    sent: list[dict] = []
    handlers = {500: lambda request, exc: ApiError(500, INTERNAL_ERROR, code="internal_error").response()}
    app = OneLinePerFailure(Starlette(routes=[Route("/x", route)], exception_handlers=handlers),
                            lambda status, error: logged.append((status, repr(error))))
    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [], "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 1), "root_path": ""}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return logged, sent


def test_a_route_that_raises_is_one_500_line_and_a_json_error():
    async def broken(request):
        raise RuntimeError("a bug")

    logged, sent = call(broken)
    assert logged == [(500, "RuntimeError('a bug')")]
    assert sent[0]["status"] == 500
    assert json.loads(sent[1]["body"])["error"]["code"] == "internal_error"


def test_a_client_gone_while_it_was_answered_is_one_499_line():
    async def gone(request):
        raise ClientDisconnect()

    logged, _ = call(gone)
    assert [status for status, _ in logged] == [CLIENT_CLOSED]


def test_a_failure_after_the_route_wrote_its_line_adds_none():
    """(A stream whose client stopped reading: the stream logs its line as it ends, then the send fails.)"""
    async def logged_then_failed(request):
        note_logged()
        raise RuntimeError("the send timed out")

    logged, sent = call(logged_then_failed)
    assert logged == [] and sent[0]["status"] == 500
