"""What the window does when it cannot start at all: one stderr line, and the same words in a dialog.

Before the window exists there is nowhere else to say it. A settings or engines file that is not
the user's own (:mod:`model_store.own_files`), for instance, stops the start-up: Hearth must not
read it, and running on defaults behind the user's back would hide a planted file. The dialog is
left out on the offscreen platform, where no one could close it.
"""

from __future__ import annotations

import sys

from PySide6.QtWidgets import QApplication, QMessageBox

TITLE = "Hearth cannot start"


def show_startup_failure(message: str) -> int:
    """Say ``message`` on stderr and in a dialog; the exit status for the process (1)."""
    print(f"hearth: error: {message}", file=sys.stderr)
    app = QApplication.instance() or QApplication(sys.argv)
    if app.platformName() != "offscreen":
        QMessageBox.critical(None, TITLE, message)
    return 1
