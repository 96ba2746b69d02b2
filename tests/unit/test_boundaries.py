"""The layer boundaries in pyproject.toml hold (import-linter reads every import statement)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "engine", "ui", "model_store")


def _lint_imports(project: Path, **env: str) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(lint), "--no-cache"], cwd=project, capture_output=True, text=True,
                          env={**os.environ, **env})


def test_import_contracts_hold():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" in result.stdout and " 0 broken" in result.stdout


@pytest.mark.parametrize(("source", "contract"), [
    ("from PySide6.QtCore import QObject\n", "Only ui imports Qt BROKEN"),
    ("def later():\n    from ui.formatting import fmt_ms\n", "Only the composition root imports ui BROKEN"),
])
def test_a_new_app_module_is_covered_without_being_listed(tmp_path, source, contract):
    """The rules name whole packages, so a module added to app later is checked like the others."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "app" / "brand_new_commands.py").write_text(source)
    result = _lint_imports(tmp_path, PYTHONPATH=str(tmp_path))
    assert result.returncode != 0 and contract in result.stdout, result.stdout + result.stderr
    assert "app.brand_new_commands ->" in result.stdout
