"""Types shared by the inference backends: settings in, errors out (a model's facts are a wire type:
:class:`engine.protocol.ModelFacts`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


class ModelLoadError(Exception):
    """A model file could not be used. The message names the file, the reason and what to do."""

    def __init__(self, path: Path | str, reason: str, what: str = "model") -> None:
        """``what``: what the file was to be ("model", "draft file")."""
        self.path = str(path)
        self.reason = reason
        super().__init__(f"Cannot load {what} {self.path}: {reason}.")


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
