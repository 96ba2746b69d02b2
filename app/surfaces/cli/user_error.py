"""The one error a command prints: a sentence the user can act on (see :func:`app.surfaces.cli.main._report`)."""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix; printed as one line, exit status 1. ``details`` (a ``kind`` and
    more) is what ``--json`` prints as the ``error`` object."""

    def __init__(self, message: str, **details: str) -> None:
        super().__init__(message)
        self.details = details
