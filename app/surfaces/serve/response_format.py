"""The API's ``response_format``: which shape an answer must have, as the engine's constraint.

OpenAI's three forms are taken: ``{"type": "text"}`` (any text, as without it),
``{"type": "json_object"}`` (any JSON object) and ``{"type": "json_schema", "json_schema": {"name": ...,
"schema": {...}, "strict": ...}}`` (JSON that matches the schema). The worker holds decoding to it token
by token, so the answer parses and matches whatever the model would have written. A schema asking for
something Hearth cannot hold an answer to (``minimum``, say) is refused by name with a 400, never
ignored: :func:`engine.protocol.constraint.constraint_from_schema_text` says what and where.
"""

from __future__ import annotations

import json
from typing import Any

from engine import protocol as p
from app.surfaces.serve.schema import RequestRefused

FIELD = "response_format"
TYPES = ("text", "json_object", "json_schema")


def output_constraint(response_format: dict[str, Any] | None) -> p.OutputConstraint | None:
    """The constraint ``response_format`` asks for (None: any text); :class:`RequestRefused` naming
    what in it is not one Hearth can hold an answer to."""
    if response_format is None:
        return None
    kind = response_format.get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object":
        return p.OutputConstraint(kind="json")
    if kind != "json_schema":
        raise RequestRefused(f"'response_format' type {_shown(kind)} is not supported; use one of "
                             f"{', '.join(TYPES)}", FIELD)
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise RequestRefused("'response_format' of type json_schema needs a 'json_schema' object with the "
                             "schema under 'schema'", FIELD)
    schema, name = spec.get("schema"), spec.get("name", "")
    if not isinstance(schema, dict):
        raise RequestRefused("'response_format.json_schema.schema' must be a JSON schema (an object)", FIELD)
    if not isinstance(name, str):
        raise RequestRefused("'response_format.json_schema.name' must be a string", FIELD)
    try:
        return p.constraint_from_schema_text(json.dumps(schema, ensure_ascii=False), name)
    except ValueError as exc:
        raise RequestRefused(f"'response_format.json_schema.schema': {exc}", FIELD) from None


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."
