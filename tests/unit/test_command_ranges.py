"""The protocol's ranges: a value outside one is refused in words naming the field and the range,
by the same decoder on both sides of the pipe (issue 16). The real worker is driven in
tests/process/test_numeric_ranges.py; this is the wording and the single source of each limit."""

from __future__ import annotations

import importlib.util

import msgspec
import pytest

from app.surfaces.serve import schema
from app.services.settings import DRAFT_MAX_RANGE
from engine import protocol as p
from engine.protocol.command_check import error_field, explain, field_range
from tests.conftest import ROOT


def refusal(command: p.Command) -> p.InvalidCommand:
    with pytest.raises(p.InvalidCommand) as refused:
        p.check_command(command)
    return refused.value


@pytest.mark.parametrize("command, field, message", [
    (p.LoadModel(request_id="l", model="m", draft_max=1000), "draft_max",
     "draft_max must be between 0 and 14; got 1000"),
    (p.LoadModel(request_id="l", model="m", draft_max=-3), "draft_max", "draft_max must be between 0 and 14; got -3"),
    (p.LoadModel(request_id="l", model="m", n_ctx=-5), "n_ctx", "n_ctx must be between 0 and 2147483647; got -5"),
    (p.LoadModel(request_id="l", model="m", n_ctx=2**31), "n_ctx",
     "n_ctx must be between 0 and 2147483647; got 2147483648"),
    (p.LoadModel(request_id="l", model="m", n_threads=513), "n_threads",
     "n_threads must be between 0 and 512; got 513"),
    (p.LoadModel(request_id="l", model="m", device_policy="gpu"), "device_policy",
     "device_policy must be one of 'auto', 'cpu', 'npu'; got 'gpu'"),
    (p.Chat(request_id="l", messages=[], draft_max=0), "draft_max", "draft_max must be between 1 and 14; got 0"),
    (p.Complete(request_id="l", prompt="", max_tokens=0), "max_tokens", "max_tokens must be between 1 and 2147483647; got 0"),
    (p.AnswerTurn(request_id="l", conversation_id="c", answer_id="a", messages=[], sampling=p.SamplingSpec(top_p=0.0)), "sampling.top_p",
     "top-p must be in (0, 1], got 0.0"),
    (p.Complete(request_id="l", prompt="", sampling=p.SamplingSpec(seed=2**63)), "sampling.seed",
     "seed must be a non-negative integer below 2**63, got 9223372036854775808"),
    (p.MeasureText(request_id="l", text="t", budget_tokens=-1), "budget_tokens",
     "budget_tokens must be between 0 and 2147483647; got -1"),
    (p.Calibrate(request_id="l", lengths=[128, 1]), "lengths[1]", "lengths[1] must be between 2 and 2147483647; got 1"),
    (p.Calibrate(request_id="l", lengths=[128] * 33), "lengths",
     "lengths must be a list of at most 32 values; got 33 values"),
    (p.SetTelemetry(interval_ms=2**63 - 1), "interval_ms",
     "interval_ms must be between 0 and 3600000; got 9223372036854775807"),
    (p.Hello(protocol_version=1, snapshot_budget_bytes=-1), "snapshot_budget_bytes",
     "snapshot_budget_bytes must be between 0 and 9223372036854775807; got -1"),
])
def test_a_value_out_of_range_is_refused_in_words(command, field, message):
    refused = refusal(command)
    assert (refused.field, str(refused)) == (field, message)
    assert refused.kind == command.__struct_config__.tag
    assert refused.request_id == getattr(command, "request_id", None)


def test_the_worker_reads_a_raw_frame_the_same_way():
    """A frame from a client that did not check (or is not Hearth's) gets the same refusal."""
    raw = msgspec.msgpack.encode({"kind": "load_model", "request_id": "r7", "model": "m", "draft_max": 10_000})
    with pytest.raises(p.InvalidCommand) as refused:
        p.decode_command(raw)
    assert str(refused.value) == "draft_max must be between 0 and 14; got 10000"
    assert refused.value.request_id == "r7"
    assert isinstance(refused.value, msgspec.ValidationError)  # what the worker catches for any bad frame


@pytest.mark.parametrize("message", [
    {"kind": "load_model", "request_id": "r", "model": "m", "n_ctx": "8192"},  # a wrong type
    {"kind": "load_model", "request_id": 5, "model": "m"},
    {"kind": "load_model", "model": "m"},  # a missing field
    {"kind": "no_such_command", "request_id": "r"},
])
def test_a_malformed_message_is_not_called_out_of_range(message):
    with pytest.raises(msgspec.ValidationError) as caught:
        p.decode_command(msgspec.msgpack.encode(message))
    assert not isinstance(caught.value, p.InvalidCommand)


@pytest.mark.parametrize("command", [
    p.Hello(protocol_version=p.PROTOCOL_VERSION), p.LoadModel(request_id="l", model="m"), p.Complete(request_id="g", prompt=""),
    p.MeasureText(request_id="m", text="t"), p.Calibrate(request_id="c"), p.SetTelemetry(interval_ms=1000),
    p.LoadModel(request_id="l", model="m", n_ctx=p.MAX_TOKENS, n_threads=p.MAX_THREADS, draft_max=p.MAX_DRAFT),
    p.Chat(request_id="g", messages=[], max_tokens=p.MAX_TOKENS, draft_max=p.MAX_DRAFT),
    p.Calibrate(request_id="c", lengths=[p.MIN_CALIBRATION_LENGTH, p.MAX_TOKENS]),
])
def test_defaults_and_bounds_are_accepted(command):
    assert p.check_command(command) == command


def test_one_draft_limit_everywhere():
    """The GUI's settings take the protocol's limit, and the limit is the longest draft the CPU
    builds keep exact (a verify batch of draft + 1 tokens below their exact-rows bound)."""
    spec = importlib.util.spec_from_file_location("llama_build", ROOT / "installers" / "llama_build.py")
    llama_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(llama_build)
    assert DRAFT_MAX_RANGE == (1, p.MAX_DRAFT)
    assert p.MAX_DRAFT == llama_build.EXACT_ROWS - 2


@pytest.mark.parametrize("now", [-1.0, p.MAX_CLOCK + 1, 1e300, float("inf"), float("nan")])
def test_a_templates_clock_out_of_range_is_refused_for_every_command_that_renders(now):
    template = p.TemplateSpec(now=now)
    for command in (p.Chat(request_id="c", messages=[p.WireMessage("user", "hi")], template=template),
                    p.AnswerTurn(request_id="a", conversation_id="c", answer_id="x", messages=[], template=template),
                    p.OpenConversation(request_id="o", conversation_id="c", messages=[], template=template),
                    p.ReadDocument(request_id="r", conversation_id="c", messages=[], template=template)):
        with pytest.raises((p.InvalidCommand, msgspec.ValidationError)):
            p.check_command(command)
    assert p.check_command(p.Chat(request_id="c", messages=[], template=p.TemplateSpec(now=p.MAX_CLOCK)))


@pytest.mark.parametrize("started", [-1.0, p.MAX_CLOCK + 1, 1e300, float("inf"), float("nan")])
def test_a_kept_answers_start_out_of_range_is_refused(started):
    command = p.AnswerTurn(request_id="a", conversation_id="c", answer_id="x", messages=[],
                           keep=p.KeepAnswer(started_at=started))
    with pytest.raises((p.InvalidCommand, msgspec.ValidationError)):
        p.check_command(command)
    assert p.check_command(msgspec.structs.replace(command, keep=p.KeepAnswer(started_at=p.MAX_CLOCK)))


# --- the local API's request bodies: the same ranges, the same explainer (issue 32, point 2) ---------
API_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def api_refusal(text: str) -> schema.RequestRefused:
    """What the API answers for a chat body written as ``text``, whether decoding or sampling refuses it."""
    with pytest.raises(schema.RequestRefused) as refused:
        schema.sampling_spec(schema.decode_body(text.encode(), schema.ChatRequest))
    return refused.value


@pytest.mark.parametrize("field, value", [("seed", -1), ("seed", 2**63), ("seed", 2**64), ("seed", 10**400),
                                          ("top_p", 0), ("top_p", 1.5), ("min_p", 1), ("repeat_penalty", 0),
                                          ("temperature", -0.5)])
def test_the_api_refuses_a_sampling_value_with_the_workers_own_rule(field, value):
    """One rule: the API's refusal quotes the one the worker (and check_command) gives for that value."""
    refused = api_refusal(msgspec.json.encode({**API_BODY, field: value}).decode())
    assert refused.param == field
    if abs(value) < 2**64:  # (the protocol cannot carry the others: they never get that far)
        with pytest.raises(p.InvalidCommand) as worker:
            p.check_command(p.Complete(request_id="c", prompt="", sampling=p.SamplingSpec(**{field: value})))
        rule = str(worker.value)
        assert str(refused) == f"Invalid '{field}': {rule}" or (field == "temperature" and "between 0 and 2" in str(refused))
    assert len(str(refused)) < 200  # a 400-digit seed is not quoted whole


@pytest.mark.parametrize("text, param, words", [
    ('{"model": "m", "messages": [], "max_tokens": 0}', "max_tokens", "max_tokens must be between 1 and 2147483647; got 0"),
    ('{"model": "m", "messages": [], "max_tokens": ' + "9" * 400 + "}", "max_tokens", "between 1 and 2147483647"),
    ('{"model": "m", "messages": [], "temperature": 1e400}', "temperature", "too large to read; it must be between 0 and 2"),
    ('{"model": "m", "messages": [], "top_k": -3}', "top_k", "top_k must be between 0 and 2147483647; got -3"),
    ('{"model": "m", "messages": [], "top_p": ' + "9" * 400 + "}", "top_p", "top-p must be in (0, 1], got 99"),
    ('{"model": "m", "messages": [], "presence_penalty": 9}', "presence_penalty", "between -2 and 2"),
    ('{"model": "m", "messages": [], "temperature": "hot"}', "temperature", "got `str`; it must be between 0 and 2"),
    ('{"model": "m", "messages": [{"role": "user", "content": 5}]}', "messages[0].content", "got `int`"),
    ('{"model": "m", "messages": [], "stop": ["a", 1]}', "stop[1]", "got `int`"),
    ('{"model": "m", "messages": [], "frobnicate": 1}', "frobnicate", "Unrecognized request argument supplied"),
])
def test_the_api_names_the_field_and_its_range(text, param, words):
    refused = api_refusal(text)
    assert refused.param == param and words in str(refused), str(refused)


def test_explain_follows_a_json_body_as_it_follows_a_frame():
    error = None
    try:
        msgspec.json.decode(b'{"model": "m", "messages": [], "max_tokens": -4}', type=schema.ChatRequest)
    except msgspec.ValidationError as exc:
        error = exc
    explained = explain(error, {"model": "m", "messages": [], "max_tokens": -4}, schema.ChatRequest)
    assert (explained.field, explained.value, explained.allowed) == ("max_tokens", -4, "between 1 and 2147483647")
    assert error_field(error) == "max_tokens"
    assert field_range(schema.ChatRequest, "temperature") == "between 0 and 2"
    assert field_range(schema.ChatRequest, "messages[0].role") is None
