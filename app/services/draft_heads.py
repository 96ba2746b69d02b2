"""``--draft auto`` with an installed EAGLE-3 head: the app finds the head, the worker tries it.

The worker knows nothing of the installed-models registry (as with ``--model ID``), so the app looks
the head up when a request meets the loaded model: the registry's heads that fit the model's hidden
size and layer count (:meth:`model_store.installed.ModelLibrary.heads_for`, the last one added
first) are those ``auto`` may use, and the first goes to the worker as ``DraftSpec("auto", path)``.
The worker loads it only after its own check (``check_head``, which also compares vocabularies) and
otherwise drafts as ``auto`` always did (the model's MTP head, else prompt lookup), in silence:
``auto`` never fails a request. A remote engine drafts by itself, so it is sent no head. The callers
are where a request meets its model: ``generate``, ``send`` and ``chat`` once the model is loaded, the
window before it sends a turn, and ``hearth serve`` on its runner's thread.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from app.services.model_refs import open_library, resolve_head_ref, resolve_model_ref
from engine import protocol as p
from engine.protocol import ModelFacts
from engine.protocol.draft_choice import draft_text, parse_draft_spec
from model_store.db import StoreError
from model_store.eagle3_heads import ModelShape
from model_store.installed import ModelLibrary


def installed_head(facts: ModelFacts, library: ModelLibrary) -> Path | None:
    """The installed EAGLE-3 head ``auto`` drafts with for a model of these facts (None: no head fits, or
    the registry cannot be read, which leaves ``auto`` as it was)."""
    try:
        heads = library.heads_for(ModelShape(facts.n_embd, facts.n_layer))
    except StoreError:
        return None
    return heads[0].path if heads else None


def with_installed_head(command: p.Answer, facts: ModelFacts, library: ModelLibrary) -> p.Answer:
    """``command`` with the installed head for the loaded model in its ``auto`` drafting choice; any other
    choice (or ``auto`` where no head fits) is sent as it is. ``library`` is over the caller's own
    database connection: a turn opens no second one."""
    if not _wants_head(command):
        return command
    head = installed_head(facts, library)
    if head is None:
        return command
    return msgspec.structs.replace(command, draft=p.DraftSpec("auto", str(head)))


def with_head_from(command: p.Answer, facts: ModelFacts, data_dir: Path) -> p.Answer:
    """:func:`with_installed_head` for a caller that holds no database (``generate``, ``hearth serve``):
    the registry of ``data_dir`` is opened for the look-up, and only when ``auto`` may take a head."""
    if not _wants_head(command):
        return command
    try:
        library = open_library(data_dir)
    except StoreError:
        return command
    try:
        return with_installed_head(command, facts, library)
    finally:
        library.db.close()


def _wants_head(command: p.Answer) -> bool:
    return command.draft.kind == "auto" and not command.draft.path


def resolve_draft_files(text: str, data_dir: Path) -> str:
    """A drafting choice with an installed id in place of its file: ``model:ID`` as ``--model ID`` resolves,
    ``eagle3:ID`` as an installed head's file; paths and the other choices are kept as they are.

    Raises:
        DraftRefused: If ``text`` is no drafting choice.
        ModelRefError: If the id names nothing installed (the message says what to do).
    """
    spec = parse_draft_spec(text)
    if spec.kind == "model":
        return draft_text(p.DraftSpec("model", resolve_model_ref(spec.path, data_dir)))
    if spec.kind == "eagle3":
        return draft_text(p.DraftSpec("eagle3", resolve_head_ref(spec.path, data_dir)))
    return text
