"""The prefill on the NPU (here: the x86 HTP emulator, forced), handed to the CPU for decoding.

Real worker processes read prompts with ``device_policy="npu"`` and are compared with an all-CPU
run of the same worker: the emulator computes in fp16, so the issue allows a greedy continuation
that differs on one prompt in twenty, but never the first token. The devices that actually ran
reach ``Finished``, the telemetry and the CLI's JSON; the compiled graph is cached per model file;
a conversation's second turn continues on the NPU from the first turn's state. Cancel and failure
are checked in-process, on the ONNX CPU provider, where the sequence's bytes can be compared.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.services.turn import send_turn
from engine import protocol as p
from engine.backends.qnn import cpu_session, run
from engine.npu.qwen35_graph import export_prefill
from engine.npu.runner import NpuPrefiller
from engine.npu.service import CHUNK, RequestPrefill
from app.engine_clients.process_client import ProcessClient
from engine.templates.prompts import raw_prompt_tokens
from engine.models.session import open_session
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from tests.process.conftest import collect, finished, generate, wait_for

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
N_CTX = 256  # the graph's KV buffers hold n_ctx positions; the emulator's time grows with them
CONTINUATION = 16
PROMPTS = [
    "The quick brown fox", "Once upon a time, in a small village by the sea,", "def fibonacci(n):", "1, 2, 3, 4,",
    "The river flows past the old mill and", "Dear friend, I hope this letter finds you", "In 1969 the first",
    "Water boils at", "The capital of France is", "import numpy as np\n", "Roses are red, violets are",
    "She opened the door and saw", "A B C D E F G", "The recipe calls for two cups of flour,",
    "Question: what is the largest planet? Answer:",
    "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore",
    "for i in range(10):\n    print(", "The weather today is",
    "Hello! How are you doing today? I wanted to ask about the train timetable for tomorrow morning, because",
    "Mary had a little lamb, its fleece was white as snow; and everywhere that Mary went",
]
LONG_PROMPT = "The river flows past the old mill. " * 12  # several chunks
GREEDY = p.SamplingSpec(temperature=0)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("npu-data")


def start_worker(data_dir: Path) -> ProcessClient:
    client = ProcessClient(data_dir=data_dir, env={"HEARTH_HOME": str(data_dir / "home")})
    client.start()
    return client


@pytest.fixture(scope="module")
def engine(data_dir):
    client = start_worker(data_dir)
    yield client
    client.close(mode="abort", timeout=5)


def read_all(client, model: Path, policy: str) -> tuple[p.ModelLoaded, list[list]]:
    loaded = client.load_model(str(model), n_ctx=N_CTX, device_policy=policy)
    runs = [collect(client, generate(text, max_tokens=CONTINUATION)) for text in PROMPTS]
    return loaded, runs


@pytest.fixture(scope="module")
def twenty(engine, hybrid_tiny) -> dict:
    """The 20 prompts read by the CPU, then by the emulator (the first NPU load compiles the graph)."""
    cpu_loaded, cpu = read_all(engine, hybrid_tiny, "cpu")
    npu_loaded, npu = read_all(engine, hybrid_tiny, "npu")
    return {"cpu": cpu, "npu": npu, "cpu_loaded": cpu_loaded, "npu_loaded": npu_loaded}


def test_forced_emulator_prefill_continues_like_the_cpu_on_20_prompts(twenty):
    cpu = [finished(events).token_ids for events in twenty["cpu"]]
    npu = [finished(events).token_ids for events in twenty["npu"]]
    assert all(len(ids) == CONTINUATION for ids in cpu + npu)
    same_first = sum(a[0] == b[0] for a, b in zip(cpu, npu))
    same_all = sum(a == b for a, b in zip(cpu, npu))
    print(f"\nemulator vs CPU on {len(PROMPTS)} prompts: first token {same_first}/20, "
          f"{CONTINUATION}-token greedy continuation {same_all}/20")
    assert same_first == len(PROMPTS)
    assert same_all >= 19


def test_finished_says_the_emulator_read_and_the_cpu_wrote(twenty):
    plan = twenty["npu_loaded"].devices
    assert plan.prefill.device == "npu-emulator" and "emulated, slow" in plan.prefill.reason
    for events in twenty["npu"]:
        devices = finished(events).devices
        assert devices.prefill == p.PhaseDevice("npu-emulator", "NPU emulator (forced; emulated, slow)")
        assert devices.decode.device == devices.draft.device == "cpu"
        assert "decodes" in devices.decode.reason
    for events in twenty["cpu"]:
        assert finished(events).devices.prefill == p.PhaseDevice("cpu", "CPU: policy is CPU")


def load_npu(client, model: Path) -> p.ModelLoaded:
    return client.load_model(str(model), n_ctx=N_CTX, device_policy="npu")


def test_progress_comes_after_every_graph_chunk(engine, hybrid_tiny, twenty):
    load_npu(engine, hybrid_tiny)
    events = collect(engine, generate(LONG_PROMPT, max_tokens=2))
    n = finished(events).timings.prompt_n
    exact = [e.processed for e in events if isinstance(e, p.PromptProgress) and not e.estimated]
    assert n > 2 * CHUNK
    assert exact == [*range(CHUNK, n - 1, CHUNK), n - 1, n]  # the graph's chunks, then the last token on the CPU


def test_telemetry_names_the_devices_that_ran(engine, hybrid_tiny, twenty):
    load_npu(engine, hybrid_tiny)
    engine.send(p.SetTelemetry(interval_ms=100))
    try:
        finished(collect(engine, generate(max_tokens=4)))
        sample = wait_for(engine, p.Telemetry, timeout=10)
    finally:
        engine.send(p.SetTelemetry(interval_ms=0))
    assert sample.phase_devices == {"prefill": "npu-emulator", "decode": "cpu"}


def test_auto_policy_never_picks_the_emulator(engine, hybrid_tiny, twenty):
    loaded = engine.load_model(str(hybrid_tiny), n_ctx=N_CTX, device_policy="auto")
    assert loaded.devices.prefill.device == "cpu" and loaded.npu_graph is None
    end = finished(collect(engine, generate(LONG_PROMPT, max_tokens=2)))
    assert end.devices.prefill.device == "cpu"
    assert "only the NPU emulator is here" in end.devices.prefill.reason


def test_a_new_worker_loads_the_compiled_graph_from_the_cache(data_dir, hybrid_tiny, twenty):
    compiled = twenty["npu_loaded"].npu_graph
    assert compiled is not None and not compiled.cached and compiled.chunk == CHUNK and compiled.max_ctx == N_CTX
    folder = Path(compiled.cache_dir)
    written = {f.name: f.stat().st_mtime_ns for f in folder.iterdir()}
    assert {"prefill.onnx", "prefill_qnn.bin", "key.json"} <= set(written)
    client = start_worker(data_dir)
    try:
        again = load_npu(client, hybrid_tiny).npu_graph
        end = finished(collect(client, generate(max_tokens=4)))
    finally:
        client.close(mode="abort", timeout=5)
    print(f"\nEP-context (emulator): compile {compiled.prepare_ms:.0f} ms, cached load {again.prepare_ms:.0f} ms")
    assert again.cached and again.cache_dir == compiled.cache_dir
    assert {f.name: f.stat().st_mtime_ns for f in folder.iterdir()} == written  # reused, not rewritten
    assert again.prepare_ms < compiled.prepare_ms / 3
    assert end.devices.prefill.device == "npu-emulator"


def test_the_compile_cache_is_private_folders_0700_files_0600(twenty):
    entry = Path(twenty["npu_loaded"].npu_graph.cache_dir)
    assert entry.parent.name == "npu-cache"
    modes = {path: stat.S_IMODE(path.lstat().st_mode) for path in [entry.parent, entry, *entry.iterdir()]}
    assert {path: mode for path, mode in modes.items() if path.is_dir()} == {entry.parent: 0o700, entry: 0o700}
    files = {path.name: mode for path, mode in modes.items() if not path.is_dir()}
    assert {"prefill.onnx", "prefill_qnn.bin", "key.json"} <= set(files)
    assert set(files.values()) == {0o600}, files


def converse(client, data_dir: Path, model: Path, policy: str, messages: list[str]) -> list[p.Finished]:
    client.load_model(str(model), n_ctx=N_CTX, device_policy=policy)
    store = ConversationStore(open_database(database_path(data_dir)))
    conversation = store.create(f"{policy} chat", model=str(model))
    ends = []
    for text in messages:
        result = send_turn(store, client, conversation.id, text, sampling=GREEDY, max_tokens=12)
        assert not result.errors and result.finished is not None, result.errors
        ends.append(result.finished)
    return ends


def test_turn_two_is_read_by_the_emulator_from_turn_ones_state(engine, data_dir, hybrid_tiny, twenty):
    messages = ["Hello! Who are you?", "Tell me about rivers and the sea."]
    cpu = converse(engine, data_dir, hybrid_tiny, "cpu", messages)
    npu = converse(engine, data_dir, hybrid_tiny, "npu", messages)
    second = npu[1]
    assert [end.devices.prefill.device for end in npu] == ["npu-emulator", "npu-emulator"]
    assert second.snapshot.restored and second.snapshot.restored_tokens > 0  # continued from turn 1's state
    assert second.snapshot.prefilled_tokens < second.snapshot.restored_tokens
    print(f"\nconversation, emulator vs CPU: turn 1 {npu[0].token_ids == cpu[0].token_ids}, "
          f"turn 2 {second.token_ids == cpu[1].token_ids}")
    assert [end.token_ids[0] for end in npu] == [end.token_ids[0] for end in cpu]


def test_cancel_during_an_emulator_prefill_keeps_the_worker_serving(engine, hybrid_tiny, twenty):
    load_npu(engine, hybrid_tiny)
    command = generate(LONG_PROMPT, max_tokens=4)
    events = []
    for event in engine.stream(command, timeout=120):
        events.append(event)
        if isinstance(event, p.PromptProgress) and not event.estimated and event.processed == CHUNK:
            engine.send(p.Cancel(request_id=command.request_id))
    end = finished(events)
    assert end.finish_reason == "cancelled" and not any(isinstance(e, p.TokenDelta) for e in events)
    assert max(e.processed for e in events if isinstance(e, p.PromptProgress)) <= 2 * CHUNK
    after = finished(collect(engine, generate(max_tokens=4)))
    assert after.finish_reason == "length" and after.devices.prefill.device == "npu-emulator"


def test_cli_generate_json_reports_the_emulator(hybrid_tiny, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "app", "generate", "--model", str(hybrid_tiny), "--prefill-device", "npu",
         "--temperature", "0", "--max-tokens", "4", "--json", "Tell me about rivers."],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "HEARTH_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    devices = json.loads(done.stdout)["devices"]  # nothing QNN prints reaches stdout
    assert devices["prefill"] == "npu-emulator" and devices["decode"] == "cpu"
    assert "emulated, slow" in devices["prefill_reason"] and devices["decode_reason"]
    assert "warning: prefill runs on npu-emulator" in done.stderr


# -- in-process, on the ONNX CPU provider: the sequence's bytes after a cancel or a failure ------------


@pytest.fixture
def session(hybrid_tiny):
    made = open_session(str(hybrid_tiny), n_ctx=N_CTX)
    yield made
    made.close()


@pytest.fixture(scope="module")
def exported(hybrid_tiny):
    spec, model = export_prefill(hybrid_tiny, 16, N_CTX)
    return spec, functools.partial(run, cpu_session(model, n_threads=1))


def test_cancel_between_chunks_leaves_the_sequence_as_it_was(session, exported):
    spec, runner = exported
    first = raw_prompt_tokens(session.model, "The quick brown fox")
    session.feed(first)
    before = session.context.state_get(0)
    more = raw_prompt_tokens(session.model, LONG_PROMPT)
    done: list[int] = []
    result = NpuPrefiller(spec, runner).prefill(session, more, reset=False, on_progress=lambda n, _: done.append(n),
                                                cancelled=lambda: len(done) == 2)
    assert result is None and done == [16, 32]
    assert session.tokens == first and session.context.state_get(0) == before


def greedy_after(session, n: int) -> list[int]:
    out = [int(np.argmax(session.last_logits()))]
    while len(out) < n:
        session.feed(out[-1:])
        out.append(int(np.argmax(session.last_logits())))
    return out


def test_reading_on_from_a_held_state_equals_the_cpu(session, exported):
    spec, runner = exported
    first = raw_prompt_tokens(session.model, "Once upon a time,")
    more = raw_prompt_tokens(session.model, " in a small village by the sea, there lived an old fisherman")
    session.feed(first + more)
    expected = greedy_after(session, 12)
    session.reset()
    session.feed(first)
    chunks = NpuPrefiller(spec, runner).prefill(session, more, reset=False, on_progress=lambda *_: None,
                                                cancelled=lambda: False)
    assert sum(chunks) == len(more) and chunks[-1] == 1
    assert session.tokens == first + more
    assert greedy_after(session, 12) == expected


def test_a_failing_npu_graph_falls_back_to_the_cpu_and_says_why(session, exported):
    spec, _ = exported

    def broken(feeds):
        raise RuntimeError("QNN_GRAPH_ERROR_GENERAL")

    tokens = raw_prompt_tokens(session.model, LONG_PROMPT)
    ran: list[p.PhaseDevice] = []
    prefill = RequestPrefill(p.PhaseDevice("npu-emulator", "forced"), NpuPrefiller(spec, broken), ran.append)
    chunks = prefill(session, tokens, reset=True, on_progress=lambda *_: None, cancelled=lambda: False)
    assert sum(chunks) == len(tokens) and session.tokens == tokens
    assert prefill.ran.device == "cpu" and "QNN_GRAPH_ERROR_GENERAL" in prefill.ran.reason
    assert [d.device for d in ran] == ["npu-emulator", "cpu"]  # what telemetry heard
    via_fallback = session.last_logits().copy()
    session.reset()
    session.feed(tokens)
    assert np.array_equal(via_fallback, session.last_logits())
