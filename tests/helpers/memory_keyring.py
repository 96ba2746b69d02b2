"""A real ``keyring`` backend for tests, so they never touch the user's own secret store.

:class:`FileKeyring` keeps its passwords in a JSON file named by ``HEARTH_TEST_KEYRING_FILE``, so a
test and the ``hearth`` commands it runs see the same secrets: in a subprocess select it with
``PYTHON_KEYRING_BACKEND=tests.helpers.memory_keyring.FileKeyring`` (see :func:`keyring_env`); in
the test's own process with ``keyring.set_keyring(FileKeyring())``. Its priority is below every
real backend's, so keyring never picks it by itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

FILE_ENV = "HEARTH_TEST_KEYRING_FILE"
BACKEND = "tests.helpers.memory_keyring.FileKeyring"
NO_STORE = "keyring.backends.fail.Keyring"  # what a system without a secret store has


class FileKeyring(KeyringBackend):
    priority = -10  # never chosen automatically (the fail backend has 0)

    @property
    def path(self) -> Path:
        return Path(os.environ[FILE_ENV])

    def secrets(self) -> dict[str, str]:
        """Everything stored, as ``{"service/user": password}``."""
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}

    def _write(self, secrets: dict[str, str]) -> None:
        self.path.write_text(json.dumps(secrets))

    def get_password(self, service: str, username: str) -> str | None:
        return self.secrets().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        self._write({**self.secrets(), f"{service}/{username}": password})

    def delete_password(self, service: str, username: str) -> None:
        secrets = self.secrets()
        if secrets.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError(f"{service}/{username} is not stored")
        self._write(secrets)


def keyring_env(secrets_file: Path | None) -> dict[str, str]:
    """The environment for a ``hearth`` command: the file backend on ``secrets_file``, or (None) no
    secret store at all."""
    if secrets_file is None:
        return {"PYTHON_KEYRING_BACKEND": NO_STORE}
    return {"PYTHON_KEYRING_BACKEND": BACKEND, FILE_ENV: str(secrets_file)}
