"""Reading a settings.json written by an earlier Hearth: what changed between schema versions.

Schema 1 wrote every sampling value, touched or not, so a user who never opened Settings carried
Hearth's shipped values of the day (a repeat penalty of 1.0, which let the built-in model loop).
From schema 2 a sampling field is saved only when the user set it; absent (``None`` in
:class:`app.services.settings.Settings`) it follows the model's own defaults
(:mod:`app.services.sampling_defaults`). So a schema-1 value equal to a default Hearth shipped
(:data:`SHIPPED_DEFAULTS`, from the history of ``engine/protocol``) counts as not set by the user; any
other value is the user's and is kept.
"""

from __future__ import annotations

from typing import Any

MODEL_SAMPLING = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n",
                  "dry_multiplier")  # the fields a model has defaults for
# Every default Hearth shipped for them (temperature 0.7, top-k 40, top-p 0.95, min-p 0.05 since the first
# version; the repeat penalty 1.0 until issue 51, then 1.1).
SHIPPED_DEFAULTS: dict[str, tuple[float, ...]] = {
    "temperature": (0.7,), "top_k": (40,), "top_p": (0.95,), "min_p": (0.05,), "repeat_penalty": (1.0, 1.1)}
FIRST_SCHEMA = 1  # a file without schema_version was written by the first Hearth


def migrate(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (a settings.json object) as the current schema reads it: from schema 1, the
    sampling values equal to a shipped default are dropped, so they follow the model."""
    version = document.get("schema_version", FIRST_SCHEMA)
    if not isinstance(version, int) or isinstance(version, bool) or version >= 2:
        return document
    return {name: value for name, value in document.items()
            if not (name in SHIPPED_DEFAULTS and _same(value, SHIPPED_DEFAULTS[name]))}


def _same(value: Any, shipped: tuple[float, ...]) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and any(value == s for s in shipped)
