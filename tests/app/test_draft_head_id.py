"""``--draft eagle3:ID``: an imported EAGLE-3 head named by its id, through the real command line and
worker, drafts as its path does (greedy output identical to ``--draft off``); an id that names no head
is one line saying what to do, in ``generate`` and ``serve`` alike."""

from __future__ import annotations

import json

from tests.helpers.cli import hearth

PROMPT = "the river ran past the old mill and the birds sang over the park"
GREEDY = ("--temperature", "0", "--max-tokens", "30", "--json")


def imported_id(path) -> str:
    result = hearth("models", "import", "--json", str(path))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["id"]


def generate(model, draft: str):
    return hearth("generate", "--model", str(model), "--draft", draft, *GREEDY, PROMPT)


def one_line(result) -> str:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_an_installed_heads_id_drafts_as_its_file_does(hearth_home, hybrid_tiny, eagle3_tiny):
    head_id = imported_id(eagle3_tiny)
    plain, by_id = generate(hybrid_tiny, "off"), generate(hybrid_tiny, f"eagle3:{head_id}")
    assert by_id.returncode == 0 and not by_id.stderr.strip(), by_id.stderr
    drafted, expected = json.loads(by_id.stdout), json.loads(plain.stdout)
    assert drafted["draft"]["kind"] == "eagle3" and drafted["draft"]["rounds"] > 0, drafted["draft"]
    assert drafted["token_ids"] == expected["token_ids"] and len(expected["token_ids"]) > 10


def test_an_id_that_names_no_head_is_one_line_saying_what_to_do(hearth_home, hybrid_tiny):
    model_id = imported_id(hybrid_tiny)  # a model, not a head
    for ref in ("no-such-head", model_id):
        line = one_line(generate(hybrid_tiny, f"eagle3:{ref}"))
        assert f"no installed EAGLE-3 head is called '{ref}'" in line and "hearth models list" in line, line


def test_a_head_whose_file_is_gone_says_so(hearth_home, hybrid_tiny, eagle3_tiny, tmp_path):
    copy = tmp_path / "gone-head.gguf"
    copy.write_bytes(eagle3_tiny.read_bytes())
    head_id = imported_id(copy)
    copy.unlink()
    line = one_line(generate(hybrid_tiny, f"eagle3:{head_id}"))
    assert "is gone" in line and f"hearth models rm {head_id}" in line, line


def test_serve_refuses_an_unknown_head_id_in_one_line(hearth_home):
    line = one_line(hearth("serve", "--port", "0", "--draft", "eagle3:no-such-head", timeout=60))
    assert "--draft eagle3:no-such-head" in line and "no installed EAGLE-3 head" in line, line
