"""The digest a snapshot keeps of the text its state holds, in place of the text (m012)."""

from __future__ import annotations

import hashlib


def text_digest(text: str) -> str:
    """128 bits of BLAKE2b over the text's UTF-8 (lone surrogates too: a template may write them)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
