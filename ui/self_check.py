"""Ask the real window one question and report the answer: how an installed app proves it works.

With ``HEARTH_SELF_CHECK_QUESTION`` set, the app opens as usual (offscreen in CI), waits for its
worker to load the model, types the question into the composer and sends it as a user would, and
when the answer is stored prints one JSON line to stdout, ``{"ok", "question", "answer",
"finish_reason", "model", "error", "window_shown_ms"}`` (from the process's start to the window on
screen with the event loop running), then quits (status 0 when an answer came, 1 otherwise). The
bundle's smoke test uses it: nothing in the app behaves differently, the check only drives it.
"""

from __future__ import annotations

import json
import sys
import time

import psutil

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

from ui.main_window import MainWindow

SELF_CHECK_ENV = "HEARTH_SELF_CHECK_QUESTION"
SELF_CHECK_TIMEOUT_ENV = "HEARTH_SELF_CHECK_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 300.0


class SelfCheck(QObject):
    def __init__(self, window: MainWindow, question: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__(window)
        self.window, self.question = window, question
        self._asked = False
        self._done = False
        self.window_shown_ms: float | None = None
        QTimer.singleShot(0, self._shown)  # the first turn of the event loop, after window.show()
        controller = window.controller
        controller.model_loaded.connect(self._ask)
        controller.turn_finished.connect(self._answered)
        controller.model_failed.connect(lambda text: self._report(False, error=f"the model did not load: {text}"))
        controller.crash_loop.connect(lambda text: self._report(False, error=f"the worker keeps crashing: {text}"))
        QTimer.singleShot(int(timeout_s * 1000),
                          lambda: self._report(False, error=f"no answer within {timeout_s:g} s"))

    def _shown(self) -> None:
        self.window_shown_ms = (time.time() - psutil.Process().create_time()) * 1000

    def _ask(self, _loaded) -> None:
        if self._asked:
            return
        self._asked = True
        self.window.composer.edit.setPlainText(self.question)
        self.window.composer.send_button.click()

    def _answered(self, turn) -> None:
        finished = turn.finished
        reason = finished.finish_reason if finished is not None else "error"
        error = "; ".join(turn.errors) or (str(turn.dead) if turn.dead is not None else "")
        self._report(bool(turn.text.strip()) and not error, answer=turn.text, finish_reason=reason,
                     model=turn.model, error=error)

    def _report(self, ok: bool, **fields) -> None:
        if self._done:
            return
        self._done = True
        line = {"ok": ok, "question": self.question, "answer": "", "finish_reason": "", "model": "", "error": "",
                "window_shown_ms": self.window_shown_ms, **fields}
        print(json.dumps(line), flush=True)
        if not ok:
            print(f"hearth: self-check failed: {line['error'] or 'an empty answer'}", file=sys.stderr, flush=True)
        QApplication.instance().exit(0 if ok else 1)
