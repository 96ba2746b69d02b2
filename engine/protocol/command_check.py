"""A command with a value outside its field's range, refused in words that name the field and the range.

The ranges live in the protocol's struct annotations (``Annotated[int, msgspec.Meta(ge=..., le=...)]``,
see :mod:`engine.protocol`), which msgspec checks when a frame is decoded. msgspec reports
``Expected `int` <= 14 - at `$.draft_max```; :func:`out_of_range` turns that into
``draft_max must be between 1 and 14; got 1000`` by following the error's path through the
command's type (for the range) and through the same message decoded without types (for the value
and the request id). The app checks a command by the same decoder before sending it
(:func:`engine.protocol.check_command`), so the CLI, the GUI and the worker refuse the same values
with the same words.

Only values of the right type outside their range are explained here. A wrong type, a missing
field or an unknown kind is a malformed message (a bug in the sender, not a user's input): the
worker answers it as such, with msgspec's own description.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from msgspec import inspect as mi

_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_STEP = re.compile(r"\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)|\[(?P<index>\d+)\]")


class InvalidCommand(msgspec.ValidationError):
    """A command refused because a value is outside its field's range.

    Attributes:
        kind: The command's tag ("load_model", "generate", ...).
        field: The value's place: "draft_max", "sampling.top_p", "lengths[2]".
        value: The value that was sent.
        allowed: The range in words ("between 1 and 14"); None when the message says it otherwise.
        request_id: The command's request id, when it has one.
    """

    def __init__(self, message: str, *, kind: str, field: str, value: Any, allowed: str | None,
                 request_id: str | None) -> None:
        super().__init__(message)
        self.kind = kind
        self.field = field
        self.value = value
        self.allowed = allowed
        self.request_id = request_id


def refusal(kind: str, field: str, value: Any, allowed: str, request_id: str | None) -> InvalidCommand:
    return InvalidCommand(f"{field} must be {allowed}; got {shown(value)}", kind=kind, field=field, value=value,
                          allowed=allowed, request_id=request_id)


def shown(value: Any) -> str:
    """A value as a message quotes it (a long list by its length)."""
    if isinstance(value, (list, dict)):
        return f"{len(value)} values"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def out_of_range(error: msgspec.ValidationError, payload: bytes, commands: dict[str, type]) -> InvalidCommand | None:
    """``error`` (from decoding ``payload`` as one of ``commands``, tag -> struct) in words, when it is
    a value outside its field's range; None when the message is malformed in another way."""
    try:
        raw = msgspec.msgpack.decode(payload)
    except msgspec.DecodeError:
        return None
    if not isinstance(raw, dict) or raw.get("kind") not in commands:
        return None
    rid = raw.get("request_id")
    rid = rid if isinstance(rid, str) else None
    return explain(error, raw, commands[raw["kind"]], kind=raw["kind"], request_id=rid)


def explain(error: msgspec.ValidationError, raw: Any, struct_type: type, *, kind: str = "",
            request_id: str | None = None) -> InvalidCommand | None:
    """``error`` (from decoding ``raw``, the same message decoded without types, as ``struct_type``)
    in words naming the field and its range, when it is a value outside that range; None otherwise.
    The local API explains a request body's numbers with it, as the worker explains a command's."""
    match = _PATH.search(str(error))
    if match is None:
        return None
    steps = [(m["name"], m["index"]) for m in _STEP.finditer(match["path"])]
    found = _follow(mi.type_info(struct_type), raw, steps)
    if found is None:
        return None
    field_type, value = found
    allowed = _allowed(field_type, value)
    if allowed is None:
        return None
    return refusal(kind, _field_name(steps), value, allowed, request_id)


def error_field(error: msgspec.ValidationError) -> str | None:
    """The field a decoding error is about ("messages[0].content"), None for the whole message."""
    match = _PATH.search(str(error))
    if match is None:
        return None
    return _field_name([(m["name"], m["index"]) for m in _STEP.finditer(match["path"])]) or None


def field_range(struct_type: type, field: str) -> str | None:
    """The range of ``struct_type``'s field at ``field`` (a path as :func:`error_field` gives it) in
    words, when it has one; for a value too large to be read at all (JSON's 1e400)."""
    field_type: mi.Type = mi.type_info(struct_type)
    for m in _STEP.finditer("." + field if not field.startswith("[") else field):
        field_type = _not_none(field_type)
        if m["name"] is not None and isinstance(field_type, mi.StructType):
            found = next((f for f in field_type.fields if f.encode_name == m["name"]), None)
            if found is None:
                return None
            field_type = found.type
        elif m["index"] is not None and isinstance(field_type, mi.ListType):
            field_type = field_type.item_type
        else:
            return None
    field_type = _not_none(field_type)
    return _bounds(field_type) if isinstance(field_type, (mi.IntType, mi.FloatType)) else None


def _not_none(field_type: mi.Type) -> mi.Type:
    """``X | None`` as ``X``."""
    if isinstance(field_type, mi.UnionType):
        others = [t for t in field_type.types if not isinstance(t, mi.NoneType)]
        if len(others) == 1:
            return others[0]
    return field_type


def _field_name(steps: list[tuple[str | None, str | None]]) -> str:
    parts = [f".{name}" if name is not None else f"[{index}]" for name, index in steps]
    return "".join(parts).removeprefix(".")


def _follow(field_type: mi.Type, value: Any, steps: list[tuple[str | None, str | None]]) -> tuple[mi.Type, Any] | None:
    """The type and value at the end of the error's path; None if the path does not fit them."""
    for name, index in steps:
        field_type = _without_none(field_type, value)
        if name is not None:
            if not isinstance(field_type, mi.StructType) or not isinstance(value, dict) or name not in value:
                return None
            field = next((f for f in field_type.fields if f.encode_name == name), None)
            if field is None:
                return None
            field_type, value = field.type, value[name]
        else:
            position = int(index)
            if not isinstance(field_type, mi.ListType) or not isinstance(value, list) or position >= len(value):
                return None
            field_type, value = field_type.item_type, value[position]
    return _without_none(field_type, value), value


def _without_none(field_type: mi.Type, value: Any) -> mi.Type:
    """``X | None`` as ``X`` when the value is not None."""
    if isinstance(field_type, mi.UnionType) and value is not None:
        others = [t for t in field_type.types if not isinstance(t, mi.NoneType)]
        if len(others) == 1:
            return others[0]
    return field_type


def _allowed(field_type: mi.Type, value: Any) -> str | None:
    """The field's range in words, if ``value`` has the field's type (so the range is what it breaks)."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(field_type, mi.IntType) and is_number and isinstance(value, int):
        return _bounds(field_type)
    if isinstance(field_type, mi.FloatType) and is_number:
        return _bounds(field_type)
    if isinstance(field_type, mi.LiteralType) and isinstance(value, (str, int)):
        return "one of " + ", ".join(repr(v) for v in field_type.values)
    if isinstance(field_type, mi.ListType) and isinstance(value, list):
        return _length(field_type)
    return None


def _bounds(t: mi.IntType | mi.FloatType) -> str | None:
    low = f"{t.ge}" if t.ge is not None else (f"above {t.gt}" if t.gt is not None else None)
    high = f"{t.le}" if t.le is not None else (f"below {t.lt}" if t.lt is not None else None)
    if t.ge is not None and t.le is not None:
        return f"between {t.ge} and {t.le}"
    words = [w for w in (f"at least {low}" if t.ge is not None else low,
                         f"at most {high}" if t.le is not None else high) if w]
    return " and ".join(words) or None


def _length(t: mi.ListType) -> str | None:
    if t.min_length is not None and t.max_length is not None:
        return f"a list of {t.min_length} to {t.max_length} values"
    if t.max_length is not None:
        return f"a list of at most {t.max_length} values"
    if t.min_length is not None:
        return f"a list of at least {t.min_length} values"
    return None
