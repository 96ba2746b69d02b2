"""A message's identity: a hash chained from its parent's, so one hash names the whole branch up to it.

The one definition of which messages are the same, as simonw/llm and llama.cpp's server key their
caches. A message's identity covers what a chat template renders from it (its role, text and
reasoning) and its parent's identity, never where it is stored. Every part of Hearth that asks "is
this the message I have?" asks it with this hash:

- the store keeps it with each message (``messages.identity``, :mod:`model_store.conversations`), so
  ``hearth serve`` finds the stored message an API request continues, after a restart too
  (:mod:`app.surfaces.serve.api_conversations`);
- a snapshot keeps the identity of the branch its state ends with, and the worker stands on one by
  that identity (:mod:`engine.state.snapshot_cursor`; whether the template still writes the same
  text is checked there, the one place);
- the pipe's record of what the worker was already sent chains the same identity with each stored
  message's id (:mod:`engine.protocol.pipe_transcripts`).

It lives at the bottom layer, beside the rows that keep it, so the store computes it itself when a
message is added or its text changes. Each field is length-prefixed, so no text can pass for two
fields or for another's end.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

ROOT = ""  # the parent identity of a conversation's first message


def chained(parent: str, *fields: str) -> str:
    """The hash of ``fields`` after the hash ``parent`` (the primitive; see :func:`message_identity`)."""
    digest = hashlib.blake2b(parent.encode("utf-8", "surrogatepass"), digest_size=16)  # hex, unless a row is damaged
    for field in fields:
        data = field.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def message_identity(parent: str, role: str, content: str, reasoning: str = "", tool_part: str = "") -> str:
    """The identity of a message with this role, text, reasoning and tool part (the calls an answer
    made or the call a tool's result answers: :mod:`engine.protocol.tools.tool_part`) after the message
    ``parent`` names. A message without a tool part hashes as it did before tools existed."""
    return chained(parent, role, content, reasoning, *((tool_part,) if tool_part else ()))


def branch_identities(messages: Iterable[tuple[str, str, str, str]]) -> list[str]:
    """``[i1, ..., in]``: ``ik`` is the identity of the ``k``-th message of the branch (each given as
    role, text, reasoning, tool part), and so names the first ``k``."""
    identities, parent = [], ROOT
    for role, content, reasoning, tool_part in messages:
        parent = message_identity(parent, role, content, reasoning, tool_part)
        identities.append(parent)
    return identities


def row_identity(parent: Any, role: Any, content: Any, reasoning: Any, tool_part: Any = "") -> str:
    """:func:`message_identity` of a stored row's columns, whatever a damaged row holds in them (bytes or
    a number where text belongs is taken as text), so neither a migration nor a recovery stops at one."""
    return message_identity(*(_text(value) for value in (parent, role, content, reasoning, tool_part)))


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)
