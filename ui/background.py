"""Run a slow function (reading a file, extracting a PDF) on its own thread; hand the result back
to the GUI thread as a queued signal."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot


class Background(QObject):
    _finished = Signal(object, object)  # (callback, argument), delivered on the GUI thread

    def __init__(self) -> None:
        super().__init__()
        self._finished.connect(self._deliver)
        self.running = 0

    def run(self, fn: Callable[[], Any], on_done: Callable[[Any], None],
            on_error: Callable[[Exception], None]) -> None:
        """Call ``fn()`` on a new thread; then ``on_done(result)`` or ``on_error(exception)`` here."""
        self.running += 1

        def work() -> None:
            try:
                result = fn()
            except Exception as exc:  # handed to on_error, which decides what the user sees
                self._finished.emit(on_error, exc)
            else:
                self._finished.emit(on_done, result)

        threading.Thread(target=work, name="background", daemon=True).start()

    @Slot(object, object)
    def _deliver(self, callback: Callable[[Any], None], argument: Any) -> None:
        self.running -= 1
        callback(argument)
