"""The fast tier's lists (tests/tiers.py) name files and tests that exist, so neither rots unseen."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.tiers import FULL_ONLY, SMOKES, in_fast_tier

TESTS = Path(__file__).resolve().parents[1]


def test_every_file_the_fast_tier_leaves_out_exists():
    assert sorted(name for name in FULL_ONLY if not (TESTS / name).is_file()) == []


def test_every_smoke_names_a_test_function_in_a_file_the_tier_leaves_out():
    for smoke in SMOKES:
        file, _, name = smoke.partition("::")
        assert file in FULL_ONLY, f"{smoke}: its file is in the fast tier already"
        functions = {node.name for node in ast.parse((TESTS / file).read_text()).body if isinstance(node, ast.FunctionDef)}
        assert name in functions, f"{smoke}: no such test"


def test_a_smoke_runs_in_the_fast_tier_and_its_neighbours_do_not():
    smoke = sorted(SMOKES)[0]
    file = smoke.split("::")[0]
    assert in_fast_tier(f"tests/{smoke}") and in_fast_tier(f"tests/{smoke}[a case]")
    assert not in_fast_tier(f"tests/{file}::test_another_one")
    assert in_fast_tier("tests/unit/test_a_new_file.py::test_it"), "a new file is in the fast tier"
