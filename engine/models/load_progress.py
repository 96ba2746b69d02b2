"""What a model's load is doing, for the loading bar: one fraction over the whole load, and the step.

A load is a few steps of very different lengths, and a bar that sits at 0 % while the slow one runs
looks stuck. So each step (:data:`STEPS`) owns a span of the bar and reports inside it:

* ``prepare``: only the built-in model's first start, converting it for faster reading
  (:mod:`engine.models.embedded_layout`), by tensors converted;
* ``load``: llama.cpp reading the file, by its own progress callback;
* ``context``: making the context (the memory the conversation is read into);
* ``warm``: one small batch through the model, so the weights are in memory and the first
  question is not the one that waits for them.

The spans are shares of time measured on the built-in model (``docs/performance.md``); a load
without the ``prepare`` step spreads the rest over the whole bar.
"""

from __future__ import annotations

from collections.abc import Callable

Send = Callable[[str, float], None]  # (step, fraction of the whole load)

STEP_SHOWN = 0.01  # a move of less than 1 % of the bar is not sent (llama.cpp reports every tensor)
STEPS = {"load": (0.0, 0.7), "context": (0.7, 0.85), "warm": (0.85, 1.0)}
STEPS_WITH_PREPARE = {"prepare": (0.0, 0.6), "load": (0.6, 0.85), "context": (0.85, 0.92), "warm": (0.92, 1.0)}


class LoadProgress:
    def __init__(self, send: Send) -> None:
        self.send = send
        self.steps = STEPS
        self.last = 0.0
        self._sent: tuple[str, float] | None = None

    def preparing(self, fraction: float) -> None:
        """The built-in model is being converted first (``fraction`` of it): that step gets its share."""
        self.steps = STEPS_WITH_PREPARE
        self.step("prepare", fraction)

    def step(self, name: str, fraction: float = 0.0) -> None:
        """``name`` is ``fraction`` (0..1) done; the bar never moves backwards."""
        low, high = self.steps[name]
        self.last = max(self.last, low + (high - low) * min(1.0, max(0.0, fraction)))
        if self._sent is None or self._sent[0] != name or self.last - self._sent[1] >= STEP_SHOWN:
            self._sent = (name, self.last)
            self.send(name, self.last)

    def reading(self, fraction: float) -> None:
        """llama.cpp's progress through the file; at its end, the context is being made."""
        self.step("load", fraction)
        if fraction >= 1.0:
            self.step("context")
