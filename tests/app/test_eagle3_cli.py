"""``--draft eagle3:PATH`` through the real command line and worker: greedy output is the plain
output token for token, and a file that is not an EAGLE-3 head for the model is refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.cli import error_line, hearth

PROMPT = "the river ran past the old mill and the birds sang over the park"
GREEDY = ("--temperature", "0", "--max-tokens", "48", "--json")
WORDS = "the cat sat on a mat and the dog ran to the park while birds sang over the river".split()
LONG_PROMPT = " ".join(np.random.default_rng(3).choice(WORDS, size=600))  # 631 tokens on SmolLM2


def generate(model, draft: str, prompt: str = PROMPT) -> dict:
    result = hearth("generate", "--model", str(model), "--draft", draft, *GREEDY, prompt)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout)


def test_greedy_output_with_an_eagle3_head_is_the_plain_output(hearth_home, hybrid_tiny, eagle3_tiny):
    plain = generate(hybrid_tiny, "off")
    drafted = generate(hybrid_tiny, f"eagle3:{eagle3_tiny}")
    assert drafted["draft"]["kind"] == "eagle3" and drafted["draft"]["rounds"] > 0, drafted["draft"]
    assert drafted["token_ids"] == plain["token_ids"] and len(plain["token_ids"]) > 10


@pytest.mark.parametrize("prompt", [PROMPT, LONG_PROMPT], ids=["short prompt", "past 512 tokens"])
def test_greedy_output_with_an_eagle3_head_on_smollm2_is_the_plain_output(hearth_home, smollm2, eagle3_smollm2, prompt):
    """A transformer target (SmolLM2, llama): the rejected guesses are trimmed from its KV cache."""
    plain = generate(smollm2, "off", prompt)
    drafted = generate(smollm2, f"eagle3:{eagle3_smollm2}", prompt)
    assert drafted["draft"]["kind"] == "eagle3" and drafted["draft"]["rounds"] > 0, drafted["draft"]
    assert drafted["token_ids"] == plain["token_ids"] and len(plain["token_ids"]) > 10
    assert (plain["timings"]["prompt_n"] > 512) == (prompt is LONG_PROMPT), plain["timings"]


@pytest.mark.parametrize("which", ["target itself", "missing"])
def test_a_file_that_is_no_eagle3_head_for_the_model_is_refused_in_one_line(hearth_home, hybrid_tiny, tmp_path, which):
    path = hybrid_tiny if which == "target itself" else tmp_path / "absent.gguf"
    result = hearth("generate", "--model", str(hybrid_tiny), "--draft", f"eagle3:{path}", *GREEDY, PROMPT)
    line = error_line(result)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert path.name in line, line
    if which == "target itself":
        assert "is not an EAGLE-3 head" in line and "another drafting choice" in line, line
    else:
        assert "no such file" in line and "another drafting choice" in line and "--model default" not in line, line
