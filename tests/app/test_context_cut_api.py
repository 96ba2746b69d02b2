"""A chat longer than the model can read, through a real ``hearth serve`` and the ``openai`` client
(issue 51, point 8): by default (and with ``when_full: "drop-oldest"``) the oldest messages are left
out and the response's ``hearth`` object says how many, the next request stands on saved state; with
``when_full: "stop"`` it is refused as before (400 context_length_exceeded)."""

from __future__ import annotations

import openai
import pytest

from engine.context.context_memory import model_memory
from engine.models.model_files import check_model_file
from model_store.fit import AVAILABLE_MEMORY_ENV
from tests.app.test_context_cut_cli import fact
from tests.helpers.serve import start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]


@pytest.fixture(scope="module")
def server(tmp_path_factory, smollm2):
    memory = model_memory(smollm2, check_model_file(smollm2))
    pinned = str(-(-memory.total_bytes(512) * 100 // 70))  # the longest context: 512 tokens
    running = start_server(tmp_path_factory.mktemp("serve-cut"), **{AVAILABLE_MEMORY_ENV: pinned})
    yield running
    running.stop()


def ask(client: openai.OpenAI, messages: list[dict], **extra):
    return client.chat.completions.create(model="default", messages=messages, temperature=0, max_tokens=24,
                                          extra_body=extra or None)


def test_the_oldest_messages_are_left_out_and_the_response_says_how_many(server):
    client, messages = server.client(), []
    for n in range(12):
        messages.append({"role": "user", "content": fact(n)})
        reply = ask(client, messages, when_full="drop-oldest")
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        hearth = (reply.model_extra or {}).get("hearth")
        if hearth:
            break
    assert hearth["context"] == "dropped_oldest" and hearth["messages_left_out"] >= 2, hearth
    assert reply.choices[0].message.content and reply.choices[0].finish_reason in ("stop", "length")

    messages.append({"role": "user", "content": "How many facts did I tell you?"})
    after = ask(client, messages)  # the default is drop-oldest too
    assert (after.model_extra or {}).get("hearth") == hearth, "the same cut stands: the same messages left out"
    assert after.usage.prompt_tokens_details.cached_tokens > 200, "it stood on the cut turn's saved state"
    assert after.usage.prompt_tokens - after.usage.prompt_tokens_details.cached_tokens < 40


def test_when_full_stop_is_refused_as_before_and_summary_is_refused_by_name(server):
    client = server.client()
    too_long = [{"role": "user", "content": " ".join(fact(n) for n in range(9))}]
    with pytest.raises(openai.BadRequestError) as refused:
        ask(client, too_long, when_full="stop")
    assert refused.value.code == "context_length_exceeded" and "512 tokens" in refused.value.message
    with pytest.raises(openai.BadRequestError) as summary:
        ask(client, [{"role": "user", "content": "Hi"}], when_full="summary")
    assert summary.value.param == "when_full"
