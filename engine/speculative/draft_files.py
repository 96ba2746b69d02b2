"""Checking a draft's file before llama.cpp opens it.

A draft model (``--draft model:PATH``) or an EAGLE-3 head (``--draft eagle3:PATH``) is a second GGUF
file the worker opens beside the model it holds, and llama.cpp reads every byte of a file it opens
into memory (it maps the file whole with ``MAP_POPULATE``). So before that, :func:`check_draft_file`
puts it through the checks a model's file gets:

* the one walk of the file (:func:`engine.models.model_files.check_model_file`, :mod:`model_store.gguf_meta`):
  its metadata and its list of tensors, every tensor's data inside the file, and the file ending where
  its data does (a valid head followed by a terabyte of holes is refused here, at once);
* for a head, every tensor's type (:func:`engine.models.model_files.check_head_file`);
* the memory check: its file and its own cache at the model's context must fit in the memory
  available beside the model already loaded (:func:`model_store.fit.available_memory` and
  :func:`model_store.fit.verdict`, sized as a model is by :mod:`engine.context.context_memory`), or it is
  refused with the numbers.

Every refusal is a :class:`~engine.backends.base.ModelLoadError` for a "draft file": it names the file,
what is wrong and what to do.
"""

from __future__ import annotations

from pathlib import Path

from engine.backends.base import ModelLoadError
from engine.context.context_memory import model_memory
from engine.models.model_files import DRAFT_ELSE, check_head_file, check_model_file
from model_store.download_errors import format_bytes
from model_store.fit import RUNTIME_OVERHEAD_BYTES, TOO_BIG, available_memory, verdict

DRAFT_FILE = "draft file"  # what ModelLoadError calls the file
# The sequences a drafter's own context keeps (each with its own recurrent state, if any): a draft
# model's history, its draft and a tree's branch (engine.speculative.draft_model); a head's one.
SEQUENCES = {"model": 3, "eagle3": 1}


def check_draft_file(path: Path, kind: str, *, n_ctx: int, held_bytes: int = 0, available: int | None = None) -> None:
    """Refuse a draft file (``kind`` "model" or "eagle3") that is not a sound GGUF, or does not fit in memory.

    Args:
        path: The file.
        kind: "model" for a draft model, "eagle3" for an EAGLE-3 head.
        n_ctx: The context the drafter's own context is made with (the loaded model's).
        held_bytes: What the worker holds already (the loaded model's estimate): a pinned figure of
            available memory (:data:`model_store.fit.AVAILABLE_MEMORY_ENV`) has it taken out.
        available: The memory available now; None measures it.

    Raises:
        ModelLoadError: Naming the file, saying what is wrong and what to do.
    """
    try:
        metadata = check_model_file(path, DRAFT_ELSE)
        if kind == "eagle3":
            check_head_file(path)
    except ModelLoadError as exc:
        raise ModelLoadError(path, exc.reason, what=DRAFT_FILE) from None
    memory = model_memory(path, metadata)
    need = memory.total_bytes(n_ctx, planes=SEQUENCES.get(kind, 1)) - RUNTIME_OVERHEAD_BYTES  # the worker is counted
    free = available_memory(held_bytes) if available is None else available
    if verdict(need, free) == TOO_BIG:
        raise ModelLoadError(path, (
            f"this draft needs about {format_bytes(need)} of memory (its file {format_bytes(memory.file_bytes)}, "
            f"its cache for {n_ctx:,} tokens {format_bytes(need - memory.file_bytes)}), but {format_bytes(free)} "
            "is available beside the loaded model; choose a smaller draft file, or another drafting choice such "
            "as auto"), what=DRAFT_FILE)


def held_by(session) -> int:
    """What a loaded :class:`~engine.models.session.ModelSession` holds, by its estimate (0 when it was not sized)."""
    plan = getattr(session, "plan", None)
    return plan.estimated_bytes if plan is not None else 0
