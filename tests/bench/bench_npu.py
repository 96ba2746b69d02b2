"""NPU prefill against the CPU: tok/s per device and chunk length, compile vs cached load, state error.

Everything NPU here runs on the **x86 HTP emulator** when that is what this machine has, and every
such number is labelled "emulator": the emulator simulates the HTP on the CPU, so its timings say
nothing about a real NPU (``qnn-htp.md`` §7); only its accuracy is meaningful. For each chunk
length the graph is compiled (EP context written to a temporary cache) and then loaded from that
cache, both timed; then prompts of several lengths are read by llama.cpp on the CPU and by the
graph on the HTP, and the graph's state (conv, recurrent, K, V) and last logits are compared with
llama.cpp's (relative L2 of the worst tensor of each kind). QNN options stick per process, so the
whole benchmark uses one configuration (the one the worker uses). Prints one JSON object.
Usage: ``python tests/bench/bench_npu.py [--model hybrid-tiny] [--lengths 64,192,448] [--chunks 16,32,64]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.backends import qnn  # noqa: E402
from engine.npu import compiled  # noqa: E402
from engine.npu.gguf_weights import check_model  # noqa: E402
from engine.npu.handoff import state_from_blob  # noqa: E402
from engine.npu.prefill import PrefillState, prefill  # noqa: E402
from engine.npu.qwen35_graph import export_prefill  # noqa: E402
from engine.npu.graph_shape import PrefillSpec  # noqa: E402
from engine.templates.prompts import raw_prompt_tokens  # noqa: E402
from engine.models.session import open_session  # noqa: E402
from model_store.file_hashes import hash_file  # noqa: E402
from tests.fixtures.make_models import make_models  # noqa: E402

TEXT = "The river flows past the old mill, where the miller's children count the boats going by. "
KINDS = {"conv_state": "conv", "ssm_state": "recurrent", "past_k": "k", "past_v": "v"}


def prompt(session, n: int) -> list[int]:
    tokens: list[int] = []
    while len(tokens) < n:
        tokens += raw_prompt_tokens(session.model, TEXT * 8)
    return tokens[:n]


def cpu_rate(session, tokens: list[int]) -> tuple[float, np.ndarray]:
    session.reset()
    started = time.perf_counter()
    session.feed(tokens)
    return len(tokens) / (time.perf_counter() - started), session.last_logits().copy()


def state_errors(spec: PrefillSpec, ours: PrefillState, logits: np.ndarray, session, reference_logits) -> dict:
    """Worst relative L2 error per kind of state tensor, and of the logits, against llama.cpp."""
    reference = state_from_blob(spec.config, session.context.state_get(0), spec.max_ctx)
    n, worst = ours.n_past, {}
    for name, expected in reference.tensors.items():
        rows = slice(0, n) if name.startswith("past_") else slice(None)
        error = np.linalg.norm(ours.tensors[name][rows] - expected[rows]) / np.linalg.norm(expected[rows])
        kind = KINDS[name.split(".")[0]]
        worst[kind] = max(worst.get(kind, 0.0), float(error))
    worst["logits"] = float(np.linalg.norm(logits - reference_logits) / np.linalg.norm(reference_logits))
    return {kind: f"{value:.2e}" for kind, value in worst.items()}


def graph_for(path: Path, spec: PrefillSpec, cache: Path) -> dict:
    """Compile into ``cache``, then load from it; both timed (ms). Returns the loaded graph too."""
    key = compiled.current_key(hash_file(path), spec.chunk, spec.max_ctx)
    export_started = time.perf_counter()
    model = export_prefill(path, spec.chunk, spec.max_ctx)[1]
    export_ms = (time.perf_counter() - export_started) * 1000
    first = compiled.prepare(key, cache, lambda: model)
    second = compiled.prepare(key, cache, lambda: model)
    assert not first.cached and second.cached
    return {"graph": second, "export_ms": export_ms, "compile_ms": first.seconds * 1000,
            "cached_load_ms": second.seconds * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="hybrid-tiny")
    parser.add_argument("--cache", type=Path, default=ROOT / "bench-models")
    parser.add_argument("--lengths", default="64,192,448", help="prompt tokens")
    parser.add_argument("--chunks", default="16,32,64", help="graph chunk lengths")
    parser.add_argument("--n-ctx", type=int, default=512, help="positions the graph's KV buffers hold")
    args = parser.parse_args()
    path = make_models(args.cache, [args.model])[args.model]
    lengths = [int(n) for n in args.lengths.split(",")]
    config = check_model(path)
    device = "npu" if qnn.htp_soc_model() == "" else "npu-emulator"
    label = "" if device == "npu" else " (emulator: CPU simulation of the HTP, not NPU timings)"
    session = open_session(str(path), n_ctx=args.n_ctx)
    prompts = {n: prompt(session, n) for n in lengths}
    cpu_rate(session, prompts[lengths[0]])  # warm-up: the first decode allocates llama.cpp's buffers
    cpu = {n: cpu_rate(session, tokens) for n, tokens in prompts.items()}
    report = {"model": args.model, "n_ctx": args.n_ctx, "device": device, "soc_model": qnn.htp_soc_model(),
              "runtime": qnn.runtime_versions(), "note": f"{device} numbers{label}",
              "prefill_tok_s": {"cpu (llama.cpp)": {str(n): round(rate, 1) for n, (rate, _) in cpu.items()}},
              f"{device} graph": {}, f"{device} state error vs llama.cpp (rel L2, worst tensor per kind)": {}}
    with tempfile.TemporaryDirectory() as cache:
        for chunk in (int(c) for c in args.chunks.split(",")):
            spec = PrefillSpec(config, chunk, args.n_ctx)
            timing = graph_for(path, spec, Path(cache))
            rates, errors = {}, {}
            for n, tokens in prompts.items():
                started = time.perf_counter()
                result = prefill(timing["graph"].run, spec, tokens)
                rates[str(n)] = round(n / (time.perf_counter() - started), 1)
                session.reset()
                session.feed(tokens)
                errors[str(n)] = state_errors(spec, result.state, result.logits, session, cpu[n][1])
            report["prefill_tok_s"][f"{device} chunk {chunk}"] = rates
            report[f"{device} graph"][f"chunk {chunk}"] = {
                "export_ms (GGUF to ONNX)": round(timing["export_ms"], 1),
                "compile_ms (HTP compile, EP context written)": round(timing["compile_ms"], 1),
                "cached_load_ms (EP context read)": round(timing["cached_load_ms"], 1)}
            report[f"{device} state error vs llama.cpp (rel L2, worst tensor per kind)"][f"chunk {chunk}"] = errors
    session.close()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
