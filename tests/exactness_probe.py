"""Exactness of one CPU build on some models, measured in this process (one build per process).

    HEARTH_CPU_VARIANT=haswell python -m tests.exactness_probe MODEL.gguf [...]

prints one JSON line: the build in use (``variant``; ``unsupported`` when this CPU cannot run the
one asked for) and, per model, its weight type, whether it was loaded with repacked weights, and:

* ``batch_exact``: after a prompt longer than 512 tokens (past flash attention's single-token
  switch), a batch of 5 tokens gives bit-identical logits, row by row, to the same tokens decoded
  one at a time;
* ``draft_identical``: greedy decoding drafted by the same file as draft model (so nearly every
  round is verified as a full batch), with auto-off disabled, yields the same tokens as
  ``--draft off``, at a short prompt and at one of 490 tokens (read in one prefill chunk, so both
  runs start from the same state; the answer crosses 512 cells of KV); ``rounds`` / ``accepted``
  show the drafting ran.

Used by ``tests/engine/test_quant_exactness.py`` (CI, on ``hybrid-quant-<TYPE>``) and
``tests/bench/bench_quant_exactness.py`` (the table on ``hybrid-bench-<TYPE>``).
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import numpy as np

from engine import protocol as p
from engine.protocol.draft_choice import parse_draft_spec
from engine.backends import row_kernels
from engine.backends.base import ContextSettings, default_threads
from engine.backends.cpu_variants import CpuBackendError
from engine.backends.llama_context import LlamaContext
from engine.backends.llama_cpp import LlamaModel, init_backend
from app.engine_clients.client import new_request_id
from app.engine_clients.inproc_client import InprocClient
from engine.templates.prompts import raw_prompt_tokens

LONG_TEXT = " ".join(f"entry {i}: the keeper logged the light, the wind and the tide." for i in range(60))
EXTRA = [101, 202, 303, 404, 505]
ANSWER_TOKENS = 40
ONE_CHUNK_TOKENS = 490  # under the 512-token batch, and the answer then crosses 512 cells of KV


def _read(context: LlamaContext, tokens: list[int]) -> None:
    for start in range(0, len(tokens), 512):
        context.decode(tokens[start:start + 512], start)


def batch_exact(path: Path, repack: bool | None = None, fast: bool = False) -> bool:
    """``repack`` None: the kernels the engine picks for this weight type; True/False forces them.
    ``fast``: the batch takes the kernels a prompt read may take (``row_kernels.fast_kernels``)."""
    model = LlamaModel(path, repack=repack)
    context = LlamaContext(model, ContextSettings(n_ctx=2048, n_threads=default_threads()))
    try:
        prompt = raw_prompt_tokens(model, LONG_TEXT)[:600]
        _read(context, prompt)
        with row_kernels.fast_kernels() if fast else contextlib.nullcontext():
            context.decode(EXTRA, len(prompt), all_logits=True)
        batch = [context.logits(i).copy() for i in range(len(EXTRA))]
        context.clear()
        _read(context, prompt)
        rows = []
        for i, token in enumerate(EXTRA):
            context.decode([token], len(prompt) + i)
            rows.append(context.logits().copy())
        return all(np.array_equal(a.view(np.uint32), b.view(np.uint32)) for a, b in zip(batch, rows))
    finally:
        context.close()
        model.close()


def greedy(client: InprocClient, text: str, draft: str) -> p.Finished:
    command = p.Complete(request_id=new_request_id("exact"), prompt=text, max_tokens=ANSWER_TOKENS,
                         sampling=p.SamplingSpec(temperature=0.0, seed=1), draft=parse_draft_spec(draft), draft_max=4,
                         draft_auto_off=False)
    events = list(client.stream(command))
    errors = [e.message for e in events if isinstance(e, p.Error)]
    if errors:
        raise RuntimeError(f"{draft}: {'; '.join(errors)}")
    return next(e for e in events if isinstance(e, p.Finished))


def one_chunk_text(model: LlamaModel, limit: int = ONE_CHUNK_TOKENS) -> str:
    """The longest run of LONG_TEXT's words that is at most ``limit`` tokens: a prompt read in one
    prefill chunk. Longer prompts are read in chunks whose lengths adapt to timing
    (engine.decoding.generation.prefill), so two runs could sum the recurrent state in a different order and
    differ before drafting even starts."""
    words = LONG_TEXT.split()
    low, high = 1, len(words)
    while low < high:
        middle = (low + high + 1) // 2
        if len(raw_prompt_tokens(model, " ".join(words[:middle]))) <= limit:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low])


def drafting(path: Path, long_text: str) -> dict:
    client = InprocClient(telemetry_interval_ms=0)
    client.start()
    try:
        client.load_model(str(path), n_ctx=4096, draft_max=4)
        result = {"draft_identical": True, "rounds": 0, "accepted": 0}
        for text in ("The lighthouse keeper", long_text):
            plain, drafted = greedy(client, text, "off"), greedy(client, text, f"model:{path}")
            result["draft_identical"] &= plain.token_ids == drafted.token_ids
            result["rounds"] += drafted.draft.rounds
            result["accepted"] += drafted.draft.accepted
        return result
    finally:
        client.close(mode="abort")


def probe(path: Path, with_drafting: bool = True) -> dict:
    model = LlamaModel(path)
    facts = {"model": path.name, "weight_type": model.weight_type, "repacked": model.repacked,
             "kernels_exact": model.batch_exact}
    long_text = one_chunk_text(model)
    model.close()
    drafted = drafting(path, long_text) if with_drafting else {}
    return {**facts, "batch_exact": batch_exact(path), **drafted}


def main(argv: list[str]) -> None:
    """``--repacked-only``: just ``batch_exact`` with repacked weights forced on (to compare with the
    canary's verdicts); ``--fast-only``: just ``batch_exact`` on the kernels a prompt read may take (a
    control that shows the check sees a difference where one is); ``--batch-only``: the kernels'
    exactness without the drafting runs."""
    forced = argv[:1] in (["--repacked-only"], ["--fast-only"])
    fast = argv[:1] == ["--fast-only"]
    batch_only = argv[:1] == ["--batch-only"]
    argv = argv[1:] if batch_only else argv
    try:
        choice = init_backend()
    except CpuBackendError as exc:
        print(json.dumps({"variant": "unsupported", "detail": str(exc)}))
        return
    paths = [Path(a) for a in argv[forced:]]
    if forced:
        models = [{"model": path.name, "batch_exact": batch_exact(path, repack=None if fast else True, fast=fast)}
                  for path in paths]
    else:
        models = [probe(path, with_drafting=not batch_only) for path in paths]
    print(json.dumps({"variant": choice.variant, "models": models}))


if __name__ == "__main__":
    main(sys.argv[1:])
