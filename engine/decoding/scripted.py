"""Test-only: answers written from a script, for what a random-weight model never writes on its own.

``HEARTH_TEST_SCRIPTED_ANSWERS=FILE`` (a JSON list of strings) makes the worker's N-th answer the
N-th string, token for token (read with its control tokens, as the model would write them), then the
end of generation; answers past the list's end are the model's own. The model still reads every
prompt and decodes every token into its state: only the choice is taken from the script, through the
same mask a constraint uses (engine.decoding.constraint), so drafting, snapshots, the text stream and
the tool-call reader all run as they do for a real answer. Unset, this costs one dictionary lookup per
answer.
"""

from __future__ import annotations

import json
import os

import numpy as np

from engine.backends.backend import ModelBackend
from engine.decoding.sampling import SamplingParams

SCRIPT_ENV = "HEARTH_TEST_SCRIPTED_ANSWERS"
_answered = [0]  # answers this process has written under the script


class ScriptedAnswer:
    """A mask that allows, at each choice, only the script's next token."""

    masking = True

    def __init__(self, tokens: list[int], end: int) -> None:
        self.tokens, self.end, self.at = tokens, end, 0

    def _next(self) -> int:
        return self.tokens[self.at] if self.at < len(self.tokens) else self.end

    def waiting(self, penalized: np.ndarray) -> np.ndarray:
        return np.asarray(penalized, dtype=np.float64)

    def candidates(self, penalized: np.ndarray, params: SamplingParams) -> tuple[np.ndarray, np.ndarray]:
        token = self._next()
        value = float(penalized[token]) if np.isfinite(penalized[token]) else 0.0
        return np.array([token], dtype=np.int64), np.array([value], dtype=np.float64)

    def took(self, token: int) -> None:
        if token != self._next():
            raise RuntimeError(f"the scripted answer wanted token {self._next()}, not {token}")
        self.at += 1

    def close(self) -> None:
        pass


def scripted_answer(model: ModelBackend):
    """A maker of the next scripted answer's mask, or None (no script, or the script is used up)."""
    path = os.environ.get(SCRIPT_ENV)
    if not path:
        return None
    with open(path, encoding="utf-8") as file:
        script = json.load(file)
    if _answered[0] >= len(script):
        return None
    text = script[_answered[0]]
    _answered[0] += 1
    tokens = model.tokenize(text, add_special=False, parse_special=True)
    return lambda: ScriptedAnswer(tokens, model.eos)
