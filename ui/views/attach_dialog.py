"""The dialog that chooses a document to attach: it opens where the last document attached was, else
in the user's documents folder (never wherever Hearth happened to be started), and it is sized so
that file names show whole.

Where the system has a native file dialog, that one is used and sizes itself; the sizing here is
for Qt's own dialog (Linux without a desktop portal, for one).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QStandardPaths, Qt
from PySide6.QtWidgets import QFileDialog, QHeaderView, QTreeView, QWidget

DOCUMENT_FILTER = ("Documents (*.txt *.md *.markdown *.html *.htm *.pdf *.py *.js *.ts *.c *.h *.cpp *.rs *.go "
                   "*.java *.json *.yaml *.yml *.toml *.csv *.log);;All files (*)")
DIALOG_CHARS = (150, 36)  # the dialog's size, in average characters and lines of text
SCREEN_SHARE = 0.9  # at most this much of the screen, each way


def attach_dialog(parent: QWidget, last_folder: Path | None) -> QFileDialog:
    """A window-modal dialog (not yet shown) for one existing file; it deletes itself when closed."""
    dialog = QFileDialog(parent, "Attach a document", str(start_folder(last_folder)), DOCUMENT_FILTER)
    dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
    dialog.setOption(QFileDialog.Option.HideNameFilterDetails)  # "Documents", not its 25 patterns: fits any text size
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    metrics, screen = dialog.fontMetrics(), parent.screen().availableGeometry()
    columns, lines = DIALOG_CHARS
    dialog.resize(min(metrics.averageCharWidth() * columns, int(screen.width() * SCREEN_SHARE)),
                  min(metrics.lineSpacing() * lines, int(screen.height() * SCREEN_SHARE)))
    _widen_name_column(dialog)
    return dialog


def start_folder(last_folder: Path | None) -> Path:
    """Where the last document was (if that folder is still there), else Documents, else home."""
    if last_folder is not None and last_folder.is_dir():
        return last_folder
    documents = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    return Path(documents) if documents and Path(documents).is_dir() else Path.home()


def _widen_name_column(dialog: QFileDialog) -> None:
    """In Qt's own dialog (where the system has no native one) names are never cut: the name column
    is as wide as the longest name shown, the type column (the name's extension says it) is left
    out, and the date takes the rest."""
    view = dialog.findChild(QTreeView, "treeView")
    if view is None:
        return
    header = view.header()
    header.setStretchLastSection(True)
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
    if header.count() > 3:
        header.setSectionHidden(2, True)
