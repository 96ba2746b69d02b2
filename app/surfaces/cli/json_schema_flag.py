"""``--json-schema FILE`` on ``generate`` and ``send``: the answer is JSON that matches the schema.

The file is read here, checked by the engine's own rules (:func:`engine.protocol.constraint_from_schema_text`:
what Hearth cannot hold an answer to is refused by name, never ignored) and sent as the request's
constraint; the worker holds decoding to it token by token. Every failure is one line naming the file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from engine import protocol as p
from app.surfaces.cli.user_error import UserError

FLAG = "--json-schema"


def add_json_schema_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(FLAG, type=Path, default=None, metavar="FILE", dest="json_schema",
                        help="answer with JSON that matches the JSON schema in FILE (the answer is held to it "
                             "as it is written)")


def constraint_from_args(args: argparse.Namespace) -> p.OutputConstraint | None:
    """The constraint ``--json-schema`` asks for (None without the flag); :class:`UserError` for a file
    that cannot be read or a schema Hearth cannot hold an answer to."""
    path: Path | None = getattr(args, "json_schema", None)
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            data = file.read(p.MAX_SCHEMA_BYTES + 1)
    except FileNotFoundError:
        raise _refused(path, "no such file") from None
    except IsADirectoryError:
        raise _refused(path, "is a folder; give the schema's file") from None
    except OSError as exc:
        raise _refused(path, f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > p.MAX_SCHEMA_BYTES:
        raise _refused(path, f"is larger than {p.MAX_SCHEMA_BYTES // 1024} KiB, the most Hearth takes for a schema")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _refused(path, "is not UTF-8 text; save the schema as UTF-8") from None
    try:
        return p.constraint_from_schema_text(text)
    except ValueError as exc:
        raise _refused(path, str(exc)) from None


def _refused(path: Path, why: str) -> UserError:
    return UserError(f"{FLAG} {path}: {why}", kind="invalid_value", field="json_schema")
