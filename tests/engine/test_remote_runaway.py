"""A remote engine that never stops (issue 32, point 11): the client enforces ``max_tokens`` and a
byte cap itself, closes the stream, and says the answer is cut off.

Before, a server streaming for ever held ``hearth generate --engine … --max-tokens 8`` for as long
as it streamed (96 s and 22 million characters in the report; here: still running after 8 s with
300,000 characters printed). The engine is :class:`~tests.helpers.scripted_engine.ScriptedEngine`,
a real HTTP server on 127.0.0.1, driven through the real ``hearth`` command line."""

from __future__ import annotations

import json
import time

import pytest

from engine import protocol as p
from app.engine_clients.remote.client import RemoteClient
from app.engine_clients.remote.limits import AnswerBudget, byte_cap
from app.engine_clients.remote.spec import RemoteEngine
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from tests.helpers.cli import hearth
from tests.helpers.scripted_engine import ScriptedEngine

WORD = "word "
CUT_OFF = "so Hearth closed its answer there: the answer is cut off"


def add_engine(name: str, engine: ScriptedEngine) -> None:
    added = hearth("engines", "add", name, "--url", engine.base_url, timeout=60)
    assert added.returncode == 0, added.stderr


def test_a_never_ending_stream_is_closed_at_max_tokens_and_said_cut_off(hearth_home):
    with ScriptedEngine([WORD], forever=True) as engine:
        add_engine("loop", engine)
        started = time.monotonic()
        ran = hearth("generate", "--engine", "loop", "--max-tokens", "8", "hi", timeout=60)
        took = time.monotonic() - started
        assert engine.closed.wait(5), "the server never saw the connection close"
    assert ran.returncode == 0, ran.stderr
    assert took < 15, took
    assert ran.stdout == WORD * 8 + "\n"  # the 9th piece is past the limit: not shown
    assert "the engine loop did not stop at the answer's token limit (--max-tokens)" in ran.stderr
    assert CUT_OFF in ran.stderr and "Traceback" not in ran.stderr
    assert engine.bodies[-1]["max_tokens"] == 8  # the server was asked for 8, and ignored it


def test_send_stores_the_cut_answer_and_json_says_which_limit(hearth_home):
    with ScriptedEngine([WORD], forever=True) as engine:
        add_engine("loop", engine)
        sent = hearth("send", "--engine", "loop", "--new", "runaway", "--max-tokens", "5", "--json", "hi",
                      timeout=60)
        assert engine.closed.wait(5)
    assert sent.returncode == 0, sent.stderr
    result = json.loads(sent.stdout)
    assert result["text"] == WORD * 5 and result["finish_reason"] == "length"
    assert result["remote"]["closed_by_hearth"] == "max_tokens" and CUT_OFF in sent.stderr
    store = ConversationStore(open_database(database_path(hearth_home / "data")))
    assert store.message(result["message_id"]).content == WORD * 5


def test_one_huge_piece_is_cut_at_the_byte_cap(hearth_home):
    piece = "x" * 100_000  # each piece alone is past the cap of an 8-token answer
    with ScriptedEngine([piece], forever=True) as engine:
        add_engine("flood", engine)
        ran = hearth("generate", "--engine", "flood", "--max-tokens", "8", "hi", timeout=60)
        assert engine.closed.wait(5)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "x" * byte_cap(8) + "\n"
    assert "sent more text than the answer's token limit (--max-tokens) allows" in ran.stderr


def test_engines_test_ends_on_a_server_that_never_stops(hearth_home):
    with ScriptedEngine([WORD], forever=True) as engine:
        add_engine("loop", engine)
        started = time.monotonic()
        tested = hearth("engines", "test", "loop", "--json", timeout=60)
        assert time.monotonic() - started < 15 and engine.closed.wait(5)
    assert tested.returncode == 0 and json.loads(tested.stdout)["ok"] is True, tested.stdout + tested.stderr


def test_an_engine_that_stops_at_max_tokens_by_itself_is_not_cut(hearth_home):
    """Exactly ``max_tokens`` pieces, then the server's own finish and usage: all kept, nothing said."""
    with ScriptedEngine([WORD] * 8) as engine:
        client = RemoteClient(RemoteEngine(name="honest", url=engine.base_url))
        client.start()
        try:
            client.load_model("engine:honest")
            events = list(client.stream(p.Chat(request_id="honest", messages=[p.WireMessage("user", "hi")],
                                               max_tokens=8), timeout=30))
        finally:
            client.close()
    finished = events[-1]
    assert "".join(e.text for e in events if isinstance(e, p.TokenDelta)) == WORD * 8
    assert finished.finish_reason == "stop" and finished.remote.closed_by_hearth == ""
    assert not engine.closed.is_set()


def test_the_budget_counts_the_servers_usage_where_it_gives_it_else_pieces():
    budget = AnswerBudget(4)
    budget.saw_usage({"completion_tokens": 3})  # a server that sends several tokens a piece, and says so
    assert budget.take("abc", "") == ("abc", "") and not budget.exceeded
    budget.saw_usage({"completion_tokens": 5})
    assert budget.take("def", "") == ("", "") and budget.exceeded == "max_tokens"
    counted = AnswerBudget(2)
    assert [counted.take("a", ""), counted.take("", "b"), counted.take("c", "")] == [("a", ""), ("", "b"), ("", "")]
    assert counted.exceeded == "max_tokens"
    capped = AnswerBudget(1)
    text, _ = capped.take("é" * byte_cap(1), "")  # 2 bytes a character: cut on a character's boundary
    assert text == "é" * (byte_cap(1) // 2) and capped.exceeded == "max_bytes"
