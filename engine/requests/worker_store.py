"""The worker's one connection to the conversation database, for snapshots and model-file digests.

The app owns the schema: it brings the database up to date before it starts a worker, and the
worker never migrates (an older file is refused, in words). The connection is opened when a loaded
model first needs it and closed when the model is unloaded and at shutdown, so a worker holds at
most one, never one per load.
"""

from __future__ import annotations

from pathlib import Path

import sqlite_utils

from model_store.db import StoreError, database_path, open_database
from model_store.file_hashes import file_sha256
from model_store.snapshots import SnapshotStore


class WorkerStore:
    def __init__(self, data_dir: Path | None) -> None:
        self.data_dir = data_dir  # the app's data folder (Hello.user_dir); None: no conversations
        self._db: sqlite_utils.Database | None = None

    def move_to(self, data_dir: Path | None) -> None:
        """Use the database of ``data_dir`` from now on (the handshake names it)."""
        self.close()
        self.data_dir = data_dir

    def db(self) -> sqlite_utils.Database:
        """The open connection. Raises ``ValueError`` without a data folder and ``StoreError`` when
        the file cannot be opened or its schema is older than this engine."""
        if self.data_dir is None:
            raise ValueError("the engine was started without a data folder, so it cannot keep conversations")
        if self._db is None:
            self._db = open_database(database_path(self.data_dir), migrate=False)
        return self._db

    def snapshots(self) -> SnapshotStore:
        return SnapshotStore(self.db())

    def file_digest(self, path: Path) -> str:
        """A model file's sha256, from the database's cache of file hashes (a big file is hashed once)."""
        return file_sha256(self.db(), path)

    def close(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except StoreError:
                pass
            self._db = None
