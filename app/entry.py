"""The ``hearth`` command and ``python -m app``: the one place that knows both the window and the CLI.

``hearth app`` (and ``python -m app`` with no arguments) opens the window; everything else is the
command line. The CLI itself never imports the window (an import-linter layer), so the choice is
made here, above both. ``hearth app --help`` and a mistyped flag are still answered by the CLI's
own parser, like every other command's.
"""

from __future__ import annotations

import sys

WINDOW_COMMAND = "app"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == [WINDOW_COMMAND]:
        from app.cli.main import build_parser

        build_parser().parse_args(argv)  # --help and stray flags end here, as for every command
        return open_window()
    from app.cli.main import main as run_command

    return run_command(argv)


def open_window() -> int:
    from app.gui import main as run_window

    return run_window()
