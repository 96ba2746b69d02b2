"""Tools in the window, against a real worker and a real MCP server written with the ``mcp`` SDK (issue 54).

The model is Qwen3.5's real-template fixture; its random weights never decide to call a tool, so its
answers are scripted (``HEARTH_TEST_SCRIPTED_ANSWERS``, engine.decoding.scripted: the tokens its family
writes for the call, forced while the worker reads and decodes everything as usual). The MCP server is
``tests/fixtures/mcp_test_server.py`` over stdio, started by Hearth from Settings → Tools. Each call runs
without asking (its tool is on the "always" list); one that hangs, crashes or returns hostile text ends
in one line in the banner, and the conversation goes on. The round is stored: a restart shows it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from app.services.tools.tool_settings import McpServer, ToolSettings
from engine.protocol.tools import ToolCall
from engine.templates.tool_formats import tool_format
from tests.fixtures import llama_sdist
from tests.helpers.gui import stored, watch_notices, write_settings
from tests.helpers.real_models import REAL_TINY, TEMPLATES, real_model

pytestmark = [pytest.mark.slow, pytest.mark.process]

SERVER = Path(__file__).parents[1] / "fixtures" / "mcp_test_server.py"
TOOLS = ["probe_add", "probe_hang", "probe_crash", "probe_hostile"]


def call_text(name: str, arguments: dict) -> str:
    form = tool_format(llama_sdist.template(TEMPLATES["qwen35"]))
    return "\n</think>\n\n" + form.write([ToolCall("c", name, json.dumps(arguments))], "")


SCRIPT = [call_text("probe_add", {"a": 2, "b": 3}), "\n</think>\n\nThe sum is 5.",
          call_text("probe_hang", {}), "\n</think>\n\nIt did not answer.",
          call_text("probe_crash", {}), "\n</think>\n\nIt stopped.",
          call_text("probe_hostile", {}), "\n</think>\n\nDone."]


@pytest.fixture
def tool_app(start_app, monkeypatch, tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    monkeypatch.setenv("HEARTH_TEST_SCRIPTED_ANSWERS", str(script))
    monkeypatch.setenv("HEARTH_TEST_TOOL_TIMEOUT_S", "3")
    server = McpServer("probe", sys.executable, [str(SERVER)])
    write_settings(model=str(real_model(REAL_TINY["qwen35"])), temperature=0.0, max_tokens=80, draft="off",
                   tools=ToolSettings(enabled=["probe"], always=TOOLS, servers=[server]))
    app = start_app()
    app.wait_loaded()
    app.wait(lambda: bool(app.controller.tool_specs), 60_000)
    return app


def test_an_mcp_tool_is_listed_and_called_from_the_window_and_its_failures_each_end_in_one_line(tool_app,
                                                                                               start_app):
    app = tool_app
    assert set(TOOLS) <= {spec.name for spec in app.controller.tool_specs}
    notices = watch_notices(app)
    app.send_and_wait("What is 2 + 3?")
    rows = app.transcript()
    assert [role for role, _, _ in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[2][1] == "5" and rows[3][1] == "The sum is 5."
    call_widget, result_widget = app.window.chat_view.widgets[1], app.window.chat_view.widgets[2]
    assert "probe_add" in call_widget.rendered_text() and '"a": 2' in call_widget.rendered_text()
    assert result_widget.who.text().startswith("Tool: probe_add ·")
    assert not notices

    for question, answer in (("Try the slow one.", "It did not answer."), ("Try the broken one.", "It stopped."),
                             ("Try the odd one.", "Done.")):
        before = len(notices)
        app.send_and_wait(question)
        assert app.transcript()[-1][1:] == (answer, "done")
        said = [text for _, text in notices[before:]]
        assert len(said) == 1 and "\n" not in said[0] and "probe_" in said[0], said
    reports = [turn.finished.snapshot for turn in app.finished_turns]
    print("\ntokens (read, restored) per turn:", [(r.prefilled_tokens, r.restored_tokens) for r in reports])
    # every turn after the first stands on saved state: a result's turn on the call's answer, a question after
    # a round on the question before it (Qwen3.5's template writes the round again without its reasoning)
    assert all(r.restored and r.restored_tokens > r.prefilled_tokens for r in reports[1:-1]), reports
    hostile = app.transcript()[-2][1]
    assert "\x1b" not in hostile and "\x07" not in hostile and len(hostile) <= 16_500

    conversation_id = app.controller.conversation.id
    branch = stored(app, lambda store: store.current_branch(conversation_id))
    assert [m.role for m in branch].count("tool") == 4
    app.window.close()
    again = start_app()
    again.wait_loaded()
    again.controller.open_conversation(conversation_id)
    again.wait(lambda: len(again.transcript()) == len(branch))
    assert [r[0] for r in again.transcript()] == [m.role for m in branch]


def test_settings_tools_lists_the_servers_tools(tool_app, qtbot):
    app = tool_app
    app.window.open_settings()
    dialog = app.window.settings_dialog
    tab = dialog.tools_tab
    tab.servers.setCurrentRow(0)
    tab.check_server()
    qtbot.waitUntil(lambda: tab.server_tools.text().startswith("Tools:"), timeout=30_000)
    assert all(name in tab.server_tools.text() for name in TOOLS)
    dialog.reject()


def test_a_tool_the_user_does_not_allow_is_not_run_and_always_is_remembered(start_app, monkeypatch, tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([call_text("probe_add", {"a": 1, "b": 1}), "\n</think>\n\nI may not add.",
                                  call_text("probe_add", {"a": 1, "b": 1}), "\n</think>\n\nTwo."]))
    monkeypatch.setenv("HEARTH_TEST_SCRIPTED_ANSWERS", str(script))
    server = McpServer("probe", sys.executable, [str(SERVER)])
    write_settings(model=str(real_model(REAL_TINY["qwen35"])), temperature=0.0, max_tokens=80, draft="off",
                   tools=ToolSettings(enabled=["probe"], servers=[server]))
    app = start_app()
    app.wait_loaded()
    app.wait(lambda: bool(app.controller.tool_specs), 60_000)
    notices = watch_notices(app)
    answers = iter(["no", "always"])
    asked = []
    app.controller.confirm_tool = lambda call: asked.append(call.name) or next(answers)
    app.send_and_wait("1 + 1?")
    assert asked == ["probe_add"]
    assert app.transcript()[-2][1] == "The user did not allow this tool to run."
    assert app.transcript()[-1][1] == "I may not add."
    assert [text for _, text in notices] == ["You did not allow the tool 'probe_add' to run."]
    app.send_and_wait("Please, 1 + 1?")
    assert app.transcript()[-2][1] == "2" and app.controller.settings.tools.always == ["probe_add"]


def test_a_model_that_cannot_call_tools_is_said_once(start_app):
    write_settings(temperature=0.0, max_tokens=4, tools=ToolSettings(enabled=["calculator"]))
    app = start_app()
    app.wait_loaded()
    app.wait(lambda: bool(app.controller.tool_specs), 30_000)
    notices = watch_notices(app)
    app.send_and_wait("Hi")
    app.send_and_wait("Hi again")
    said = [text for _, text in notices if "cannot call tools" in text]
    assert len(said) == 1 and "Settings → Tools" in said[0], notices
