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


@pytest.mark.parametrize(("where", "source", "contract"), [
    ("app/services", "from PySide6.QtCore import QObject\n", "Only ui imports Qt BROKEN"),
    ("app/surfaces/cli", "from PySide6.QtCore import QObject\n", "Only ui imports Qt BROKEN"),
    ("app/services", "def later():\n    from ui.formatting import fmt_ms\n", "Layers: entry points"),
    ("ui/views", "def later():\n    from app.surfaces.gui import main\n", "Layers: entry points"),
    ("engine", "from app.services.turn import prompt_turns\n", "Layers: entry points"),
    ("model_store", "import engine.protocol\n", "Layers: entry points"),
    ("engine", "import llama_cpp\n", "Only the llama.cpp adapter imports llama_cpp BROKEN"),
    ("ui/views", "from engine.models.session import open_session\n", "The app and the window reach"),
], ids=["services-qt", "cli-qt", "services-ui", "ui-entry-point", "engine-services", "store-engine", "engine-llama",
        "ui-engine-inside"])
def test_a_new_module_is_covered_without_being_listed(tmp_path, where, source, contract):
    """The rules name whole packages, so a module added later is checked like the others."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / where / "brand_new.py").write_text(source)
    result = _lint_imports(tmp_path, PYTHONPATH=str(tmp_path))
    assert result.returncode != 0 and contract in result.stdout, result.stdout + result.stderr
    assert f"{where.replace('/', '.')}.brand_new ->" in result.stdout


ENTRY_POINTS = {"engine.protocol", "engine.worker_loop", "engine.models.model_files", "engine.devices.probe",
                "engine.devices.cpu", "engine.devices.calibration"}


def test_the_app_and_the_window_are_kept_from_every_engine_module_but_the_contract_and_entry_points():
    """A module added to engine later must be listed (or named an entry point here, on purpose)."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if "its contract package" in c["name"]]
    engine = ROOT / "engine"
    parts = {f"engine.{p.stem}" for p in engine.glob("*.py") if p.stem != "__init__"}
    parts |= {f"engine.{p.name}" for p in engine.iterdir() if (p / "__init__.py").is_file()}
    holding = {entry.rsplit(".", 1)[0] for entry in ENTRY_POINTS} - {"engine"}  # packages holding an entry point
    modules = parts - holding
    for package in holding:  # listed module by module
        modules |= {f"{package}.{p.stem}" for p in (ROOT / package.replace(".", "/")).glob("*.py") if p.stem != "__init__"}
    assert set(contract["forbidden_modules"]) == modules - ENTRY_POINTS
    assert set(contract["source_modules"]) == {"app", "ui"}


def test_the_app_package_holds_only_its_layers():
    """A module directly in app/ (or app/surfaces/) would sit in no layer, so no contract would check it:
    the ways in (app/surfaces/) sit above the window, the services and engine clients below it."""
    entries = {p.name for p in (ROOT / "app").iterdir() if p.name != "__pycache__"}
    assert entries == {"__init__.py", "__main__.py", "surfaces", "services", "engine_clients"}
    surfaces = {p.name for p in (ROOT / "app" / "surfaces").iterdir() if p.name != "__pycache__"}
    assert surfaces == {"__init__.py", "entry.py", "gui.py", "cli", "serve"}


def import_cycles() -> list[list[str]]:
    """Groups of Hearth's modules that import one another, directly or through others (Tarjan's
    strongly connected components of the import graph; a function-level import counts too)."""
    import grimp

    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in graph.modules:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = [stack.pop()]
            while group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_module_imports_itself_through_others():
    assert import_cycles() == []


def test_a_cycle_would_be_found(tmp_path, monkeypatch):
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "engine" / "cycle_a.py").write_text("import engine.cycle_b\n")
    (tmp_path / "engine" / "cycle_b.py").write_text("def later():\n    import engine.cycle_a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in list(sys.modules):
        if name.split(".")[0] in PACKAGES:
            monkeypatch.delitem(sys.modules, name)
    assert import_cycles() == [["engine.cycle_a", "engine.cycle_b"]]
