"""The window's side of tools: which tools the model is offered, asking before one runs, running it off
the window's thread, and sending the results on.

The tools offered are listed in the background (an MCP server is a process to start: listing it must not
hold the window) whenever the tool settings change, and every turn sent afterwards offers them
(``tool_choice`` auto). When an answer ends with calls, each call is shown in the conversation (the
answer's message lists them) and run, in order, on a thread of its own: one on the user's "always" list
at once, any other after the user allows it (:attr:`ToolRounds.confirm_tool`, a dialog in the window).
A call the user refuses, or one that fails, still gets a result (the model reads what happened) and a
line in the banner; then the results are stored as messages and the model answers them
(:mod:`app.services.tool_round`). After :data:`~app.services.tool_round.MAX_ROUNDS` rounds in a row the
next answer is written without tools, so a model that keeps calling cannot loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Literal

import msgspec

from app.services.tool_round import MAX_ROUNDS, CallResult, ToolResults, calls_of
from app.services.tools.tool_settings import ToolSettings
from app.services.tools.toolbox import Toolbox
from app.services.turn import PendingTurn, TurnOptions
from engine import protocol as p
from model_store.conversations import ConversationStore, Message
from model_store.db import open_database

Consent = Literal["once", "always", "no"]
REFUSED = "The user did not allow this tool to run."


class ToolRounds:
    """Mixed into :class:`ui.controller.ChatController`, which gives the signals ``tools_listed``,
    ``tool_done``, ``notice``, ``conversation_notice`` and ``status``, and ``settings``, ``store``,
    ``conversation``, ``_options`` and ``_begin``."""

    def _init_tools(self) -> None:
        self.tool_specs: tuple[p.ToolSpec, ...] = ()  # what the next turn offers
        self.confirm_tool: Callable[[p.ToolCall], Consent] = lambda call: "no"  # the window asks the user
        self._toolbox: Toolbox | None = None
        self._tool_round: _Round | None = None
        self._rounds = 0  # tool rounds since the last question
        self._no_tools_said: str | None = None  # the model whose lack of tools was said
        self.save_tool_settings: Callable[[object], None] = lambda settings: None  # the window saves them
        self.tools_listed.connect(self._take_specs)
        self.tool_done.connect(self._take_result)

    # -- what is offered ----------------------------------------------------------------------------

    def tools_changed(self) -> None:
        """The tool settings may have changed: list the tools again, in the background."""
        old, self._toolbox = self._toolbox, self._make_toolbox(self.settings.tools)
        if old is not None:
            threading.Thread(target=old.close, daemon=True).start()
        toolbox = self._toolbox
        if toolbox is None:
            self.tool_specs = ()
            return
        threading.Thread(target=lambda: self.tools_listed.emit((toolbox, toolbox.specs(), toolbox.problems())),
                         name="hearth-tools-listing", daemon=True).start()

    def _make_toolbox(self, settings: ToolSettings) -> Toolbox | None:
        if not settings.enabled:
            return None
        db_path = self.store.db_path  # its own connection, opened on the first search (never tidied as after a crash)
        return Toolbox(settings, lambda: ConversationStore(open_database(db_path)))

    def _take_specs(self, listed: tuple) -> None:
        toolbox, specs, problems = listed
        if toolbox is not self._toolbox:  # listed for settings since changed
            return
        self.tool_specs = tuple(specs)
        for problem in problems:
            self.notice.emit("warning", problem)

    def with_tools(self, options: TurnOptions, history_rounds: int = 0) -> TurnOptions:
        """``options`` offering the tools (none after too many rounds in a row); said once per model when
        the model cannot take them."""
        if not self.tool_specs:
            return options
        facts = self.loaded.facts if self.loaded is not None else None
        if facts is not None and not facts.tool_form and self._no_tools_said != facts.path:
            self._no_tools_said = facts.path
            self.notice.emit("info", _no_tools(facts))
        choice = p.ToolChoice(mode="none" if history_rounds >= MAX_ROUNDS else "auto")
        return replace(options, tools=self.tool_specs, tool_choice=choice)

    # -- a round --------------------------------------------------------------------------------------

    @property
    def running_tools(self) -> bool:
        return self._tool_round is not None

    def start_tool_round(self, turn: PendingTurn) -> bool:
        """Run the calls ``turn``'s answer made, if it made any and tools are on; False when there is nothing to run."""
        calls = calls_of(turn.answer)
        if not calls or self._toolbox is None or self.conversation is None \
                or self.conversation.id != turn.conversation_id or turn.answer.status != "done":
            return False
        self._rounds = self._rounds + 1
        self._tool_round = _Round(turn.answer, calls, self._toolbox)
        self._next_call()
        return True

    def stop_tools(self) -> None:
        """The user stopped: the round's results are not sent (a tool still running ends unheard)."""
        if self._tool_round is not None:
            self._tool_round = None
            self.status.emit("")
            self.generating_changed.emit(self.generating)

    def question_sent(self) -> None:
        self._rounds = 0

    def _next_call(self) -> None:
        round_ = self._tool_round
        call = round_.pending()
        if call is None:
            self._send_results(round_)
            return
        consent = "once" if call.name in self.settings.tools.always else self.confirm_tool(call)
        if consent == "always":
            self._always(call.name)
        if consent == "no":
            problem = f"You did not allow the tool '{call.name}' to run."
            self._take_result((round_, CallResult(call, REFUSED, 0.0, problem)))
            return
        self.status.emit(f"Running the tool '{call.name}'…")
        worker = threading.Thread(target=lambda: self.tool_done.emit((round_, round_.run(call))),
                                  name="hearth-tool", daemon=True)
        worker.start()

    def _always(self, name: str) -> None:
        tools = self.settings.tools
        if name not in tools.always:
            self.settings.tools = msgspec.structs.replace(tools, always=[*tools.always, name])
            self.save_tool_settings(self.settings)

    def _take_result(self, done: tuple) -> None:
        round_, result = done
        if round_ is not self._tool_round:  # stopped meanwhile
            return
        round_.results.append(result)
        if result.problem or result.note:
            self.conversation_notice.emit("warning" if result.problem else "info", result.problem or result.note)
        self._next_call()

    def _send_results(self, round_: _Round) -> None:
        self._tool_round = None
        self.status.emit("")
        options = self.with_tools(self._options(), self._rounds)
        self._begin(ToolResults(self.conversation, round_.answer, tuple(round_.results), options))


def _no_tools(facts: p.ModelFacts) -> str:
    what = "the tools turned on in Settings → Tools are not offered to it"
    if facts.arch == "remote":
        return f"Hearth does not send tools to a remote engine yet, so {what}."
    return f"{facts.name} cannot call tools, so {what}. Models that can: Qwen3.5, Granite 4, LFM2, Llama 3.2."


class _Round:
    """One answer's calls and the results so far."""

    def __init__(self, answer: Message, calls: list[p.ToolCall], toolbox: Toolbox) -> None:
        self.answer, self.calls, self.toolbox = answer, calls, toolbox
        self.results: list[CallResult] = []

    def pending(self) -> p.ToolCall | None:
        return self.calls[len(self.results)] if len(self.results) < len(self.calls) else None

    def run(self, call: p.ToolCall) -> CallResult:
        result = self.toolbox.run(call)
        return CallResult(call, result.text, result.seconds, "" if result.ok else result.problem, result.note)
