"""Function calls in each family's form (engine.templates.tool_formats): which form each of llama.cpp's
vendored chat templates gets, what each template writes for a call read back as that call, ``write``
and ``parse`` round trips, call-like answers that are not calls (kept as text, with the reason), and
what a stream holds back while a call may be beginning."""

from __future__ import annotations

import json
import os
import random
import tarfile
import time

import jinja2
import jinja2.ext
import pytest

from engine.protocol.tools import ToolCall, ToolSpec
from engine.templates.chat_template import CHATML_TEMPLATE
from engine.templates.tool_formats import CUT_OFF, FORMS, renders_calls, tool_format
from tests.fixtures import llama_sdist

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                            "metric": {"type": "boolean"}}, "required": ["city"]}
SEARCH = {"type": "object", "properties": {"query": {"type": "string"}, "options": {
    "type": "object", "properties": {"year": {"type": "integer"},
                                     "tags": {"type": "array", "items": {"type": "string"}}}},
    "limit": {"type": "number"}}, "required": ["query"]}
TOOLS = [ToolSpec("get_weather", "The weather in a city.", json.dumps(WEATHER)),
         ToolSpec("search", "Search the web.", json.dumps(SEARCH)),
         ToolSpec("get_time", "The time now.", "")]
CASES = {  # what a test answer calls: (name, arguments) pairs
    "one call": [("get_weather", {"city": "Paris", "days": 3, "metric": True})],
    "two calls": [("get_weather", {"city": "Paris"}), ("get_time", {})],
    "nested object": [("search", {"query": "rivers", "options": {"year": 2020, "tags": ["long", "wet"]},
                                  "limit": 2.5})],
    "awkward text": [("search", {"query": 'She said "hi"\nthen left: café ✓ 日本 \\ {braces} </think>'})],
}
EXPECTED = {
    "qwen-xml": ["NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "Qwen3-Coder.jinja", "Qwen3.5-4B.jinja",
                 "StepFun3.5-Flash.jinja"],
    "hermes": ["Bielik-11B-v3.0-Instruct.jinja", "MiMo-VL.jinja", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
               "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "Qwen-QwQ-32B.jinja",
               "Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja", "Reka-Edge.jinja",
               "ibm-granite-granite-4.0.jinja", "ibm-granite-granite-4.1.jinja"],
    "lfm2": ["LFM2-8B-A1B.jinja", "LFM2.5-8B-A1B.jinja", "LFM2.5-Instruct.jinja"],
    "llama3": ["meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja",
               "meta-llama-Llama-3.3-70B-Instruct.jinja"],
}
FORM_OF = {name: form for form, names in EXPECTED.items() for name in names}
ENDS = ("<|im_end|>", "<|end_of_text|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<sep>")  # where a rendered turn ends


def vendored_templates() -> list[str]:
    with tarfile.open(llama_sdist.sdist_path()) as archive:
        return sorted(member.name.rsplit("/", 1)[1] for member in archive.getmembers()
                      if f"/{llama_sdist.TEMPLATES}/" in member.name and member.name.endswith(".jinja"))


# --- rendering a call through a real template (also used by tests/engine/test_tool_grammar.py) --------------


def _raise(message: str) -> None:
    raise jinja2.TemplateError(message)


def _tojson(value, indent=None, ensure_ascii=False, **_):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent)


class _Generation(jinja2.ext.Extension):
    """Transformers' ``{% generation %}`` (it marks the assistant's own text): its body, as it is."""

    tags = {"generation"}

    def parse(self, parser):
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", _Generation])
    env.globals["raise_exception"] = _raise
    env.filters["tojson"] = _tojson
    return env


def openai_tools(tools=TOOLS) -> list[dict]:
    no_parameters = '{"type": "object", "properties": {}}'
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": json.loads(t.parameters or no_parameters)}} for t in tools]


def assistant_turn(template_name: str, calls: list[tuple[str, dict]], content: str = "", tools=TOOLS) -> str:
    """What ``template_name`` writes for an assistant message making ``calls`` after ``content``: the
    text between the answer's cue and the end of its turn (an empty reasoning block left out). A
    template that does not write ``tool_calls`` gets them in the content, as ``write`` writes them."""
    template = _environment().from_string(llama_sdist.template(template_name))
    form = tool_format(llama_sdist.template(template_name))
    user = {"role": "user", "content": "What is the weather in Paris?"}
    assistant = {"role": "assistant", "content": content,
                 "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                                for i, (n, a) in enumerate(calls)]}
    if not renders_calls(llama_sdist.template(template_name)):
        assistant = {"role": "assistant", "content": form.write(tool_calls(calls), content)}
    common = {"tools": openai_tools(tools), "bos_token": "", "eos_token": ""}
    cue = template.render(messages=[user], add_generation_prompt=True, **common)
    full = template.render(messages=[user, assistant], add_generation_prompt=False, **common)
    shared = os.path.commonprefix([cue, full])
    if len(shared) < len(cue):  # the cue opens a reasoning block the turn does not have: back to the cue's line
        shared = shared[:shared.rfind("\n") + 1]
    body = full[len(shared):]
    if "</think>" in body[:24]:
        body = body.split("</think>", 1)[1].lstrip("\n")
    return body[:min(at for at in (body.find(end) for end in ENDS) if at >= 0)]


def tool_calls(calls: list[tuple[str, dict]]) -> list[ToolCall]:
    return [ToolCall(f"call_{i}", name, json.dumps(arguments)) for i, (name, arguments) in enumerate(calls)]


def as_read(calls: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    return [(name, dict(arguments)) for name, arguments in calls]


def read(parsed) -> list[tuple[str, dict]]:
    return [(name, json.loads(arguments)) for name, arguments in parsed.calls]


# --- which form ---------------------------------------------------------------------------------------------


def test_every_vendored_template_that_takes_tools_gets_its_form():
    names = vendored_templates()
    assert len(names) >= 60 and set(FORM_OF) <= set(names)
    for name in names:
        form = tool_format(llama_sdist.template(name))
        assert (form.name if form else None) == FORM_OF.get(name), name


def test_the_four_families_get_the_four_forms_and_a_template_without_tools_none():
    forms = {name: tool_format(llama_sdist.template(name)).name for name in
             ("Qwen3.5-4B.jinja", "ibm-granite-granite-4.0.jinja", "LFM2.5-Instruct.jinja",
              "meta-llama-Llama-3.2-3B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja")}
    assert forms == {"Qwen3.5-4B.jinja": "qwen-xml", "ibm-granite-granite-4.0.jinja": "hermes",
                     "LFM2.5-Instruct.jinja": "lfm2", "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
                     "Qwen-Qwen3-0.6B.jinja": "hermes", "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes"}
    for template in (None, "", CHATML_TEMPLATE, llama_sdist.template("google-gemma-2-2b-it.jinja"),
                     llama_sdist.template("mistralai-Mistral-Nemo-Instruct-2407.jinja")):  # [TOOL_CALLS]: not read
        assert tool_format(template) is None


def test_only_lfm2_templates_that_list_tools_leave_the_calls_to_the_content():
    assert not renders_calls(llama_sdist.template("LFM2.5-Instruct.jinja"))
    assert not renders_calls(llama_sdist.template("LFM2-8B-A1B.jinja"))
    assert not renders_calls(None)
    for name in FORM_OF.keys() - {"LFM2.5-Instruct.jinja", "LFM2-8B-A1B.jinja"}:
        assert renders_calls(llama_sdist.template(name)), name


# --- what the templates write, read back ---------------------------------------------------------------------


def skipped(name: str, case: str) -> bool:
    if FORM_OF[name] == "llama3" and case == "two calls":
        return True  # Llama 3's templates refuse more than one call in a message
    # LFM2.5-8B's template writes a string argument in single quotes as it is: a quote or a newline in it
    # breaks the Python it writes (what its model reads and writes is not known to be any better).
    return name == "LFM2.5-8B-A1B.jinja" and case == "awkward text"


def test_every_templates_own_rendering_of_calls_reads_back_as_those_calls():
    checked = 0
    for name, form in FORM_OF.items():
        for case, calls in CASES.items():
            if skipped(name, case):
                continue
            body = assistant_turn(name, calls)
            parsed = FORMS[form].parse(body, TOOLS)
            assert parsed.problem == "" and read(parsed) == as_read(calls), (name, case, body)
            assert parsed.content == "", (name, case)
            checked += 1
    assert checked >= 70


@pytest.mark.parametrize("name", ["Qwen3.5-4B.jinja", "Qwen-Qwen3-0.6B.jinja", "ibm-granite-granite-4.0.jinja",
                                  "LFM2.5-Instruct.jinja"])
def test_content_before_the_calls_is_kept(name):
    calls = CASES["two calls"]
    parsed = FORMS[FORM_OF[name]].parse(assistant_turn(name, calls, "Let me look that up."), TOOLS)
    assert (parsed.content, read(parsed), parsed.problem) == ("Let me look that up.", as_read(calls), "")


def test_lfm25_instruct_renders_the_written_calls_as_they_were_written():
    written = FORMS["lfm2"].write(tool_calls(CASES["one call"]), "Checking.")
    assert written == 'Checking.<|tool_call_start|>[get_weather(city="Paris", days=3, metric=True)]<|tool_call_end|>'
    assert assistant_turn("LFM2.5-Instruct.jinja", CASES["one call"], "Checking.") == written


# --- write, then parse ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", sorted(FORMS))
def test_what_a_form_writes_it_reads_back(form):
    for case, calls in CASES.items():
        for content in ("", "I will check.", "Line one.\n\nLine two."):
            text = FORMS[form].write(tool_calls(calls), content)
            parsed = FORMS[form].parse(text, TOOLS)
            assert (parsed.content, read(parsed), parsed.problem) == (content, as_read(calls), ""), (case, text)
    assert FORMS[form].parse("Just text, no call.", TOOLS) == FORMS[form].parse("Just text, no call.", [])
    assert FORMS[form].parse("Just text, no call.", TOOLS).calls == []


def test_the_written_forms_are_the_families_own():
    calls = tool_calls([("get_weather", {"city": "Paris", "days": 3})])
    assert FORMS["qwen-xml"].write(calls, "") == ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                                                  "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
                                                  "</tool_call>")
    assert FORMS["hermes"].write(calls, "Hi") == ('Hi\n<tool_call>\n{"name": "get_weather", "arguments": '
                                                  '{"city": "Paris", "days": 3}}\n</tool_call>')
    assert FORMS["llama3"].write(calls, "") == '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}'
    assert FORMS["lfm2"].write([], "Only text.") == "Only text."


# --- reading values -------------------------------------------------------------------------------------------


def test_qwen_xml_values_are_text_where_the_schema_says_string_and_json_elsewhere():
    text = ("<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n<parameter=days>\n 7 \n"
            "</parameter>\n<parameter=metric>\nFalse\n</parameter>\n<parameter=extra>\n[1]\n</parameter>\n</function>\n"
            "</tool_call>")
    assert read(FORMS["qwen-xml"].parse(text, TOOLS)) == [("get_weather", {"city": "42", "days": 7, "metric": False,
                                                                           "extra": "[1]"})]
    unparsed = text.replace(" 7 ", "seven")
    assert read(FORMS["qwen-xml"].parse(unparsed, TOOLS))[0][1]["days"] == "seven"  # kept as it was written


def test_pythonic_calls_take_json_names_and_single_quotes_and_never_run_anything():
    lfm2 = FORMS["lfm2"]
    parsed = lfm2.parse("<|tool_call_start|>[search(query='x', options={\"year\": 1, \"tags\": []}, limit=-2), "
                        "get_weather(city=\"P\", metric=true, days=null)]<|tool_call_end|>", TOOLS)
    assert read(parsed) == [("search", {"query": "x", "options": {"year": 1, "tags": []}, "limit": -2}),
                            ("get_weather", {"city": "P", "metric": True, "days": None})]
    for body in ("get_weather(__import__('os').system('touch /tmp/x'))", "get_weather(city=open('f').read())",
                 "get_weather('Paris')", "get_weather(**{'city': 'P'})", "get_weather(city=1e999)", "[1, 2]",
                 "get_weather(city=\"unclosed)"):
        parsed = lfm2.parse(f"<|tool_call_start|>[{body}]<|tool_call_end|>", TOOLS)
        assert parsed.calls == [] and parsed.problem, body


# --- answers that look like calls but are not ------------------------------------------------------------------


def test_call_like_answers_that_are_not_calls_stay_text_with_the_reason():
    problems = {
        ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": }}\n</tool_call>'): "not valid JSON",
        ("llama3", '{"name": "get_weather", "parameters": {"city" "Paris"}}'): "not valid JSON",
        ("hermes", '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>'): "'rm_rf', which is not among",
        ("qwen-xml", "<tool_call>\n<function=rm_rf>\n</function>\n</tool_call>"): "'rm_rf', which is not among",
        ("lfm2", "<|tool_call_start|>[rm_rf()]<|tool_call_end|>"): "'rm_rf', which is not among",
        ("llama3", '{"name": "rm_rf", "parameters": {}}'): "'rm_rf', which is not among",
        ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": [1]}\n</tool_call>'): "are not an object",
        ("llama3", '{"name": "get_weather", "parameters": "Paris"}'): "are not an object",
        ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"days": NaN}}\n</tool_call>'): "not valid JSON",
        ("hermes", '<tool_call>\n{"arguments": {}}\n</tool_call>'): 'under "name"',
        ("qwen-xml", "<tool_call>\n<function=get_weather>\ncity=Paris\n</function>\n</tool_call>"): "not a <parameter",
        ("llama3", '{"type": "object", "properties": {}}'): 'under "name"',
    }
    for (form, text), words in problems.items():
        parsed = FORMS[form].parse("Sure. " + text if form != "llama3" else text, TOOLS)
        assert parsed.calls == [] and words in parsed.problem, (form, text, parsed)
        assert parsed.content == ("Sure. " + text if form != "llama3" else text)
        assert parsed.problem[0].islower() and "\n" not in parsed.problem


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_call_cut_off_anywhere_before_its_end_is_not_taken(form):
    text = FORMS[form].write(tool_calls(CASES["one call"]), "")
    start = FORMS[form].call_start(text)
    for end in range(start + 1, len(text)):
        parsed = FORMS[form].parse(text[:end], TOOLS)
        assert parsed.calls == [] and (parsed.problem or FORMS[form].call_start(text[:end]) is None), text[:end]
        assert parsed.content == text[:end]
    assert FORMS[form].parse(text[:-1], TOOLS).problem == CUT_OFF


def test_one_bad_call_among_good_ones_takes_none_of_them():
    text = FORMS["hermes"].write(tool_calls(CASES["two calls"]), "") + '\n<tool_call>\n{"name": "nope"}\n</tool_call>'
    parsed = FORMS["hermes"].parse(text, TOOLS)
    assert parsed.calls == [] and "'nope'" in parsed.problem and parsed.content == text


def test_reading_is_linear_in_the_answers_length():
    hostile = {
        "hermes": "<tool_call>" * 50_000,
        "qwen-xml": "<tool_call>\n<function=get_weather>\n" + "<parameter=a>\n" * 50_000,
        "lfm2": "<|tool_call_start|>[" + "[" * 100_000 + "]<|tool_call_end|>", "llama3": "{" + '"name"' + " " * 500_000,
    }
    for form, text in hostile.items():
        began = time.perf_counter()
        parsed = FORMS[form].parse(text, TOOLS)
        assert parsed.calls == [] and parsed.problem, form
        assert time.perf_counter() - began < 1.0, form


# --- streaming: where a call begins, what to hold back -------------------------------------------------------


def test_a_call_begins_at_its_marker_and_a_partial_marker_is_held_back():
    for form, opener in (("hermes", "<tool_call>"), ("qwen-xml", "<tool_call>"), ("lfm2", "<|tool_call_start|>")):
        tool_format = FORMS[form]
        assert tool_format.call_start("Let me check. ") is None and tool_format.held("Let me check. ") == 0
        for n in range(1, len(opener)):
            assert tool_format.call_start("Let me check. " + opener[:n]) is None
            assert tool_format.held("Let me check. " + opener[:n]) == n
        assert tool_format.call_start("Let me check. " + opener + "\n") == len("Let me check. ")
        assert tool_format.held("a < b") == 0 and tool_format.held("a <") == 1
        assert opener in tool_format.markers


def test_llama3_holds_an_answer_while_it_may_still_open_a_json_call():
    llama3 = FORMS["llama3"]
    for text in ("", "  \n", "{", ' { "na', "<|pyth"):
        assert llama3.call_start(text) is None and llama3.held(text) == len(text), text
    assert llama3.call_start('\n{"name": "get_weather"') == 1
    assert llama3.call_start('{ "type": "function", "name": "x"') == 0
    assert llama3.call_start('{"answer": 42}') is None and llama3.held('{"answer": 42}') == 0
    assert llama3.call_start("The answer is {") is None and llama3.held("The answer is {") == 0
    assert llama3.held("Sure <|python") == len("<|python")
    assert llama3.call_start("Sure. <|python_tag|>{") == len("Sure. ")
    parsed = llama3.parse('Sure. <|python_tag|>{"name": "get_time", "parameters": {}}', TOOLS)
    assert (parsed.content, parsed.calls) == ("Sure.", [("get_time", "{}")])
    assert llama3.parse('{"answer": 42}', TOOLS) == llama3.parse('{"answer": 42}', TOOLS)
    assert llama3.parse('{"answer": 42}', TOOLS).content == '{"answer": 42}'


def test_any_answer_is_read_without_an_error_and_a_call_is_never_half_taken():
    """Answers made of the forms' pieces, garbled calls and hostile values: ``parse`` never raises,
    takes all calls or none, and takes only objects it can write as JSON text."""
    rng = random.Random(7)
    pieces = ["<tool_call>", "</tool_call>", "<function=get_weather>", "<parameter=city>", "</parameter>", "</function>",
              "<|tool_call_start|>", "<|tool_call_end|>", "<|python_tag|>", "[", "]", "(", ")", "{", "}", '"', "'", ",",
              "=", ":", "get_weather", "city", "\n", "\\", "\\ud800", "\x00", "1" * 5000, "1e999", "NaN", "true", "True",
              "null", "__import__('os')", "b'x'", "1j", "{1, 2}", "**", '{"name": "get_weather"', '"arguments":']
    written = [form.write(tool_calls(calls), "Hi") for form in FORMS.values() for calls in CASES.values()]
    for i in range(3000):
        if i % 2:
            text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        else:
            whole = rng.choice(written)
            cut, rejoin = sorted(rng.randrange(len(whole) + 1) for _ in range(2))
            text = whole[:cut] + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 3))) + whole[rejoin:]
        for form in FORMS.values():
            parsed = form.parse(text, TOOLS)
            assert not (parsed.calls and parsed.problem)
            assert parsed.calls or parsed.content == text
            assert all(isinstance(json.loads(arguments), dict) and arguments.encode() for _, arguments in parsed.calls)
