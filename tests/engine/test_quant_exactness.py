"""Exact drafting for every weight type users have, in every CPU build this machine can run.

For each build a child process (one CPU build per process) loads ``hybrid-quant`` converted by
llama.cpp's quantizer to each of ``QUANT_TYPES`` and checks (``tests/exactness_probe.py``) that
a batch after a 600-token prompt equals single-token decoding bit for bit: what drafting's
exactness rests on, and what differs between builds (their kernels). In the build this machine
runs, it also checks the consequence end to end: greedy drafting (the same file as draft model,
auto-off disabled) yields exactly the ``--draft off`` tokens; the drafting and rollback code
around the kernels is the same in every build. A build this CPU cannot run is skipped, saying so. A check ties the canary's per-type verdict to
the same measurement on this model: where the canary found repacked kernels inexact, forcing them
on here must show a difference too. A control runs the check on the kernels a prompt read may take
(sgemm, the repacked GEMM): it must see rows that differ there, so the check can fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from engine.backends.cpu_check import run_canary
from engine.backends.cpu_variants import read_variant_set
from tests.conftest import ROOT
from tests.cpu_builds import auto_build
from tests.fixtures.make_models import QUANT_TYPES, make_models

VARIANTS = read_variant_set()
BUILDS = VARIANTS.names if VARIANTS is not None else ("built-in",)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quant_models(tmp_path_factory) -> dict[str, str]:
    names = [f"hybrid-quant-{t}" for t in QUANT_TYPES]
    paths = make_models(tmp_path_factory.mktemp("quant"), names)
    return {t: str(paths[f"hybrid-quant-{t}"]) for t in QUANT_TYPES}


def run_probe(variant: str, paths: list[str], *flags: str) -> dict:
    env = {**os.environ, "HEARTH_CPU_VARIANT": variant, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tests.exactness_probe", *flags, *paths], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("variant", BUILDS)
def test_every_weight_type_is_batch_exact_and_drafts_token_identically(variant, quant_models):
    drafts = variant == auto_build()
    report = run_probe(variant, list(quant_models.values()), *(() if drafts else ("--batch-only",)))
    if report["variant"] == "unsupported":
        pytest.skip(f"this CPU cannot run the {variant} build: {report['detail']}")
    assert report["variant"] == variant
    for weight_type, result in zip(quant_models, report["models"]):
        assert result["weight_type"] == weight_type
        assert result["kernels_exact"], result
        assert result["batch_exact"], f"{variant} {weight_type}: a batch differs from single tokens"
        if drafts:
            assert result["draft_identical"], f"{variant} {weight_type}: drafting changed the greedy output"
            assert result["rounds"] > 0 and result["accepted"] > 0, result  # drafting really ran


def test_the_canary_verdict_matches_a_hybrid_model_with_repacked_weights_forced_on(quant_models):
    variant = auto_build()
    canary = run_canary(VARIANTS.named(variant))
    assert canary.status == "ok", canary
    report = run_probe(variant, list(quant_models.values()), "--repacked-only")
    measured = {t: r["batch_exact"] for t, r in zip(quant_models, report["models"])}
    expected = {t: canary.types[t] == "repacked" for t in quant_models}
    assert measured == expected


def test_the_check_sees_the_difference_of_the_kernels_a_prompt_read_takes(quant_models):
    """The control: on the batched kernels (sgemm, the repacked GEMM), which a verify batch never
    takes, the same check must find rows that differ from single tokens, or it could not fail."""
    report = run_probe(auto_build(), list(quant_models.values()), "--fast-only")
    measured = {t: r["batch_exact"] for t, r in zip(quant_models, report["models"])}
    assert not all(measured.values()), f"no weight type differed on the batched kernels: {measured}"
