"""The real command line on a ``hearth.db`` with a damaged page in the middle: every command says so in
one line and writes nothing to it; ``hearth db recover`` copies every readable row into a new file,
keeps the damaged one aside, and the commands work again on the result."""

from __future__ import annotations

import json
import re

import pytest

from model_store.conversations import ConversationStore
from model_store.db import PAGE_SIZE, database_path, open_database
from tests.helpers.cli import error_line, hearth
from tests.store.damaged import last_page_of, make_damaged_database, truncate, write_messages_then_snapshots


@pytest.fixture
def damaged(hearth_home):
    return make_damaged_database(database_path(hearth_home / "data"))


def assert_says_damaged(result, path) -> None:
    line = error_line(result)
    assert f"the conversation database {path} is damaged" in line, line
    assert "`hearth db recover`" in line and "kept aside" in line, line


def test_every_command_refuses_in_one_line_and_writes_nothing(damaged, hybrid_tiny, tmp_path):
    before = damaged.path.read_bytes()
    document = tmp_path / "notes.txt"
    document.write_text("A short note about lighthouses.\n")
    conversation = damaged.conversation_ids[0]
    for args in (["conversations"], ["conversations", "--search", "words"],
                 ["send", "--conversation", conversation, "--model", str(hybrid_tiny), "--max-tokens", "4", "Hi"],
                 ["send", "--new", "Fresh", "--model", str(hybrid_tiny), "--max-tokens", "4", "Hi"],
                 ["doc", "load", "--model", str(hybrid_tiny), str(document)]):
        assert_says_damaged(hearth(*args), damaged.path)
        assert damaged.path.read_bytes() == before, f"{args[0]} wrote to the damaged file"
    listed = hearth("conversations", "--json")
    assert json.loads(listed.stdout)["error"]["kind"] == "database_damaged"


def test_recover_keeps_every_readable_row_and_the_app_works_again(damaged, hybrid_tiny):
    before = damaged.path.read_bytes()
    recovered = hearth("db", "recover")
    assert recovered.returncode == 0, recovered.stderr
    aside = [p for p in damaged.path.parent.iterdir() if re.fullmatch(r"hearth\.db\.damaged-\d{8}-\d{6}", p.name)]
    assert len(aside) == 1 and aside[0].read_bytes() == before, "the damaged file is kept as it was"
    assert str(aside[0]) in recovered.stdout and "Recovered 40 conversations" in recovered.stdout
    assert "Lost: 1 of " in recovered.stdout, recovered.stdout  # the damaged page is named as lost

    db = open_database(damaged.path)
    assert {row[0] for row in db.execute("SELECT id FROM messages")} == damaged.readable_ids
    db.close()
    listed = hearth("conversations", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {c["id"] for c in json.loads(listed.stdout)} == set(damaged.conversation_ids)

    conversation = damaged.conversation_ids[0]
    sent = hearth("send", "--conversation", conversation, "--model", str(hybrid_tiny), "--max-tokens", "4",
                  "--temperature", "0", "--json", "Still there?")
    assert sent.returncode == 0, sent.stderr
    db = open_database(damaged.path)
    branch = ConversationStore(db).current_branch(conversation)
    assert [m.content for m in branch[-2:]] == ["Still there?", json.loads(sent.stdout)["text"]]
    db.close()
    again = hearth("db", "recover")
    assert again.returncode == 0 and "not damaged" in again.stdout


def test_recover_without_a_database_says_so(hearth_home):
    assert "no conversation database" in error_line(hearth("db", "recover"))


def test_a_truncated_file_gives_back_every_message_it_kept_and_the_conversation_goes_on(hearth_home, hybrid_tiny):
    """Issue 32, point 5: the file cut short inside the snapshot chunks at its end, its 16 messages
    all in the part that was kept. Before, recovery found 0 of them and the next send failed."""
    path = database_path(hearth_home / "data")
    leaves = write_messages_then_snapshots(path, conversations=2, messages=8)
    kept = last_page_of(path, ("conversations", "messages"))
    assert kept * PAGE_SIZE < path.stat().st_size - PAGE_SIZE, "the cut must fall in the snapshots"
    truncate(path, kept * PAGE_SIZE + PAGE_SIZE // 3)

    recovered = hearth("db", "recover", "--json")
    assert recovered.returncode == 0, recovered.stderr
    report = json.loads(recovered.stdout)
    assert report["damaged"] and report["rows"]["messages"] == 16 and report["rows"]["conversations"] == 2

    conversation, last = next(iter(leaves.items()))
    sent = hearth("send", "--conversation", conversation, "--model", str(hybrid_tiny), "--max-tokens", "4",
                  "--temperature", "0", "--json", "Still there?")
    assert sent.returncode == 0, sent.stderr
    db = open_database(path)
    branch = ConversationStore(db).current_branch(conversation)
    db.close()
    assert len(branch) == 10 and branch[-3].id == last, "the new turn follows the last recovered message"
    assert [m.content for m in branch[-2:]] == ["Still there?", json.loads(sent.stdout)["text"]]
