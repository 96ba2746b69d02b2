"""Fixtures for tests that download from a local Hugging Face hub (see tests/fixtures/local_hub.py).

A test module that uses them names this module in ``pytest_plugins`` (as test_downloads.py does);
they live here rather than in ``conftest.py`` so UI tests can share them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub.utils import close_session

from tests.fixtures.local_hub import LocalHub
from tests.fixtures.make_models import make_models


@pytest.fixture
def hub():
    """A running local hub (and CDN); stopped after the test."""
    server = LocalHub().start()
    yield server
    close_session()  # drop huggingface_hub's kept-alive connections, so the hub's handler threads end
    server.stop()


@pytest.fixture
def hf_cache(tmp_path) -> Path:
    """An empty Hugging Face cache folder for this test."""
    return tmp_path / "hf-cache"


@pytest.fixture(scope="session")
def tiny_gguf_bytes(tmp_path_factory) -> bytes:
    """The bytes of the project's generated hybrid-tiny GGUF (about 1.2 MB)."""
    return make_models(tmp_path_factory.mktemp("hub-models"), ["hybrid-tiny"])["hybrid-tiny"].read_bytes()

