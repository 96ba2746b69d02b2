"""Telling a model's reasoning from its answer, as the text streams.

Reasoning models write their thinking between ``<think>`` and ``</think>`` before the answer
(Qwen3/3.5, DeepSeek-R1, SmolLM3, Nemotron, GLM...). Many chat templates open the block
themselves: Qwen3.5's generation cue ends with ``<think>\\n``, so the model's first token is already
reasoning. :func:`reasoning_start` reads the cue to know which, and :class:`ReasoningSplitter`
sorts the streamed text into reasoning and answer: the markers themselves and the blank lines
around them belong to neither (templates write them back when they render the answer again).

Only a block at the very start of the answer counts: ``<think>`` later in an answer is answer text.
A marker split over several tokens is held back until it is decided, as stop strings are.
"""

from __future__ import annotations

from typing import Literal

OPEN, CLOSE = "<think>", "</think>"

# "open": the prompt opened a block (the model starts in reasoning); "detect": the answer may open
# one itself; "off": no reasoning (plain completions).
ReasoningStart = Literal["open", "detect", "off"]

Spans = list[list]  # [characters, from an accepted draft], as engine.protocol.draft_spans.add_span builds them


def reasoning_start(cue: str) -> ReasoningStart:
    """Where an answer written after ``cue`` (the template's text after the last message) starts."""
    opened, closed = cue.rfind(OPEN), cue.rfind(CLOSE)
    return "open" if opened >= 0 and opened > closed else "detect"


def _flags(spans: list) -> list[bool]:
    return [bool(drafted) for chars, drafted in spans for _ in range(chars)]


def _spans(flags: list[bool]) -> Spans:
    spans: Spans = []
    for flag in flags:
        if spans and spans[-1][1] == flag:
            spans[-1][0] += 1
        else:
            spans.append([1, flag])
    return spans


def _partial_suffix(text: str, marker: str) -> int:
    """How many characters at the end of ``text`` could begin ``marker``."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0


class ReasoningSplitter:
    """Feed released text (with its draft spans); get back reasoning, answer and the answer's spans."""

    def __init__(self, start: ReasoningStart) -> None:
        # "start": deciding whether the answer opens a block; "after": blank lines after </think>
        self.state = {"open": "reasoning", "detect": "start", "off": "answer"}[start]
        self._held = ""
        self._held_flags: list[bool] = []

    @property
    def reasoning_done(self) -> bool:
        """The answer has begun (or there is no reasoning): nothing more goes to reasoning."""
        return self.state in ("answer", "after")

    def feed(self, text: str, spans: list) -> tuple[str, str, Spans]:
        if self.state == "answer" and not self._held:
            return "", text, [list(s) for s in spans]
        self._held += text
        self._held_flags += _flags(spans) if spans else [False] * len(text)
        reasoning, answer, flags = self._advance(final=False)
        return reasoning, answer, _spans(flags)

    def flush(self) -> tuple[str, str, Spans]:
        reasoning, answer, flags = self._advance(final=True)
        return reasoning, answer, _spans(flags)

    def _take(self, n: int) -> tuple[str, list[bool]]:
        text, flags = self._held[:n], self._held_flags[:n]
        self._held, self._held_flags = self._held[n:], self._held_flags[n:]
        return text, flags

    def _advance(self, *, final: bool) -> tuple[str, str, list[bool]]:
        reasoning, answer, answer_flags = "", "", []
        while self._held:
            if self.state == "start":
                body = self._held.lstrip()
                if body.startswith(OPEN):
                    self._take(len(self._held) - len(body) + len(OPEN))
                    self.state = "reasoning"
                elif not final and (not body or OPEN.startswith(body)):
                    break  # still could be the opening marker
                else:
                    self.state = "answer"
            elif self.state == "reasoning":
                at = self._held.find(CLOSE)
                if at >= 0:
                    reasoning += self._take(at)[0]
                    self._take(len(CLOSE))
                    self.state = "after"
                    continue
                keep = 0 if final else _partial_suffix(self._held, CLOSE)
                reasoning += self._take(len(self._held) - keep)[0]
                break
            elif self.state == "after":
                body = self._held.lstrip()
                self._take(len(self._held) - len(body))
                if body:
                    self.state = "answer"
            else:
                text, flags = self._take(len(self._held))
                answer += text
                answer_flags += flags
        return reasoning, answer, answer_flags
