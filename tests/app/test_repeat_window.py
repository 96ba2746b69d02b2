"""The repeat penalty's window is a sampling setting like the others (issue 51, point 1): ``--repeat-last-n``
on generate/send, ``repeat_last_n`` in an API request (llama.cpp's server's name), a model's own
``general.sampling.penalty_last_n``; -1 is the whole answer, 0 no penalty. Real CLI processes, a real
``hearth serve`` with the ``openai`` client, real workers, the embedded SmolLM2, greedy."""

from __future__ import annotations

import json

import openai
import pytest

from tests.helpers.cli import hearth
from tests.helpers.serve import start_server

pytestmark = [pytest.mark.process]
POEM = "Write a poem about rain."  # greedy with a 4-token window: "A gentle breeze, a soft rain" over and over
NO_PHRASE_PENALTY = ("--dry-multiplier", "0")  # it would break the loop these tests use to tell windows apart
QUOTE = ("Repeat exactly: the cat sat on a mat and the dog ran to the park while birds sang over the river, "
         "and the cat sat on a mat again while the dog ran to the park again.")


def generate(*flags: str, prompt: str = POEM, tokens: int = 80) -> dict:
    done = hearth("generate", "--temperature", "0", "--max-tokens", str(tokens), "--json", *flags, prompt)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_four_token_window_changes_the_greedy_answer_and_json_says_the_window():
    default = generate("--draft", "off", *NO_PHRASE_PENALTY)
    short = generate("--draft", "off", "--repeat-last-n", "4", *NO_PHRASE_PENALTY)
    assert (default["sampling"]["repeat_last_n"], short["sampling"]["repeat_last_n"]) == (64, 4)
    assert short["token_ids"] != default["token_ids"]
    assert short["token_ids"][:8] == default["token_ids"][:8], "the same start: only the penalty's reach differs"
    assert short["text"].count("A gentle breeze, a soft rain") >= 3, short["text"]  # too short a window to stop it
    assert default["text"].count("A gentle breeze, a soft rain") <= 1, default["text"]


@pytest.mark.parametrize("window", ["8", "-1"])
def test_lookup_drafting_stays_exact_with_the_window(window):
    plain = generate("--draft", "off", "--repeat-last-n", window, prompt=QUOTE, tokens=96)
    drafted = generate("--draft", "lookup", "--repeat-last-n", window, prompt=QUOTE, tokens=96)
    assert drafted["token_ids"] == plain["token_ids"]
    assert drafted["sampling"]["repeat_last_n"] == int(window)
    assert drafted["draft"]["drafted"] > 0, drafted["draft"]  # drafts were judged under the window (the engine
    # tests, tests/engine/test_drafting*.py, keep drafting on throughout; here auto-off may stop it early)


# The window set in Settings, the flag over it, and a window out of range: tests/app/test_cli_sampling_settings.py


def test_the_api_takes_repeat_last_n_as_llama_cpps_server_does(tmp_path):
    server = start_server(tmp_path / "home")
    try:
        client = server.client()

        def ask(**extra):
            answer = client.chat.completions.create(model="default", messages=[{"role": "user", "content": POEM}],
                                                    temperature=0, max_tokens=80, extra_body=extra or None)
            return answer.choices[0].message.content

        default, short = ask(dry_multiplier=0), ask(repeat_last_n=4, dry_multiplier=0)
        with pytest.raises(openai.BadRequestError) as refused:
            ask(repeat_last_n=-2)
    finally:
        server.stop()
    assert short != default
    assert short.count("A gentle breeze, a soft rain") >= 3 and default.count("A gentle breeze, a soft rain") <= 1
    assert refused.value.body["param"] == "repeat_last_n", refused.value.body
