"""The model files a user has: every ``.gguf`` under the models folder (downloads land there)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class InstalledModel:
    name: str
    path: Path
    size_bytes: int


def models_folder(data_dir: Path) -> Path:
    return data_dir / "models"


def installed_models(folder: Path) -> list[InstalledModel]:
    """The ``.gguf`` files under ``folder``, by name; unreadable entries are skipped."""
    found = []
    for path in sorted(folder.rglob("*.gguf")) if folder.is_dir() else []:
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if path.is_file() and not path.name.endswith(".incomplete"):
            found.append(InstalledModel(path.stem, path, size))
    return found
