"""What can go wrong with a remote engine, as a :class:`RemoteError` a user can act on.

Every failure of the network, TLS, the server's answer or its stream becomes one code (the
protocol's ``remote_*`` error codes) and one sentence that says what happened and what to do.
``retry_after`` is set for the answers worth waiting for (429, 503); whether to wait is
:mod:`app.engine_clients.remote.retry`'s decision.
"""

from __future__ import annotations

import ssl

import httpx2

from app.engine_clients.remote.redact import redact
from app.engine_clients.remote.spec import is_control


class RemoteError(Exception):
    def __init__(self, code: str, message: str, *, retry_after: float | None = None, status: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after
        self.status = status

    @property
    def retryable(self) -> bool:
        return self.retry_after is not None


def _plain(text: str) -> str:
    """``text`` with each control character or text-direction override written as its escape
    (``\\x1b``, ``\\u202e``): a server's words end up on terminals and in logs, where they must not act."""
    return "".join((f"\\x{ord(c):02x}" if ord(c) <= 0xFF else f"\\u{ord(c):04x}") if is_control(c) else c
                   for c in text)


def _server_words(body: object, key: str) -> str:
    """The server's own explanation from an OpenAI-shaped (or any JSON) error body, without the
    engine's ``key`` or any Bearer token (:func:`~app.engine_clients.remote.redact.redact`), without control
    characters (:func:`_plain`), shortened."""
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
        if message is None and isinstance(body.get("detail"), str):  # FastAPI's shape
            message = body["detail"]
        if isinstance(message, str) and message.strip():
            text = _plain(redact(" ".join(message.split()), key))
            return text if len(text) <= 300 else text[:297] + "..."
    return ""


def _retry_after(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value is not None else 1.0
    except ValueError:
        return 1.0  # an HTTP date or garbage: wait the shortest step


def from_status(name: str, status: int, body: object, retry_after: str | None = None, *,
                key: str = "") -> RemoteError:
    """The error for an HTTP answer that is not 200; ``key`` (the engine's) is never repeated."""
    said = _server_words(body, key)
    says = f" (it said: {said})" if said else ""
    if status in (401, 403):
        return RemoteError("remote_auth", f"the engine {name} refused the API key (HTTP {status}){says}; check the "
                                          "key in Settings → Engines or `hearth engines add`", status=status)
    if status == 404:
        return RemoteError("remote_model", f"the engine {name} does not have that model or address (HTTP 404){says}; "
                                           "pick one of its models (`hearth engines test NAME` lists them)",
                           status=status)
    if status in (429, 503):
        why = "is busy" if status == 429 else "is not available right now"
        return RemoteError("remote_busy", f"the engine {name} {why} (HTTP {status}){says}; try again in a moment",
                           retry_after=_retry_after(retry_after), status=status)
    if 400 <= status < 500:
        return RemoteError("remote_refused", f"the engine {name} refused the request (HTTP {status}){says}",
                           status=status)
    return RemoteError("remote_bad_reply", f"the engine {name} failed (HTTP {status}){says}; try again, or check "
                                           "the server's log", status=status)


def from_transport(name: str, url: str, exc: Exception, *, streaming: bool = False) -> RemoteError:
    """The error for a failure below HTTP: no connection, TLS, a timeout, a stream cut short."""
    if isinstance(exc, httpx2.ConnectError) and _is_tls(exc):
        return RemoteError("remote_tls", f"the engine {name} at {url} did not prove who it is (TLS: {_tls_reason(exc)}); "
                                         "check the address, or the server's certificate")
    if isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout)):
        return RemoteError("remote_unreachable", f"cannot reach the engine {name} at {url}; check that the server is "
                                                 "running and the address and network are right")
    if isinstance(exc, httpx2.TimeoutException):
        return RemoteError("remote_timeout", f"the engine {name} stopped answering (no data within the time limit); "
                                             "the server may be overloaded, try again")
    if streaming or isinstance(exc, (httpx2.RemoteProtocolError, httpx2.ReadError)):
        return RemoteError("remote_disconnected", f"the connection to the engine {name} broke while it was answering; "
                                                  "what it wrote so far is kept")
    return RemoteError("remote_unreachable", f"cannot talk to the engine {name} at {url} ({type(exc).__name__}); "
                                             "check the address and the network")


def _is_tls(exc: Exception) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) or "SSL" in type(seen).__name__ or "CERTIFICATE" in str(seen).upper():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _tls_reason(exc: Exception) -> str:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen.verify_message or "certificate not trusted"
        seen = seen.__cause__ or seen.__context__
    return "the secure connection failed"
