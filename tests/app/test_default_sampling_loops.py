"""The built-in model at its default sampling does not go round in circles (issue 51): through the API
when a request sets only the temperature, and through ``hearth send``. Real server, real worker,
real CLI process, the embedded SmolLM2. A loop is the benchmark's rule (tests/bench/bench_loops.py)."""

from __future__ import annotations

import json

import pytest

from tests.bench.bench_loops import loops
from tests.helpers.cli import hearth
from tests.helpers.serve import start_server

pytestmark = [pytest.mark.slow, pytest.mark.process]
ITALY = "What is the capital of Italy?"  # with the penalty off: "Il Coriobella, il Coriobella, ..."
DRAGON = "Write a short poem about a dragon who bakes bread."  # with it off: two lines until Stop
MAX_TOKENS = 256


def words_loop(text: str, run: int = 8) -> bool:
    """The same run of ``run`` words three times or more (the API gives text, not token ids)."""
    words = text.split()
    runs = [tuple(words[i:i + run]) for i in range(len(words) - run + 1)]
    return any(runs.count(r) >= 3 for r in set(runs))


def test_the_api_at_temperature_0_answers_the_capital_of_italy_without_a_loop(tmp_path):
    server = start_server(tmp_path / "home")
    try:
        answer = server.client().chat.completions.create(
            model="default", messages=[{"role": "user", "content": ITALY}], temperature=0, max_tokens=MAX_TOKENS)
    finally:
        server.stop()
    text = answer.choices[0].message.content
    assert not words_loop(text), text
    assert answer.choices[0].finish_reason == "stop", text  # it ended, rather than running to the limit


@pytest.mark.parametrize("temperature", ["0", None])
def test_hearth_send_at_its_defaults_writes_the_dragon_poem_without_a_loop(temperature):
    flags = ["--temperature", temperature] if temperature is not None else ["--seed", "51"]
    sent = hearth("send", "--new", "poem", *flags, "--max-tokens", str(MAX_TOKENS), "--json", DRAGON)
    assert sent.returncode == 0, sent.stderr
    reply = json.loads(sent.stdout)
    assert not loops(reply["token_ids"], reply["finish_reason"]), reply["text"]
