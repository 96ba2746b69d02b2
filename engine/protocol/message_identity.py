"""A message's identity: a hash chained from its parent's, so one hash names the whole branch up to it.

The one definition, as simonw/llm and llama.cpp's server key their caches: the pipe's record of
what the worker was already sent (:mod:`engine.protocol.pipe_transcripts`: role, text, reasoning and the stored
id) and ``hearth serve``'s mapping of API requests onto its stored conversations
(:mod:`app.surfaces.serve.api_conversations`: role and text, as clients send them back) chain the same way.
Each field is length-prefixed, so no text can pass for two fields or for another's end.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

ROOT = ""  # the parent hash of a conversation's first message


def message_identity(parent: str, *fields: str) -> str:
    """The hash of a message with these ``fields`` after the branch ``parent`` names."""
    digest = hashlib.blake2b(parent.encode("ascii"), digest_size=16)
    for field in fields:
        data = field.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def branch_identities(messages: Iterable[Sequence[str]]) -> list[str]:
    """``[h1, ..., hn]``: ``hk`` names the first ``k`` messages (each given as its fields)."""
    hashes, parent = [], ROOT
    for fields in messages:
        parent = message_identity(parent, *fields)
        hashes.append(parent)
    return hashes
