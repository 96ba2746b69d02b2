"""An answer's constraint as llama.cpp grammar: the GBNF text, and the grammar's state over a vocabulary.

**The text.** A JSON schema becomes GBNF through llama-cpp-python's own converter
(``llama_cpp.llama_grammar.SchemaConverter``, the Python twin of llama.cpp's
``json-schema-to-grammar``), after :func:`engine.protocol.constraint.bare_schema` has refused what the
converter would pass over and dropped the annotations. ``json`` (any JSON object) is the library's
``JSON_GBNF``. Two of the converter's rules would let an answer's JSON break, so they are replaced: its
``char`` (a string's character) takes raw control characters such as a newline, and its ``dot`` (a
pattern's ``.``) takes quotes, backslashes and control characters; both become JSON's string character.
Its literals (enum values, constants, property names) leave backslashes unescaped, so a value with
``\\n`` or a quote in it would come out broken: :class:`_Converter` escapes them. A converter that
fails (an assert, a key it cannot find) is :class:`ConstraintRefused`, with its reason.
:class:`SchemaRules` holds several schemas' rules in one grammar, each under its own name (a function
call's grammar: engine.templates.tool_grammar).

**The state.** :class:`LlamaGrammar` is llama.cpp's grammar sampler used as a mask, never as a
sampler: :meth:`~LlamaGrammar.allowed` applies it to any set of token ids (a preallocated array of
``llama_token_data``; the rejected ones come back with a logit of -inf) and :meth:`~LlamaGrammar.accept`
advances it by one chosen token. llama.cpp aborts the process when a grammar is given a token it
rejects, so ``accept`` checks the token first and raises RuntimeError instead. Control tokens match
as their text here (llama.cpp reads pieces with ``special=true``) and end-of-generation only once the
grammar is complete: the caller bans the control tokens (engine.decoding.constraint).
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp import llama_grammar as converter

from engine import protocol as p
from engine.protocol.constraint import bare_schema

ROOT = "root"
GATED_ROOT = "hearth-root"  # the start after a reasoning block: the blank lines a model writes there, then root
# A string's character and a pattern's "." as JSON allows them (llama.cpp's C++ converter's char).
JSON_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])'
JSON_DOT = r'[^"\\\x7F\x00-\x1F]'
_REPLACED = {"char": JSON_CHAR, "dot": JSON_DOT}
_CONVERTER_FAILS = (AssertionError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError)

_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])  # llama_token_data
assert _TOKEN_DATA.itemsize == ctypes.sizeof(llama_cpp.llama_token_data)


class ConstraintRefused(ValueError):
    """A schema or grammar an answer cannot be held to; the message says why, for the user."""


def grammar_text(spec: p.OutputConstraint, after_reasoning: bool = False) -> tuple[str, str]:
    """The GBNF for ``spec`` and its start rule; ``after_reasoning``: the answer follows a reasoning
    block, so up to two blank characters may come first. Raises :class:`ConstraintRefused`."""
    if spec.kind == "json":
        text = converter.JSON_GBNF
    elif spec.kind == "json_schema":
        text = schema_grammar(spec.schema)
    elif spec.grammar.strip():
        text = spec.grammar
    else:
        raise ConstraintRefused("the grammar is empty")
    if not after_reasoning:
        return text, ROOT
    return f"{text}\n{GATED_ROOT} ::= [ \\n]{{0,2}} {ROOT}\n", GATED_ROOT


def schema_grammar(schema_text: str) -> str:
    """The GBNF for a JSON schema's text (checked by :func:`engine.protocol.constraint.bare_schema`)."""
    try:
        schema = bare_schema(schema_text)
    except ValueError as exc:
        raise ConstraintRefused(f"the JSON schema cannot be used: {exc}") from None
    made = _Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    try:
        made.visit(made.resolve_refs(schema, "schema"), "")
        text = made.format_grammar()
    except _CONVERTER_FAILS as exc:
        raise ConstraintRefused(f"the JSON schema could not be turned into a grammar: {exc or type(exc).__name__}") \
            from None
    return "\n".join(_safe_rule(line) for line in text.splitlines())


class _Converter(converter.SchemaConverter):
    def _format_literal(self, literal: str) -> str:
        """A GBNF literal that writes ``literal`` as it is: backslashes escaped too (the library's
        leaves them to GBNF, which reads ``\\n`` as a newline)."""
        return super()._format_literal(literal.replace("\\", "\\\\"))


def _safe_rule(line: str, replaced: dict[str, str] = _REPLACED) -> str:
    """``line`` (``name ::= body``, one rule) with the rules that could break JSON replaced."""
    name, _, _ = line.partition(" ::= ")
    return f"{name} ::= {replaced[name]}" if name in replaced else line


class SchemaRules:
    """Several JSON schemas' rules in one grammar (a function call's: each tool's arguments, or each of
    their values), each schema's rules named under the name it is given and its ``$ref``s resolved
    within its own text, so two schemas with the same names inside never mix. ``constant`` spells a
    ``const`` or ``enum`` value (JSON by default); ``primitives`` replaces the converter's shared rules
    by name (a pythonic call writes ``True`` where JSON writes ``true``). Raises :class:`ConstraintRefused`."""

    def __init__(self, constant: Callable[[Any], str] = json.dumps, primitives: dict[str, str] | None = None) -> None:
        self._made = _ScopedConverter(constant)
        self._replaced = {**_REPLACED, **(primitives or {})}

    def read(self, schema_text: str, scope: str) -> dict:
        """The schema in ``schema_text``, checked as :func:`schema_grammar` checks it, its ``$ref``s
        resolved under ``scope`` (a name no other schema of this grammar has)."""
        try:
            schema = bare_schema(schema_text)
        except ValueError as exc:
            raise ConstraintRefused(f"the JSON schema cannot be used: {exc}") from None
        return self._converted(lambda: self._made.resolve_refs(schema, scope))

    def rule(self, schema: dict, name: str) -> str:
        """The rule a value of ``schema`` (what :meth:`read` returned, or a part of it) matches; the
        rules it needs are named under ``name``."""
        return self._converted(lambda: self._made.visit(schema, name))

    def text(self) -> str:
        """Every rule made so far, one a line (GBNF without a root)."""
        return "\n".join(_safe_rule(line, self._replaced) for line in self._made.format_grammar().splitlines())

    @staticmethod
    def _converted(step: Callable[[], Any]) -> Any:
        try:
            return step()
        except _CONVERTER_FAILS as exc:
            raise ConstraintRefused(f"the JSON schema could not be turned into a grammar: "
                                    f"{exc or type(exc).__name__}") from None


class _ScopedConverter(_Converter):
    """The converter for several schemas in one grammar: a ``$ref``'s rule is named by the whole
    resolved reference (its schema's scope, then its path), not by the path's last step alone."""

    def __init__(self, constant: Callable[[Any], str]) -> None:
        super().__init__(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
        self._constant = constant

    def _generate_constant_rule(self, value: Any) -> str:
        return self._format_literal(self._constant(value))

    def _resolve_ref(self, ref: str) -> str:
        name = converter.INVALID_RULE_CHARS_RE.sub("-", ref)
        if name not in self._rules and ref not in self._refs_being_resolved:
            self._refs_being_resolved.add(ref)
            name = self.visit(self._refs[ref], name)
            self._refs_being_resolved.remove(ref)
        return name


class LlamaGrammar:
    """llama.cpp's grammar (``text``, starting at ``root``) over a model's vocabulary, as a mask."""

    def __init__(self, vocab: llama_cpp.llama_vocab_p, n_vocab: int, text: str, root: str = ROOT) -> None:
        self._handle = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), root.encode("utf-8"))
        if not self._handle:
            raise ConstraintRefused("llama.cpp could not read the grammar made for this answer (a rule repeated "
                                    "too many times, a rule that starts with itself, or a syntax error)")
        self._cells = np.zeros(n_vocab, dtype=_TOKEN_DATA)  # one array for every apply, refilled
        self._array = llama_cpp.llama_token_data_array(
            data=self._cells.ctypes.data_as(llama_cpp.llama_token_data_p), size=0, selected=-1, sorted=False)
        self._one = np.zeros(1, dtype=np.int64)

    def allowed(self, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` (distinct token ids, any order) the grammar allows next, as booleans."""
        n = int(ids.size)
        cells = self._cells[:n]
        cells["id"] = ids
        cells["logit"] = 0.0
        self._array.size, self._array.selected, self._array.sorted = n, -1, False
        llama_cpp.llama_sampler_apply(self._live(), ctypes.byref(self._array))
        return cells["logit"] != -np.inf

    def accept(self, token: int) -> None:
        """Advance by ``token``, which :meth:`allowed` must allow (else RuntimeError: llama.cpp would abort)."""
        self._one[0] = token
        if not self.allowed(self._one)[0]:
            raise RuntimeError(f"the answer's grammar does not allow token {token} here; the answer was stopped")
        llama_cpp.llama_sampler_accept(self._live(), token)

    def _live(self) -> llama_cpp.llama_sampler_p:
        if not self._handle:
            raise RuntimeError("the answer's grammar was already closed")
        return self._handle

    def close(self) -> None:
        if getattr(self, "_handle", None):
            llama_cpp.llama_sampler_free(self._handle)
        self._handle = None

    def __del__(self) -> None:
        self.close()
