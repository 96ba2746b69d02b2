"""The HTTP API (Starlette): ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``, ``/health``.

Every request is checked before it reaches the engine: the key (when one is set, compared in
constant time), the body's size, its JSON and fields (``schema``), and the model's name, which must
be the served model's id (a request never names a file). A chat request becomes an ``AnswerTurn``
on the server's own conversation store (``conversations``), a completion a ``Complete``; both go to
the engine runner's FIFO queue. Failures are OpenAI error objects with the status OpenAI uses.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.surfaces.serve import schema
from app.surfaces.serve.connections import ConnectionLimits
from app.surfaces.serve.guard import WebPageGuard, cors_origins
from app.surfaces.serve.replies import ApiError, Reply, usage
from app.surfaces.serve.request_io import CLIENT_CLOSED, INTERNAL_ERROR, OneLinePerFailure, note_logged, read_body
from app.surfaces.serve.runner import EngineRunner, Job, QueueFull, SwitchFailed, WaitedTooLong
from app.services.serve_contract import REQUEST_PREFIX
from app.engine_clients.client import ClientEvent, EngineDead
from engine import protocol as p

MAX_BODY_BYTES = 4 * 1024 * 1024
RETRY_AFTER_S = 2
DISCONNECT_POLL_S = 0.25


@dataclass
class ServeConfig:
    model_ids: list[str]  # what requests may name: the served model, and installed ones with --allow-switch
    api_key: str | None = None
    cors_origin: str | None = None  # one origin, or several separated by commas
    max_body_bytes: int = MAX_BODY_BYTES
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
    bound_host: str | None = None  # the address it listens on (the Host check: guard.py)
    limits: ConnectionLimits = ConnectionLimits()  # how long a body may take (connections.py)


@dataclass
class Outcome:
    """What a request's events added up to."""

    text: str = ""
    reasoning: str = ""
    finish_reason: str = "stop"
    usage: dict | None = None
    ttft_ms: float | None = None
    tokens: int = 0
    client_gone: bool = False  # it disconnected before the end (the answer was cancelled)
    left_out: int = 0  # the conversation's messages the model did not read (app.services.context_cut)
    tool_calls: list[p.ToolCall] = field(default_factory=list)  # the calls the answer made


class Api:
    """The routes, bound to one engine runner and the way it turns requests into jobs."""

    def __init__(self, config: ServeConfig, runner: EngineRunner, chat_job: Callable[[schema.ChatRequest], Job],
                 completion_job: Callable[[schema.CompletionRequest], Job]) -> None:
        self.config, self.runner = config, runner
        self.chat_job, self.completion_job = chat_job, completion_job
        self.requests = 0  # answered so far (the app's state bar shows it)

    def app(self) -> OneLinePerFailure:
        routes = [Route("/health", self.health, methods=["GET"]),
                  Route("/v1/models", self.models, methods=["GET"]),
                  Route("/v1/chat/completions", self.chat, methods=["POST"]),
                  Route("/v1/completions", self.completions, methods=["POST"])]
        middleware = [Middleware(WebPageGuard, bound_host=self.config.bound_host, cors=self.config.cors_origin,
                                 json_paths=[route.path for route in routes if "POST" in (route.methods or ())],
                                 on_refused=self.log_refused)]
        if self.config.cors_origin:
            middleware.append(Middleware(CORSMiddleware, allow_origins=cors_origins(self.config.cors_origin),
                                         allow_methods=["GET", "POST"], allow_headers=["Authorization", "Content-Type"]))
        app = Starlette(routes=routes, middleware=middleware, exception_handlers={
            404: lambda request, exc: ApiError(404, f"no route {request.url.path}", code="not_found").response(),
            405: lambda request, exc: ApiError(405, f"{request.method} is not allowed on {request.url.path}").response(),
            500: lambda request, exc: ApiError(500, INTERNAL_ERROR, code="internal_error").response(),
        })
        return OneLinePerFailure(app, self.log_failure)

    # -- routes -------------------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        up = self.runner.up.is_set()
        body = {"status": "ok" if up else "restarting", "model": self.runner.model,
                "waiting": self.runner.waiting, "requests": self.requests}
        return JSONResponse(body, status_code=200 if up else 503)

    async def models(self, request: Request) -> Response:
        try:
            self._authorise(request)
        except ApiError as exc:
            return exc.response()
        models = [self._model_entry(name) for name in self.config.model_ids]
        return JSONResponse({"object": "list", "data": models})

    def _model_entry(self, name: str) -> dict:
        """OpenAI's model object; the loaded one also says how long a conversation it can hold, under
        vLLM's name for it (``max_model_len``), so a client (another Hearth) need not ask its user."""
        entry = {"id": name, "object": "model", "created": 0, "owned_by": "hearth"}
        loaded = self.runner.loaded
        if loaded is not None and name == self.runner.model:
            entry["max_model_len"] = loaded.context.max_n_ctx
        return entry

    async def chat(self, request: Request) -> Response:
        return await self._answer(request, schema.ChatRequest, "chat")

    async def completions(self, request: Request) -> Response:
        return await self._answer(request, schema.CompletionRequest, "text")

    # -- one answer ---------------------------------------------------------------------------------

    async def _answer(self, request: Request, kind: type, reply_kind: str) -> Response:
        started = time.monotonic()
        try:
            self._authorise(request)
            body = await self._decode(request, kind)
            schema.refuse_unsupported(body)
            job = self.chat_job(body) if reply_kind == "chat" else self.completion_job(body)
            job.loop, job.events, job.model = asyncio.get_running_loop(), asyncio.Queue(), body.model
            self._submit(job)
        except schema.RequestRefused as exc:
            return self._logged(ApiError(400, str(exc), param=exc.param, code=exc.code).response(), started)
        except ApiError as exc:
            return self._logged(exc.response(), started)
        reply = Reply(reply_kind, body.model)
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return EventSourceResponse(self._stream(job, reply, include_usage, started), ping=15,
                                       sep="\n", send_timeout=30)
        try:
            outcome = await self._collect(job, request)
        except ApiError as exc:
            return self._logged(exc.response(), started, job)
        if outcome.client_gone:  # nobody is left to read an answer
            self._log(job, CLIENT_CLOSED, started, outcome)
            return Response(status_code=CLIENT_CLOSED)
        self.requests += 1
        response = JSONResponse({**reply.whole(outcome.text, outcome.finish_reason, outcome.usage or {},
                                               outcome.reasoning.strip(), outcome.tool_calls),
                                 **hearth_report(outcome.left_out)})
        return self._logged(response, started, job, outcome)

    def _authorise(self, request: Request) -> None:
        key = self.config.api_key
        if not key:
            return
        given = request.headers.get("authorization", "")
        token = given[7:] if given.lower().startswith("bearer ") else ""
        if not hmac.compare_digest(token.encode(), key.encode()):
            raise ApiError(401, "Incorrect API key provided: send it as 'Authorization: Bearer KEY'",
                           code="invalid_api_key")

    async def _decode(self, request: Request, kind: type):
        data = await read_body(request, self.config.max_body_bytes, self.config.limits)
        body = schema.decode_body(data, kind)
        if body.model not in self.config.model_ids:
            raise ApiError(404, f"The model '{body.model}' does not exist: this server serves "
                                f"{', '.join(repr(m) for m in self.config.model_ids)} (GET /v1/models)",
                           param="model", code="model_not_found")
        return body

    def _submit(self, job: Job) -> None:
        try:
            self.runner.submit(job)
        except QueueFull:
            raise ApiError(429, f"{self.runner.max_queue} requests are already waiting: retry shortly",
                           code="queue_full", headers={"Retry-After": str(RETRY_AFTER_S)}) from None

    async def _next(self, job: Job):
        """The job's next item; while it waits in the queue, no longer than its wait limit."""
        if job.started_at is not None:
            return await job.events.get()
        waited = time.monotonic() - job.queued_at
        try:
            return await asyncio.wait_for(job.events.get(), max(0.0, job.wait_limit_s - waited))
        except TimeoutError:
            if job.started_at is not None:  # it started just now
                return await job.events.get()
            self.runner.cancel(job)  # skipped when its turn comes
            return WaitedTooLong(f"the request waited {job.wait_limit_s:g} s for the engine")

    async def _events(self, job: Job) -> AsyncIterator[ClientEvent]:
        """The job's events as they come; raises :class:`ApiError` for a failure."""
        while (item := await self._next(job)) is not None:
            if isinstance(item, WaitedTooLong):
                raise ApiError(503, f"{item}: the server is busy, retry later", code="queue_timeout")
            if isinstance(item, SwitchFailed):
                raise ApiError(503, str(item), param="model", code="model_load_failed")
            if isinstance(item, BaseException):
                raise ApiError(500, f"the request failed: {item}", code="internal_error")
            if isinstance(item, EngineDead):
                raise ApiError(503, f"the engine stopped ({item.message}); it is restarting: retry the request",
                               code="engine_restarting")
            if isinstance(item, p.Error):
                raise _engine_error(item)
            if isinstance(item, p.Finished) and job.ran_out:
                raise ApiError(504, f"the answer ran past {job.run_limit_s:g} s and was stopped: ask for fewer "
                                    "tokens (max_tokens)", code="answer_timeout")
            yield item

    async def _collect(self, job: Job, request: Request) -> Outcome:
        """Run a non-streaming request to its end; a client that disconnects cancels it."""
        outcome = Outcome()
        watcher = asyncio.create_task(_wait_for_disconnect(request))
        try:
            async for event in self._events(job):
                _add(outcome, event, job)
                if watcher.done():
                    self.runner.cancel(job)
        finally:
            outcome.client_gone = watcher.done()
            watcher.cancel()
            self.runner.cancel(job)  # a no-op once it ended
        return outcome

    async def _stream(self, job: Job, reply: Reply, include_usage: bool, started: float) -> AsyncIterator[str]:
        """The answer's chunks; its log line comes when the stream ends, however it ends (499: the client
        went away mid-stream)."""
        outcome, status = Outcome(), CLIENT_CLOSED
        try:
            yield json.dumps(reply.chunk(first=True))
            async for event in self._events(job):
                if isinstance(event, p.TokenDelta) and event.reasoning and reply.kind == "chat":
                    yield json.dumps(reply.chunk(reasoning=event.reasoning))
                if isinstance(event, p.TokenDelta) and event.text:
                    yield json.dumps(reply.chunk(event.text))
                _add(outcome, event, job)
            for chunk in reply.call_chunks(outcome.tool_calls):
                yield json.dumps(chunk)
            yield json.dumps({**reply.chunk(finish_reason=outcome.finish_reason), **hearth_report(outcome.left_out)})
            if include_usage:
                yield json.dumps(reply.usage_chunk(outcome.usage or {}))
            yield "[DONE]"
            self.requests += 1
            status = 200
        except ApiError as exc:
            status = exc.status
            yield json.dumps(exc.body())
        finally:
            self.runner.cancel(job)  # the client went away mid-stream: stop writing for it
            self._log(job, status, started, outcome)

    # -- logging ------------------------------------------------------------------------------------

    def _logged(self, response: Response, started: float, job: Job | None = None,
                outcome: Outcome | None = None) -> Response:
        self._log(job, response.status_code, started, outcome)
        return response

    def log_refused(self, status: int) -> None:
        """A connection answered before its request reached a route (connections.py)."""
        self._log(None, status, time.monotonic(), None)

    def log_failure(self, status: int, error: BaseException) -> None:
        """A request a route let an exception escape from (request_io.OneLinePerFailure)."""
        what = " ".join(repr(error).split())[:200]
        self._log(None, status, time.monotonic(), None, f" error={what}" if status >= 500 else "")

    def _log(self, job: Job | None, status: int, started: float, outcome: Outcome | None, extra: str = "") -> None:
        usage = (outcome.usage if outcome else None) or {}
        elapsed = time.monotonic() - started
        ttft = f"{outcome.ttft_ms:.0f}ms" if outcome and outcome.ttft_ms is not None else "-"
        rate = f"{outcome.tokens / elapsed:.1f}" if outcome and outcome.tokens and elapsed > 0 else "-"
        cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
        written = usage.get("completion_tokens", outcome.tokens if outcome else 0)  # so far, if it did not finish
        note_logged()
        self.config.log(f"{REQUEST_PREFIX}{job.request_id if job and job.request_id else '-'} {status} "
                        f"in={usage.get('prompt_tokens', 0)} cached={cached} out={written} "
                        f"ttft={ttft} tok/s={rate}{extra}")


def _add(outcome: Outcome, event: ClientEvent, job: Job) -> None:
    if isinstance(event, p.TokenDelta):
        if outcome.ttft_ms is None and job.started_at is not None:
            outcome.ttft_ms = (time.monotonic() - job.started_at) * 1000
        outcome.text += event.text
        outcome.reasoning += event.reasoning
        outcome.tokens += event.n_tokens
    elif isinstance(event, p.Finished):
        outcome.finish_reason = schema.finish_reason(event.finish_reason)
        outcome.tool_calls = list(event.tool_calls)
        outcome.usage = usage(event, outcome.tokens)
        outcome.left_out = job.left_out + (event.context_cut.left_out if event.context_cut is not None else 0)


def hearth_report(left_out: int) -> dict:
    """Hearth's own key of a chat answer whose oldest messages the model no longer read (none otherwise)."""
    return {"hearth": {"context": "dropped_oldest", "messages_left_out": left_out}} if left_out else {}


async def _wait_for_disconnect(request: Request) -> None:
    while not await request.is_disconnected():
        await asyncio.sleep(DISCONNECT_POLL_S)


def _engine_error(error: p.Error) -> ApiError:
    if error.code == "context_full":
        return ApiError(400, error.message, param="messages", code="context_length_exceeded")
    if error.code == "bad_request":
        return ApiError(400, error.message, code="invalid_request")
    return ApiError(500, error.message, code=error.code)

