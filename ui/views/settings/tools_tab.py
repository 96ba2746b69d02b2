"""Settings → Tools: which tools the model may call, the files and folders the file tool may read, the
MCP servers Hearth starts or reaches, and the tools that run without asking.

Every tool is off until it is ticked here (app.services.tools.tool_settings). "Check" lists the chosen
server's tools in the background (a server is a program to start: it must not hold the dialog) and shows
them, or why they could not be listed, under the list.
"""

from __future__ import annotations

import shlex
import threading
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QFileDialog, QHBoxLayout, QInputDialog, QLabel, QListWidget,
                               QListWidgetItem, QPushButton, QWidget)

from app.services.settings import Settings
from app.services.tools.tool_settings import McpServer, ToolSettings
from app.services.tools.toolbox import Toolbox
from ui.views.settings.form import FieldRows, SettingsTab, note

BUILTIN = (("read_file", "Read files and folders you pick"), ("search_conversations", "Search your saved conversations"),
           ("calculator", "Calculator"), ("current_time", "Today's date and the time"))
SERVER_ROLE = Qt.ItemDataRole.UserRole


class ToolsTab(SettingsTab):
    title = "Tools"
    fields = ("tools",)
    listed = Signal(str, str)  # (server name, what to show: its tools or why not), from the checking thread

    def __init__(self, rows: FieldRows) -> None:
        super().__init__(rows)
        self._always: list[str] = []
        builtin = self.group("Built-in tools")
        self.builtin = {name: QCheckBox(label, objectName=f"tool_{name}") for name, label in BUILTIN}
        for box in self.builtin.values():
            builtin.addRow("", box)
        self.folders = QListWidget(objectName="tool_folders")
        self.folders.setMaximumHeight(90)
        builtin.addRow("Files and folders:", self.folders)
        builtin.addRow("", self._buttons(("Add file…", self._add_file), ("Add folder…", self._add_folder),
                                         ("Remove", lambda: self._remove(self.folders))))
        builtin.addRow("", note("The model may read only what is in this list."))
        servers = self.group("Tools from other programs (MCP servers)")
        self.servers = QListWidget(objectName="mcp_servers")
        self.servers.setMaximumHeight(110)
        rows.row(servers, "Servers:", "tools", self.servers)
        servers.addRow("", self._buttons(("Add…", self._add_server), ("Remove", lambda: self._remove(self.servers)),
                                         ("Check", self.check_server)))
        self.server_tools = QLabel(objectName="mcp_server_tools", wordWrap=True,
                                   textInteractionFlags=Qt.TextInteractionFlag.TextSelectableByMouse)
        self.server_tools.setTextFormat(Qt.TextFormat.PlainText)  # what a server says is data
        servers.addRow("", self.server_tools)
        servers.addRow("", note("A server is a program on this computer that Hearth starts, or one already running "
                                "here (a local address). Tick a server to offer its tools."))
        asking = self.group("Asking")
        self.forget_always = QPushButton("Ask again before every tool", objectName="forget_always")
        self.forget_always.setAutoDefault(False)
        self.forget_always.clicked.connect(self._forget_always)
        self.always_note = note("")
        asking.addRow("", self.forget_always)
        asking.addRow("", self.always_note)
        self.listed.connect(self._show_listed)
        self.finish()

    def _buttons(self, *actions) -> QWidget:
        box = QWidget()
        line = QHBoxLayout(box)
        line.setContentsMargins(0, 0, 0, 0)
        for label, slot in actions:
            button = QPushButton(label)
            button.setAutoDefault(False)
            button.clicked.connect(slot)
            line.addWidget(button)
        line.addStretch(1)
        return box

    # -- form <-> settings ------------------------------------------------------------------------

    def fill(self, s: Settings) -> None:
        tools = s.tools
        for name, box in self.builtin.items():
            box.setChecked(name in tools.enabled)
        self.folders.clear()
        self.folders.addItems(tools.folders)
        self.servers.clear()
        for server in tools.servers:
            self._add_server_item(server, server.name in tools.enabled)
        self._always = list(tools.always)
        self._show_always()

    def values(self) -> dict[str, Any]:
        servers = [self.servers.item(i) for i in range(self.servers.count())]
        enabled = [name for name, box in self.builtin.items() if box.isChecked()]
        enabled += [item.data(SERVER_ROLE).name for item in servers if item.checkState() == Qt.CheckState.Checked]
        folders = [self.folders.item(i).text() for i in range(self.folders.count())]
        return {"tools": ToolSettings(enabled, list(self._always), folders, [item.data(SERVER_ROLE) for item in servers])}

    def focus_widget(self, field: str) -> QWidget:
        return self.servers

    # -- actions ----------------------------------------------------------------------------------

    def _add_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a file the model may read")
        if path:
            self.folders.addItem(path)

    def _add_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Choose a folder the model may read")
        if path:
            self.folders.addItem(path)

    @staticmethod
    def _remove(listing: QListWidget) -> None:
        for item in listing.selectedItems():
            listing.takeItem(listing.row(item))

    def _add_server(self) -> None:
        name, ok = QInputDialog.getText(self, "Add an MCP server", "Its name (letters and digits):")
        if not ok or not name.strip():
            return
        where, ok = QInputDialog.getText(self, "Add an MCP server",
                                         "The command that starts it, or its local address (http://127.0.0.1:…):")
        if ok and where.strip():
            self.add_server(server_from_text(name.strip(), where.strip()), enabled=True)

    def add_server(self, server: McpServer, enabled: bool = True) -> None:
        self._add_server_item(server, enabled)
        self.servers.setCurrentRow(self.servers.count() - 1)

    def _add_server_item(self, server: McpServer, enabled: bool) -> None:
        where = server.url or " ".join([server.command, *server.args])
        item = QListWidgetItem(f"{server.name} — {where}")
        item.setData(SERVER_ROLE, server)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked if enabled else Qt.CheckState.Unchecked)
        self.servers.addItem(item)

    def check_server(self) -> None:
        """List the current server's tools in the background; shown under the list when they come."""
        item = self.servers.currentItem()
        if item is None:
            self.server_tools.setText("Choose a server in the list first.")
            return
        server: McpServer = item.data(SERVER_ROLE)
        self.server_tools.setText(f"Asking {server.name} for its tools…")

        def check() -> None:
            toolbox = Toolbox(ToolSettings([server.name], [], [], [server]))
            try:
                specs, problem = toolbox.listed(server)
            finally:
                toolbox.close()
            names = ", ".join(spec.name for spec in specs)
            self.listed.emit(server.name, problem or (f"Tools: {names}" if names else "It offers no tools."))

        threading.Thread(target=check, name="hearth-mcp-check", daemon=True).start()

    def _show_listed(self, name: str, text: str) -> None:
        item = self.servers.currentItem()
        if item is not None and item.data(SERVER_ROLE).name == name:
            self.server_tools.setText(text)

    def _forget_always(self) -> None:
        self._always = []
        self._show_always()

    def _show_always(self) -> None:
        self.always_note.setText("Runs without asking: " + ", ".join(self._always) if self._always
                                 else "Hearth asks you before every tool runs.")
        self.forget_always.setEnabled(bool(self._always))


def server_from_text(name: str, where: str) -> McpServer:
    """A server from what the user typed: a local address, or a command line."""
    if where.startswith(("http://", "https://")):
        return McpServer(name, url=where)
    try:
        words = shlex.split(where)
    except ValueError:  # an unclosed quote: the whole line is the command
        words = [where]
    return McpServer(name, command=words[0], args=words[1:]) if words else McpServer(name)
