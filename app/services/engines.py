"""The remote engines the user added: ``<config dir>/engines.json`` (next to ``settings.json``).

Design:

* One :class:`EngineEntry` per engine: its name, base URL, model, context and *where its API key
  is kept* (``key_kind``, see :mod:`app.services.engine_keys`). The key itself never enters this
  file; :meth:`EngineRegistry.remote_engine` fills it in when the engine is used.
* The file is read on every call, so a window and a command see each other's changes; it is
  written atomically and privately (0600), as ``settings.json`` is.
* A file that cannot be read as a list of engines is set aside as ``engines.json.broken`` (the
  user's bytes are kept) and reported in :attr:`EngineRegistry.problems`; Hearth goes on with none.
* Names follow :func:`app.engine_clients.remote.spec.engine_name_problem`; addresses :func:`check_url`, at
  ``add`` and again at each use (a hand-edited file, or a name that now resolves elsewhere).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import msgspec

from app.services.engine_keys import KeyKind, KeyProblem, KeyVault, key_problem, secret_store
from app.services.paths import user_paths
from app.services.settings import move_aside, write_atomically
from app.engine_clients.remote.spec import RemoteEngine, UrlProblem, check_url, control_problem, engine_name_problem
from model_store.own_files import read_own_bytes

SCHEMA_VERSION = 1
ENGINES_FILE = "engines.json"
LIST_HINT = "`hearth engines list` shows the engines there are"

__all__ = ["EngineEntry", "EngineNotFound", "EngineProblem", "EngineRegistry", "secret_store"]


class EngineProblem(Exception):
    """An engine cannot be added, found or used; the message says why and what to do."""


class EngineNotFound(EngineProblem):
    pass


@dataclass(frozen=True)
class EngineEntry:
    """One remote engine as saved. ``key_kind``: where its API key is (none, keyring, file, env,
    session); ``key_env``: the environment variable it is read from when ``key_kind`` is env."""

    name: str
    url: str
    model: str = ""  # the server's model id; "" = the first one it lists
    context: int = 0  # tokens; 0 = what the server says
    key_kind: KeyKind = "none"
    key_env: str = ""


class _EnginesFile(msgspec.Struct):
    schema_version: int = SCHEMA_VERSION
    engines: list[EngineEntry] = []


def _entries_problem(entries: list[EngineEntry]) -> str | None:
    names = [entry.name.lower() for entry in entries]
    for entry in entries:
        if (problem := engine_name_problem(entry.name) or control_problem("model id", entry.model)) is not None:
            return problem
        if entry.context < 0:
            return f"engine {entry.name} has a negative context ({entry.context})"
    duplicate = next((name for name in names if names.count(name) > 1), None)
    return None if duplicate is None else f"the name {duplicate} is used twice"


class EngineRegistry:
    """The remote engines of one config folder (by default the app's, as ``settings.json``)."""

    def __init__(self, config_dir: Path | None = None) -> None:
        self.config_dir = Path(config_dir) if config_dir is not None else user_paths().ensure().config
        self.path = self.config_dir / ENGINES_FILE
        self.keys = KeyVault(self.config_dir)
        self.problems: list[str] = []  # what was repaired when the file was read (a file set aside)
        self.entries()

    # -- reading ---------------------------------------------------------------------------------

    def entries(self) -> list[EngineEntry]:
        """The engines in the order they were added."""
        try:
            document = msgspec.json.decode(read_own_bytes(self.path), type=_EnginesFile)  # NotOwnFile: raised
            problem = _entries_problem(document.engines)
        except FileNotFoundError:
            return []
        except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            problem = getattr(exc, "strerror", None) or str(exc)
        if problem is None:
            return document.engines
        self._set_aside(problem)
        return []

    def _set_aside(self, problem: str) -> None:
        moved = move_aside(self.path)
        kept = f"your file was kept as {moved}" if moved else "adding an engine will replace the file"
        self.problems.append(f"Could not read the remote engines from {self.path}: {problem}. No remote engine is "
                             f"set up now and {kept}; add them again with `hearth engines add`.")

    def get(self, name: str) -> EngineEntry:
        """The engine called ``name`` (names are matched ignoring case); raises :class:`EngineNotFound`."""
        for entry in self.entries():
            if entry.name.lower() == name.lower():
                return entry
        raise EngineNotFound(f"there is no remote engine called {name!r}; {LIST_HINT}")

    def remote_engine(self, name: str) -> RemoteEngine:
        """The engine as a client needs it, with its address checked again and its key filled in
        from where it is kept; raises :class:`EngineProblem` saying what to do when it cannot be."""
        entry = self.get(name)
        try:
            url, _warning = check_url(entry.url)
            key = self.keys.read(entry.name, entry.key_kind, entry.key_env)
        except (UrlProblem, KeyProblem) as exc:
            raise EngineProblem(f"engine {entry.name}: {exc}") from exc
        return RemoteEngine(entry.name, url, model=entry.model, context=entry.context, api_key=key)

    # -- changing --------------------------------------------------------------------------------

    def add(self, entry: EngineEntry, key: str | None = None, *, key_in_file: bool = False,
            replace: bool = False) -> str:
        """Save ``entry`` (its URL normalized) with ``key`` kept as well as this system allows; returns
        a sentence saying where the key went. ``entry.key_env`` names the variable ``key`` came from
        (used when the key cannot be kept); ``key_in_file``: the user agreed to a 0600 file when there
        is no secret store. ``replace`` lets an engine of the same name be replaced (its old key is
        forgotten; ``key`` None leaves the new one without a key). Raises :class:`EngineProblem`."""
        entry = self._checked(entry, key)
        existing = [e for e in self.entries() if e.name.lower() == entry.name.lower()]
        if existing and not replace:
            raise EngineProblem(f"there is already an engine called {existing[0].name}; remove it with "
                                f"`hearth engines rm {existing[0].name}` or add it again with --replace")
        for old in existing:
            self.keys.forget(old.name)
        said = "The engine has no API key."
        kind: KeyKind = "none"
        if key is not None:
            try:
                kind, said = self.keys.store(entry.name, key, in_file=key_in_file, env=entry.key_env)
            except KeyProblem as exc:
                raise EngineProblem(str(exc)) from exc
        entry = dataclasses.replace(entry, key_kind=kind, key_env=entry.key_env if kind == "env" else "")
        others = [e for e in self.entries() if e.name.lower() != entry.name.lower()]
        self._save([*others, entry])
        return said

    def remove(self, name: str) -> EngineEntry:
        """Remove the engine and forget its key wherever it was kept; returns what was removed."""
        entry = self.get(name)
        self._save([e for e in self.entries() if e.name != entry.name])
        self.keys.forget(entry.name)
        return entry

    def _checked(self, entry: EngineEntry, key: str | None) -> EngineEntry:
        problem = engine_name_problem(entry.name) or control_problem("model id", entry.model)
        if problem is None and entry.context < 0:
            problem = f"a context is 0 (what the server says) or more tokens, got {entry.context}"
        if problem is None and key is not None:
            problem = key_problem(key)
        if problem is not None:
            raise EngineProblem(problem)
        try:
            url, _warning = check_url(entry.url)
        except UrlProblem as exc:
            raise EngineProblem(str(exc)) from exc
        return dataclasses.replace(entry, url=url)

    def _save(self, entries: list[EngineEntry]) -> None:
        data = msgspec.json.format(msgspec.json.encode(_EnginesFile(engines=entries)), indent=2) + b"\n"
        try:
            write_atomically(self.path, data)
        except OSError as exc:
            raise EngineProblem(f"could not save the engines to {self.path}: {exc.strerror or exc}; free some "
                                "disk space or check the folder's permissions") from exc


def entry_json(entry: EngineEntry) -> dict:
    """An engine as ``hearth engines list --json`` prints it: where its key is kept, never the key."""
    fields = dataclasses.asdict(entry)
    kind, env = fields.pop("key_kind"), fields.pop("key_env")
    return {**fields, "key": f"env:{env}" if kind == "env" else kind}
