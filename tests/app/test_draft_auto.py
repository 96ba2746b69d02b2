"""``--draft auto`` through the real command line and worker: an installed EAGLE-3 head that fits the
loaded model drafts, else the model's MTP head, else prompt lookup, and greedy output is the plain
output token for token in every case."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from app.surfaces.serve.server_folder import RUN_PREFIX
from tests.helpers.cli import hearth
from tests.helpers.serve import start_server

PROMPT = "the river ran past the old mill and the birds sang over the park"
GREEDY = ("--temperature", "0", "--max-tokens", "40", "--json")


def generate(model, draft: str, *extra: str) -> dict:
    result = hearth("generate", "--model", str(model), "--draft", draft, *GREEDY, *extra, PROMPT)
    assert result.returncode == 0 and "Traceback" not in result.stderr and not result.stderr.strip(), result.stderr
    return json.loads(result.stdout)


def imported(*paths) -> None:
    for path in paths:
        result = hearth("models", "import", str(path))
        assert result.returncode == 0, result.stderr


def test_auto_drafts_with_the_installed_head_that_fits_the_model(hearth_home, hybrid_tiny, eagle3_tiny, eagle3_smollm2):
    """Both heads installed: hybrid-tiny's is chosen (SmolLM2's is, through send and serve, below)."""
    imported(eagle3_tiny, eagle3_smollm2)
    plain = generate(hybrid_tiny, "off")
    auto = generate(hybrid_tiny, "auto", "--draft-max", "4")
    assert auto["draft"]["kind"] == "eagle3" and auto["draft"]["rounds"] > 0, auto["draft"]
    assert auto["token_ids"] == plain["token_ids"] and len(plain["token_ids"]) > 10


def test_auto_without_a_head_or_mtp_head_for_the_model_drafts_by_prompt_lookup(hearth_home, eagle3_tiny):
    """SmolLM2 gets only hybrid-tiny's head and has no MTP head: lookup. (hybrid-tiny falling back to its
    MTP head is the next test's case; every order of the rule is tests/engine/test_draft_auto.py's.)"""
    imported(eagle3_tiny)
    plain = generate("default", "off")
    auto = generate("default", "auto")
    assert auto["draft"]["kind"] == "lookup", auto["draft"]
    assert auto["token_ids"] == plain["token_ids"]


def test_auto_passes_over_a_head_the_engine_refuses_in_silence(hearth_home, hybrid_tiny, eagle3_tiny, eagle3_smollm2,
                                                               tmp_path):
    """The registry says the head fits hybrid-tiny, but its file was replaced since by SmolLM2's head:
    the worker's own check refuses it, and auto drafts with the MTP head instead, without a word."""
    head = tmp_path / "head.gguf"
    shutil.copy(eagle3_tiny, head)
    imported(head)
    shutil.copy(eagle3_smollm2, head)
    plain = generate(hybrid_tiny, "off")
    auto = generate(hybrid_tiny, "auto")
    assert auto["draft"]["kind"] == "mtp", auto["draft"]
    assert auto["token_ids"] == plain["token_ids"]


def test_a_conversation_turn_drafts_with_the_installed_head_too(hearth_home, eagle3_smollm2):
    """``hearth send`` (the conversation path the window shares) sends the head with ``auto`` as ``generate`` does."""
    imported(eagle3_smollm2)
    sent = {}
    for draft in ("off", "auto"):
        result = hearth("send", "--new", f"mill {draft}", "--draft", draft, *GREEDY, PROMPT)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        sent[draft] = json.loads(result.stdout)
    assert sent["auto"]["draft"]["kind"] == "eagle3" and sent["auto"]["draft"]["rounds"] > 0, sent["auto"]["draft"]
    assert sent["auto"]["token_ids"] == sent["off"]["token_ids"] and len(sent["off"]["token_ids"]) > 10


def test_hearth_serve_drafts_with_the_installed_head_too(hearth_home, eagle3_smollm2):
    """The API's answers are kept in the server's own store, with their drafting stats: the head drafted."""
    imported(eagle3_smollm2)
    expected = hearth("send", "--new", "api", "--draft", "off", *GREEDY, PROMPT)
    assert expected.returncode == 0, expected.stderr
    server = start_server(hearth_home)
    try:
        answer = server.client().chat.completions.create(
            model="default", messages=[{"role": "user", "content": PROMPT}], temperature=0, max_tokens=40)
        stored = [sqlite3.connect(db).execute("SELECT stats FROM messages WHERE role = 'assistant'").fetchall()
                  for db in hearth_home.rglob("hearth.db") if db.parent.name.startswith(RUN_PREFIX)]
    finally:
        server.stop()
    assert answer.choices[0].message.content == json.loads(expected.stdout)["text"]
    drafts = [json.loads(stats)["draft"] for rows in stored for (stats,) in rows]
    assert [d["kind"] for d in drafts] == ["eagle3"] and drafts[0]["rounds"] > 0, drafts
