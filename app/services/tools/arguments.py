"""A call's arguments read and checked against its tool's parameter schema before anything runs.

The model writes the arguments as JSON text; they must be an object that fits the tool's schema (its
required properties present, every value of the type it declares, and the schema's other rules,
checked by the reference JSON-schema validator). What does not fit is refused in one sentence that
says what is wrong, so the model can call again with arguments that fit. A schema the validator cannot
read (a server's mistake) checks nothing: the server then judges the arguments itself.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from app.services.tools.tool_problem import ToolProblem
from app.services.tools.safe_text import one_line


def checked_arguments(tool: str, arguments: str, parameters: str) -> dict[str, Any]:
    """The call's arguments as a dict, checked against ``parameters`` (the schema's JSON text; "": the
    tool takes none).

    Raises:
        ToolProblem: They are not a JSON object or do not fit the schema.
    """
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        raise ToolProblem(_refusal(tool, "they are not valid JSON")) from None
    if not isinstance(value, dict):
        raise ToolProblem(_refusal(tool, "they are not a JSON object of named values"))
    if problem := _schema_problem(value, parameters):
        raise ToolProblem(_refusal(tool, problem))
    return value


def _refusal(tool: str, reason: str) -> str:
    return f"The tool '{tool}' was called with arguments that do not fit it ({reason}), so it did not run."


def _schema_problem(value: dict[str, Any], parameters: str) -> str:
    """What is wrong with ``value`` for the schema, in a few words; "" when it fits."""
    try:
        schema = json.loads(parameters) if parameters.strip() else {"type": "object"}
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
        error = jsonschema.exceptions.best_match(validator_class(schema).iter_errors(value))
    except (ValueError, TypeError, jsonschema.exceptions.SchemaError, RecursionError):
        return ""
    if error is None:
        return ""
    return _described(error)


def _described(error: jsonschema.exceptions.ValidationError) -> str:
    where = ".".join(str(part) for part in error.absolute_path)
    if error.validator == "required":
        given = error.instance if isinstance(error.instance, dict) else {}
        missing = [name for name in error.validator_value if name not in given]
        names = ", ".join(f"'{one_line(str(name), 60)}'" for name in missing) or "a required value"
        return f"{names} {'is' if len(missing) <= 1 else 'are'} missing" + (f" in '{where}'" if where else "")
    if error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, str) else " or ".join(error.validator_value)
        return f"'{one_line(where, 60)}' should be {_TYPE_WORDS.get(wanted, wanted)}"
    if error.validator == "additionalProperties" and not where:
        return one_line(error.message, 160)
    prefix = f"'{one_line(where, 60)}': " if where else ""
    return prefix + one_line(error.message, 160)


_TYPE_WORDS = {"integer": "a whole number", "number": "a number", "string": "text", "boolean": "true or false",
               "array": "a list", "object": "an object", "null": "null"}
