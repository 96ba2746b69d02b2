"""The user's drafting choice as text (``auto``, ``off``, ``lookup``, ``mtp``, ``model:PATH``,
``eagle3:PATH``) and
as the protocol's typed :class:`~engine.protocol.DraftSpec`.

Kept free of the inference stack so settings forms and the command line can check a choice
without loading llama.cpp.
"""

from __future__ import annotations

from engine.protocol import DraftSpec

SPEC_HELP = "auto, off, lookup, mtp, model:PATH|ID or eagle3:PATH|ID"  # ID: an installed model or head (the app resolves it)
PATH_KINDS = ("model", "eagle3")  # the choices written KIND:PATH


class DraftRefused(ValueError):
    """This drafting choice cannot work for this model; the message says why and what to do."""


def parse_draft_spec(text: str) -> DraftSpec:
    """``text`` as a :class:`DraftSpec`; raises :class:`DraftRefused` saying what is allowed."""
    if text in ("auto", "off", "lookup", "mtp"):
        return DraftSpec(text)
    kind, colon, path = text.partition(":")
    if colon and kind in PATH_KINDS and path:
        return DraftSpec(kind, path)
    raise DraftRefused(f"unknown drafting choice {text!r}; use {SPEC_HELP}")


def draft_text(spec: DraftSpec) -> str:
    """How a user writes ``spec`` (the inverse of :func:`parse_draft_spec`)."""
    return f"{spec.kind}:{spec.path}" if spec.kind in PATH_KINDS else spec.kind
