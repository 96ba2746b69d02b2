"""Noticing what other programs change while the window is open.

The database and the models folder are the truth, and the window is not their only writer:
``hearth models import`` registers a model, a file copied into the models folder is one, ``hearth send``
adds to a conversation, ``hearth serve`` starts some. Every :data:`POLL_MS` the store thread reads a
small stamp of each (the models table's count and times, the models folder's ``.gguf`` files with
their sizes and times, the conversations' count and newest change) and the window refreshes the list
whose stamp changed: the model picker and the Models page, or the conversation list (which keeps the
open conversation selected). The stamp costs two indexed aggregates and a folder listing; nothing is
refreshed while nothing changed. The window's own changes move the stamps too, which costs one
refresh of a list the window already shows as it is.

Settings too (:meth:`OutsideChanges.watch_settings`): ``settings.json``'s size and time, read on the GUI
thread (one ``stat``); when they move, the window reads the file again and takes what changed
(:meth:`ui.window_dialogs.WindowDialogs.settings_changed_outside`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QTimer

from ui.store_thread import StoreThread

POLL_MS = 2000


class OutsideChanges(QObject):
    """Polls the stamps; calls ``models_changed`` or ``conversations_changed`` when one moves."""

    def __init__(self, store: StoreThread, models_dir: Path, *, models_changed: Callable[[], None],
                 conversations_changed: Callable[[], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store, self.models_dir = store, models_dir
        self.models_changed, self.conversations_changed = models_changed, conversations_changed
        self._stamps: tuple | None = None
        self._asking = False
        self._settings: tuple[Path, Callable[[], None]] | None = None
        self._settings_stamp: tuple | None = None
        self.timer = QTimer(self, interval=POLL_MS)
        self.timer.timeout.connect(self.check)
        self.timer.start()
        self.check()  # the stamps as the window starts: a change from now on is noticed

    def watch_settings(self, path: Path, changed: Callable[[], None]) -> None:
        """Call ``changed`` when the settings file at ``path`` is written by anyone (the window's own
        saves too: the callback tells a change from a file that says what the window has)."""
        self._settings = (path, changed)
        self._settings_stamp = _file_stamp(path)

    def check(self) -> None:
        """Ask the store thread for the stamps (one question at a time); look at the settings file."""
        self._check_settings()
        if self._asking:
            return
        self._asking = True
        models_dir = self.models_dir
        self.store.submit(lambda store: (_models_stamp(store.db, models_dir), _conversations_stamp(store.db)),
                          self._compare, lambda _message: self._done())

    def _compare(self, stamps: tuple) -> None:
        self._done()
        before, self._stamps = self._stamps, stamps
        if before is None:
            return
        if stamps[0] != before[0]:
            self.models_changed()
        if stamps[1] != before[1]:
            self.conversations_changed()

    def _done(self) -> None:
        self._asking = False

    def _check_settings(self) -> None:
        if self._settings is None:
            return
        path, changed = self._settings
        stamp = _file_stamp(path)
        if stamp != self._settings_stamp:
            self._settings_stamp = stamp
            changed()


def _file_stamp(path: Path) -> tuple | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


def _models_stamp(db, models_dir: Path) -> tuple:
    registered = tuple(db.execute("SELECT count(*), total(added_at), total(size_bytes) FROM models").fetchone())
    try:
        files = tuple(sorted((entry.name, entry.stat().st_size, entry.stat().st_mtime_ns)
                             for entry in os.scandir(models_dir) if entry.name.endswith(".gguf")))
    except OSError:  # no models folder (yet)
        files = ()
    return registered, files


def _conversations_stamp(db) -> tuple:
    return tuple(db.execute("SELECT count(*), max(updated_at), total(length(title)) FROM conversations").fetchone())
