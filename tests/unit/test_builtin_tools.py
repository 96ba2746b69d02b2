"""Hearth's own tools, run through the toolbox as the window runs them: the calculator (arithmetic only,
bounded), read_file (only what the user shared, links followed before deciding), current_time, and
search_conversations against a real SQLite store."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime

import jsonschema
import pytest

from app.engine_clients.client import prepare_database
from app.services.tools.builtin import BUILTINS
from app.services.tools.file_reader import PART_CHARS
from app.services.tools.tool_settings import BUILTIN_TOOLS, ToolSettings
from app.services.tools.toolbox import MAX_RESULT_CHARS, Toolbox
from engine.protocol.tools import ToolCall
from model_store.after_crash import open_conversation_store
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database


def run(box: Toolbox, name: str, **arguments):
    return box.run(ToolCall(id="call-1", name=name, arguments=json.dumps(arguments)))


def one_sentence(text: str) -> bool:
    return bool(text) and text.endswith(".") and "\n" not in text


@pytest.fixture
def box():
    toolbox = Toolbox(ToolSettings(enabled=list(BUILTIN_TOOLS)))
    yield toolbox
    toolbox.close()


def test_the_built_in_tools_are_offered_only_when_switched_on_with_valid_schemas():
    assert tuple(BUILTINS) == BUILTIN_TOOLS
    assert Toolbox(ToolSettings()).specs() == ()
    specs = Toolbox(ToolSettings(enabled=["calculator", "current_time"])).specs()
    assert [spec.name for spec in specs] == ["calculator", "current_time"]
    for spec in Toolbox(ToolSettings(enabled=list(BUILTIN_TOOLS))).specs():
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", spec.name) and len(spec.description) > 40
        jsonschema.Draft202012Validator.check_schema(json.loads(spec.parameters))


def test_a_built_in_tool_that_is_switched_off_does_not_run():
    result = run(Toolbox(ToolSettings(enabled=["current_time"])), "calculator", expression="1+1")
    assert not result.ok and "'calculator'" in result.problem and "not switched on" in result.problem
    assert result.text == result.problem and one_sentence(result.problem)


# ------------------------------------------------------------------ calculator


@pytest.mark.parametrize("expression, value", [
    ("(2.5 + 4) * 3**2 / 7", "8.35714285714286"), ("2**100", str(2**100)), ("sqrt(16) + log(e)", "5"),
    ("-7 // 2 + 7 % 3", "-3"), ("log(8, 2) * cos(0) - tan(0) + exp(0)", "4"), ("0.1 + 0.2", "0.3"),
])
def test_the_calculator_works_out_arithmetic(box, expression, value):
    result = run(box, "calculator", expression=expression)
    assert result.ok and result.problem == "" and result.text == f"{expression} = {value}"


def test_the_calculator_refuses_division_by_zero_in_a_sentence(box):
    result = run(box, "calculator", expression="1 / (3 - 3)")
    assert not result.ok and result.problem == "The tool 'calculator' could not work this out: it divides by zero."
    assert result.text == result.problem


@pytest.mark.parametrize("expression", ["9**9**9", "2**10**6", "(10**3000) * (10**3000) * 10**3000", "1e308 * 10"])
def test_the_calculator_refuses_numbers_too_large_at_once(box, expression):
    started = time.monotonic()
    result = run(box, "calculator", expression=expression)
    assert time.monotonic() - started < 1
    assert not result.ok and "too large" in result.problem and one_sentence(result.problem)


@pytest.mark.parametrize("expression", [
    "__import__('os').mkdir('made-by-the-calculator')", "x + 1", "(1).__class__", "open('secrets.txt')", "sqrt(x=4)",
    "'a' * 3", "[1, 2][0]", "(lambda: 1)()", "True + 1", "abs(-1)", "sqrt(*[4])",
])
def test_the_calculator_refuses_names_attributes_and_calls(box, expression, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run(box, "calculator", expression=expression)
    assert not result.ok and result.problem.startswith("The tool 'calculator' could not work this out")
    assert one_sentence(result.problem) and not (tmp_path / "made-by-the-calculator").exists()


def test_arguments_that_do_not_fit_the_schema_are_refused_before_running(box):
    missing = box.run(ToolCall(id="1", name="calculator", arguments="{}"))
    assert not missing.ok and "'expression' is missing" in missing.problem and "did not run" in missing.problem
    wrong = run(box, "calculator", expression=12)
    assert not wrong.ok and "'expression' should be text" in wrong.problem
    not_json = box.run(ToolCall(id="1", name="calculator", arguments="{expression: 1+1"))
    assert not not_json.ok and "not valid JSON" in not_json.problem and one_sentence(not_json.problem)


# ------------------------------------------------------------------ read_file


@pytest.fixture
def shared(tmp_path):
    """A shared folder (notes.md, sub/deep.txt, a link out), a secret beside it, and a toolbox sharing it."""
    folder, outside = tmp_path / "shared", tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nThe \x1b[31mred\x1b[0m key is under the mat.\n")
    (folder / "sub" / "deep.txt").write_text("deep text\n")
    (outside / "secret.txt").write_text("the secret\n")
    (folder / "link-out.txt").symlink_to(outside / "secret.txt")
    (folder / "folder-out").symlink_to(outside)
    toolbox = Toolbox(ToolSettings(enabled=["read_file"], folders=[str(folder)]))
    yield toolbox, folder, outside
    toolbox.close()


def test_read_file_reads_a_shared_document_cleaned(shared):
    box, folder, _ = shared
    for path in ("notes.md", str(folder / "notes.md"), "sub/../notes.md"):
        result = run(box, "read_file", path=path)
        assert result.ok, result.problem
        assert "The red key is under the mat." in result.text and "\x1b" not in result.text
        assert "markdown" in result.text.splitlines()[0]


def test_read_file_refuses_what_lies_outside_the_shared_folders(shared):
    box, folder, outside = shared
    for path in (str(outside / "secret.txt"), "../outside/secret.txt", str(folder / ".." / "outside" / "secret.txt"),
                 "link-out.txt", "folder-out/secret.txt", "/etc/passwd", str(outside / "missing.txt")):
        result = run(box, "read_file", path=path)
        assert not result.ok and "leads outside them" in result.problem, path
        assert "secret" not in result.text.replace("secret.txt", "") and one_sentence(result.problem)


def test_read_file_lists_a_shared_folder_and_what_was_shared(shared):
    box, folder, _ = shared
    listing = run(box, "read_file", path=str(folder))
    assert listing.ok
    out = "(a link to a place outside what was shared; it cannot be read)"
    size = (folder / "notes.md").stat().st_size
    assert listing.text.splitlines() == [f"Folder {folder} (4 entries):", f"folder-out {out}", "sub/",
                                         f"link-out.txt {out}", f"notes.md ({size} bytes)"]
    sub = run(box, "read_file", path="sub")
    assert sub.text.splitlines() == [f"Folder {folder / 'sub'} (1 entry):", "deep.txt (10 bytes)"]
    assert run(box, "read_file", path="").text == f"Shared with Hearth:\n{folder}/"


def test_read_file_says_when_nothing_is_there_or_nothing_is_shared(shared, tmp_path):
    box, _, _ = shared
    missing = run(box, "read_file", path="nothing-here.txt")
    assert not missing.ok
    assert missing.problem == ("The tool 'read_file' found nothing at 'nothing-here.txt' in the files and folders "
                               "you shared.")
    unshared = Toolbox(ToolSettings(enabled=["read_file"], folders=[str(tmp_path / "gone")]))
    result = run(unshared, "read_file", path="notes.md")
    assert not result.ok and "pick some in Settings → Tools" in result.problem


def test_read_file_reads_a_shared_single_file_and_a_long_one_in_parts(tmp_path):
    long_file = tmp_path / "long.txt"
    long_file.write_text("".join(f"line {n:06d}\n" for n in range(5000)))  # 60,000 characters
    box = Toolbox(ToolSettings(enabled=["read_file"], folders=[str(long_file)]))
    first = run(box, "read_file", path="long.txt")
    assert first.ok and len(first.text) <= MAX_RESULT_CHARS and "line 000000" in first.text
    assert f"call read_file again with start={PART_CHARS}" in first.text
    last = run(box, "read_file", path=str(long_file), start=59_000)
    assert last.ok and last.text.rstrip().endswith("the end.]") and "line 004999" in last.text


# ------------------------------------------------------------------ current_time and search_conversations


def test_current_time_tells_the_local_date_time_weekday_and_zone(box):
    before = datetime.now().astimezone()
    result = run(box, "current_time")
    assert result.ok and before.strftime("%A") in result.text and str(before.year) in result.text
    assert "time zone" in result.text and re.search(r"UTC[+-]\d\d:\d\d", result.text)
    stamp = re.search(r"ISO 8601: (\S+)\.$", result.text).group(1)
    assert abs((datetime.fromisoformat(stamp) - before).total_seconds()) < 5


@pytest.fixture
def saved(tmp_path):
    """A real conversation database with three conversations, and a toolbox that searches it."""
    prepare_database(tmp_path)
    store = open_conversation_store(database_path(tmp_path))
    for title, messages in [("Holiday plans", ["Where should we go in May?", "Lisbon has mild weather in May."]),
                            ("Bread", ["How long do I knead sourdough?", "About ten minutes, until it is smooth."]),
                            ("Trains", ["Is the night train to Lisbon still running?", "Yes, twice a week."])]:
        conversation = store.create(title)
        parent = None
        for number, text in enumerate(messages):
            parent = store.add_message(conversation.id, ("user", "assistant")[number % 2], text, parent_id=parent).id
    store.db.close()
    toolbox = Toolbox(ToolSettings(enabled=["search_conversations"]),
                      open_store=lambda: ConversationStore(open_database(database_path(tmp_path))))
    yield toolbox
    toolbox.close()


def test_search_conversations_lists_matching_titles_and_passages(saved):
    result = run(saved, "search_conversations", query="lisbon")
    assert result.ok
    lines = result.text.splitlines()
    assert lines[0] == '2 saved conversations mention "lisbon":'
    assert lines[2].startswith('1. "Trains" (last used ')
    assert lines[3] == "   The user: Is the night train to Lisbon still running?"
    assert lines[5].startswith('2. "Holiday plans"') and lines[6] == "   The assistant: Lisbon has mild weather in May."
    assert "Bread" not in result.text


def test_search_conversations_finds_titles_and_says_when_nothing_matches(saved):
    bread = run(saved, "search_conversations", query="bread")
    assert bread.ok and bread.text.splitlines()[2].startswith('1. "Bread"')
    nothing = run(saved, "search_conversations", query="volcano")
    assert nothing.ok and nothing.text == 'No saved conversation mentions "volcano".'


def test_search_conversations_without_a_store_is_a_problem_sentence(box):
    result = run(box, "search_conversations", query="anything")
    assert not result.ok and one_sentence(result.problem) and "'search_conversations'" in result.problem
