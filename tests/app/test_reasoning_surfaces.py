"""A reasoning model's thinking, end to end: told from the answer by the engine, stored apart, shown
(or not) by the command line, given as ``reasoning_content`` by the API, switched off through the
template, and changing nothing about drafting or saved state (issue 30).

The model is ``qwen35-real-script`` (tests/fixtures/real_families.py): Qwen3.5's real vocabulary and
template, with weights that make its greedy answer after the template's ``<think>`` cue exactly
``SCRIPT``: a reasoning block, then the answer.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import hearth
from tests.helpers.real_models import REAL_SCRIPT, SCRIPT, real_model
from tests.helpers.serve import serving

THOUGHT, ANSWER = (part.strip() for part in SCRIPT.removesuffix("<|im_end|>").split("</think>"))
GREEDY = ("--temperature", "0", "--max-tokens", "24")


@pytest.fixture(scope="module")
def script_model():
    return str(real_model(REAL_SCRIPT))


def _send(home, *args):
    result = hearth("send", *GREEDY, *args, HEARTH_HOME=str(home))
    assert result.returncode == 0, result.stderr
    return result


def test_send_stores_the_reasoning_apart_and_the_next_turn_stands_on_saved_state(script_model, hearth_home):
    first = json.loads(_send(hearth_home, "--new", "t", "--model", script_model, "--json", "Hi").stdout)
    assert (first["text"], first["reasoning"]) == (ANSWER, THOUGHT)
    second = json.loads(_send(hearth_home, "--conversation", first["conversation_id"], "--json", "Again").stdout)
    assert (second["text"], second["reasoning"]) == (ANSWER, THOUGHT)
    # the template writes the first answer again without its reasoning: the turn stands where the question ended,
    # with the part of the cue the template writes again before that answer (<|im_start|> assistant \n); the rest of
    # the cue, <think> \n, was read apart
    read_apart = 2
    question_tokens = first["snapshot"]["prefilled_tokens"] - read_apart
    assert second["snapshot"]["restored"] and second["snapshot"]["restored_tokens"] == question_tokens


def test_piped_output_has_the_answer_alone_unless_asked_and_off_asks_the_template_not_to_think(script_model,
                                                                                               hearth_home):
    piped = _send(hearth_home, "--new", "a", "--model", script_model, "Hi").stdout
    assert piped == ANSWER + "\n"
    shown = _send(hearth_home, "--new", "b", "--model", script_model, "--thinking", "show", "Hi").stdout
    assert shown == f"{THOUGHT}\n\n{ANSWER}\n" and "\x1b" not in shown  # not a terminal: no dimming codes
    off = json.loads(_send(hearth_home, "--new", "c", "--model", script_model, "--thinking", "off", "--json",
                           "Hi").stdout)
    assert (off["text"], off["reasoning"]) == (ANSWER, "")  # the cue closed the block: the model answered at once


def test_drafting_through_reasoning_changes_no_token(script_model, hearth_home):
    runs = [json.loads(hearth("generate", *GREEDY, "--model", script_model, "--draft", draft, "--json", "Hi",
                              HEARTH_HOME=str(hearth_home)).stdout) for draft in ("off", "lookup")]
    assert runs[0]["token_ids"] == runs[1]["token_ids"] and (runs[0]["text"], runs[0]["reasoning"]) == (ANSWER, THOUGHT)


def test_the_api_gives_reasoning_content_whole_and_streamed_and_reuses_state_across_requests(script_model,
                                                                                             hearth_home):
    with serving(hearth_home, "--model", script_model) as server:
        client = server.client()
        model = client.models.list().data[0].id
        question = [{"role": "user", "content": "Hi"}]
        whole = client.chat.completions.create(model=model, messages=question, temperature=0, max_tokens=24)
        message = whole.choices[0].message
        assert (message.content, message.model_extra["reasoning_content"]) == (ANSWER, THOUGHT)
        stream = client.chat.completions.create(model=model, messages=question, temperature=0, max_tokens=24,
                                                stream=True)
        reasoning = content = ""
        for chunk in stream:
            delta = chunk.choices[0].delta
            reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            content += delta.content or ""
        assert (content, reasoning.strip()) == (ANSWER, THOUGHT)
        follow = [*question, {"role": "assistant", "content": ANSWER}, {"role": "user", "content": "Again"}]
        again = client.chat.completions.create(model=model, messages=follow, temperature=0, max_tokens=24)
        # Qwen3.5's template writes the answer again without its reasoning: the request stands where the question
        # ended (all of the first request but <think> \n, the 2 tokens of its cue that history does not repeat)
        # and reads the rest
        assert again.usage.prompt_tokens_details.cached_tokens == whole.usage.prompt_tokens - 2
        assert again.choices[0].message.content == ANSWER
        off = client.chat.completions.create(model=model, messages=question, temperature=0, max_tokens=24,
                                             extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        assert off.choices[0].message.content == ANSWER
        assert "reasoning_content" not in (off.choices[0].message.model_extra or {})
