"""An answer that may call tools: the calls held back from the streamed text, read when it ends.

The model writes a call in its family's form (engine.templates.tool_formats: Qwen3.5's
``<tool_call><function=…>``, Granite's and Qwen3's ``<tool_call>`` JSON, LFM2's
``<|tool_call_start|>[f(x=1)]<|tool_call_end|>``, Llama 3.2's bare JSON). Its text streams as usual
until a call begins (:class:`CallSplitter`); from there it is held. When the answer ends, the held
text is read as calls (``Finished.tool_calls``, the finish reason ``tool_calls``); text that looked
like a call but is not one (bad JSON, a function that was not offered, a call cut off by the token
limit) is released as the answer's text after all, with the reason in ``Finished.tool_problem``.

The markers a form uses are often control tokens, which an answer's text never shows; while tools
are offered those are shown, so the splitter and the parser see what the model wrote.

``tool_choice`` ``required`` or a named function holds decoding to one well-formed call whose
arguments match the function's schema (the form's grammar, through engine.decoding.constraint, with
the form's markers allowed although they are control tokens).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from engine import protocol as p
from engine.decoding.constraint import ConstraintFactory, build_constraint
from engine.decoding.reasoning import ReasoningStart
from engine.models.session import ModelSession
from engine.templates.tool_formats import FORMS, ToolFormat


@dataclass(frozen=True)
class ToolUse:
    """What an answer that may call tools needs: the form its model writes calls in, the tools offered,
    and the ids of the control tokens to show (the form's markers)."""

    form: ToolFormat
    tools: tuple[p.ToolSpec, ...]
    choice: p.ToolChoice
    shown: frozenset[int]

    @property
    def reads_calls(self) -> bool:
        return self.choice.mode != "none"


def tool_use_for(session: ModelSession, tools: tuple[p.ToolSpec, ...], choice: p.ToolChoice | None) -> ToolUse | None:
    """The answer's tool use, or None when it has none (no tools, no choice, or a template without
    tools: then the calls it might write are text). The form is the one found when the model loaded
    (``ModelFacts.tool_form``)."""
    if not tools or choice is None:
        return None
    form = FORMS.get(session.facts.tool_form)
    if form is None:
        return None
    control = session.model.control_tokens()
    shown = frozenset(control[m] for m in form.markers if m in control)
    return ToolUse(form, tools, choice, shown)


class ToolChoiceRefused(ValueError):
    """``tool_choice`` asks for what the request cannot have (a function it did not offer, a call from a
    model whose template takes no tools)."""


def forced_call(session: ModelSession, use: ToolUse | None, choice: p.ToolChoice | None,
                reasoning: ReasoningStart) -> ConstraintFactory | None:
    """The constraint of a ``required`` or named choice: one call in the form, its arguments matching
    the schema; None for ``auto`` and ``none``."""
    if choice is None or choice.mode not in ("required", "named"):
        return None
    if use is None:
        raise ToolChoiceRefused("this model's chat template does not take tools, so it cannot be made to call one; "
                                "use tool_choice \"auto\" or another model")
    if choice.mode == "named" and choice.name not in {t.name for t in use.tools}:
        raise ToolChoiceRefused(f"tool_choice names the function {choice.name!r}, which is not among the tools")
    grammar = use.form.grammar(use.tools, choice.name if choice.mode == "named" else None)
    banned, eog = session.constraint_masks()
    banned = banned.copy()
    banned[list(use.shown)] = False
    return build_constraint(session.model, p.OutputConstraint(kind="grammar", grammar=grammar), reasoning, banned, eog)


def new_call_id() -> str:
    return "call_" + secrets.token_hex(12)


class CallSplitter:
    """Sorts an answer's streamed text into what is shown now and what is held as a possible call."""

    def __init__(self, use: ToolUse) -> None:
        self.use = use
        self.seen = ""  # the whole answer so far
        self.released = 0  # characters of it already let through
        self.start: int | None = None  # where the first call begins
        self.calls: list[p.ToolCall] = []
        self.problem = ""

    def feed(self, text: str) -> str:
        """The part of the answer that can be shown now (a call's text, a marker's first characters and
        trailing blanks wait)."""
        self.seen += text
        if self.start is None:
            self.start = self.use.form.call_start(self.seen)
        end = self.start if self.start is not None else len(self.seen) - self.use.form.held(self.seen)
        while end > self.released and self.seen[end - 1].isspace():  # blanks before a call belong to neither
            end -= 1
        out = self.seen[self.released:end] if end > self.released else ""
        self.released = max(self.released, end)
        return out

    def finish(self) -> str:
        """Read the held text as calls; what is released after all (the text, when it is none)."""
        held = self.seen[self.released:]
        if self.start is None:
            return held
        parsed = self.use.form.parse(self.seen, self.use.tools)
        if not parsed.calls:
            self.problem = parsed.problem
            return held
        kept = parsed.calls if self.use.choice.parallel else parsed.calls[:1]
        self.calls = [p.ToolCall(new_call_id(), name, arguments) for name, arguments in kept]
        return ""
