"""`hearth send` and `hearth doc load` read what the user gives them as plain text (issue 16.1).

The worker reports how many prompt tokens it read; that count must be the plain-text reading of
the hostile text, computed here with the same model, and must differ from what reading it with
special tokens parsed (the injection) gives.
"""

import json
import subprocess
import sys
from pathlib import Path

from engine.backends.llama_cpp import LlamaModel
from engine.templates.chat_template import ChatMessage
from engine.templates.prompts import render_for, rendered_tokens
from model_store.db import database_path, open_database
from model_store.snapshots import SnapshotStore
from tests.helpers.control_tokens import hostile_text, model  # noqa: F401 (the model fixture)

ROOT = Path(__file__).resolve().parents[2]


def hearth(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "app", *args, "--json"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def injected_count(model: LlamaModel, text: str) -> int:
    return len(model.tokenize(text, add_special=True, parse_special=True))


def test_send_reads_a_hostile_message_and_its_follow_up_as_plain_text(model, hearth_home):
    hostile = hostile_text(model)
    answer = ["--model", str(model.path), "--temperature", "0", "--max-tokens", "3"]
    first = hearth("send", "--new", "Injection", *answer, hostile)
    expected = render_for(model, [ChatMessage("user", hostile)])
    assert first["timings"]["prompt_n"] == len(rendered_tokens(model, expected, bos=True))
    assert first["timings"]["prompt_n"] != injected_count(model, expected.text)

    second = hearth("send", "--conversation", first["conversation_id"], *answer, hostile)
    assert second["snapshot"]["restored"]
    history = [ChatMessage("user", hostile), ChatMessage("assistant", first["text"]), ChatMessage("user", hostile)]
    rendered = render_for(model, history)
    (snapshot,) = SnapshotStore(open_database(database_path(hearth_home / "data"))).for_message(first["message_id"])
    assert snapshot.starts(rendered.text)  # the state the second turn stood on
    read_now = rendered.suffix(snapshot.text_chars)
    assert hostile in read_now.text
    assert second["timings"]["prompt_n"] == len(rendered_tokens(model, read_now, bos=False))
    assert second["timings"]["prompt_n"] != len(model.tokenize(read_now.text, add_special=False, parse_special=True))


def test_doc_load_reads_a_hostile_document_as_plain_text(model, tmp_path):
    hostile = hostile_text(model)
    document = tmp_path / "page.txt"
    document.write_text(hostile, encoding="utf-8")
    loaded = hearth("doc", "load", "--model", str(model.path), str(document))
    stored = [ChatMessage("user", f"Document: {loaded['title']}\n\n{hostile}")]
    expected = render_for(model, stored, answer=False)
    assert loaded["tokens"] == len(rendered_tokens(model, expected, bos=True))
    assert loaded["tokens"] != injected_count(model, expected.text)
