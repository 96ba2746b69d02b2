"""The CPU canary: ``python -m engine.backends.canary NAME`` tries one CPU build, in a child.

A CPU can advertise instructions that its hypervisor or OS does not really let a program run (an
AMX tile instruction that traps on a VM that lists ``amx_tile``). Such a build dies of SIGILL the
first time a matrix product takes that path, which for quantized weights is the first token. So
before a build is trusted on a machine, this child loads it, converts the built-in tiny model
(:mod:`engine.backends.canary_model`) with llama.cpp's own quantizer into each weight type Hearth
meets and decodes, for each: a long batch (the GEMM kernels, the tiled and repacked layouts, AMX),
then a short batch and the same tokens one at a time, with ggml's repacked weight layouts and
without. If the child dies, the parent sees the signal. If it lives, it prints one line,
``RESULT_MARKER`` and a JSON object: ``status`` (``ok``, ``unsupported``, ``failed``), ``detail``,
and per weight type (``types``) which kernels keep a short batch's logits bit-identical to
single-token decoding, which exact speculative drafting needs: ``repacked``, ``plain`` (only with
repacking off) or ``none``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from engine.backends import cpu_check
from engine.backends.cpu_check import RESULT_MARKER
from engine.backends.canary_model import N_VOCAB, write_canary_model
from engine.backends.cpu_variants import CpuBackendError, load_variant, read_variant_set, variant_score
from engine.backends.faults import crash_if_injected

# The weight types checked, as llama.cpp's file types name them (LLAMA_FTYPE_MOSTLY_<type>).
WEIGHT_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K", "Q3_K_M",
                "IQ4_NL", "IQ4_XS")
LONG_BATCH = 48  # past every batch-size switch of the CPU kernels
SHORT_BATCH = 15  # the longest verify batch: just below the build's exact_rows (tiled GEMM, llamafile)
TOKENS = [(7 * i + 3) % N_VOCAB for i in range(LONG_BATCH)]


def _decode_rows(path: Path, repack: bool) -> tuple[np.ndarray, np.ndarray]:
    """Logits of a short batch, and of the same tokens one at a time (after a long batch ran)."""
    from engine.backends.base import ContextSettings
    from engine.backends.llama_context import LlamaContext
    from engine.backends.llama_cpp import LlamaModel

    model = LlamaModel(path, repack=repack)
    # One thread: the numbers do not depend on the count, and a busy machine (a build, another
    # program's spinning threads) cannot stall a one-thread canary at ggml's barriers.
    context = LlamaContext(model, ContextSettings(n_ctx=128, n_batch=LONG_BATCH, n_ubatch=LONG_BATCH,
                                                  n_threads=1))
    try:
        context.decode(TOKENS, 0, all_logits=True)
        if not np.isfinite(context.logits(LONG_BATCH - 1)).all():
            raise ArithmeticError("a long batch gave non-finite logits")
        context.clear()
        short = TOKENS[:SHORT_BATCH]
        context.decode(short, 0, all_logits=True)
        batch = np.stack([context.logits(i).copy() for i in range(SHORT_BATCH)])
        context.clear()
        single = []
        for pos, token in enumerate(short):
            context.decode([token], pos)
            single.append(context.logits().copy())
        return batch, np.stack(single)
    finally:
        context.close()
        model.close()


def _exact(path: Path, repack: bool) -> bool:
    batch, single = _decode_rows(path, repack)
    if not (np.isfinite(batch).all() and np.isfinite(single).all()):
        raise ArithmeticError(f"{path.name} gave non-finite logits")
    return bool(np.array_equal(batch.view(np.uint32), single.view(np.uint32)))


def check_weight_type(f32_model: Path, weight_type: str, folder: Path) -> str:
    """Which kernels keep ``weight_type`` batch-exact here: "repacked", "plain" or "none"."""
    from engine.backends.llama_cpp import quantize

    path = f32_model
    if weight_type != "F32":
        path = quantize(f32_model, folder / f"canary-{weight_type}.gguf", weight_type)
    if _exact(path, repack=True):
        return "repacked"
    return "plain" if _exact(path, repack=False) else "none"


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
    return {"status": "ok", "detail": f"decoded {len(types)} weight types in long and short batches and "
                                      "token by token", "types": types}


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
