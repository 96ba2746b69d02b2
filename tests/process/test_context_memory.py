"""The memory a context takes, measured on a real worker (issue 19).

llama.cpp clears the attention cache when it creates a context, so the whole cache is resident at
once: the estimate the worker reports (``ModelLoaded.context.estimated_bytes``, from the file's
metadata: engine.context.context_memory) must be what the worker really holds. Each size is loaded in a
fresh worker, which then reads one full batch (so llama.cpp's compute buffers are touched too), and
its resident memory is compared with the estimate. A small machine is simulated with the one
injectable source of "available memory" (model_store.fit.AVAILABLE_MEMORY_ENV).
"""

from __future__ import annotations

import psutil
import pytest

from engine import protocol as p
from app.engine_clients.client import EngineError, new_request_id
from engine.context.context_memory import CONTEXT_STEP, model_memory
from engine.models.model_files import check_model_file
from app.engine_clients.process_client import ProcessClient
from model_store.fit import AVAILABLE_MEMORY_ENV
from tests.process.conftest import collect, finished, wait_for

pytestmark = pytest.mark.process

MiB = 1 << 20


def worker(home, **env: str) -> ProcessClient:
    client = ProcessClient(env={"HEARTH_HOME": str(home), **env})
    client.start()
    client.send(p.SetTelemetry(interval_ms=0))
    return client


def read_one_batch(client: ProcessClient) -> None:
    """A 512-token prompt and one answer token: every buffer a batch uses is touched."""
    prompt = " ".join(f"w{i % 97}" for i in range(170))  # about 512 tokens for SmolLM2
    command = p.Complete(request_id=new_request_id("batch"), prompt=prompt, max_tokens=1,
                         sampling=p.SamplingSpec(temperature=0), draft=p.DraftSpec("off"))
    assert finished(collect(client, command)).finish_reason in ("stop", "length")


@pytest.mark.parametrize("model, n_ctx, kv_type", [
    ("smollm2", 2048, "f16"), ("smollm2", 8192, "f16"), ("smollm2", 8192, "q8_0"),
    ("hybrid_long", 16384, "f16"), ("hybrid_long", 131072, "f16"), ("hybrid_long", 131072, "q8_0"),
])
def test_the_estimate_is_what_the_worker_holds_within_10_percent(request, hearth_home, model, n_ctx, kv_type):
    path = request.getfixturevalue(model)
    client = worker(hearth_home)
    try:
        loaded = client.load_model(str(path), n_ctx=n_ctx, kv_type=kv_type)
        read_one_batch(client)
        resident = psutil.Process(client.process.pid).memory_info().rss
    finally:
        client.close(mode="abort")
    context = loaded.context
    assert (context.n_ctx, context.mode, context.kv_type) == (n_ctx, "fixed", kv_type)
    assert abs(resident - context.estimated_bytes) <= 0.10 * context.estimated_bytes, \
        f"resident {resident / MiB:.0f} MiB, estimated {context.estimated_bytes / MiB:.0f} MiB"
    if model == "hybrid_long":  # the cache is most of it: the test is about the cache, not the runtime
        assert context.kv_bytes > 0.5 * context.estimated_bytes or n_ctx < 65536


def test_auto_fills_the_budget_of_a_small_machine_and_no_more(hearth_home, hybrid_long):
    memory = model_memory(hybrid_long, check_model_file(hybrid_long))
    available = memory.total_bytes(40_000) * 100 // 70  # a machine where ~40k tokens fit the 70 % budget
    client = worker(hearth_home, **{AVAILABLE_MEMORY_ENV: str(available)})
    try:
        context = client.load_model(str(hybrid_long)).context
        read_one_batch(client)
        resident = psutil.Process(client.process.pid).memory_info().rss
    finally:
        client.close(mode="abort")
    assert context.mode == "auto" and context.available_bytes == available
    assert context.n_ctx % CONTEXT_STEP == 0 and context.max_n_ctx == context.n_ctx
    assert context.estimated_bytes <= context.budget_bytes == available * 70 // 100
    planes = context.estimated_bytes - memory.total_bytes(context.n_ctx)  # rollback copies of the recurrent state
    assert memory.total_bytes(context.n_ctx + CONTEXT_STEP) + planes > context.budget_bytes, "the longest that fits"
    assert resident <= 1.10 * context.budget_bytes


def test_a_context_that_cannot_fit_is_refused_before_loading_with_the_numbers(hearth_home, hybrid_long):
    client = worker(hearth_home, **{AVAILABLE_MEMORY_ENV: str(512 * MiB)})
    try:
        with pytest.raises(EngineError) as refused:
            client.load_model(str(hybrid_long), n_ctx=262144)
        message = str(refused.value)
        assert refused.value.code == "model_load_failed"
        assert "a context of 262144 tokens needs about 2.1 GiB of memory" in message
        assert "but only 512 MiB is available" in message and "tokens fit now" in message
        assert "8-bit KV cache" in message
        assert client.load_model(str(hybrid_long)).context.n_ctx > 0, "the worker goes on: auto fits"
    finally:
        client.close(mode="abort")


def test_telemetry_shows_the_kv_in_use_against_the_kv_allocated(hearth_home, smollm2):
    client = worker(hearth_home)
    try:
        loaded = client.load_model(str(smollm2), n_ctx=4096)
        read_one_batch(client)
        client.send(p.SetTelemetry(interval_ms=50))
        sample = wait_for(client, p.Telemetry)
    finally:
        client.close(mode="abort")
    assert sample.kv_allocated_bytes == loaded.context.kv_bytes
    assert 0 < sample.state_kv_bytes < sample.kv_allocated_bytes
