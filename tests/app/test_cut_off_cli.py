"""An answer the full context cut off, from the command line (issue 31, point 8): ``send`` says so in
one stderr line, its JSON has ``cut_off: true`` (every other key as before), and the stored answer is
marked ``finish = "context"`` (the window shows the mark)."""

from __future__ import annotations

import io
import json

from app.surfaces.cli.main import main
from engine.context.context_memory import model_memory
from engine.models.model_files import check_model_file
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.fit import AVAILABLE_MEMORY_ENV


def small_memory(monkeypatch, model) -> None:
    """Memory that holds a 256-token context for ``model`` and no longer (with its drafting planes)."""
    memory = model_memory(model, check_model_file(model))
    monkeypatch.setenv(AVAILABLE_MEMORY_ENV, str(-(-memory.total_bytes(384, planes=5) * 100 // 70)))


def test_send_says_an_answer_was_cut_off_by_the_context_and_stores_it_so(hearth_home, hybrid_tiny, monkeypatch,
                                                                          capsys):
    small_memory(monkeypatch, hybrid_tiny)
    assert main(["send", "--model", str(hybrid_tiny), "--temperature", "0", "--max-tokens", "400", "--draft", "off",
                 "--new", "Story", "--json", "Tell me a long story about the mill."]) == 0
    captured = capsys.readouterr()
    reply = json.loads(captured.out)
    assert reply["finish_reason"] == "length" and reply["cut_off"] is True and reply["n_ctx"] == 256
    assert reply["timings"]["gen_n"] < 400, "the context ended it, not --max-tokens"
    (line,) = [line for line in captured.err.splitlines() if "cut off" in line]
    assert line.startswith("hearth: cut off: the context is full (256 tokens)")
    store = ConversationStore(open_database(database_path(hearth_home / "data")))
    try:
        answer = store.message(reply["message_id"])
    finally:
        store.db.close()
    assert (answer.status, answer.finish, answer.cut_off) == ("done", "context", True)


def test_chat_says_so_too(hybrid_tiny, monkeypatch, capsys):
    small_memory(monkeypatch, hybrid_tiny)
    monkeypatch.setattr("sys.stdin", io.StringIO("Tell me a long story about the mill.\n/exit\n"))
    assert main(["chat", "--model", str(hybrid_tiny), "--temperature", "0", "--max-tokens", "400", "--draft", "off"]) == 0
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "cut off" in line]
    assert line.startswith("hearth: cut off: the context is full (256 tokens)")


def test_an_answer_ended_by_max_tokens_is_not_cut_off(hybrid_tiny, capsys):
    assert main(["generate", "--model", str(hybrid_tiny), "--temperature", "0", "--max-tokens", "3", "--json",
                 "Tell me a long story."]) == 0
    captured = capsys.readouterr()
    reply = json.loads(captured.out)
    assert reply["finish_reason"] == "length" and reply["cut_off"] is False and "cut off" not in captured.err
