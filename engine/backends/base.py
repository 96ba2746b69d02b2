"""Types shared by the inference backends: settings in, facts and errors out."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import msgspec


class ModelLoadError(Exception):
    """A model file could not be used. The message names the file, the reason and what to do."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"Cannot load model {self.path}: {reason}.")


def default_threads() -> int:
    """One thread per core this process may use (llama.cpp scales poorly past physical cores)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ContextSettings:
    """How an inference context is created. ``n_rs_seq`` > 0 keeps recurrent rollback planes."""

    n_ctx: int = 4096
    n_batch: int = 512
    n_ubatch: int = 512
    n_seq_max: int = 1
    n_rs_seq: int = 0
    n_threads: int = 1
    n_threads_batch: int = 0  # 0: same as n_threads
    flash_attn: bool = True  # explicit, not "auto": it changes numerics and the KV layout in state blobs
    kv_type: str = "f16"  # the attention cache's element type: "f16" or "q8_0" (p.KvType)
    kv_unified: bool = False  # one attention cache for all sequences (copies share cells instead of buffers)


class ModelFacts(msgspec.Struct, frozen=True):
    """What a loaded model is; sent to the GUI and printed by ``hearth info``."""

    path: str
    file_bytes: int
    arch: str
    name: str
    description: str
    n_params: int
    size_bytes: int
    n_ctx_train: int
    n_embd: int
    n_layer: int
    n_layer_mtp: int
    n_vocab: int
    is_recurrent: bool
    is_hybrid: bool
    supports_rollback: bool
    has_chat_template: bool
    backend_version: str
    # what its chat template does about reasoning (engine.prompts.thinking_facts): whether the answer
    # starts in a <think> block by default, and whether ``enable_thinking`` switches that
    thinks: bool = False
    thinking_switch: bool = False

    # -- what the model can do, read everywhere from here (never recomputed from is_recurrent/is_hybrid) --

    @property
    def has_recurrent_state(self) -> bool:
        """A fixed-size recurrent state (SSM, Gated DeltaNet, short convolutions) besides or instead of attention."""
        return self.is_recurrent or self.is_hybrid

    @property
    def has_attention_kv(self) -> bool:
        """An attention KV cache that grows with every token (every model but a purely recurrent one)."""
        return self.is_hybrid or not self.is_recurrent

    @property
    def can_roll_back(self) -> bool:
        """Whether rejected draft tokens can be taken back out of the state (a KV cache always can;
        a recurrent state only through llama.cpp's rollback planes)."""
        return self.supports_rollback or not self.has_recurrent_state

    @property
    def has_mtp(self) -> bool:
        """A multi-token-prediction head that can draft for the model itself."""
        return self.n_layer_mtp > 0
