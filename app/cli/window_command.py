"""``hearth app``: open the window, as ``python -m app`` and the desktop menu entry do."""

from __future__ import annotations

import argparse


def run_app(_args: argparse.Namespace) -> int:
    from app.gui import main  # Qt is imported only when the window is asked for

    return main()
