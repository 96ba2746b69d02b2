"""The window's network work for remote engines (a server's model list, a test), done off the GUI
thread.

(The window's client itself is a :class:`~app.engine_clients.remote.routing.RoutingClient` around the local
worker's, made in :mod:`app.surfaces.gui`: loading ``engine:NAME`` switches it to that remote engine, loading
a local model switches it back. It asks the :class:`~app.services.engines.EngineRegistry` for the
engine at load time, so an engine added or edited in Settings → Engines is used as saved, with its
key read from where it is kept.)

:class:`RemoteWork` runs the blocking calls of :mod:`app.engine_clients.remote.probe` on threads of their own
(through :class:`~ui.background.Background`) and hands back their results, or the sentence a
:class:`~app.engine_clients.remote.errors.RemoteError` carries, on the GUI thread.
"""

from __future__ import annotations

from collections.abc import Callable

from app.services.engines import EngineProblem
from app.engine_clients.remote.errors import RemoteError
from app.engine_clients.remote.probe import ProbeResult, list_models, probe
from app.engine_clients.remote.spec import RemoteEngine
from ui.background import Background
from ui.remote_text import sentence


def problem_text(exc: Exception) -> str:
    """What a failed fetch or test says: the sentence of an error a user can act on, else the error
    named (a fault of Hearth's own, said rather than hidden)."""
    if isinstance(exc, (RemoteError, EngineProblem, ValueError)):
        return sentence(str(exc))
    return sentence(f"the engine could not be reached ({type(exc).__name__}: {exc})")


class RemoteWork:
    """Fetching a server's models and testing an engine, each on a thread of its own."""

    def __init__(self) -> None:
        self.background = Background()

    @property
    def running(self) -> int:
        return self.background.running

    def fetch_models(self, engine: RemoteEngine, on_done: Callable[[list], None],
                     on_error: Callable[[str], None]) -> None:
        """``on_done([ServerModel, ...])`` with the server's models, or ``on_error(sentence)``."""
        self.background.run(lambda: list_models(engine), on_done, lambda exc: on_error(problem_text(exc)))

    def test(self, engine: RemoteEngine, on_done: Callable[[ProbeResult], None], timeout: float = 30) -> None:
        """``on_done(ProbeResult)``: reachability, the key, the model list and one short answer."""

        def failed(exc: Exception) -> None:
            on_done(ProbeResult(ok=False, error=problem_text(exc)))

        self.background.run(lambda: probe(engine, timeout=timeout), on_done, failed)
