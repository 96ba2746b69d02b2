"""``hearth send`` says on stderr what happened to the turn's saved state when something did (a snapshot
that could not be saved, one that was refused), one line each, and the answer is kept all the same."""

from __future__ import annotations

import json
import shutil

from tests.helpers.cli import hearth

ANSWER = ("--max-tokens", "8", "--temperature", "0", "--draft", "off", "--json")


def notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("hearth: note: ")]


def test_a_turn_whose_state_could_not_be_saved_says_so_and_keeps_its_answer(hearth_home, hybrid_tiny):
    first = hearth("send", "--new", "Notes", "--model", str(hybrid_tiny), *ANSWER, "Hello there.")
    assert first.returncode == 0 and notes(first.stderr) == [], first.stderr
    conversation = json.loads(first.stdout)["conversation_id"]

    states = hearth_home / "data" / "states"
    shutil.rmtree(states)
    states.write_text("a file where the state files' folder was")
    second = hearth("send", "--conversation", conversation, *ANSWER, "Again, please.")

    assert second.returncode == 0 and "Traceback" not in second.stderr, second.stderr
    said = notes(second.stderr)
    assert any("this turn's snapshot could not be saved" in line and line.endswith("the answer is kept")
               for line in said), second.stderr
    printed = json.loads(second.stdout)
    assert printed["status"] == "done" and printed["text"] and printed["snapshot"]["saved_bytes"] == 0
