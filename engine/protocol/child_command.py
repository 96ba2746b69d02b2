"""How Hearth starts one of its own modules in a child process, from a checkout or from the bundle.

From source the child is ``python -m MODULE``. A bundled app (PyInstaller) has no Python to run:
``sys.executable`` is the app's own executable, so the child is that executable with
``RUN_MODULE_FLAG MODULE``, which ``run_module_if_asked`` (the first thing a bundle's entry point
calls) turns into the same ``python -m`` run. Only the modules in ``CHILD_MODULES`` can be started
that way: an executable's arguments are not a way to run arbitrary code.
"""

from __future__ import annotations

import runpy
import sys

RUN_MODULE_FLAG = "--hearth-run-module"
WORKER = "engine.worker"
CPU_CANARY = "engine.backends.canary"
NPU_CHECK = "engine.backends.qnn"
CLI = "app"
CHILD_MODULES = frozenset({WORKER, CPU_CANARY, NPU_CHECK, CLI})
VARIANT_ENV = "HEARTH_CPU_VARIANT"  # the CPU build a child asks for by name (engine.backends.cpu_check)


def is_bundled() -> bool:
    """True in a PyInstaller bundle (it sets ``sys.frozen``)."""
    return bool(getattr(sys, "frozen", False))


def module_command(module: str) -> list[str]:
    """The command line that runs ``module`` as ``__main__`` in a child process."""
    if module not in CHILD_MODULES:
        raise ValueError(f"{module} is not one of Hearth's child modules")
    if is_bundled():
        return [sys.executable, RUN_MODULE_FLAG, module]
    return [sys.executable, "-m", module]


def run_module_if_asked(argv: list[str]) -> None:
    """In a bundle's entry point: when ``argv`` asks for a child module, run it and exit."""
    if len(argv) < 3 or argv[1] != RUN_MODULE_FLAG:
        return
    module = argv[2]
    if module not in CHILD_MODULES:
        sys.exit(f"hearth: {module!r} is not a module Hearth runs")
    sys.argv = [argv[0], *argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    sys.exit(0)
