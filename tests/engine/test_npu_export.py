"""The exported qwen35 prefill graph is the same model as llama.cpp's, checked on the ONNX CPU provider.

The graph runs chunk by chunk (C = 16) on onnxruntime's CPU execution provider, which computes in
fp32, and is compared with llama.cpp's own prefill of the same tokens: every state tensor (conv
and recurrent states of the DeltaNet layers, K and V rows of the attention layer) and the logits of
the last position. llama.cpp's reference contexts keep an f32 KV cache, so a difference beyond fp32
rounding is a difference of model. Hearth's ContextSettings cannot ask for that cache type, so the
reference contexts get it by patching llama-cpp-python's default context parameters.

Two more facts about llama.cpp shape the checks: its CPU flash-attention kernel computes in f16
whatever the cache type (its logits differ from an fp32 computation by about 1e-4), so exact logits
are compared with flash attention off; and its state blobs split by cell only with flash attention
on (V not transposed), so states are compared with it on.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from engine.backends.base import ContextSettings
from engine.backends.llama_context import STATE_PARTIAL_ONLY
from engine.backends.llama_cpp import LlamaModel
from engine.backends.qnn import cpu_session, run
from engine.npu.gguf_weights import UnsupportedModel, load_model
from engine.npu.handoff import kv_layout, recurrent_size, state_from_blob, state_to_blob
from engine.npu.onnx_ops import HTP_SAFE_OPS
from engine.npu.prefill import prefill
from engine.npu.qwen35_graph import export_prefill
from engine.templates.prompts import raw_prompt_tokens
from engine.models.session import ModelSession

CHUNK, MAX_CTX = 16, 128
TEXT = "The quick brown fox jumps over the lazy dog. Once upon a time, in a small village by the sea, " * 2
STATE_TOLERANCE = 1e-5  # max |graph − llama.cpp| / max |llama.cpp|, per tensor (seen: ≤ 1.1e-6)
EXACT_LOGITS_TOLERANCE = 1e-5  # seen: ≤ 8e-7
FLASH_LOGITS_TOLERANCE = 2e-3  # llama.cpp's f16 flash attention; seen: ≤ 3e-4
HANDOFF_PROMPTS = ["The quick brown fox", "Once upon a time, in a small village by the sea,",
                   "def fibonacci(n):", "1, 2, 3, 4,"]


def max_rel(ours: np.ndarray, reference: np.ndarray) -> float:
    return float(np.abs(ours - reference).max() / np.abs(reference).max())


def rel_l2(ours: np.ndarray, reference: np.ndarray) -> float:
    return float(np.linalg.norm(ours - reference) / np.linalg.norm(reference))


def filled(name: str, n_tokens: int) -> slice:
    """The rows of a state tensor that hold data: KV buffers are filled up to the prompt length."""
    return slice(0, n_tokens) if name.startswith("past_") else slice(None)


@pytest.fixture(scope="module")
def exported(hybrid_tiny):
    spec, model = export_prefill(hybrid_tiny, CHUNK, MAX_CTX)
    return spec, model, functools.partial(run, cpu_session(model, n_threads=1))


def reference_session(path, *, flash_attn: bool, f32_cache: bool) -> ModelSession:
    settings = ContextSettings(n_ctx=256, n_threads=1, flash_attn=flash_attn, kv_type="f32" if f32_cache else "f16")
    return ModelSession(LlamaModel(path), settings)


@pytest.fixture(scope="module")
def sessions(hybrid_tiny):
    made = {
        "states": reference_session(hybrid_tiny, flash_attn=True, f32_cache=True),
        "logits": reference_session(hybrid_tiny, flash_attn=False, f32_cache=True),
        "default": reference_session(hybrid_tiny, flash_attn=True, f32_cache=False),
    }
    yield made
    for session in made.values():
        session.close()


def prompt(session: ModelSession, n: int) -> list[int]:
    tokens = raw_prompt_tokens(session.model, TEXT)
    assert len(tokens) >= n
    return tokens[:n]


def llama_state(session: ModelSession, spec, tokens: list[int]):
    session.reset()
    session.feed(tokens)
    assert len(session.context.state_get(0, STATE_PARTIAL_ONLY)) == 8 + recurrent_size(spec.config)
    return state_from_blob(spec.config, session.context.state_get(0), spec.max_ctx)


def test_graph_uses_only_htp_safe_ops_and_static_fp32_io(exported):
    _, model, _ = exported
    graph = onnx.load_from_string(model).graph
    assert {node.op_type for node in graph.node} <= HTP_SAFE_OPS
    assert not {"Trilu", "CumSum", "Einsum", "Inverse", "Softplus"} & HTP_SAFE_OPS
    for value in (*graph.input, *graph.output):
        tensor = value.type.tensor_type
        assert all(dim.HasField("dim_value") for dim in tensor.shape.dim), value.name
        integer = value.name in ("tokens", "pos_offset", "n_valid")
        expected = onnx.TensorProto.INT32 if integer else onnx.TensorProto.FLOAT
        assert tensor.elem_type == expected, value.name


@pytest.mark.parametrize("n_tokens", [1, 7, CHUNK, CHUNK + 7, 3 * CHUNK + 2])
def test_every_state_tensor_matches_llama_cpp(exported, sessions, n_tokens):
    spec, _, runner = exported
    tokens = prompt(sessions["states"], n_tokens)
    reference = llama_state(sessions["states"], spec, tokens)
    ours = prefill(runner, spec, tokens).state
    assert set(ours.tensors) == set(reference.tensors)
    for name, expected in reference.tensors.items():
        rows = filled(name, n_tokens)
        assert max_rel(ours.tensors[name][rows], expected[rows]) < STATE_TOLERANCE, name
    assert ours.tokens == reference.tokens == tokens


@pytest.mark.parametrize("n_tokens", [1, 7, CHUNK + 7, 3 * CHUNK + 2])
def test_last_logits_match_llama_cpp(exported, sessions, n_tokens):
    spec, _, runner = exported
    tokens = prompt(sessions["logits"], n_tokens)
    ours = prefill(runner, spec, tokens).logits
    for kind, tolerance in (("logits", EXACT_LOGITS_TOLERANCE), ("states", FLASH_LOGITS_TOLERANCE)):
        sessions[kind].reset()
        sessions[kind].feed(tokens)
        assert max_rel(ours, sessions[kind].last_logits()) < tolerance, kind
        assert np.argmax(ours) == np.argmax(sessions[kind].last_logits())


def test_chunk_length_does_not_change_the_result(hybrid_tiny, exported, sessions):
    spec16, _, runner16 = exported
    spec32, model32 = export_prefill(hybrid_tiny, 32, MAX_CTX)
    tokens = prompt(sessions["logits"], 45)
    a = prefill(runner16, spec16, tokens)
    b = prefill(functools.partial(run, cpu_session(model32, n_threads=1)), spec32, tokens)
    assert max_rel(a.logits, b.logits) < 1e-5
    for name, value in b.state.tensors.items():
        assert max_rel(a.state.tensors[name], value) < 1e-5, name


def test_llama_cpp_blob_survives_the_graph_layout_byte_for_byte(exported, sessions):
    spec, _, _ = exported
    session = sessions["default"]  # f16 cache: re-encoding the parsed rows must give the same bytes
    state = llama_state(session, spec, prompt(session, 23))
    assert state_to_blob(spec.config, state, kv_layout(spec.config)).tobytes() == session.context.state_get(0)


def greedy(session: ModelSession, first: int, n: int) -> list[int]:
    out = [first]
    while len(out) < n:
        session.feed([out[-1]])
        out.append(int(np.argmax(session.last_logits())))
    return out


@pytest.mark.parametrize("text", HANDOFF_PROMPTS)
def test_handoff_then_cpu_decode_equals_an_all_cpu_run(exported, sessions, text):
    spec, _, runner = exported
    session = sessions["default"]
    tokens = raw_prompt_tokens(session.model, text)
    session.reset()
    session.feed(tokens)
    expected = greedy(session, int(np.argmax(session.last_logits())), 16)

    result = prefill(runner, spec, tokens)
    session.reset()
    assert session.context.state_set(state_to_blob(spec.config, result.state, kv_layout(spec.config)))
    session.tokens = list(tokens)
    assert greedy(session, int(np.argmax(result.logits)), 16) == expected


def test_other_architectures_are_refused_with_a_reason(smollm2):
    with pytest.raises(UnsupportedModel, match="qwen35 only, not llama"):
        load_model(smollm2)


HTP_CHILD = """
import json, sys
import numpy as np
from engine.backends.qnn import QnnUnavailable, htp_session, run
from engine.npu.prefill import prefill
from engine.npu.qwen35_graph import export_prefill
path, chunk, max_ctx, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
spec, model = export_prefill(path, chunk, max_ctx)
try:
    session = htp_session(model)
except QnnUnavailable as exc:
    print(exc)
    sys.exit(3)
result = prefill(lambda feeds: run(session, feeds), spec, json.loads(sys.argv[5]))
np.savez(out, logits=result.logits, **result.state.tensors)
"""
HTP_TOLERANCE = 5e-2  # relative L2; the emulator computes in fp16 (seen: ≤ 1.4e-2)


def test_whole_graph_runs_on_the_htp_emulator_within_fp16_error(hybrid_tiny, exported, sessions, tmp_path):
    """CPU fallback is disabled, so the session exists only if QNN took every node. A child process:
    QNN backend options stick per process (qnn-htp.md §0.3)."""
    spec, _, _ = exported
    tokens = prompt(sessions["states"], CHUNK + 7)
    out = tmp_path / "htp.npz"
    child = subprocess.run([sys.executable, "-c", HTP_CHILD, str(hybrid_tiny), str(CHUNK), str(MAX_CTX), str(out),
                            json.dumps(tokens)], cwd=Path(__file__).resolve().parents[2], capture_output=True,
                           text=True, timeout=300)
    if child.returncode == 3:
        pytest.skip(f"no QNN HTP here: {child.stdout.strip()}")
    assert child.returncode == 0, child.stderr[-2000:]
    ours = dict(np.load(out))
    reference = llama_state(sessions["states"], spec, tokens)
    errors = {name: rel_l2(ours[name][filled(name, len(tokens))], value[filled(name, len(tokens))])
              for name, value in reference.tensors.items()}
    logits = sessions["states"].last_logits()
    errors["logits"] = rel_l2(ours["logits"], logits)
    assert max(errors.values()) < HTP_TOLERANCE, errors
    assert np.argmax(ours["logits"]) == np.argmax(logits)
