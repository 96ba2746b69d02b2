"""The CPU canary: ``python -m engine.backends.canary NAME`` tries one CPU build, in a child.

A CPU can advertise instructions that its hypervisor or OS does not really let a program run (an
AMX tile instruction that traps on a VM that lists ``amx_tile``). Such a build dies of SIGILL the
first time a matrix product takes that path, which for quantized weights is the first token. So
before a build is trusted on a machine, this child loads it, converts the built-in tiny model
(:mod:`engine.backends.canary_model`) with llama.cpp's own quantizer into each weight type
family Hearth meets (f32, f16, Q8_0, Q4_0, Q4_1, the K-quants, IQ4_NL) and decodes a batch of
tokens, then the same tokens one at a time, so the GEMM and GEMV kernels, the repacked layouts and
AMX all run. If the child dies, the parent sees the signal; if it lives, it prints one line:
``RESULT_MARKER`` and a JSON object with ``status`` (``ok``, ``unsupported``, ``failed``), a
``detail`` and, per weight type, whether a batch's logits were bit-identical to single-token
decoding (``batch_invariant``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from engine.backends import cpu_check
from engine.backends.canary_model import N_VOCAB, write_canary_model
from engine.backends.cpu_variants import CpuBackendError, load_variant, read_variant_set, variant_score
from engine.backends.faults import crash_if_injected

RESULT_MARKER = "HEARTH-CANARY "
# What llama.cpp's quantizer is asked for; None keeps the f32 original.
WEIGHT_TYPES = ("F32", "F16", "Q8_0", "Q4_0", "Q4_1", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL")
BATCH = 8
TOKENS = [(7 * i + 3) % N_VOCAB for i in range(BATCH)]


def _logits_per_row(path: Path, batched: bool) -> np.ndarray:
    from engine.backends.base import ContextSettings
    from engine.backends.llama_cpp import LlamaContext, LlamaModel

    model = LlamaModel(path)
    context = LlamaContext(model, ContextSettings(n_ctx=64, n_batch=BATCH, n_ubatch=BATCH, n_threads=2,
                                                  flash_attn=False))
    try:
        if batched:
            context.decode(TOKENS, 0, all_logits=True)
            return np.stack([context.logits(i).copy() for i in range(BATCH)])
        rows = []
        for pos, token in enumerate(TOKENS):
            context.decode([token], pos)
            rows.append(context.logits().copy())
        return np.stack(rows)
    finally:
        context.close()
        model.close()


def check_weight_type(f32_model: Path, weight_type: str, folder: Path) -> dict:
    from engine.backends.llama_cpp import quantize

    path = f32_model
    if weight_type != "F32":
        path = quantize(f32_model, folder / f"canary-{weight_type}.gguf", weight_type)
    batch, single = _logits_per_row(path, True), _logits_per_row(path, False)
    if not (np.isfinite(batch).all() and np.isfinite(single).all()):
        raise ArithmeticError(f"{weight_type} weights gave non-finite logits")
    return {"batch_invariant": bool(np.array_equal(batch.view(np.uint32), single.view(np.uint32)))}


def run(name: str) -> dict:
    variants = read_variant_set()
    variant = variants.named(name) if variants is not None else None
    if variant is None:
        raise CpuBackendError(f"there is no CPU build named {name!r}")
    if variant_score(variant, variants.registry) == 0:
        return {"status": "unsupported", "detail": "this CPU lacks instructions this build needs"}
    load_variant(variant, variants.registry)
    cpu_check.adopt(variant, "the canary's own build")
    crash_if_injected("canary", name)
    with tempfile.TemporaryDirectory(prefix="hearth-canary-") as folder:
        base = write_canary_model(Path(folder) / "canary-F32.gguf")
        types = {t: check_weight_type(base, t, Path(folder)) for t in WEIGHT_TYPES}
    return {"status": "ok", "detail": f"decoded {len(types)} weight types, batched and token by token",
            "types": types}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m engine.backends.canary NAME", file=sys.stderr)
        return 2
    try:
        result = run(argv[1])
    except Exception as exc:  # a failure that is not a crash: the build is not used either
        result = {"status": "failed", "detail": f"{type(exc).__name__}: {exc}"}
    print(RESULT_MARKER + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
