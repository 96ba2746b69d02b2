"""No value of a numeric field can abort the worker (issue 16).

Every numeric field of every command is driven across its range and beyond: at its bounds, just
past them and far past them (negative, 2**31, 2**63-1, 2**64-1: all that msgpack can carry). Each
value goes to a real worker twice: as a raw frame, bypassing the app's check, and through the
client. A value in range is answered as usual (or refused cleanly, like a context too big for this
machine's memory); a value out of range is refused with one Error naming the field, and the client
refuses it before sending, with the same words. After every value the worker still answers a Ping.

The ranges are read from the protocol's annotations (``msgspec.inspect``), so the test follows the
constants; :func:`test_every_numeric_field_is_driven` fails when a command gains a numeric field
that this test does not drive.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any

import msgspec
import psutil
import pytest
from msgspec import inspect as mi

from app.surfaces.cli.main import main
from engine import protocol as p
from app.engine_clients.client import EngineDead, EngineError, InvalidRequest, new_request_id
from engine.protocol.framing import frame
from app.engine_clients.process_client import ProcessClient
from tests.process.conftest import wait_for

pytestmark = pytest.mark.process

FAR = (-1, -(2**31), 2**31, 2**63 - 1, -(2**63), 2**64 - 1)  # beyond every range, as far as msgpack goes
SMALL_CONTEXT = 256  # the base model's context: a runaway answer ends quickly
PROMPT = "The quick brown fox jumps over the lazy dog. " * 3

# Sampling fields are checked by engine.decoding.sampling (floats: no annotation can say "finite").
SAMPLING_VALUES = {
    "temperature": ([0.0, 1e30], [-1e-9, -1e308, math.inf, -math.inf, math.nan]),
    "top_k": ([0, 2**63 - 1, 2**64 - 1], [-1, -(2**63)]),
    "top_p": ([5e-324, 1.0], [0.0, -1.0, 1.0000001, math.inf, math.nan]),
    "min_p": ([0.0, 0.999999], [1.0, -1e-9, math.inf, math.nan]),
    "seed": ([0, 2**63 - 1], [-1, 2**63, 2**64 - 1, -(2**63)]),
    "repeat_penalty": ([1.0, 2.0], [0.999, 2.0000001, 0.0, -1.0, math.inf, math.nan]),
    "repeat_last_n": ([-1, 0, 2**31 - 1], [-2, 2**31, 2**63 - 1, 2**64 - 1, -(2**63)]),  # -1: the whole answer
    "dry_multiplier": ([0.0, 5.0], [-1e-9, 5.0000001, math.inf, math.nan]),
}
# In-range values of note besides the bounds: a context shorter than llama.cpp's batch.
ALSO_INSIDE = {("load_model", "n_ctx"): (1,)}
# Numeric fields with no range, and why.
NOT_DRIVEN = {
    ("hello", "protocol_version"): "any other version ends the worker by design (test_worker_lifecycle)",
    **{(kind, "template.now"): "a template's clock: refused out of range when decoded (tests/unit/test_command_ranges.py)"
       for kind in ("chat", "answer_turn", "open_conversation", "read_document")},
    ("answer_turn", "keep.started_at"): "when the app began a kept answer's turn, a clock: refused out of range "
                                        "when decoded (tests/unit/test_command_ranges.py)",
}


def base_commands(model: str) -> dict[str, p.Command]:
    """A valid command of each kind with numeric fields (new request ids on each call)."""
    return {
        "load_model": p.LoadModel(request_id=new_request_id("load"), model=model, n_ctx=SMALL_CONTEXT),
        "complete": p.Complete(request_id=new_request_id("gen"), prompt=PROMPT, max_tokens=2, draft=p.DraftSpec("auto"),
                               sampling=p.SamplingSpec(temperature=0.0)),
        "measure_text": p.MeasureText(request_id=new_request_id("measure"), text=PROMPT, keep="first"),
        "calibrate": p.Calibrate(request_id=new_request_id("cal"), lengths=[16]),
        "set_telemetry": p.SetTelemetry(interval_ms=0),
    }


@dataclass(frozen=True)
class Case:
    kind: str
    field: str  # "n_ctx", "sampling.top_p", "lengths[]" (an item), "lengths" (the list's length)
    value: Any
    valid: bool

    def __str__(self) -> str:
        return f"{self.kind}.{self.field}={self.value!r}"

    @property
    def path(self) -> str:
        """The field as InvalidCommand.field names it."""
        return self.field.replace("[]", "[0]")

    @property
    def name(self) -> str:
        """The field as the refusal's message starts (sampling says "top-p" for top_p)."""
        name = self.path.removeprefix("sampling.")
        words = {"repeat_penalty": "repeat penalty", "dry_multiplier": "phrase penalty"}
        if name in words:
            return words[name]
        return name.replace("_", "-") if name in ("top_k", "top_p", "min_p", "repeat_last_n") else name

    def raw(self, command: p.Command) -> dict:
        message = msgspec.to_builtins(command)
        if self.field == "lengths":
            message["lengths"] = [16] * self.value
        elif self.field == "lengths[]":
            message["lengths"] = [self.value]
        elif self.field.startswith("sampling."):
            message["sampling"][self.field.removeprefix("sampling.")] = self.value
        else:
            message[self.field] = self.value
        return message

    def struct(self, command: p.Command) -> p.Command:
        if self.field == "lengths":
            return msgspec.structs.replace(command, lengths=[16] * self.value)
        if self.field == "lengths[]":
            return msgspec.structs.replace(command, lengths=[self.value])
        if self.field.startswith("sampling."):
            sampling = msgspec.structs.replace(command.sampling, **{self.field.removeprefix("sampling."): self.value})
            return msgspec.structs.replace(command, sampling=sampling)
        return msgspec.structs.replace(command, **{self.field: self.value})


def int_cases(kind: str, field: str, t: mi.IntType) -> list[Case]:
    low, high = t.ge, t.le
    outside = sorted(v for v in {low - 1, high + 1, *FAR} if not low <= v <= high)
    inside = (low, *ALSO_INSIDE.get((kind, field), ()), high)
    return [Case(kind, field, v, True) for v in inside] + [Case(kind, field, v, False) for v in outside]


def numeric_fields() -> dict[tuple[str, str], mi.Type]:
    """Every numeric field of every command: (kind, field) -> its type (an int, a float or a list's length)."""
    found: dict[tuple[str, str], mi.Type] = {}

    def walk(kind: str, prefix: str, struct: mi.StructType) -> None:
        for field in struct.fields:
            field_type = field.type
            if isinstance(field_type, mi.UnionType):
                field_type = next((t for t in field_type.types if not isinstance(t, mi.NoneType)), field_type)
            name = prefix + field.encode_name
            if isinstance(field_type, mi.StructType):
                walk(kind, name + ".", field_type)
            elif isinstance(field_type, (mi.IntType, mi.FloatType)):
                found[(kind, name)] = field_type
            elif isinstance(field_type, mi.ListType) and isinstance(field_type.item_type, mi.IntType):
                found[(kind, name)] = field_type
                found[(kind, name + "[]")] = field_type.item_type

    for command in p.Command.__args__:
        info = mi.type_info(command)
        walk(info.tag, "", info)
    return found


def cases_for(kind: str, field: str) -> list[Case]:
    if field.startswith("sampling."):
        valid, invalid = SAMPLING_VALUES[field.removeprefix("sampling.")]
        return [Case(kind, field, v, True) for v in valid] + [Case(kind, field, v, False) for v in invalid]
    field_type = numeric_fields()[(kind, field)]
    if isinstance(field_type, mi.ListType):  # the list's length
        most = field_type.max_length
        return [Case(kind, field, 0, True), Case(kind, field, most, True), Case(kind, field, most + 1, False),
                Case(kind, field, 10_000, False)]
    return int_cases(kind, field, field_type)


# Chat and AnswerTurn take exactly the answer fields Complete takes (engine.protocol.commands._Answering): driven there.
SHARED = {key for key in numeric_fields() if key[0] in ("chat", "answer_turn") and key not in NOT_DRIVEN}
assert {field for _, field in SHARED} <= {field for kind, field in numeric_fields() if kind == "complete"}
DRIVEN = sorted(key for key in numeric_fields() if key not in NOT_DRIVEN and key not in SHARED and key[0] != "hello")


def test_every_numeric_field_is_driven():
    fields = numeric_fields()
    assert set(DRIVEN) | set(NOT_DRIVEN) | SHARED | {("hello", "snapshot_budget_bytes")} == set(fields)
    for kind, field in DRIVEN:
        field_type = fields[(kind, field)]
        if field.startswith("sampling."):
            continue
        if isinstance(field_type, mi.IntType):  # a range on both sides, or the worker could be handed anything
            assert field_type.ge is not None and field_type.le is not None, (kind, field)
        else:
            assert field_type.max_length is not None, (kind, field)


# --- the worker ----------------------------------------------------------------------------------


class Engine:
    """A real worker and what it has loaded."""

    def __init__(self, home, model: str) -> None:
        self.client = ProcessClient(env={"HEARTH_HOME": str(home)})
        self.client.start()
        self.client.send(p.SetTelemetry(interval_ms=0))
        self.model = model
        self.base_loaded = False

    def ensure_base_model(self) -> None:
        if not self.base_loaded:
            self.client.load_model(self.model, n_ctx=SMALL_CONTEXT, timeout=120)
            self.base_loaded = True

    def answers_until_pong(self, timeout: float = 120.0) -> list[p.Event]:
        """Ping, and every event before the Pong (telemetry left out): the answers to what was sent."""
        rid = new_request_id("ping")
        self.client.send(p.Ping(request_id=rid))
        events = []
        while True:
            event = self.client.next_event(timeout)
            assert event is not None, f"no Pong within {timeout} s: {events}"
            assert not isinstance(event, EngineDead), f"the worker died: {event.message} after {events}"
            if isinstance(event, p.Pong) and event.request_id == rid:
                return events
            if not isinstance(event, p.Telemetry):
                events.append(event)


@pytest.fixture(scope="module")
def engine(tmp_path_factory, test_models):
    engine = Engine(tmp_path_factory.mktemp("home"), str(test_models["hybrid-tiny"]))
    yield engine
    engine.client.close(mode="abort", timeout=5)


def check_refused(case: Case, events: list[p.Event], rid: str | None) -> None:
    errors = [e for e in events if isinstance(e, p.Error)]
    assert len(errors) == 1 and errors[0].code == "bad_request" and errors[0].request_id == rid, f"{case}: {events}"
    assert errors[0].message.startswith(f"{case.name} must be "), f"{case}: {errors[0].message}"
    others = [e for e in events if not isinstance(e, p.Error)]
    if case.kind == "complete":  # an answer always ends with its Finished
        assert [type(e) for e in others] == [p.Finished] and others[0].finish_reason == "error", f"{case}: {events}"
    else:
        assert others == [], f"{case}: {events}"


ANSWERS = {"load_model": p.ModelLoaded, "complete": p.Finished, "measure_text": p.TextMeasured,
           "calibrate": p.Calibrated}


def check_answered(engine: Engine, case: Case, events: list[p.Event]) -> None:
    """A value in range: the usual answer, or a clean refusal that is not about the value's range."""
    errors = [e for e in events if isinstance(e, p.Error)]
    assert all(e.code not in ("bad_request", "bad_message", "internal") for e in errors), \
        f"{case}: {events}"
    if case.kind == "set_telemetry":
        assert errors == [], f"{case}: {events}"
        return
    answer = ANSWERS[case.kind]
    assert any(isinstance(e, answer) for e in events) or (case.kind == "load_model" and errors), f"{case}: {events}"
    if case.kind == "complete":
        assert errors == [] and events[-1].finish_reason in ("stop", "length"), f"{case}: {events}"
    if case.kind == "load_model":
        engine.base_loaded = False
        if not errors:  # the context it made works, drafting at the longest draft included
            generated = list(engine.client.stream(
                p.Complete(request_id=new_request_id("gen"), prompt=PROMPT, max_tokens=4, draft=p.DraftSpec("auto"),
                           draft_max=p.MAX_DRAFT, sampling=p.SamplingSpec(temperature=0.0)), timeout=120))
            assert [e for e in generated if isinstance(e, (p.Error, EngineDead))] == [], f"{case}: {generated}"
            assert generated[-1].finish_reason in ("stop", "length"), f"{case}: {generated}"


def drive(engine: Engine, case: Case, through_client: bool) -> None:
    if case.kind != "load_model":
        engine.ensure_base_model()
    command = base_commands(engine.model)[case.kind]
    rid = getattr(command, "request_id", None)
    if through_client and not case.valid:
        with pytest.raises(InvalidRequest) as refused:
            engine.client.send(case.struct(command))
        assert refused.value.invalid.field == case.path, str(refused.value)
        assert str(refused.value).startswith(f"{case.name} must be "), str(refused.value)
        assert engine.answers_until_pong() == [], f"{case}: the client sent it"
        return
    if through_client:
        engine.client.send(case.struct(command))
    else:
        engine.client.send_raw(frame(msgspec.msgpack.encode(case.raw(command))))
    events = engine.answers_until_pong()
    if case.valid:
        check_answered(engine, case, events)
    else:
        check_refused(case, events, rid)
    if case.kind == "set_telemetry":
        engine.client.send(p.SetTelemetry(interval_ms=0))


@pytest.mark.parametrize("kind, field", DRIVEN, ids=[f"{k}.{f}" for k, f in DRIVEN])
def test_values_across_and_beyond_the_range_never_kill_the_worker(engine, kind, field):
    for case in cases_for(kind, field):
        for through_client in (False, True):
            drive(engine, case, through_client)
    assert engine.client.process.poll() is None


def test_snapshot_budget_in_the_handshake(hearth_home):
    """Hello is the first message, so its field is driven on fresh workers."""
    (low, high), outside = (0, p.MAX_STORED_BYTES), (-1, -(2**63), 2**63, 2**64 - 1)
    client = ProcessClient()
    client.snapshot_budget_bytes = outside[0]
    with pytest.raises(InvalidRequest) as refused:
        client.start()
    assert str(refused.value).startswith("snapshot_budget_bytes must be between 0 and ")
    try:
        for value in outside:  # raw frames: refused, and the worker waits for a good Hello
            hello = msgspec.to_builtins(p.Hello(protocol_version=p.PROTOCOL_VERSION, snapshot_budget_bytes=value))
            client.send_raw(frame(msgspec.msgpack.encode(hello)))
            error = wait_for(client, p.Error)
            assert error.code == "bad_request", error
            assert error.message.startswith(f"snapshot_budget_bytes must be between {low} and {high}; got ")
        client.send_raw(frame(p.encode(p.Hello(protocol_version=p.PROTOCOL_VERSION, snapshot_budget_bytes=low))))
        wait_for(client, p.Ready, timeout=60)
    finally:
        client.close(mode="abort", timeout=5)
    client = ProcessClient()
    client.snapshot_budget_bytes = high
    try:
        client.start()
        assert isinstance(next(iter(client.stream(p.Ping(request_id="p"), timeout=30))), p.Pong)
    finally:
        client.close(mode="abort", timeout=5)


# --- a context no machine can hold (point 6) -----------------------------------------------------


def test_an_impossible_context_is_refused_at_once(engine):
    """2**31-1 tokens of SmolLM2's cache is tens of terabytes: refused from the file's metadata,
    before llama.cpp spends most of a minute finding out, and the worker loads a sane one next."""
    started = time.monotonic()
    with pytest.raises(EngineError) as refused:
        engine.client.load_model("default", n_ctx=2**31 - 1, timeout=60)
    took = time.monotonic() - started
    engine.base_loaded = False
    assert refused.value.code == "model_load_failed"
    assert re.search(r"a context of 2147483647 tokens needs about [\d,.]+ GiB of memory \(the model file .*, its "
                     r"attention cache [\d,.]+ GiB, the rest .*\), but only [\d,.]+ GiB is available; choose a shorter "
                     r"context: about \d+ tokens fit now",
                     str(refused.value)), str(refused.value)
    assert took < 10, took  # loose: the machine is shared; the refusal reads metadata only
    assert engine.client.load_model("default", n_ctx=SMALL_CONTEXT, timeout=120).n_ctx == SMALL_CONTEXT


# --- the command line ----------------------------------------------------------------------------


def run_cli(capsys, *argv: str) -> tuple[int, str, list[str]]:
    """Exit status, stdout and stderr's lines of a command; it must leave no engine running."""
    before = set(psutil.Process().children())
    code = main(list(argv))
    captured = capsys.readouterr()
    assert set(psutil.Process().children()) <= before
    return code, captured.out, captured.err.strip().splitlines()


@pytest.mark.parametrize("argv, line", [
    (("generate", "--draft-max", "1000", "hi"), "--draft-max must be between 1 and 14; got 1000"),
    (("generate", "--draft-max", "-3", "hi"), "--draft-max must be between 1 and 14; got -3"),
    (("generate", "--max-tokens", "0", "hi"), "--max-tokens must be between 1 and 2147483647; got 0"),
    (("chat", "--draft-max", "15"), "--draft-max must be between 1 and 14; got 15"),
    (("send", "--new", "t", "--draft-max", "99", "hi"), "--draft-max must be between 1 and 14; got 99"),
    (("generate", "--top-p", "0", "hi"), "top-p must be in (0, 1], got 0.0"),
    (("send", "--new", "t", "--repeat-penalty", "3", "hi"), "repeat penalty must be between 1 (off) and 2, got 3.0"),
])
def test_the_cli_refuses_a_value_out_of_range_in_one_line(capsys, argv, line):
    started = time.monotonic()
    code, out, err = run_cli(capsys, *argv)
    assert (code, err, out) == (1, [f"hearth: error: {line}"], "")
    assert time.monotonic() - started < 1  # refused before any engine started (that takes seconds)


def test_the_cli_json_error_names_the_field_and_the_range(capsys):
    code, out, err = run_cli(capsys, "generate", "--draft-max", "1000", "--json", "hi")
    assert code == 1 and err == ["hearth: error: --draft-max must be between 1 and 14; got 1000"]
    assert json.loads(out) == {"error": {"kind": "invalid_value", "field": "draft_max", "allowed": "between 1 and 14",
                                         "message": "--draft-max must be between 1 and 14; got 1000"}}


def test_a_value_refused_as_a_running_engine_is_sent_it(capsys, test_models):
    """``devices calibrate`` starts the engine before it sends its lengths: the refusal is the same
    one line, and the engine is closed behind it."""
    code, _out, err = run_cli(capsys, "devices", "calibrate", "--model", str(test_models["hybrid-tiny"]),
                              "--lengths", "64,1")
    assert (code, err) == (1, ["hearth: error: each --lengths value must be between 2 and 2147483647; got 1"])
