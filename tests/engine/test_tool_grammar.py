"""The grammar of one function call (engine.templates.tool_grammar) in llama.cpp, over the real
vocabularies of the four families' fixtures: it takes what each family's template writes for a valid
call, markers as the tokens the tokenizer reads them as, then lets the answer end; it refuses a name
not offered (or not the one named), an argument of the wrong type and a required one left out."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.backends.llama_cpp import LlamaModel
from engine.backends.llama_grammar import ConstraintRefused
from engine.protocol.tools import ToolSpec
from engine.templates.tool_formats import tool_format
from tests.fixtures import llama_sdist
from tests.helpers.real_models import REAL_TINY, TEMPLATES, real_model
from tests.unit.test_tool_formats import CASES, TOOLS, assistant_turn

VALID = {"one call": CASES["one call"], "nested object": CASES["nested object"], "no arguments": [("get_time", {})],
         "optional left out": [("get_weather", {"city": "Paris"})],
         "middle one left out": [("get_weather", {"city": "Paris", "metric": False})]}


@pytest.fixture(scope="module", params=sorted(REAL_TINY))
def family(request):
    model = LlamaModel(real_model(REAL_TINY[request.param]))
    yield request.param, model, tool_format(llama_sdist.template(TEMPLATES[request.param]))
    model.close()


def walk(model: LlamaModel, grammar_text: str, text: str) -> tuple[bool, bool]:
    """Whether llama.cpp's grammar takes every token of ``text`` (markers read as special tokens), and
    then lets the answer end."""
    grammar = model.grammar(grammar_text, "root")
    try:
        for token in model.tokenize(text, add_special=False, parse_special=True):
            if not grammar.allowed(np.array([token]))[0]:
                return False, False
            grammar.accept(token)
        return True, bool(grammar.allowed(np.array([model.eos]))[0])
    finally:
        grammar.close()


def test_the_grammar_takes_what_the_template_writes_for_a_valid_call(family):
    name, model, form = family
    for case, calls in VALID.items():
        body = assistant_turn(TEMPLATES[name], calls)
        for chosen in (None, calls[0][0]):
            assert walk(model, form.grammar(TOOLS, chosen), body) == (True, True), (name, case, chosen, body)
        assert walk(model, form.grammar(TOOLS, None), body[:-1]) == (True, False), (name, case)  # not yet complete


def test_markers_the_vocabulary_has_are_matched_as_their_tokens(family):
    """Qwen's ``<tool_call>`` (a user-defined token) and Llama's ``<|python_tag|>`` (a control token) are
    one token each; the LFM2 and Granite fixtures' vocabularies have no tokens for their markers (the
    real models' have), so there the markers are plain text, which the grammar takes as well."""
    name, model, form = family
    lengths = [len(model.tokenize(marker, add_special=False, parse_special=True)) for marker in form.markers]
    assert all(n == 1 for n in lengths) == (name in ("qwen35", "llama")), (name, lengths)
    if name == "qwen35":
        body = assistant_turn(TEMPLATES[name], VALID["one call"])
        tokens = model.tokenize(body, add_special=False, parse_special=True)
        assert tokens[0] == model.tokenize("<tool_call>", add_special=False, parse_special=True)[0]
        assert walk(model, form.grammar(TOOLS, None), body) == (True, True)


def test_the_grammar_refuses_a_wrong_name_a_wrong_type_and_a_missing_argument(family):
    name, model, form = family
    grammar = form.grammar(TOOLS, None)
    wrong_name = assistant_turn(TEMPLATES[name], [("get_wether", {"city": "Paris"})])
    wrong_type = assistant_turn(TEMPLATES[name], [("get_weather", {"city": "Paris", "days": "three"})])
    missing = assistant_turn(TEMPLATES[name], [("get_weather", {"days": 3})])
    other_tool = assistant_turn(TEMPLATES[name], VALID["one call"])
    for text in (wrong_name, wrong_type, missing):
        assert walk(model, grammar, text)[0] is False, (name, text)
    assert walk(model, form.grammar(TOOLS, "get_time"), other_tool)[0] is False, name


def test_a_tool_taking_any_object_takes_any_parameters(family):
    name, model, form = family
    tools = [ToolSpec("note", "", json.dumps({"type": "object"}))]
    body = assistant_turn(TEMPLATES[name], [("note", {"title": "Shopping", "items": 3})], tools=tools)
    assert walk(model, form.grammar(tools, None), body) == (True, True), (name, body)


def test_each_tools_definitions_stay_its_own():
    """Two tools whose schemas name different definitions alike: each call is held to its own."""
    def tool(name: str, key: str, kind: str) -> ToolSpec:
        item = {"type": "object", "properties": {key: {"type": kind}}, "required": [key]}
        return ToolSpec(name, "", json.dumps({"type": "object", "$defs": {"Item": item},
                                              "properties": {"item": {"$ref": "#/$defs/Item"}}, "required": ["item"]}))

    tools = [tool("count", "n", "integer"), tool("label", "s", "string")]
    text = tool_format(llama_sdist.template(TEMPLATES["granite"])).grammar(tools, None)
    model = LlamaModel(real_model(REAL_TINY["granite"]))
    try:
        call = '<tool_call>\n{{"name": "{}", "arguments": {{"item": {}}}}}\n</tool_call>'
        assert walk(model, text, call.format("count", '{"n": 3}')) == (True, True)
        assert walk(model, text, call.format("label", '{"s": "three"}')) == (True, True)
        assert walk(model, text, call.format("count", '{"s": "three"}'))[0] is False
        assert walk(model, text, call.format("label", '{"n": 3}'))[0] is False
    finally:
        model.close()


def test_a_schema_or_a_name_the_grammar_cannot_hold_is_refused_in_words():
    form = tool_format(llama_sdist.template(TEMPLATES["qwen35"]))
    limited = ToolSpec("pick", "", json.dumps({"type": "object",
                                               "properties": {"n": {"type": "integer", "minimum": 1}}}))
    with pytest.raises(ConstraintRefused, match="'minimum'"):
        form.grammar([limited], None)
    with pytest.raises(ConstraintRefused, match="not among the offered tools"):
        form.grammar(TOOLS, "nope")
    with pytest.raises(ConstraintRefused, match="no tools"):
        form.grammar([], None)
