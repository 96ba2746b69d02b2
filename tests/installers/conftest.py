"""What the installer definition tests share: where the installers are, and loading an installers/
script as a module (installers/ is not a package). Import these from tests.installers.conftest."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALLERS = ROOT / "installers"


def load_module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


package_windows = load_module(INSTALLERS / "windows" / "package_windows.py")
