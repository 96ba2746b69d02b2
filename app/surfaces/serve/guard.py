"""What a web page could send the API is refused before it reaches a route (an ASGI middleware).

A page the user visits can make the browser send requests to ``127.0.0.1``; with no key set the API
would run the model for it. Three checks close that, each answered with one OpenAI-shaped JSON error:

- **Host** (DNS rebinding: a page's own name made to resolve to 127.0.0.1, so the browser lets it
  read the answers). When the server is bound to a loopback address, only the loopback names
  (``localhost``, ``127.0.0.1`` and other loopback addresses, ``[::1]``; any port) and the bound
  address are accepted; others get 403 ``forbidden_host``. When it is bound to another address
  (``--host`` for LAN use, including ``0.0.0.0``/``::``), ``hearth serve`` has already required a key,
  and any Host is accepted: the machine's names on a LAN vary, and a page cannot send the key.
  A request without Host (HTTP/1.0, never a browser) passes.
- **Origin** (cross-site requests): a request that carries one must name an origin given to
  ``--cors`` exactly (several may be given, separated by commas; ``*`` allows any); others get 403
  ``forbidden_origin``. Requests without Origin (curl, the ``openai`` client, scripts) pass.
- **Content-Type** on the JSON endpoints' POSTs must be ``application/json``; anything else (the
  ``text/plain`` or form "simple requests" a page may send without asking) gets 415
  ``unsupported_media_type``, so the model never runs for it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable

from app.surfaces.serve.replies import ApiError

LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "127.0.0.1", "::1"})
JSON_TYPE = "application/json"


def cors_origins(value: str | None) -> list[str]:
    """The origins ``--cors`` names (comma-separated), compared exactly (without a trailing slash)."""
    return [origin.strip().rstrip("/") for origin in (value or "").split(",") if origin.strip()]


def host_name(header: str) -> str:
    """The name in a Host header, without its port or IPv6 brackets, in lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def is_loopback_name(name: str) -> bool:
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class WebPageGuard:
    """Refuses requests with a foreign Host, a foreign Origin, or a non-JSON body on a JSON endpoint."""

    def __init__(self, app, *, bound_host: str | None, cors: str | None, json_paths: Iterable[str],
                 on_refused: Callable[[int], None] = lambda status: None) -> None:
        self.app = app
        bound = host_name(bound_host) if bound_host else "127.0.0.1"
        self.any_host = not is_loopback_name(bound)  # LAN use: a key is required (see the docstring)
        self.bound = bound
        self.origins = set(cors_origins(cors))
        self.json_paths = frozenset(json_paths)
        self.on_refused = on_refused

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        refusal = self.refusal(scope, headers)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        self.on_refused(refusal.status)
        await refusal.response()(scope, receive, send)

    def refusal(self, scope, headers: dict[str, str]) -> ApiError | None:
        host = headers.get("host")
        if host is not None and not self._host_allowed(host):
            return ApiError(403, f"This server does not answer requests for the host '{host}': use "
                                 "http://127.0.0.1 or http://localhost (a web page may not reach it under "
                                 "another name)", code="forbidden_host")
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin):
            return ApiError(403, f"Requests from web pages at '{origin}' are not allowed: start the server "
                                 f"with --cors {origin} to let that page use it", code="forbidden_origin")
        if scope["method"] == "POST" and scope["path"] in self.json_paths:
            media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if media != JSON_TYPE:
                shown = media or "none"
                return ApiError(415, f"This endpoint takes a JSON body: send it with "
                                     f"'Content-Type: application/json' (the request had {shown})",
                                code="unsupported_media_type")
        return None

    def _host_allowed(self, host: str) -> bool:
        if self.any_host:
            return True
        name = host_name(host)
        return name == self.bound or is_loopback_name(name)

    def _origin_allowed(self, origin: str) -> bool:
        return "*" in self.origins or origin.strip().rstrip("/") in self.origins
