"""Fixture models with real tokenizers, chat templates and shapes (``tests/fixtures/real_families.py``),
built once into a persistent cache and reused by every run.

    path = real_model("qwen35-real-tiny")            # built on first use, then read from the cache
    path = real_model(REAL_TINY["granite"])

The cache is ``${HEARTH_TEST_MODELS:-~/.cache/hearth/test-models}``. A file whose fingerprint no
longer matches its generator (code, config, template, vocabulary, llama.cpp version) is rebuilt
(``make_models``).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.fixtures.make_models import make_models
from tests.fixtures.real_families import FAMILIES, REAL_MODELS, SCRIPT

CACHE_ENV = "HEARTH_TEST_MODELS"

REAL_TINY = {"qwen35": "qwen35-real-tiny", "lfm2": "lfm2-real-tiny", "granite": "granite-real-tiny",
             "llama": "llama-real-tiny"}
REAL_SHAPES = {"qwen35": "qwen35-0.8b-shape", "lfm2": "lfm2-350m-shape", "granite": "granite-4.0-h-1b-shape",
               "llama": "llama-3.2-1b-shape"}
REAL_SCRIPT = "qwen35-real-script"  # greedy decoding after the generation cue writes SCRIPT
TEMPLATES = {family: spec.template for family, spec in FAMILIES.items()}  # file name in llama.cpp's templates
END_OF_TURN = {family: spec.end_of_turn for family, spec in FAMILIES.items()}  # EOS/EOT token text

__all__ = ["END_OF_TURN", "REAL_SCRIPT", "REAL_SHAPES", "REAL_TINY", "SCRIPT", "TEMPLATES", "cache_dir",
           "real_model"]


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "hearth" / "test-models").expanduser()


def real_model(name: str) -> Path:
    """The path of fixture model ``name`` (one of ``REAL_MODELS``), built into the cache if needed."""
    if name not in REAL_MODELS:
        raise ValueError(f"unknown real-family fixture {name!r}; known: {', '.join(REAL_MODELS)}")
    return make_models(cache_dir(), [name])[name]
