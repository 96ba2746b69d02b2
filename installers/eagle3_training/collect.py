"""Collect what the built-in model's EAGLE-3 head learns from: the model's own text, its three layers'
inputs at every position, and its next-token distribution there.

Two kinds of text are read, both by the built-in model as it runs (the set-up's fast-reading copy):

- **its own answers** to :func:`prompts.training_prompts`, written at its default sampling (each prompt
  with its own seed), the prompt rendered with its chat template;
- **plain text**: :func:`prompts.plain_texts`, cut into pieces of :data:`PIECE` tokens.

Each text is then decoded in one batch on a context that keeps the inputs of layers
:data:`LAYERS` (llama.cpp's layer capture, :class:`engine.backends.llama_eagle3.TargetFeatures`, the
same the drafter reads) and every row's logits. Per position p it stores the three inputs (float16,
``[3 * 576]``) and the model's distribution of the token at p + 1 as its :data:`TOP` likeliest tokens
and their probabilities (the teacher). Shards of :data:`SHARD` texts go to ``OUT/shard_NNN.npz``
(keys ``tokens``, ``offsets``, ``features``, ``top_ids``, ``top_p``); a rerun skips the shards that
exist, so it can be stopped and resumed.

Run with the project's environment: ``.venv/bin/python installers/eagle3_training/collect.py OUT
[--answers N] [--max-tokens N]``. It prints one line per shard.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from app.services.sampling_defaults import resolve_sampling  # noqa: E402
from engine.backends.base import ContextSettings  # noqa: E402
from engine.backends.llama_context import LlamaContext  # noqa: E402
from engine.backends.llama_eagle3 import TargetFeatures  # noqa: E402
from engine.templates.chat_template import ChatMessage  # noqa: E402
from engine.decoding.generation import Generation, GenerationSettings  # noqa: E402
from engine.models.model_files import resolve_model_ref  # noqa: E402
from engine.templates.prompts import chat_prompt_tokens, raw_prompt_tokens  # noqa: E402
from engine.decoding.sampling import SamplingParams  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from prompts import plain_texts, training_prompts  # noqa: E402

LAYERS = (2, 15, 27)  # EAGLE-3's trainers' default for a 30-layer target: 2, n_layer // 2, n_layer - 3
TOP = 20  # teacher tokens kept a position
PIECE = 384  # tokens of plain text per piece
SHARD = 100  # texts per shard
N_CTX = 1024


class Capture:
    """A context that decodes a whole text and keeps its layer inputs and every row's logits."""

    def __init__(self, model) -> None:
        self.context = LlamaContext(model, ContextSettings(n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=512, n_threads=2))
        self.features = TargetFeatures(self.context, LAYERS)
        self.features.capture(True)

    def read(self, tokens: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Features ``[n, 3 * n_embd]`` (f16), teacher ids ``[n, TOP]`` and probabilities (f16)."""
        self.context.clear()
        self.context.decode(tokens, 0, all_logits=True)
        features = self.features.read(len(tokens)).astype(np.float16)
        ids = np.empty((len(tokens), TOP), dtype=np.int32)
        probs = np.empty((len(tokens), TOP), dtype=np.float16)
        for row in range(len(tokens)):
            logits = self.context.logits(row).astype(np.float64)
            top = np.argpartition(-logits, TOP)[:TOP]
            top = top[np.argsort(-logits[top])]
            p = np.exp(logits - logits.max())
            p /= p.sum()
            ids[row], probs[row] = top, p[top]
        return features, ids, probs


def answers(session, prompts: list[str], max_tokens: int, first_seed: int):
    """Each prompt rendered, followed by the model's answer at its default sampling (seed per prompt)."""
    spec = resolve_sampling("default").spec()
    for i, prompt in enumerate(prompts):
        tokens = chat_prompt_tokens(session.model, [ChatMessage("user", prompt)])
        sampling = replace(SamplingParams.from_spec(spec, session.breakers), seed=first_seed + i)
        run = Generation(session, tokens, GenerationSettings(sampling, max_tokens=max_tokens))
        list(run)
        yield tokens + list(run.token_ids)


def plain(model) -> list[list[int]]:
    pieces = []
    for text in plain_texts():
        tokens = raw_prompt_tokens(model, text)
        pieces += [tokens[i:i + PIECE] for i in range(0, len(tokens), PIECE) if len(tokens[i:i + PIECE]) >= 32]
    return pieces


def write_shard(path: Path, capture: Capture, texts: list[list[int]]) -> int:
    parts = [capture.read(t) for t in texts]
    tokens = np.concatenate([np.asarray(t, dtype=np.int32) for t in texts])
    offsets = np.cumsum([0] + [len(t) for t in texts]).astype(np.int64)
    np.savez(path.with_suffix(".tmp.npz"), tokens=tokens, offsets=offsets,
             features=np.concatenate([f for f, _, _ in parts]), top_ids=np.concatenate([i for _, i, _ in parts]),
             top_p=np.concatenate([p for _, _, p in parts]))
    path.with_suffix(".tmp.npz").rename(path)
    return len(tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--answers", type=int, default=2000)
    parser.add_argument("--max-tokens", type=int, default=160)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    session = open_session(str(resolve_model_ref("default")), n_ctx=N_CTX)
    capture = Capture(session.model)
    print(f"model {session.model.path}", flush=True)
    pieces = plain(session.model)
    shard = 0
    for begin in range(0, len(pieces), SHARD):
        path = args.out / f"plain_{shard:03d}.npz"
        if not path.exists():
            started = time.monotonic()
            n = write_shard(path, capture, pieces[begin:begin + SHARD])
            print(f"{path.name}: {n} tokens in {time.monotonic() - started:.0f} s", flush=True)
        shard += 1
    prompts = training_prompts(args.answers)
    for shard, begin in enumerate(range(0, len(prompts), SHARD)):
        path = args.out / f"answers_{shard:03d}.npz"
        if path.exists():
            continue
        started = time.monotonic()
        texts = list(answers(session, prompts[begin:begin + SHARD], args.max_tokens, first_seed=begin))
        written = time.monotonic() - started
        n = write_shard(path, capture, texts)
        print(f"{path.name}: {n} tokens, answers {written:.0f} s, capture {time.monotonic() - started - written:.0f} s",
              flush=True)


if __name__ == "__main__":
    main()
