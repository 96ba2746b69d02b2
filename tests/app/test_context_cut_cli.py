"""A conversation longer than the model can read, through real `hearth send` processes with the
embedded SmolLM2 (issue 51, point 8). The machine's memory is pinned so the longest context is 512
tokens: the default leaves the oldest exchanges out, says so on stderr and in ``--json``, keeps every
message stored, and the next turn stands on the cut turn's snapshot; ``--when-full stop`` refuses
as before; ``--when-full summary`` continues in a new conversation that starts with the model's summary.
``hearth chat --when-full`` does the same for lines typed on its standard input."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from engine.context.context_memory import model_memory
from engine.models.model_files import check_model_file
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.fit import AVAILABLE_MEMORY_ENV
from tests.helpers.cli import HEARTH, installed_hearth
from tests.helpers.gui import write_settings

GREEDY = ("--temperature", "0", "--draft", "off", "--max-tokens", "24")
NOTICE = "no longer fit, so the model no longer sees them. Everything is still saved here."


def fact(n: int) -> str:  # about 60 tokens
    return f"Fact {n}: " + " ".join(f"the box number {n} holds {n * 7 + i} red marbles" for i in range(5)) + "."


@pytest.fixture
def small_machine(smollm2) -> dict[str, str]:
    memory = model_memory(smollm2, check_model_file(smollm2))
    return {AVAILABLE_MEMORY_ENV: str(-(-memory.total_bytes(512) * 100 // 70))}  # the longest context: 512 tokens


def send(env: dict[str, str], *args: str) -> tuple[dict, str]:
    done = installed_hearth("send", *GREEDY, "--json", *args, **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def chat_until_cut(env: dict[str, str], *flags: str) -> tuple[str, list[tuple[dict, str]]]:
    """Send facts into one conversation until a turn is cut; every turn's JSON and stderr."""
    first, err = send(env, *flags, "--new", "Marbles", fact(0))
    turns, conversation = [(first, err)], first["conversation_id"]
    for n in range(1, 12):
        turns.append(send(env, *flags, "--conversation", conversation, fact(n)))
        if turns[-1][0]["context"]["cut"]:
            return conversation, turns
    raise AssertionError(f"no turn was cut: {[t[0]['snapshot'] for t in turns]}")


def test_the_oldest_messages_are_left_out_said_so_kept_and_the_next_turn_stands_on_saved_state(hearth_home,
                                                                                               small_machine):
    conversation, turns = chat_until_cut(small_machine)
    cut, err = turns[-1]
    assert cut["status"] == "done" and cut["text"]
    left_out = cut["context"]["messages_left_out"]
    assert left_out >= 2 and left_out % 2 == 0, "whole exchanges are left out"
    (line,) = [line for line in err.splitlines() if NOTICE in line]
    assert line == f"hearth: The oldest {left_out:,} messages {NOTICE}"
    assert not any(NOTICE in e for _, e in turns[:-1]) and not any(t["context"]["cut"] for t, _ in turns[:-1])
    assert not cut["snapshot"]["restored"], "the first cut turn reads its shorter branch anew"

    after, err = send(small_machine, "--conversation", conversation, "How many facts did I tell you?")
    assert NOTICE not in err and after["context"] == {"cut": False, "messages_left_out": left_out}, \
        "the cut stands: the same messages left out, nothing new"
    assert after["snapshot"]["restored"] and after["snapshot"]["prefilled_tokens"] < 40, \
        f"it read only its new message: {after['snapshot']}"
    store = ConversationStore(open_database(database_path(hearth_home / "data")))
    assert len(store.current_branch(conversation)) == 2 * (len(turns) + 1), "every message is still stored"


def test_when_full_stop_refuses_as_before(hearth_home, small_machine):
    first, _ = send(small_machine, "--when-full", "stop", "--new", "Marbles", fact(0))
    for n in range(1, 12):
        done = installed_hearth("send", *GREEDY, "--when-full", "stop", "--conversation", first["conversation_id"],
                                fact(n), **small_machine)
        if done.returncode != 0:
            break
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("hearth: error:")]
    assert "tokens of context, but the memory available now holds 512 tokens" in line


def test_when_full_summary_continues_in_a_new_conversation_that_starts_with_the_models_summary(
        hearth_home, small_machine):
    first, _ = send(small_machine, "--when-full", "summary", "--new", "Marbles", fact(0))
    old = first["conversation_id"]
    for n in range(1, 12):
        sent, err = send(small_machine, "--when-full", "summary", "--conversation", old, fact(n))
        if sent["conversation_id"] != old:
            break
    else:
        raise AssertionError("the conversation never continued in a new one")
    assert f"continues in a new conversation, {sent['conversation_id']}, that starts with a summary" in err
    store = ConversationStore(open_database(database_path(hearth_home / "data")))
    summary, question, answer = store.current_branch(sent["conversation_id"])
    assert summary.role == "user" and summary.content.startswith('Summary of the earlier conversation ("Marbles"):')
    assert len(summary.content) > 60, summary.content
    assert question.content == fact(n) and answer.content == sent["text"] and answer.status == "done"
    assert store.get(sent["conversation_id"]).title == "Marbles (continued)"


def chat(env: dict[str, str], lines: list[str], *flags: str) -> subprocess.CompletedProcess:
    """One `hearth chat` that reads ``lines`` from its standard input, then ends."""
    typed = "".join(f"{line}\n" for line in lines) + "/exit\n"
    done = subprocess.run([str(HEARTH), "chat", *GREEDY, "--new", "Marbles", *flags], input=typed,
                          capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done


def chat_store(hearth_home) -> ConversationStore:
    return ConversationStore(open_database(database_path(hearth_home / "data")))


def test_chat_when_full_drop_oldest_keeps_one_conversation_going_and_says_what_was_left_out(
        hearth_home, small_machine):
    write_settings(when_full="stop")  # the flag wins over the window's choice
    done = chat(small_machine, [fact(n) for n in range(9)], "--when-full", "drop-oldest")
    said = [line for line in done.stderr.splitlines() if NOTICE in line]
    assert said and all(line.startswith("hearth: The oldest ") for line in said), done.stderr
    assert "hearth: error" not in done.stderr
    (conversation,) = chat_store(hearth_home).list()
    branch = chat_store(hearth_home).current_branch(conversation.id)
    assert len(branch) == 18 and all(m.status == "done" for m in branch if m.role == "assistant")
    cut = [m.stats["context_cut"] for m in branch if "context_cut" in (m.stats or {})]
    assert len(cut) == len(said), "one notice for each turn that cut"


def test_chat_when_full_summary_goes_on_in_a_new_conversation_that_starts_with_the_models_summary(
        hearth_home, small_machine):
    done = chat(small_machine, [fact(n) for n in range(9)], "--when-full", "summary")
    said = [line for line in done.stderr.splitlines() if "continues in a new conversation" in line]
    assert said and "hearth: error" not in done.stderr, done.stderr
    store = chat_store(hearth_home)
    new = next(c for c in store.list() if c.title == "Marbles (continued)")
    assert new.id in said[0]
    summary = store.current_branch(new.id)[0]
    assert summary.content.startswith('Summary of the earlier conversation ("Marbles"):') and len(summary.content) > 60
    newest = store.current_branch(store.list()[0].id)
    assert newest[-2].content == fact(8) and newest[-1].status == "done", \
        "the lines after the summary are answered in the new conversation"
