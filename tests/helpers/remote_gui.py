"""What the window's remote-engine tests share: a secret store of the test's own, and a scripted
engine that answers ``engine:NAME`` as a remote engine does.

:class:`RemoteScripted` is the scripted engine of :mod:`tests.fakes.engine_client` with the events a
:class:`~app.engine_clients.remote.routing.RoutingClient` delivers once a remote engine is loaded: a
``ModelLoaded`` whose devices are the engine (``app.engine_clients.remote.loading.model_loaded``, the real one),
a ``Finished`` carrying the :class:`~engine.protocol.RemoteReport`, and a failure that arrives after
part of the answer (a remote stream cut short). Everything else is the scripted engine's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import keyring
import keyring.backend
import keyring.backends.fail
import msgspec

from app.surfaces.gui import app_parts
from engine import protocol as p
from app.engine_clients.remote.loading import model_loaded
from app.engine_clients.remote.spec import REMOTE_PREFIX, RemoteEngine
from tests.fakes.engine_client import ScriptedEngine
from tests.helpers.gui import RunningApp
from ui.app import build_window

WAIT_MS = 3_000  # the scripted engine answers at once
SERVER_MODEL = "llama-70b"


@contextmanager
def secret_store(backend: keyring.backend.KeyringBackend | None) -> Iterator[None]:
    """Use ``backend`` as the system's secret store in this process (None: a system without one)."""
    previous = keyring.get_keyring()
    keyring.set_keyring(backend if backend is not None else keyring.backends.fail.Keyring())
    try:
        yield
    finally:
        keyring.set_keyring(previous)


class RemoteScripted(ScriptedEngine):
    """A scripted engine whose ``engine:NAME`` loads answer as that remote engine would."""

    def __init__(self, cached_tokens: int | None = 7, **options) -> None:
        super().__init__(**options)
        self.cached_tokens = cached_tokens

    @property
    def remote(self) -> str:
        """The remote engine loaded, "" for a local model."""
        path = self.loaded.facts.path if self.loaded is not None else ""
        return path.removeprefix(REMOTE_PREFIX) if path.startswith(REMOTE_PREFIX) else ""

    def _emit(self, event) -> None:
        if isinstance(event, p.ModelLoaded) and event.facts.path.startswith(REMOTE_PREFIX):
            name = event.facts.path.removeprefix(REMOTE_PREFIX)
            event = model_loaded(RemoteEngine(name, "http://127.0.0.1:9/v1"), event.request_id, SERVER_MODEL,
                                 self.n_ctx)
            self.loaded = event
        elif isinstance(event, p.Finished) and self.remote:
            event = msgspec.structs.replace(event, devices=None, snapshot=None, remote=p.RemoteReport(
                engine=self.remote, model=SERVER_MODEL, prompt_tokens=event.timings.prompt_n,
                cached_tokens=self.cached_tokens))
        super()._emit(event)

    def _refuse(self, command, code, message) -> None:
        """A failure after the pieces scripted with it, as a remote stream cut short sends them."""
        if isinstance(command, p.ANSWERS):
            self._stream(command, getattr(self, "_pieces_before_error", ()))
        super()._refuse(command, code, message)

    def _react(self, command, step) -> None:
        self._pieces_before_error = step.pieces if step.error is not None else ()
        super()._react(command, step)


def start_window(qtbot, client, registry=None) -> RunningApp:
    """The window as ``python -m app`` builds it, on ``client``; the engines of ``registry`` (else
    the test's config folder)."""
    parts = app_parts()
    window = build_window(replace(parts, make_client=lambda: client, engines=registry or parts.engines))
    qtbot.addWidget(window)  # closed (which stops the bridge and the store thread) when the test ends
    window.show()
    app = RunningApp(qtbot, window, wait_ms=WAIT_MS if isinstance(client, ScriptedEngine) else 0)
    window.controller.turn_finished.connect(app.finished_turns.append)
    return app


def choose(app: RunningApp, ref: str) -> None:
    """Pick ``ref`` in the model picker as the user does."""
    combo = app.window.model_picker.combo
    index = combo.findData(ref)
    assert index >= 0, f"{ref} is not in the picker"
    combo.setCurrentIndex(index)
    combo.activated.emit(index)
