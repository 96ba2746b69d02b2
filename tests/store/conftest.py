"""Fixtures for the SQLite store tests: a real database file in a temporary folder."""

from __future__ import annotations

import pytest

from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.snapshots import SnapshotStore


@pytest.fixture
def db_path(tmp_path):
    return database_path(tmp_path / "data")


@pytest.fixture
def db(db_path):
    database = open_database(db_path)
    yield database
    database.close()


@pytest.fixture
def convs(db):
    return ConversationStore(db)


@pytest.fixture
def snaps(db):
    return SnapshotStore(db)
