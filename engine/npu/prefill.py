"""The host side of the chunked prefill: cut the prompt into chunks and carry the state between runs.

The graph (:mod:`engine.npu.qwen35_graph`) is stateless; :class:`PrefillState` holds what it
needs between chunks, in llama.cpp's layouts: the DeltaNet conv and recurrent states (replaced
after every chunk) and the attention KV buffers (the chunk's first ``n_valid`` K/V rows are written
at its positions). The runner is any callable ``feeds → outputs`` (for instance
``functools.partial(engine.backends.qnn.run, session)``), so this module needs no onnxruntime.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.npu.graph_shape import PrefillSpec

Runner = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
_NEW_ROWS = {"past_k": "k_new", "past_v": "v_new"}
PAD_TOKEN = 0  # what fills a partial chunk; padding never reaches the state or the logits


@dataclass
class PrefillState:
    """Everything a sequence's model state is, after ``len(tokens)`` prompt tokens."""

    tensors: dict[str, np.ndarray]  # the graph's state inputs by name (conv_state.i, past_k.i, ...)
    tokens: list[int] = field(default_factory=list)

    @classmethod
    def empty(cls, spec: PrefillSpec) -> "PrefillState":
        return cls({name: np.zeros(shape, np.float32) for name, shape in spec.state_shapes().items()})

    @property
    def n_past(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class PrefillResult:
    logits: np.ndarray  # [n_vocab], after the last prompt token
    state: PrefillState


def chunk_feeds(spec: PrefillSpec, tokens: Sequence[int], state: PrefillState) -> dict[str, np.ndarray]:
    """The inputs of one graph run over ``tokens`` (1…C of them) following ``state``."""
    ids = np.full(spec.chunk, PAD_TOKEN, np.int32)
    ids[: len(tokens)] = tokens
    feeds = {"tokens": ids, "pos_offset": np.array([state.n_past], np.int32),
             "n_valid": np.array([len(tokens)], np.int32)}
    feeds.update(state.tensors)
    return feeds


def absorb(spec: PrefillSpec, tokens: Sequence[int], state: PrefillState, outputs: dict[str, np.ndarray]) -> None:
    """Fold one run's outputs into ``state`` (in place)."""
    start, n = state.n_past, len(tokens)
    for name in spec.state_shapes():
        kind, layer = name.split(".")
        if kind in ("conv_state", "ssm_state"):
            state.tensors[name] = outputs[f"{kind}_out.{layer}"]
        else:  # past_k / past_v: keep the buffer, write the chunk's real rows
            state.tensors[name][start : start + n] = outputs[f"{_NEW_ROWS[kind]}.{layer}"][:n]
    state.tokens.extend(int(t) for t in tokens)


def prefill_steps(run: Runner, spec: PrefillSpec, tokens: Sequence[int],
                  state: PrefillState) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """Run the graph over ``tokens`` one chunk per step, folding each into ``state`` (in place).

    Yields (tokens read so far, that chunk's outputs) after every chunk, so a caller can report
    progress or stop between chunks; ``state`` is then consistent with the tokens read.
    """
    if not tokens:
        raise ValueError("prefill needs at least one token")
    if state.n_past + len(tokens) > spec.max_ctx:
        raise ValueError(f"{state.n_past + len(tokens)} positions do not fit the graph's {spec.max_ctx}")
    for begin in range(0, len(tokens), spec.chunk):
        part = tokens[begin : begin + spec.chunk]
        outputs = run(chunk_feeds(spec, part, state))
        absorb(spec, part, state, outputs)
        yield begin + len(part), outputs


def prefill(run: Runner, spec: PrefillSpec, tokens: Sequence[int], state: PrefillState | None = None) -> PrefillResult:
    """Run the graph chunk by chunk over ``tokens``, continuing ``state`` (or from empty)."""
    state = state if state is not None else PrefillState.empty(spec)
    outputs: dict[str, np.ndarray] = {}
    for _, outputs in prefill_steps(run, spec, tokens, state):
        pass
    return PrefillResult(outputs["logits"].reshape(-1), state)
