"""Fixtures for the engine tests: a real OpenAI-compatible server on 127.0.0.1.

``llama_cpp_server`` is llama-cpp-python's own server with SmolLM2 (tests/helpers/llama_server.py),
started once for the session the first time a test asks for it and stopped at its end. A test
that uses it starts a process: mark it ``@pytest.mark.process``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.llama_server import LlamaServer, llama_server


@pytest.fixture(scope="session")
def llama_cpp_server(tmp_path_factory) -> Iterator[LlamaServer]:
    with llama_server(log_dir=tmp_path_factory.mktemp("llama-server")) as server:
        yield server
