"""``--draft-paths N`` through the real command line and worker: the model is loaded for a tree of N
draft paths, every drafter that can give several guesses proposes a tree, and greedy output is the
plain output token for token; a bad count is refused in one line."""

from __future__ import annotations

import json

import pytest

from tests.app.test_eagle3_cli import GREEDY, LONG_PROMPT, PROMPT
from app.surfaces.cli.main import main
from tests.helpers.cli import hearth

QUOTE = ("Repeat exactly: the cat sat on the mat. the dog ran to the park. the cat ate the fish. the dog sat on "
         "the rug. the cat ran to the mat.")


def generate(model, *flags: str, prompt: str = PROMPT) -> dict:
    result = hearth("generate", "--model", str(model), *flags, *GREEDY, prompt)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("draft", ["mtp", "eagle3"])
def test_tree_drafting_on_the_hybrid_model_is_the_plain_output(hearth_home, hybrid_tiny, eagle3_tiny, draft):
    spec = f"eagle3:{eagle3_tiny}" if draft == "eagle3" else draft
    plain = generate(hybrid_tiny, "--draft", "off")
    tree = generate(hybrid_tiny, "--draft", spec, "--draft-paths", "3")
    assert tree["token_ids"] == plain["token_ids"] and len(plain["token_ids"]) > 10
    assert tree["draft"]["kind"] == draft and tree["draft"]["tree_rounds"] > 0, tree["draft"]


def test_tree_drafting_with_an_eagle3_head_on_smollm2_past_512_tokens_is_the_plain_output(hearth_home, smollm2,
                                                                                           eagle3_smollm2):
    """(Short prompts on SmolLM2: tests/engine/test_drafting_tree.py.)"""
    plain = generate(smollm2, "--draft", "off", prompt=LONG_PROMPT)
    tree = generate(smollm2, "--draft", f"eagle3:{eagle3_smollm2}", "--draft-paths", "2", prompt=LONG_PROMPT)
    assert tree["token_ids"] == plain["token_ids"] and tree["draft"]["tree_rounds"] > 0, tree["draft"]


def test_lookup_drafts_a_tree_from_its_matches_on_smollm2(hearth_home, smollm2):
    """A quoting answer: the n-gram lengths' latest matches continue differently, one path each."""
    plain = generate(smollm2, "--draft", "off", prompt=QUOTE)
    tree = generate(smollm2, "--draft", "lookup", "--draft-paths", "3", prompt=QUOTE)
    assert tree["token_ids"] == plain["token_ids"] and tree["draft"]["tree_rounds"] > 0, tree["draft"]


@pytest.mark.parametrize("command", [("generate",), ("send", "--new", "t"), ("chat",), ("serve",)])
@pytest.mark.parametrize("value", ["0", "5", "two"])
def test_a_bad_draft_path_count_is_one_usage_line(capsys, command, value):
    """Refused by the parser before any model loads: exit 2, the flag and its range, no traceback."""
    argv = [*command, "--draft-paths", value] + (["hi"] if command[0] in ("generate", "send") else [])
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in err, err
    expected = "must be between 1 and 4" if value != "two" else "expected a whole number"
    assert f"argument --draft-paths: {expected}" in err.strip().splitlines()[-1], err
