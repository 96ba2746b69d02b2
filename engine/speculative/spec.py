"""The user's drafting choice as text (``auto``, ``off``, ``lookup``, ``mtp``, ``model:PATH``).

Kept free of the inference stack so settings forms can check a choice without loading llama.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass

SPEC_HELP = "auto, off, lookup, mtp or model:PATH"


class DraftRefused(ValueError):
    """This drafting choice cannot work for this model; the message says why and what to do."""


@dataclass(frozen=True)
class DraftSpec:
    kind: str  # auto | off | lookup | mtp | model
    path: str | None = None


def parse_draft_spec(text: str) -> DraftSpec:
    if text in ("auto", "off", "lookup", "mtp"):
        return DraftSpec(text)
    if text.startswith("model:") and len(text) > len("model:"):
        return DraftSpec("model", text[len("model:"):])
    raise DraftRefused(f"unknown drafting choice {text!r}; use {SPEC_HELP}")
