"""A tool round in a conversation: the results of an answer's calls stored as messages, and the next answer.

An answer that called tools is stored with its calls (``Message.tool_part``). Each call's result becomes
a ``tool`` message after it, in the order of the calls, naming its call (its tool part) and keeping what
the window shows of it in its statistics (the tool's name, how long it took, and the problem, if it
failed); then an empty answer is stored after the last result and the engine asked to write it, exactly
as after a question (:func:`app.services.turn.begin_answer`). Results, calls and answers are messages
like any other: shown again after a restart, and read from saved state by the next turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.services.turn import PendingTurn, TurnOptions, Writer, begin_answer, hold_conversation
from engine import protocol as p
from model_store.conversations import Conversation, ConversationStore, Message

MAX_ROUNDS = 8  # tool rounds in a row after one question; the answer after the last is written without tools


@dataclass(frozen=True)
class CallResult:
    """One call and what came of it: the text the model reads, and for the window, how long it took and
    the problem in one sentence ("" when it ran)."""

    call: p.ToolCall
    text: str
    seconds: float = 0.0
    problem: str = ""
    note: str = ""  # it ran, but its text was cut to fit (said in the window, not stored)

    def stats(self) -> dict:
        stats: dict = {"tool": self.call.name, "arguments": self.call.arguments, "seconds": round(self.seconds, 3)}
        if self.problem:
            stats["problem"] = self.problem
        return stats


@dataclass(frozen=True)
class ToolResults:
    """The results of ``answer``'s calls, to store after it and have answered."""

    conversation: Conversation
    answer: Message
    results: tuple[CallResult, ...]
    options: TurnOptions


def calls_of(message: Message) -> list[p.ToolCall]:
    """The calls a stored answer made (none for any other message)."""
    return p.calls_of(message.tool_part)[0] if message.role == "assistant" else []


def store_results(store: ConversationStore, request: ToolResults, writer: Writer,
                  request_id: str | None = None) -> PendingTurn:
    """Take the conversation, then store the results and an empty answer in one transaction."""
    def fill(held_id: str) -> PendingTurn:
        parent = request.answer
        for result in request.results:
            parent = store.add_message(held_id, "tool", result.text, parent_id=parent.id, stats=result.stats(),
                                       tool_part=p.tool_part([], result.call.id))
        return begin_answer(store, held_id, store.branch(parent.id), request.options, request_id=request_id)

    _, turn, lock = hold_conversation(store, request.conversation.id, writer, fill)
    turn.writer = lock
    return turn


def rounds_since_question(history: list[Message]) -> int:
    """How many answers that called tools follow the branch's last question."""
    rounds = 0
    for message in reversed(history):
        if message.role == "user":
            break
        rounds += bool(calls_of(message))
    return rounds
