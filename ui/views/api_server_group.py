"""The Settings dialog's "Local API server" group: on/off, port, key, and whether other devices may connect.

Like the rest of the dialog it holds no rules: :func:`app.services.settings.validate_settings`
says what is wrong (a port out of range, other devices without a key), and the dialog shows each
message under its field through the row builder it passes in. The port box allows more than the
rules do, so a port below 1024 gets the rules' message rather than a silent clamp. A generated key
is shown, so it can be copied into the programs that will use it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from PySide6.QtWidgets import QCheckBox, QFormLayout, QGroupBox, QLabel, QLineEdit, QPushButton, QSpinBox, QWidget

from app.services.settings import Settings
from ui.api_server import local_url

KEY_BYTES = 24  # secrets.token_urlsafe(24): 32 characters
Row = Callable[..., None]  # the dialog's row builder: (form, label, field, *widgets)


def new_key() -> str:
    return secrets.token_urlsafe(KEY_BYTES)


class ApiServerGroup(QGroupBox):
    def __init__(self, row: Row, parent: QWidget | None = None) -> None:
        super().__init__("Local API server", parent)
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # a field under its caption when both do not fit
        self.api_server = QCheckBox("Ser&ve an API for other programs", objectName="api_server",
                                    toolTip="An OpenAI-compatible API: programs written for OpenAI's can use "
                                            "this model. What they send is kept apart from your conversations "
                                            "(the last 500), so they carry on after a restart")
        self.api_server_port = QSpinBox(objectName="api_server_port")
        self.api_server_port.setRange(1, 65535)
        self.api_server_key = QLineEdit(objectName="api_server_key", placeholderText="No key",
                                        toolTip="The key programs must send. With no key, any program on this "
                                                "computer may connect; Generate makes one.",
                                        echoMode=QLineEdit.EchoMode.Password)
        self.key_shown = QCheckBox("Sho&w", objectName="api_server_key_shown")
        self.key_generate = QPushButton("&Generate", objectName="api_server_key_generate")
        self.key_generate.setAutoDefault(False)  # Enter still means OK when the button has focus
        self.api_server_lan = QCheckBox("Let other devices on my &network connect", objectName="api_server_lan",
                                        toolTip="They need the key above: set or generate one first")
        self.address = QLabel(objectName="api_server_address", wordWrap=True)
        row(form, "", "api_server", self.api_server)
        row(form, "Po&rt:", "api_server_port", self.api_server_port)
        row(form, "Ke&y:", "api_server_key", self.api_server_key, self.key_shown, self.key_generate)
        row(form, "", "api_server_lan", self.api_server_lan)
        form.addRow("", self.address)
        self.setLayout(form)
        self.key_shown.toggled.connect(self._show_key)
        self.key_generate.clicked.connect(self.generate_key)
        self.api_server_port.valueChanged.connect(self._update_address)
        self.api_server_lan.toggled.connect(self._update_address)

    def fill(self, s: Settings) -> None:
        self.api_server.setChecked(s.api_server)
        self.api_server_port.setValue(s.api_server_port)
        self.api_server_key.setText(s.api_server_key)
        self.api_server_lan.setChecked(s.api_server_lan)
        self._update_address()

    def values(self) -> dict:
        """The Settings fields this group edits, as the form says."""
        return {"api_server": self.api_server.isChecked(), "api_server_port": self.api_server_port.value(),
                "api_server_key": self.api_server_key.text().strip(), "api_server_lan": self.api_server_lan.isChecked()}

    def generate_key(self) -> None:
        self.api_server_key.setText(new_key())
        self.key_shown.setChecked(True)

    def _show_key(self, shown: bool) -> None:
        mode = QLineEdit.EchoMode.Normal if shown else QLineEdit.EchoMode.Password
        self.api_server_key.setEchoMode(mode)

    def _update_address(self) -> None:
        text = f"Programs on this computer use {local_url(self.api_server_port.value())}"
        if self.api_server_lan.isChecked():
            text += "; other devices use this computer's network address in place of 127.0.0.1"
        self.address.setText(text + ".")
