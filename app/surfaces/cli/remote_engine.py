"""A remote engine for ``--engine NAME``: the registry's engine with its key, opened as a client
with its model chosen, and the errors of both as the one line a command prints."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import msgspec

from app.surfaces.cli.terminal_text import visible
from app.surfaces.cli.user_error import UserError
from app.services.engines import EngineNotFound, EngineProblem, EngineRegistry
from engine import protocol as p
from app.engine_clients.client import EngineError
from app.engine_clients.remote.client import RemoteClient
from app.engine_clients.remote.spec import RemoteEngine

LEAVES = "messages leave this computer"


def open_registry() -> EngineRegistry:
    """The app's registry; a file it had to set aside is said on stderr."""
    registry = EngineRegistry()
    for problem in registry.problems:
        print(f"hearth: warning: {visible(problem)}", file=sys.stderr)
    return registry


def engine_error(exc: EngineProblem) -> UserError:
    return UserError(str(exc), kind="engine_not_found" if isinstance(exc, EngineNotFound) else "engine")


def remote_engine(name: str) -> RemoteEngine:
    """The engine ``name`` with its key, or the :class:`UserError` saying why it cannot be used."""
    try:
        return open_registry().remote_engine(name)
    except EngineProblem as exc:
        raise engine_error(exc) from exc


@contextmanager
def remote_engine_for(name: str, model: str | None, context: int | None
                      ) -> Iterator[tuple[RemoteClient, p.ModelLoaded]]:
    """A client of the remote engine ``name`` with ``model`` chosen (None or "default": the engine's
    own); ``context`` tokens when given (else the engine's setting, else what the server says).
    Says once on stderr that messages leave this computer."""
    engine = remote_engine(name)
    if context:
        engine = msgspec.structs.replace(engine, context=context)
    client = RemoteClient(engine)
    try:
        client.start()
        client.send(p.SetTelemetry(interval_ms=0))
        loaded = client.load_model(model or "")
    except EngineError as exc:
        client.close(mode="abort")
        raise UserError(str(exc), kind=exc.code) from exc
    print(f"hearth: answered on {visible(engine.name)}: {LEAVES}", file=sys.stderr, flush=True)
    try:
        yield client, loaded
    finally:
        client.close(mode="abort")
