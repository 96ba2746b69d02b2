"""1,000+ malformed frames at the real worker: each one answered with an error, the worker serving.

Every bad frame is followed by a Ping; the test expects exactly one Error and then the Pong, so a
frame that was silently swallowed, answered twice, or that broke the stream fails the test.
"""

import typing

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import protocol as p
from engine.protocol.framing import HEADER, MAGIC, MAX_FRAME_BYTES, frame
from app.engine_clients.process_client import ProcessClient
from tests.process.conftest import wait_for

pytestmark = pytest.mark.process

VALID = [
    p.Ping(request_id="x"),
    p.Cancel(request_id="abc"),
    p.Complete(request_id="g", prompt="hello", max_tokens=3),
    p.LoadModel(request_id="l", model="default"),
    p.SetTelemetry(interval_ms=5),
]


def is_valid_command(payload: bytes) -> bool:
    try:
        p.decode_command(payload)
        return True
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False


random_payloads = st.binary(max_size=300).filter(lambda b: not is_valid_command(b)).map(frame)
truncated = st.tuples(st.sampled_from(VALID), st.floats(0.0, 0.95)).map(
    lambda mv: frame(p.encode(mv[0])[: int(len(p.encode(mv[0])) * mv[1])]))
wrong_values = st.one_of(st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False), st.lists(st.integers(0, 1000), max_size=3),
                         st.none(), st.booleans(), st.binary(max_size=8))
# Every command the protocol has, with every one of its fields, read from engine.protocol itself: a
# command added there is fuzzed here without editing this test. A field given a value of the wrong
# type is a bad message; one of the right type but out of its range is refused as a bad request.
COMMANDS = typing.get_args(p.Command)
COMMAND_TAGS = {cls.__struct_config__.tag for cls in COMMANDS}
EVENT_TAGS = {cls.__struct_config__.tag for cls in typing.get_args(p.Event)}
COMMAND_FIELDS = [(cls.__struct_config__.tag, name) for cls in COMMANDS for name in cls.__struct_fields__]
wrong_types = st.tuples(st.sampled_from(COMMAND_FIELDS), wrong_values).map(
    lambda fv: msgspec.msgpack.encode({"kind": fv[0][0], fv[0][1]: fv[1]})).filter(
    lambda payload: not is_valid_command(payload)).map(frame)
unknown_tags = st.text(min_size=1, max_size=20).filter(lambda t: t not in COMMAND_TAGS).map(
    lambda tag: frame(msgspec.msgpack.encode({"kind": tag, "request_id": "r"})))
events_as_commands = st.sampled_from(sorted(EVENT_TAGS - COMMAND_TAGS)).map(
    lambda tag: frame(msgspec.msgpack.encode({"kind": tag, "request_id": "r"})))
huge_lengths = st.integers(MAX_FRAME_BYTES + 1, 2**32 - 1).map(lambda n: HEADER.pack(MAGIC, n))
no_magic = st.binary(min_size=1, max_size=64).filter(lambda b: b"H" not in b)
bad_frames = st.one_of(random_payloads, truncated, wrong_types, unknown_tags, events_as_commands, huge_lengths,
                       no_magic)


@pytest.fixture(scope="module")
def fuzz_worker():
    client = ProcessClient()
    client.start()
    client.send(p.SetTelemetry(interval_ms=0))
    yield client
    client.close(mode="abort")


counter = {"n": 0}


@settings(max_examples=1100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(bad=bad_frames)
def send_bad_frame_then_ping(fuzz_worker, bad):
    counter["n"] += 1
    rid = f"ping-{counter['n']}"
    fuzz_worker.send_raw(bad + frame(p.encode(p.Ping(request_id=rid))))
    first = wait_for(fuzz_worker, (p.Error, p.Pong), timeout=10)
    assert isinstance(first, p.Error), f"no error for {bad[:40]!r}"
    assert first.code in ("bad_frame", "bad_message", "bad_request")  # bad_request: out of range
    second = wait_for(fuzz_worker, (p.Error, p.Pong), timeout=10)
    assert isinstance(second, p.Pong) and second.request_id == rid, f"{bad[:40]!r} gave {second}"


def test_the_fuzzed_tags_are_the_protocols_own():
    assert {"hello", "complete", "chat", "answer_turn", "open_conversation", "measure_text", "read_document", "calibrate"} <= COMMAND_TAGS
    assert {tag for tag, _ in COMMAND_FIELDS} == COMMAND_TAGS, "every command has a field to put a wrong value in"
    assert {"ready", "token_delta", "finished", "document_read"} <= EVENT_TAGS


def test_each_bad_frame_gets_one_error_and_the_worker_keeps_serving(fuzz_worker):
    counter["n"] = 0
    send_bad_frame_then_ping(fuzz_worker)
    assert counter["n"] >= 1000
    assert fuzz_worker.process.poll() is None
