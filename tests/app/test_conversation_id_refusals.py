"""An empty or blank id names nothing (issue 50, point 5): ``hearth send --conversation ''`` used to
start a new conversation without a word, and ``--conversation '  '`` too. Now the sub-command's
parser refuses it in one usage line saying what to give, before any model loads or anything is
stored, as it does for ``--reply-to ''``; and a whole id or a prefix of one still works.

Every command is the real ``hearth`` command line in its own process."""

from __future__ import annotations

import pytest

from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from tests.helpers.cli import hearth


def stored(hearth_home) -> ConversationStore:
    return ConversationStore(open_database(database_path(hearth_home / "data")))


def usage_refusal(result) -> str:
    """The parser's refusal: its usage, then one line naming the flag; exit status 2, no traceback."""
    assert result.returncode == 2 and "Traceback" not in result.stderr, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert lines[0].startswith("usage: hearth "), result.stderr
    return lines[-1]


@pytest.mark.parametrize("typed", ["", "   ", "\t"])
@pytest.mark.parametrize("command", [("send", "--max-tokens", "2", "Hi"), ("chat",)])
def test_an_empty_or_blank_conversation_id_is_refused_and_nothing_is_started(hearth_home, command, typed):
    store = stored(hearth_home)
    kept = store.create("Kept")
    store.add_message(kept.id, "user", "Hello?", parent_id=None)

    result = hearth(command[0], "--conversation", typed, *command[1:], timeout=120)

    line = usage_refusal(result)
    assert line == (f"hearth {command[0]}: error: argument --conversation: an empty id names no conversation; "
                    "give its id or the id's first characters (`hearth conversations` lists them), "
                    "or --new TITLE to start one"), line
    assert [c.id for c in stored(hearth_home).list()] == [kept.id], "no conversation was started"
    assert result.stdout == ""


def test_an_empty_reply_to_id_is_refused_too(hearth_home):
    store = stored(hearth_home)
    kept = store.create("Kept")
    store.add_message(kept.id, "user", "Hello?", parent_id=None)

    line = usage_refusal(hearth("send", "--conversation", kept.id, "--reply-to", " ", "Hi", timeout=120))

    assert line == ("hearth send: error: argument --reply-to: an empty id names no message; give its id or the "
                    "id's first characters (`hearth send --json` prints each answer's message_id)"), line
    assert len(stored(hearth_home).current_branch(kept.id)) == 1, "nothing was added"


def test_a_whole_id_and_a_prefix_padded_with_spaces_still_name_their_conversation(hearth_home, hybrid_tiny):
    store = stored(hearth_home)
    kept = store.create("Kept")
    store.add_message(kept.id, "user", "Hello?", parent_id=None)

    for typed in (kept.id, f"  {kept.id[:6]} "):
        sent = hearth("send", "--conversation", typed, "--model", str(hybrid_tiny), "--max-tokens", "2",
                      "--temperature", "0", "Again", timeout=300)
        assert sent.returncode == 0, sent.stderr
    assert [c.id for c in stored(hearth_home).list()] == [kept.id]
    assert len(stored(hearth_home).current_branch(kept.id)) == 5  # Hello?, then two questions and answers
