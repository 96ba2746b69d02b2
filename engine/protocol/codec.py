"""Messages as msgpack bytes, and back: a command is checked on the way in (the worker) and before
it goes out (the app, :func:`check_command`), with one :class:`InvalidCommand` naming the field."""

from __future__ import annotations

import msgspec

from engine.protocol.command_check import InvalidCommand, out_of_range
from engine.protocol.commands import ANSWERS, Answer, Command
from engine.protocol.events import Event
from engine.protocol.limits import sampling_problem

_encoder = msgspec.msgpack.Encoder()
_command_decoder = msgspec.msgpack.Decoder(Command)
_event_decoder = msgspec.msgpack.Decoder(Event)
_COMMANDS = {cls.__struct_config__.tag: cls for cls in Command.__args__}


def encode(message: msgspec.Struct) -> bytes:
    return _encoder.encode(message)


def decode_command(payload: bytes) -> Command:
    """The command in ``payload``. Raises :class:`InvalidCommand` (a ``msgspec.ValidationError``)
    naming the field and its range when a value is out of range, and ``msgspec.DecodeError`` /
    ``msgspec.ValidationError`` saying what is wrong with a malformed message."""
    try:
        command = _command_decoder.decode(payload)
    except msgspec.ValidationError as exc:
        raise (out_of_range(exc, payload, _COMMANDS) or exc) from None
    if isinstance(command, ANSWERS):
        _check_answer(command)
    return command


def check_command(command: Command) -> Command:
    """``command`` as the worker will read it: the app calls this before sending, so a value out of
    range is refused here with the same :class:`InvalidCommand` the worker would answer with."""
    return decode_command(encode(command))


def _check_answer(command: Answer) -> None:
    """What a type cannot say: each sampling value's range, and a draft model's path."""
    kind = command.__struct_config__.tag
    spec = command.sampling
    for name in spec.__struct_fields__:
        value = getattr(spec, name)
        if (problem := sampling_problem(name, value)) is not None:
            raise InvalidCommand(problem, kind=kind, field=f"sampling.{name}", value=value, allowed=None,
                                 request_id=command.request_id)
    if command.draft.kind == "model" and not command.draft.path:
        raise InvalidCommand("a draft model needs the path of its .gguf file (model:PATH)", kind=kind,
                             field="draft.path", value=command.draft.path, allowed=None,
                             request_id=command.request_id)


def decode_event(payload: bytes) -> Event:
    return _event_decoder.decode(payload)
