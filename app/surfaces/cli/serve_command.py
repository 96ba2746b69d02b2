"""``hearth serve`` as the command line runs it (the server itself is :mod:`app.surfaces.serve.main`).

A server that cannot start (a model that does not load, a port in use, an address that needs a key)
is refused through the one place every command's error line is written,
:func:`app.surfaces.cli.main._report`, so the path, address or engine's words it echoes are made visible
(:mod:`app.surfaces.cli.terminal_text`) as in every other error line, never acted on by the terminal.
"""

from __future__ import annotations

import argparse

from app.surfaces.cli.user_error import UserError


def run_serve(args: argparse.Namespace) -> int:
    from app.surfaces.serve.main import ServeRefused, run_serve as serve  # uvicorn and the engine: only for serve

    try:
        return serve(args)
    except ServeRefused as exc:
        raise UserError(str(exc), kind="serve_refused") from None
