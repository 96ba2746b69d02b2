"""What Hearth is, as the CLI's ``--version``, the About box and the installers name it.

The version has one source, ``pyproject.toml``: the installed distribution's metadata carries it
(``pip install -e .`` in development, and the bundle copies the same metadata in), so nothing else
writes the number down.
"""

from __future__ import annotations

import importlib.metadata

DISTRIBUTION = "hearth"
UNKNOWN_VERSION = "unknown (not installed: run installers/setup_dev.sh)"


def app_version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN_VERSION


def version_line() -> str:
    """``hearth --version``: the app's version and the engine library it runs."""
    try:
        llama = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        llama = "not installed"
    return f"Hearth {app_version()} (llama-cpp-python {llama})"
