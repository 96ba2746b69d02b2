"""The sequence penalty (llama.cpp's DRY, :mod:`engine.decoding.sequence_penalty`) is on by default and is a
sampling setting like the others: ``--dry-multiplier`` on generate/send, ``dry_multiplier`` in an API
request (llama.cpp's server's name) and in Settings. Real CLI processes, a real ``hearth serve`` with
the ``openai`` client, real workers, the embedded SmolLM2 as Hearth runs it, greedy."""

from __future__ import annotations

import openai
import pytest

from tests.app.test_repeat_window import QUOTE, generate as greedy_generate
from tests.helpers.loops import loops
from tests.helpers.serve import start_server

pytestmark = [pytest.mark.process]
PANCAKES = "Give me a recipe for pancakes."  # greedy without the penalty: the same ingredient lines until the limit


def generate(*flags: str, prompt: str = PANCAKES, tokens: int = 256) -> dict:
    return greedy_generate(*flags, prompt=prompt, tokens=tokens)


def test_the_default_penalty_stops_a_loop_that_the_repeat_penalty_alone_lets_through():
    off = generate("--draft", "off", "--dry-multiplier", "0")
    default = generate("--draft", "off")
    assert (off["sampling"]["dry_multiplier"], default["sampling"]["dry_multiplier"]) == (0.0, 0.8)
    assert loops(off["token_ids"], off["finish_reason"]), off["text"]
    assert not loops(default["token_ids"], default["finish_reason"]), default["text"]


def test_lookup_drafting_stays_exact_under_a_strong_penalty():
    plain = generate("--draft", "off", "--dry-multiplier", "3", prompt=QUOTE, tokens=96)
    drafted = generate("--draft", "lookup", "--dry-multiplier", "3", prompt=QUOTE, tokens=96)
    assert drafted["token_ids"] == plain["token_ids"]
    assert drafted["draft"]["drafted"] > 0, drafted["draft"]
    assert plain["token_ids"] != generate("--draft", "off", "--dry-multiplier", "0", prompt=QUOTE, tokens=96)[
        "token_ids"], "the penalty changes this answer, so the drafts were judged under it"


# The value set in Settings, the flag over it, and a value out of range: tests/app/test_cli_sampling_settings.py


def test_the_api_takes_dry_multiplier_as_llama_cpps_server_does(tmp_path):
    server = start_server(tmp_path / "home")
    try:
        client = server.client()

        def ask(**extra):
            return client.chat.completions.create(model="default", messages=[{"role": "user", "content": PANCAKES}],
                                                  temperature=0, max_tokens=256, extra_body=extra or None)

        default, off = ask(), ask(dry_multiplier=0)
        with pytest.raises(openai.BadRequestError) as refused:
            ask(dry_multiplier=9)
    finally:
        server.stop()
    assert default.choices[0].message.content != off.choices[0].message.content
    assert off.choices[0].finish_reason == "length" and default.choices[0].finish_reason == "stop"
    assert refused.value.body["param"] == "dry_multiplier", refused.value.body
