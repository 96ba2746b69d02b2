"""Where the API keys of remote engines are kept, and nowhere else: never in ``engines.json`` or
``settings.json``, never printed.

A key goes, in this order of preference, to

* ``keyring``: the system's secret store (Keychain, Windows Credential Manager, Secret Service),
  as service ``hearth``, user ``engine:NAME``;
* ``file``: ``<config dir>/engine_keys.json`` (0600, in the 0700 config folder), only when there is
  no usable secret store and the user agreed to it;
* ``env``: nowhere: the key is read from an environment variable each time (``--api-key-env VAR``
  on a system without a secret store);
* ``session``: this process's memory only (the window, when there is no secret store and no
  agreement to a file): gone when Hearth quits.

:class:`KeyVault` stores, reads and forgets them for one config folder; which of the places an
engine's key is in is recorded as the engine's ``key_kind`` (see :mod:`app.services.engines`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import keyring
import keyring.backends.chainer
import keyring.backends.fail
import keyring.backends.null
import keyring.errors
import msgspec

from app.services.settings import move_aside, write_atomically

KeyKind = Literal["none", "keyring", "file", "env", "session"]
KEY_KINDS: tuple[str, ...] = ("none", "keyring", "file", "env", "session")
SERVICE = "hearth"
KEY_FILE = "engine_keys.json"
NO_STORE = "no secret store (a keychain, Credential Manager or Secret Service) was found on this system"

# Keys kept for this process only: (config folder, engine name) -> key.
_session_keys: dict[tuple[str, str], str] = {}


class KeyProblem(Exception):
    """A key could not be stored or found; the message says what happened and what to do."""


def keyring_user(name: str) -> str:
    return f"engine:{name}"


def secret_store() -> tuple[bool, str]:
    """Whether the system has a usable secret store: ``(True, its name)`` or ``(False, why not)``."""
    try:
        backend = keyring.get_keyring()
    except Exception as exc:  # a broken keyring configuration: it says why
        return False, f"the system's secret store could not be opened ({exc})"
    if isinstance(backend, (keyring.backends.fail.Keyring, keyring.backends.null.Keyring)):
        return False, NO_STORE
    if isinstance(backend, keyring.backends.chainer.ChainerBackend) and not backend.backends:
        return False, NO_STORE
    return True, str(backend.name)


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be an API key (it travels in an HTTP header), or None."""
    if not key:
        return "the API key is empty"
    if not all("!" <= char <= "~" for char in key):
        return "an API key may use only letters, digits and punctuation, without spaces"
    return None


def _add_again(name: str) -> str:
    return f"add the engine again with `hearth engines add {name} --replace ...`"


class KeyVault:
    """The keys of the engines configured in ``config_dir``."""

    def __init__(self, config_dir: Path) -> None:
        self.config_dir = Path(config_dir)
        self.key_file = self.config_dir / KEY_FILE
        self.damaged = ""  # set when a damaged key file was set aside

    # -- storing ---------------------------------------------------------------------------------

    def store(self, name: str, key: str, *, in_file: bool = False, env: str = "") -> tuple[KeyKind, str]:
        """Keep ``key`` for engine ``name`` in the best place allowed; returns the place (a key kind)
        and a sentence saying where it went. ``in_file``: the user agreed to the 0600 file when there
        is no secret store; ``env``: the variable the key came from (read from there when it cannot
        be kept)."""
        usable, about = secret_store()  # the store's name, or why there is none
        if usable:
            try:
                keyring.set_password(SERVICE, keyring_user(name), key)
                return "keyring", f"The API key is kept in the system's secret store ({about})."
            except keyring.errors.KeyringError as exc:
                about = f"the system's secret store refused the key ({exc})"
        why_not = about[:1].upper() + about[1:]
        if in_file:
            self._write_file({**self._read_file(), name: key})
            return "file", f"{why_not}, so the API key is kept in {self.key_file}, readable only by you."
        if env:
            return "env", f"{why_not}, so the API key is not saved: it is read from the environment variable " \
                          f"{env} each time (or allow a private file to keep it: --key-file)."
        _session_keys[self._session_id(name)] = key
        return "session", f"{why_not}, so the API key is kept only until Hearth quits; allow a private file " \
                          "(readable only by you) to keep it."

    def forget(self, name: str) -> None:
        """Delete ``name``'s key from every place it may be in (best effort for the secret store)."""
        _session_keys.pop(self._session_id(name), None)
        keys = self._read_file()
        if keys.pop(name, None) is not None:
            self._write_file(keys)
        try:
            if keyring.get_password(SERVICE, keyring_user(name)) is not None:
                keyring.delete_password(SERVICE, keyring_user(name))
        except keyring.errors.KeyringError:
            pass  # no secret store (then nothing is in it), or it refused: nothing more can be done

    # -- reading ---------------------------------------------------------------------------------

    def read(self, name: str, kind: str, env: str = "") -> str:
        """The key of engine ``name`` kept as ``kind`` ("" for "none"); raises :class:`KeyProblem`
        saying what to do when it should be there and is not."""
        if kind == "none":
            return ""
        readers = {"keyring": self._from_keyring, "file": self._from_file, "session": self._from_session}
        if kind == "env":
            key = os.environ.get(env, "")
            if not key:
                raise KeyProblem(f"the API key of engine {name} is read from the environment variable {env}, which "
                                 "is not set; set it to the engine's API key")
            return key
        if kind not in readers:
            raise KeyProblem(f"engine {name} says its key is kept as {kind!r}, which Hearth does not know; "
                             f"{_add_again(name)}")
        return readers[kind](name)

    def _from_keyring(self, name: str) -> str:
        try:
            key = keyring.get_password(SERVICE, keyring_user(name))
        except keyring.errors.KeyringError as exc:
            raise KeyProblem(f"the API key of engine {name} is in the system's secret store, which cannot be read "
                             f"now ({exc}); unlock it, or {_add_again(name)}") from exc
        if key is None:
            raise KeyProblem(f"the API key of engine {name} is no longer in the system's secret store; "
                             f"{_add_again(name)}")
        return key

    def _from_file(self, name: str) -> str:
        key = self._read_file().get(name)
        if key is None:
            where = self.damaged or f"it is not in {self.key_file}"
            raise KeyProblem(f"the API key of engine {name} was kept in a file, but {where}; {_add_again(name)}")
        return key

    def _from_session(self, name: str) -> str:
        key = _session_keys.get(self._session_id(name))
        if key is None:
            raise KeyProblem(f"the API key of engine {name} was kept only until Hearth quit (this system has no "
                             f"secret store); {_add_again(name)}")
        return key

    # -- the key file ----------------------------------------------------------------------------

    def _session_id(self, name: str) -> tuple[str, str]:
        return str(self.config_dir.resolve()), name

    def _read_file(self) -> dict[str, str]:
        """The key file's keys. A damaged file is set aside (the user's bytes kept) and read as
        empty; :attr:`damaged` then says so, for the message of a key that is missing."""
        try:
            return msgspec.json.decode(self.key_file.read_bytes(), type=dict[str, str])
        except FileNotFoundError:
            return {}
        except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            moved = move_aside(self.key_file)
            self.damaged = f"{self.key_file} could not be read ({exc}) and was kept as {moved}"
            return {}

    def _write_file(self, keys: dict[str, str]) -> None:
        try:
            write_atomically(self.key_file, msgspec.json.encode(keys))
        except OSError as exc:
            raise KeyProblem(f"could not save the API key to {self.key_file}: {exc.strerror or exc}") from exc
