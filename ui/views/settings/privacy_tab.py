"""Settings → Privacy: where conversations are kept, and whether other programs (or devices) may
use the model through the local API server (:mod:`ui.views.api_server_group`)."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QFileDialog, QLineEdit, QWidget

from app.services.settings import Settings
from ui.views.api_server_group import ApiServerGroup
from ui.views.settings.form import FieldRows, SettingsTab, browse_button, note


class PrivacyTab(SettingsTab):
    title = "Privacy"
    fields = ("data_folder", "api_server", "api_server_port", "api_server_key", "api_server_lan")

    def __init__(self, rows: FieldRows) -> None:
        super().__init__(rows)
        kept = self.group("Your conversations")
        self.data_folder = QLineEdit(objectName="data_folder", placeholderText="The default data folder")
        self.data_browse = browse_button()
        self.data_browse.clicked.connect(self._browse_data_folder)
        rows.row(kept, "Data f&older:", "data_folder", self.data_folder, self.data_browse)
        kept.addRow("", note("Conversations, documents and their saved state stay in this folder on this computer. "
                             "A new data folder is used after Hearth restarts."))
        self.api_group = ApiServerGroup(rows.row)
        self.column.addWidget(self.api_group)
        self.finish()

    def fill(self, s: Settings) -> None:
        self.data_folder.setText(s.data_folder)
        self.api_group.fill(s)

    def values(self) -> dict[str, Any]:
        return {"data_folder": self.data_folder.text().strip(), **self.api_group.values()}

    def focus_widget(self, field: str) -> QWidget:
        return getattr(self.api_group, field) if field.startswith("api_server") else self.data_folder

    def _browse_data_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Choose the data folder", self.data_folder.text())
        if folder:
            self.data_folder.setText(folder)
