"""Hearth's short-batch column kernels sum every column exactly as the single-row kernel does.

Each CPU build of the wheel that this CPU can run is probed in its own process
(``tests/column_kernel_probe.py``): random and saturating blocks, 1 to 16 columns, for Q8_0, Q4_K,
Q5_K and Q6_K. The model-level checks (``test_quant_exactness.py``, ``test_batch_exactness.py``)
show the same through llama.cpp; this one reaches column counts and values a model rarely makes.
The control runs the probe against ggml's portable kernel, which sums in another order: if the
probe could not tell two kernels apart, it would pass there too.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.backends.cpu_variants import read_variant_set, variant_score
from tests.conftest import ROOT

VARIANTS = read_variant_set()
pytestmark = pytest.mark.skipif(VARIANTS is None, reason="llama-cpp-python is not Hearth's portable build")


def probe(variant_name: str, *flags: str) -> dict:
    variant = VARIANTS.named(variant_name)
    if variant_score(variant, VARIANTS.registry) == 0:
        pytest.skip(f"this CPU cannot run the {variant_name} build")
    done = subprocess.run([sys.executable, "-m", "tests.column_kernel_probe", str(variant.path), *flags],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("variant", VARIANTS.names if VARIANTS else ())
def test_every_column_equals_the_single_row_kernel(variant):
    report = probe(variant)
    assert report and all(r["differ"] == 0 for r in report.values()), report


def test_the_probe_tells_a_kernel_that_sums_in_another_order():
    runnable = [v.name for v in VARIANTS.variants if variant_score(v, VARIANTS.registry) > 0]
    report = probe(runnable[0], "--against", "generic")  # the fastest: its kernels are not the portable ones
    assert all(r["differ"] > r["trials"] // 2 for r in report.values()), report
