"""``hearth serve`` through the official ``openai`` client: real server, real worker, SmolLM2."""

from __future__ import annotations

import json
import threading

import openai
import pytest

from tests.helpers.cli import hearth
from tests.helpers.serve import http, start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]
MODEL = "default"
QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("serve-home"))
    yield running
    running.stop()


def greedy(**extra) -> dict:
    return {"model": MODEL, "temperature": 0, **extra}


def test_models_lists_the_served_model(server):
    assert [m.id for m in server.client().models.list().data] == [MODEL]


def test_a_chat_answer_streamed_equals_the_same_answer_in_one_piece(server):
    client = server.client()
    messages = [{"role": "user", "content": QUESTION}]
    whole = client.chat.completions.create(messages=messages, max_tokens=24, **greedy())
    pieces = client.chat.completions.create(messages=messages, max_tokens=24, stream=True,
                                            stream_options={"include_usage": True}, **greedy())
    chunks = list(pieces)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content and text.strip()
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_the_answer_equals_hearth_send_on_the_same_history_token_for_token(server):
    sent = hearth("send", "--new", "api", "--temperature", "0", "--max-tokens", "24", "--json", QUESTION)
    assert sent.returncode == 0, sent.stderr
    expected = json.loads(sent.stdout)
    answer = server.client().chat.completions.create(messages=[{"role": "user", "content": QUESTION}],
                                                     max_tokens=24, **greedy())
    assert answer.choices[0].message.content == expected["text"]
    assert answer.usage.completion_tokens == len(expected["token_ids"])


def test_max_tokens_ends_the_answer_with_length(server):
    answer = server.client().chat.completions.create(
        messages=[{"role": "user", "content": "Count from one to one hundred in words."}],
        max_completion_tokens=5, **greedy())
    assert answer.choices[0].finish_reason == "length" and answer.usage.completion_tokens == 5
    text = server.client().completions.create(prompt="Once upon a time", max_tokens=3, **greedy())
    assert text.choices[0].finish_reason == "length" and text.usage.completion_tokens == 3


def test_a_stop_string_ends_the_answer_before_it(server):
    client = server.client()
    messages = [{"role": "user", "content": "Describe the sea in two sentences."}]
    free = client.chat.completions.create(messages=messages, max_tokens=40, **greedy()).choices[0].message.content
    assert len(free) > 16, free
    stop = free[8:12]  # wherever it first appears, the answer must end just before it
    stopped = client.chat.completions.create(messages=messages, max_tokens=40, stop=[stop], **greedy())
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].message.content == free[:free.index(stop)]


def test_a_conversation_continued_by_a_client_reads_only_its_new_message(server):
    client = server.client()
    messages = [{"role": "system", "content": "You answer in one short sentence."},
                {"role": "user", "content": QUESTION}]
    reads = []
    for question in ("And of Italy?", "And of Spain?", "And of Portugal?"):
        answer = client.chat.completions.create(messages=messages, max_tokens=16, **greedy())
        usage = answer.usage
        reads.append((usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens))
        messages += [{"role": "assistant", "content": answer.choices[0].message.content},
                     {"role": "user", "content": question}]
    (first_prompt, first_cached), *later = reads
    assert first_cached == 0
    previous_total = first_prompt
    for prompt, cached in later:
        assert previous_total < cached < prompt  # all of the last turn came back, only the new message was read
        assert prompt - cached < 40
        previous_total = prompt


def test_three_agents_alternating_requests_each_keep_their_own_reuse(server):
    client = server.client()
    topics = ("rivers", "mountains", "deserts")
    histories = {t: [{"role": "user", "content": f"Name one famous {t}."}] for t in topics}
    last_prompt = {t: 0 for t in topics}
    for round_ in range(3):
        for topic in topics:
            answer = client.chat.completions.create(messages=histories[topic], max_tokens=8, **greedy())
            cached = answer.usage.prompt_tokens_details.cached_tokens
            if round_ > 0:
                assert cached > last_prompt[topic], (topic, round_, cached, last_prompt[topic])
            last_prompt[topic] = answer.usage.prompt_tokens
            histories[topic] += [{"role": "assistant", "content": answer.choices[0].message.content},
                                 {"role": "user", "content": f"Another one of the {topic}?"}]


def test_four_clients_with_25_requests_each_get_their_own_answers(server):
    results: dict[tuple[int, int], str] = {}
    errors: list[BaseException] = []

    def client_run(index: int) -> None:
        client = server.client()
        try:
            for round_ in range(25):
                answer = client.completions.create(prompt=f"Client {index} request {round_}:", max_tokens=2,
                                                   **greedy())
                results[(index, round_)] = answer.id
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=client_run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors and not any(t.is_alive() for t in threads)
    assert len(results) == 100 and len(set(results.values())) == 100  # none lost, none answered twice


def test_bad_requests_get_openai_errors_with_the_right_status(server):
    url = f"{server.base_url}/chat/completions"
    good = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    cases = [
        (b"{not json", 400, "invalid_json"),
        (json.dumps({**good, "max_tokens": "many"}).encode(), 400, "invalid_request"),
        (json.dumps({**good, "tools": [{"type": "function"}]}).encode(), 400, None),
        (json.dumps({**good, "n": 2}).encode(), 400, None),
        (json.dumps({**good, "frobnicate": 1}).encode(), 400, "invalid_request"),
        (json.dumps({**good, "model": "gpt-4o"}).encode(), 404, "model_not_found"),
        (json.dumps({**good, "messages": [{"role": "tool", "content": "x"}]}).encode(), 400, None),
        (b"x" * (5 * 1024 * 1024), 413, "body_too_large"),
    ]
    for body, status, code in cases:
        reply = http("POST", url, content=body)
        assert reply.status_code == status, (body[:60], reply.text)
        error = reply.json()["error"]
        assert error["message"] and error["type"]
        if code is not None:
            assert error["code"] == code, error
    unknown = http("POST", url, json_body={**good, "frobnicate": 1}).json()["error"]["message"]
    assert "Unrecognized request argument supplied: frobnicate" in unknown


def test_health_says_the_server_is_up(server):
    reply = http("GET", f"{server.root}/health", timeout=10)
    assert reply.status_code == 200 and reply.json()["status"] == "ok" and reply.json()["model"] == MODEL


def test_each_request_is_one_log_line_with_its_tokens(server):
    server.client().chat.completions.create(messages=[{"role": "user", "content": "Hello"}], max_tokens=3,
                                            **greedy())
    line = [line for line in server.log_lines() if line.startswith("hearth serve:")][-1]
    assert " 200 " in line and "out=3" in line and "ttft=" in line and "tok/s=" in line


def test_an_openai_error_is_raised_by_the_official_client(server):
    with pytest.raises(openai.NotFoundError):
        server.client().chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError):
        server.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], n=3)
