"""Secrets never appear in what Hearth says about a remote engine.

A server may echo what it was sent (the ``Authorization`` header, the key itself) in an error
body, and that body becomes part of Hearth's error line, the stored message and the log. Every
text a server wrote passes through :func:`redact` before it is made into a message: the engine's
own key and any ``Bearer TOKEN`` are replaced by ``[redacted]``.
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)[^\s\"',;}\]]+")
MIN_KEY = 4  # shorter "keys" (e.g. "x", often a placeholder) would blank out ordinary words


def redact(text: str, key: str = "") -> str:
    """``text`` without ``key`` (where it is long enough to be a secret) and any Bearer token."""
    if key and len(key) >= MIN_KEY:
        text = text.replace(key, REDACTED)
    return _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
