"""What a remote engine is (:class:`RemoteEngine`) and which addresses Hearth will talk to.

TLS is verified always. Plain ``http://`` is allowed only to this computer (loopback) or a private
network address, where the traffic stays on the user's own network; it is said with a warning
(:func:`check_url`). A name that resolves elsewhere, or a public address, needs ``https://``.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

import msgspec

MAX_NAME = 40
ENGINE_NAME_RULE = "1 to 40 letters, digits, '-', '_' or '.', starting with a letter or digit"
LOCAL_ENGINE = "local"  # the name the app uses for this computer's own worker; never a remote engine's
REMOTE_PREFIX = "engine:"  # a model reference "engine:NAME" is the remote engine NAME (LoadModel.model)
DEFAULT_CONTEXT = 4096  # assumed when neither the server nor the user says how long the engine's context is


class RemoteEngine(msgspec.Struct, frozen=True):
    """One remote engine as a client needs it. The key is filled in from the secret store when the
    engine is used; it is never written into settings."""

    name: str
    url: str  # the API's base, ending in /v1 (https://gpu.example.com/v1, http://127.0.0.1:8000/v1)
    model: str = ""  # the server's model id; "" = the first one it lists
    context: int = 0  # tokens; 0 = what the server says, else DEFAULT_CONTEXT
    api_key: str = ""


class UrlProblem(ValueError):
    """An address Hearth will not use; the message says why and what to write instead."""


BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def is_control(char: str) -> bool:
    """C0 (CR and LF included), DEL, C1, or a bidi override/isolate/mark."""
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F or char in BIDI_CONTROLS


def control_problem(what: str, text: str) -> str | None:
    """Why ``text`` (an engine's ``what``: "address", "name", "model id") cannot be used, or None.

    A control character in an address could add a header to every request (CR/LF), and in a name
    or model id it reaches terminals and logs; none has a use in them, so they are refused.
    """
    bad = next((char for char in text if is_control(char)), None)
    if bad is None:
        return None
    return (f"an engine's {what} cannot contain control characters or text-direction overrides "
            f"(found U+{ord(bad):04X}); write it on one line as plain text")


def engine_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an engine, or None."""
    if (problem := control_problem("name", name)) is not None:
        return problem
    ok = (0 < len(name) <= MAX_NAME and name[0].isascii() and name[0].isalnum()
          and all(c.isascii() and (c.isalnum() or c in "-_.") for c in name))
    if not ok:
        return f"an engine's name is {ENGINE_NAME_RULE}; got {name!r}"
    if name.lower() == LOCAL_ENGINE:
        return f"{LOCAL_ENGINE!r} is this computer's own engine; choose another name"
    return None


def normalized_url(url: str) -> str:
    """The base URL as the client uses it: no trailing slash, ``/v1`` added when no path was given."""
    url = url.strip().rstrip("/")
    if (problem := control_problem("address", url)) is not None:
        raise UrlProblem(problem)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UrlProblem(f"{url!r} is not a web address; write it as https://HOST[:PORT]/v1")
    if parts.username or parts.password:
        raise UrlProblem("put the API key in the key field, not in the address")
    if parts.query or parts.fragment:
        raise UrlProblem(f"{url!r} has a query or fragment; give only the API's base, like https://HOST/v1")
    return url if parts.path not in ("", "/") else url + "/v1"


def is_private_host(host: str) -> bool:
    """Whether ``host`` is this computer or on a private network (by address, or every address its
    name resolves to)."""
    try:
        addresses = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        if host.lower() == "localhost":
            return True
        try:
            infos = socket.getaddrinfo(host, None)
        except (socket.gaierror, UnicodeError, OSError):
            return False
        addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    return bool(addresses) and all(a.is_loopback or a.is_private or a.is_link_local for a in addresses)


def check_url(url: str) -> tuple[str, str]:
    """``(normalized url, warning)``: the warning is "" for https. Raises :class:`UrlProblem` for an
    address Hearth will not use."""
    url = normalized_url(url)
    parts = urlsplit(url)
    if parts.scheme == "https":
        return url, ""
    if not is_private_host(parts.hostname or ""):
        raise UrlProblem(f"{parts.hostname} is not on this computer or a private network, so plain http:// "
                         "would send your messages unencrypted over the internet; use https://")
    return url, (f"{parts.hostname} is reached over plain http://: messages are not encrypted on the way "
                 "(fine on this computer or a network you trust)")
