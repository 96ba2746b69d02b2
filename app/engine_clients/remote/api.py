"""The few calls Hearth makes to an OpenAI-compatible server, over ``httpx2`` (the HTTP client
huggingface-hub already brings): the model list, and streamed chat or text completions read as
server-sent events. TLS is verified; redirects are not followed (a key is never sent on to
another host); every failure is a :class:`~app.engine_clients.remote.errors.RemoteError`.

A stream is stopped from another thread by shutting its socket down (:class:`Interrupt`): closing
the response object alone does not wake a read blocked on a server that went silent, which held a
Ctrl+C until the 600 s read timeout. Streams go over connections of their own (not kept for the
next request), so their socket is known from the moment it connects, before any header comes.

Servers differ in what they say about a model's context: vLLM's ``max_model_len``, llama.cpp
server's ``meta.n_ctx_train``, Ollama and llama-cpp-python say nothing (:func:`model_context`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import msgspec

from app.engine_clients.remote.errors import RemoteError, from_status, from_transport
from app.engine_clients.remote.spec import RemoteEngine

CONNECT_TIMEOUT_S = 10.0
# Between two pieces of a stream (and before the first: a long prompt on a busy server). The test
# switch HEARTH_TEST_REMOTE_TIMEOUT_S shortens it so a test can reach the timeout.
READ_TIMEOUT_S = 600.0
MAX_ERROR_BODY = 64 * 1024
MAX_JSON_BODY = 16 * 2**20  # a model list or a token count; more is no OpenAI-compatible answer


class OpenStream(msgspec.Struct):
    """An answer being streamed: its JSON chunks, and the response to close to stop it (from any thread)."""

    response: httpx2.Response
    chunks: Iterator[dict]


class Interrupt:
    """Ends a request being read on another thread at once, whatever it is waiting for: the
    connection, the headers or the next piece. It follows the request's connection (through
    httpcore's ``trace`` extension) and :meth:`fire` shuts its socket down, which wakes the blocked
    read; a connection made after that is shut down as it is made."""

    CONNECTED = ("connection.connect_tcp.complete", "connection.start_tls.complete")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stream = None  # the request's network stream, once connected
        self.fired = False

    def trace(self, event: str, info: dict) -> None:
        """httpcore's ``trace`` callback (on the reading thread)."""
        if event in self.CONNECTED and info.get("return_value") is not None:
            with self._lock:
                self._stream = info["return_value"]
                fired = self.fired
            if fired:
                _shut(self._stream)

    def fire(self) -> None:
        with self._lock:
            self.fired = True
            stream = self._stream
        _shut(stream)


def _shut(stream) -> None:
    """Shut a network stream's socket down (both ways; the file stays open for its owner to close)."""
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is None:
        return
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the TCP socket under TLS too, its TLS state untouched
    except OSError:  # already closed, or never connected
        pass


class ServerModel(msgspec.Struct, frozen=True):
    id: str
    context: int = 0  # 0: the server does not say


def _read_capped(response: httpx2.Response, limit: int = MAX_ERROR_BODY) -> bytes:
    """At most ``limit`` bytes of a body: what a server says, not all it may send."""
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) >= limit:
            break
    return bytes(data[:limit])


def read_timeout() -> float:
    value = os.environ.get("HEARTH_TEST_REMOTE_TIMEOUT_S", "")
    return float(value) if value else READ_TIMEOUT_S


def model_context(entry: dict, served: int = 0) -> int:
    """The context length a /v1/models entry states, 0 when it states none. ``served`` is the
    context llama.cpp's server runs with (its ``/props``), which comes before the length the model
    was trained on (its entry's ``meta.n_ctx_train``)."""
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    for value in (entry.get("max_model_len"), entry.get("context_length"), entry.get("context_window"), served,
                  meta.get("n_ctx_train")):
        if _positive_int(value):
            return value
    return 0


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class OpenAIApi:
    """One engine's HTTP connection pool; safe to use from several threads."""

    def __init__(self, engine: RemoteEngine) -> None:
        self.engine = engine
        headers = {"Authorization": f"Bearer {engine.api_key}"} if engine.api_key else {}
        timeout = httpx2.Timeout(read_timeout(), connect=CONNECT_TIMEOUT_S)
        self._http = httpx2.Client(base_url=engine.url + "/", headers=headers, timeout=timeout,
                                   follow_redirects=False, verify=True)
        self._streams = httpx2.Client(base_url=engine.url + "/", headers=headers, timeout=timeout,
                                      follow_redirects=False, verify=True,
                                      limits=httpx2.Limits(max_keepalive_connections=0))  # see the docstring

    def close(self) -> None:
        self._http.close()
        self._streams.close()

    def models(self) -> list[ServerModel]:
        body = self._json("GET", "models")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise RemoteError("remote_bad_reply", f"the engine {self.engine.name} did not answer /models like an "
                                                  "OpenAI-compatible server; check the address (it should end in /v1)")
        models = [m for m in data if isinstance(m, dict) and m.get("id")]
        served = self._llama_server_context() if any(isinstance(m.get("meta"), dict) for m in models) else 0
        return [ServerModel(str(m["id"]), model_context(m, served)) for m in models]

    def _llama_server_context(self) -> int:
        """The context a llama.cpp server gives each request (``/props``), 0 if it does not say."""
        try:
            props = self._json("GET", self.root_url("props"))
        except RemoteError:
            return 0
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        return n_ctx if _positive_int(n_ctx) else 0

    def post_json(self, path: str, body: dict) -> object:
        return self._json("POST", path, body)

    def _json(self, method: str, path: str, body: dict | None = None) -> object:
        try:
            with self._http.stream(method, path, json=body) as response:
                content = _read_capped(response, MAX_JSON_BODY + 1)
        except httpx2.HTTPError as exc:
            raise from_transport(self.engine.name, self.engine.url, exc) from None
        if response.status_code != 200:
            raise self._status_error(response.status_code, content[:MAX_ERROR_BODY], response.headers)
        if len(content) > MAX_JSON_BODY:
            raise RemoteError("remote_bad_reply", f"the engine {self.engine.name} answered {path} with more than "
                                                  f"{MAX_JSON_BODY // 2**20} MiB; check the address")
        try:
            return json.loads(content)
        except ValueError:
            raise RemoteError("remote_bad_reply", f"the engine {self.engine.name} answered {path} with something "
                                                  "that is not JSON; check the address (it should end in /v1)") from None

    @contextmanager
    def stream(self, path: str, body: dict, interrupt: Interrupt | None = None) -> Iterator[OpenStream]:
        """POST ``body`` (a streaming request) and yield the open stream; leaving the block closes
        the connection (that is how a stop reaches the server). ``interrupt`` can end it from
        another thread at any point."""
        extensions = {"trace": interrupt.trace} if interrupt is not None else None
        try:
            with self._streams.stream("POST", path, json=body, extensions=extensions) as response:
                if response.status_code != 200:
                    raise self._status_error(response.status_code, _read_capped(response), response.headers)
                yield OpenStream(response, self._chunks(response))
        except httpx2.HTTPError as exc:
            raise from_transport(self.engine.name, self.engine.url, exc, streaming=False) from None

    def root_url(self, path: str) -> str:
        """``path`` on the server's root (where llama.cpp and vLLM keep /tokenize), not under /v1."""
        base = self.engine.url.removesuffix("/v1")
        return f"{base}/{path}"

    def _chunks(self, response: httpx2.Response) -> Iterator[dict]:
        try:
            for event in httpx2.EventSource(response):
                if event.data.strip() == "[DONE]":
                    return
                if not event.data.strip():
                    continue
                try:
                    chunk = json.loads(event.data)
                except ValueError:
                    raise self._bad_stream("a piece of its stream is not JSON") from None
                if not isinstance(chunk, dict):
                    raise self._bad_stream("a piece of its stream is not an object")
                if chunk.get("error"):  # an error reported inside the stream (vLLM, llama.cpp do this)
                    raise from_status(self.engine.name, 500, chunk, key=self.engine.api_key)
                yield chunk
        except httpx2.SSEError:
            raise self._bad_stream("it did not answer with a stream of events") from None
        except httpx2.HTTPError as exc:
            raise from_transport(self.engine.name, self.engine.url, exc, streaming=True) from None

    def _bad_stream(self, what: str) -> RemoteError:
        return RemoteError("remote_bad_reply", f"the engine {self.engine.name} sent a broken answer ({what}); "
                                               "what it wrote so far is kept")

    def _status_error(self, status: int, content: bytes, headers) -> RemoteError:
        try:
            body = json.loads(content)
        except ValueError:
            body = None
        return from_status(self.engine.name, status, body, headers.get("retry-after"), key=self.engine.api_key)
