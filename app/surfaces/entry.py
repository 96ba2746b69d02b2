"""The ``hearth`` command and ``python -m app``: the one place that knows both the window and the CLI.

``hearth app`` (and ``python -m app`` with no arguments) opens the window; everything else is the
command line. The CLI itself never imports the window (an import-linter layer), so the choice is
made here, above both. ``hearth app --help`` and a mistyped flag are still answered by the CLI's
own parser, like every other command's.

``hearth`` alone opens the window too, as the menu entry does, where there is a screen to open it on
and a person at a terminal (:func:`window_can_open`); in a script, over SSH or in a console without a
display it prints a short help instead (:data:`FIRST_HELP`) and exits 0.
"""

from __future__ import annotations

import os
import sys

WINDOW_COMMAND = "app"

# What `hearth` alone prints where it cannot open the window: how to open it, then the commands used most.
FIRST_HELP = """\
Hearth: a private, offline assistant.

Open the window:  hearth app{why}

The commands used most:
  hearth chat                       chat in the terminal (saved like the window's conversations)
  hearth send --new TITLE "..."     send one message; continue with --conversation ID
  hearth doc load FILE              read a document into a new conversation, then ask with send
  hearth conversations              list the saved conversations
  hearth models list                the models to download, and the ones installed

Every command: hearth --help   One command's flags: hearth COMMAND --help"""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        return open_window() if window_can_open() else first_help()
    if argv[:1] == [WINDOW_COMMAND]:
        from app.surfaces.cli.main import build_parser

        build_parser().parse_args(argv)  # --help and stray flags end here, as for every command
        return open_window()
    from app.surfaces.cli.main import main as run_command

    return run_command(argv)


def has_display(environ=os.environ, platform: str = sys.platform) -> bool:
    """Whether a window can be shown: always on macOS and Windows; elsewhere an X or Wayland display."""
    if platform in ("darwin", "win32"):
        return True
    return bool(environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def window_can_open() -> bool:
    """``hearth`` alone opens the window for a person at a terminal on a computer with a screen; a
    script (stdout not a terminal) or a session without a display gets the help instead."""
    return has_display() and sys.stdout.isatty()


def first_help() -> int:
    why = "" if has_display() else "   (on a computer with a screen: this session has no display)"
    print(FIRST_HELP.format(why=why))
    return 0


def open_window() -> int:
    from app.surfaces.gui import main as run_window

    return run_window()
