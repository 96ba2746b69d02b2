"""How each chat-template family's model writes function calls, and how to read them back.

A model calls a function by writing the call in its family's form, which its chat template teaches it
(and writes again when the conversation is rendered). Four forms are read:

* ``qwen-xml`` (Qwen3.5, Qwen3-Coder, Nemotron 3 Nano, Step 3.5)::

      <tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>

  a value is raw text, read as JSON where the parameter's schema gives it a type other than string;
* ``hermes`` (Qwen2.5, Qwen3, QwQ, Granite 4, Hermes 2 and 3, MiMo-VL, Bielik, Reka Edge)::

      <tool_call>\\n{"name": NAME, "arguments": {...}}\\n</tool_call>

* ``lfm2`` (LFM2, LFM2.5): Python calls with literal values, ``<|tool_call_start|>[get_weather(city="Paris",
  days=3)]<|tool_call_end|>``. LFM2.5-Instruct's and LFM2-8B's templates write no calls
  (:func:`renders_calls`), so Hearth writes them into the message's content in this form
  (:meth:`ToolFormat.write`);
* ``llama3`` (Llama 3.1 to 3.3): the answer is the call, ``{"name": NAME, "parameters": {...}}``, or
  follows ``<|python_tag|>``.

Which form a template's model writes is read from the template's text (:func:`tool_format`). Other
families' forms (Mistral's ``[TOOL_CALLS]``, DeepSeek's, GLM's ``<arg_key>``, Kimi's...) are not read:
such a template gets None, as one that takes no tools.

The text read is model output, so it is untrusted: each form is scanned once from left to right
(``str.find``, no backtracking regular expressions), JSON by the json module (no NaN, no Infinity),
Python by :mod:`ast`, walking its literal nodes (nothing is evaluated). An answer that looks like calls
but cannot be read as calls stays text, with the reason in one sentence (:attr:`ParsedAnswer.problem`).
Text after the last call is not kept (LFM2 models may add a remark there).

The grammar that holds an answer to one well-formed call is :mod:`engine.templates.tool_grammar`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.protocol.tools import MAX_CALLS, ToolCall, ToolSpec
from engine.templates.tool_reading import (CUT_OFF, NotCalls, arguments_of, checked, json_at,
                                           json_text, named_call, partial_tail, pythonic_calls, python_literal,
                                           skip_space, xml_call, xml_text)



@dataclass(frozen=True)
class ParsedAnswer:
    """An answer read for calls: its text without them, the calls (name, arguments as JSON text of an
    object) and, when call-like text could not be read as calls, why (then ``calls`` is empty and
    ``content`` is the whole text)."""

    content: str
    calls: list[tuple[str, str]]
    problem: str = ""


class ToolFormat:
    """One family's form of a call. Subclasses give ``_read`` (the calls from where the first begins)
    and ``_write`` (calls as the model writes them); forms framed by a marker need only ``opener``."""

    name = ""
    markers: tuple[str, ...] = ()  # the texts of the tokens that frame a call
    opener = ""  # what a call begins with

    def call_start(self, text: str) -> int | None:
        """Where in ``text`` (an answer so far) the first call begins; None: no call has begun."""
        at = text.find(self.opener)
        return None if at < 0 else at

    def held(self, text: str) -> int:
        """Given no call has begun, how many characters at the end of ``text`` could still begin one."""
        return partial_tail(text, self.opener)

    def parse(self, text: str, tools: Sequence[ToolSpec]) -> ParsedAnswer:
        """The whole answer ``text`` read for calls of ``tools``."""
        at = self.call_start(text)
        if at is None:
            return ParsedAnswer(text, [])
        offered = {tool.name: tool for tool in tools}
        try:
            found = self._read(text, at, offered)
            if len(found) > MAX_CALLS:
                raise NotCalls(f"the answer makes {len(found)} calls; at most {MAX_CALLS} are taken")
            calls = [checked(name, arguments, offered) for name, arguments in found]
        except NotCalls as why:
            return ParsedAnswer(text, [], str(why))
        return ParsedAnswer(text[:at].rstrip(), calls)

    def write(self, calls: Sequence[ToolCall], content: str) -> str:
        """``content`` then ``calls``, as this family's model writes them. Arguments that are not a JSON
        object are written as no arguments."""
        return self._write([(call.name, arguments_of(call)) for call in calls], content)

    def grammar(self, tools: Sequence[ToolSpec], name: str | None) -> str:
        """GBNF (root rule ``root``) for exactly one call in this form, of ``name`` or of any of ``tools``,
        its arguments held to the tool's schema. Raises ConstraintRefused (a ValueError)."""
        from engine.templates.tool_grammar import call_grammar  # loads llama.cpp: only where grammars are made

        return call_grammar(self.name, tools, name)

    def _read(self, text: str, at: int, tools: dict[str, ToolSpec]) -> list[tuple[str, Any]]:
        raise NotImplementedError

    def _write(self, calls: list[tuple[str, dict]], content: str) -> str:
        raise NotImplementedError


# --- the forms ------------------------------------------------------------------------------------


class QwenXml(ToolFormat):
    """Qwen3.5's XML calls: one ``<tool_call>`` block a call, a ``<parameter=...>`` a value."""

    name = "qwen-xml"
    markers = ("<tool_call>", "</tool_call>")
    opener = "<tool_call>"

    def _read(self, text: str, at: int, tools: dict[str, ToolSpec]) -> list[tuple[str, Any]]:
        found = []
        while at >= 0:
            name, arguments, end = xml_call(text, at + len(self.opener), tools)
            found.append((name, arguments))
            at = text.find(self.opener, end)
        return found

    def _write(self, calls: list[tuple[str, dict]], content: str) -> str:
        blocks = [f"<tool_call>\n<function={name}>\n"
                  + "".join(f"<parameter={key}>\n{xml_text(value)}\n</parameter>\n"
                            for key, value in arguments.items())
                  + "</function>\n</tool_call>" for name, arguments in calls]
        return content + ("\n\n" if content.strip() and blocks else "") + "\n".join(blocks)


class Hermes(ToolFormat):
    """Hermes' JSON calls: one ``<tool_call>`` block a call, ``{"name": ..., "arguments": {...}}`` in it."""

    name = "hermes"
    markers = ("<tool_call>", "</tool_call>")
    opener = "<tool_call>"
    closer = "</tool_call>"

    def _read(self, text: str, at: int, tools: dict[str, ToolSpec]) -> list[tuple[str, Any]]:
        found = []
        while at >= 0:
            body = at + len(self.opener)
            if text.find(self.closer, body) < 0:
                raise NotCalls(CUT_OFF)
            value, end = json_at(text, skip_space(text, body))
            close = skip_space(text, end)
            if not text.startswith(self.closer, close):
                raise NotCalls(f"a call's JSON is followed by other text before {self.closer}")
            found.append(named_call(value, ("arguments", "parameters")))
            at = text.find(self.opener, close + len(self.closer))
        return found

    def _write(self, calls: list[tuple[str, dict]], content: str) -> str:
        blocks = [f'<tool_call>\n{{"name": {json_text(name)}, "arguments": {json_text(arguments)}}}\n</tool_call>'
                  for name, arguments in calls]
        return content + ("\n" if content and blocks else "") + "\n".join(blocks)


class Lfm2(ToolFormat):
    """LFM2's pythonic calls: a list of calls between ``<|tool_call_start|>`` and ``<|tool_call_end|>``."""

    name = "lfm2"
    markers = ("<|tool_call_start|>", "<|tool_call_end|>")
    opener = "<|tool_call_start|>"
    closer = "<|tool_call_end|>"

    def _read(self, text: str, at: int, tools: dict[str, ToolSpec]) -> list[tuple[str, Any]]:
        found = []
        while at >= 0:
            body = at + len(self.opener)
            close = text.find(self.closer, body)
            if close < 0:
                raise NotCalls(CUT_OFF)
            found += pythonic_calls(text[body:close])
            at = text.find(self.opener, close + len(self.closer))
        return found

    def _write(self, calls: list[tuple[str, dict]], content: str) -> str:
        if not calls:
            return content
        written = (f"{name}({', '.join(f'{key}={python_literal(value)}' for key, value in arguments.items())})"
                   for name, arguments in calls)
        return f"{content}{self.opener}[{', '.join(written)}]{self.closer}"


class Llama3(ToolFormat):
    """Llama 3's JSON calls: the answer opens with ``{"name": ..., "parameters": {...}}`` (more may follow,
    after ``;`` or a new line), or writes it after ``<|python_tag|>``."""

    name = "llama3"
    markers = ("<|python_tag|>",)
    opener = "<|python_tag|>"
    keys = ('"name"', '"type"')  # what a call's JSON may open with (``"type": "function"`` comes first in some)

    def call_start(self, text: str) -> int | None:
        """A call begins at ``<|python_tag|>``, or the answer begins with one: ``{"name"`` after blanks."""
        tag = text.find(self.opener)
        brace = skip_space(text, 0)
        if text.startswith("{", brace) and text.startswith(self.keys, skip_space(text, brace + 1)):
            return brace if tag < 0 else min(brace, tag)
        return None if tag < 0 else tag

    def held(self, text: str) -> int:
        rest = text[skip_space(text, 0):]
        if not rest or self.opener.startswith(rest):
            return len(text)
        if rest.startswith("{") and any(key.startswith(rest[1:].lstrip()) for key in self.keys):
            return len(text)
        return partial_tail(text, self.opener)

    def _read(self, text: str, at: int, tools: dict[str, ToolSpec]) -> list[tuple[str, Any]]:
        at += len(self.opener) if text.startswith(self.opener, at) else 0
        found = []
        at = skip_space(text, at, " \t\r\n;")
        while text.startswith("{", at):
            value, at = json_at(text, at)
            found.append(named_call(value, ("parameters", "arguments")))
            at = skip_space(text, at, " \t\r\n;")
        if not found:
            raise NotCalls(f"{self.opener} is not followed by a call's JSON")
        return found

    def _write(self, calls: list[tuple[str, dict]], content: str) -> str:
        written = "\n".join(f'{{"name": {json_text(name)}, "parameters": {json_text(arguments)}}}' for name, arguments in calls)
        return f"{content}{self.opener}{written}" if content and calls else content + written


FORMS: dict[str, ToolFormat] = {form.name: form for form in (QwenXml(), Hermes(), Lfm2(), Llama3())}

# What a template's text holds when its model writes each form (first match wins), and what it must not.
_SIGNS = (
    ("lfm2", ("<|tool_call_start|>",), ()),
    ("lfm2", ("List of tools:",), ()),  # LFM2's and LFM2.5-Instruct's templates list tools but write no calls
    ("qwen-xml", ("<tool_call>", "<function=", "<parameter="), ()),
    ("hermes", ("<tool_call>", '"arguments": '), ("<arg_key>", "<tool_calls>")),  # not GLM's or Apriel's forms
    ("llama3", ("<|start_header_id|>", '"parameters": '), ()),
)


def tool_format(template: str | None) -> ToolFormat | None:
    """The form a chat template's model writes calls in; None when the template takes no tools, or
    its model writes a form Hearth does not read."""
    if not template or "tools" not in template:
        return None
    text = template.replace('\\"', '"')  # a quote inside a double-quoted Jinja string
    for form, present, absent in _SIGNS:
        if all(sign in text for sign in present) and not any(sign in text for sign in absent):
            return FORMS[form]
    return None


def renders_calls(template: str | None) -> bool:
    """Whether the template writes an assistant message's ``tool_calls`` itself."""
    return bool(template) and "tool_calls" in template


# --- reading --------------------------------------------------------------------------------------
