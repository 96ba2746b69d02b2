"""Which model answers: the embedded default, the models installed under the data folder, any
GGUF file the user opens, or a remote engine (``engine:NAME``, set up in Settings → Engines); and
the way to the Models page. Shows loading progress; a failed load is explained in the banner."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QFileDialog, QHBoxLayout, QLabel, QProgressBar, QWidget

from model_store.installed import EMBEDDED_NAME, InstalledModel

DEFAULT_LABEL = f"{EMBEDDED_NAME} (embedded default)"
OPEN_FILE = "__open_file__"
MANAGE = "__manage__"


class ModelPicker(QWidget):
    model_chosen = Signal(str)  # "default", a path or "engine:NAME"
    manage_requested = Signal()  # "Download or import models…"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.combo = QComboBox()
        self.combo.setObjectName("model_picker")
        self.combo.setAccessibleName("Model")
        self.combo.setMinimumContentsLength(28)
        self.progress = QProgressBar(maximum=100, textVisible=True)
        self.progress.setObjectName("model_progress")
        self.progress.setMaximumWidth(180)
        self.progress.hide()
        self.state = QLabel()
        self.state.setObjectName("model_state")
        layout.addWidget(QLabel("Model:", buddy=self.combo))
        layout.addWidget(self.combo, 1)
        layout.addWidget(self.progress)
        layout.addWidget(self.state)
        self._current = "default"
        self._installed: list[InstalledModel] = []
        self._engines: list[tuple[str, str]] = []  # (reference, label) of each remote engine
        self.combo.activated.connect(self._activated)

    def set_engines(self, engines: list[tuple[str, str]]) -> None:
        """List these remote engines (``("engine:NAME", label)``) after the local models."""
        self._engines = list(engines)
        self.set_models(self._installed, self._current)

    def set_models(self, installed: list[InstalledModel], current: str) -> None:
        self._installed = list(installed)
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItem(DEFAULT_LABEL, "default")
        for model in installed:
            self.combo.addItem(f"{model.name} ({model.size_bytes / 2**20:,.0f} MiB)", str(model.path))
        for ref, label in self._engines:
            self.combo.addItem(label, ref)
        if current != "default" and self.combo.findData(current) < 0:
            self.combo.addItem(Path(current).name, current)
        self.combo.addItem("Open a GGUF file…", OPEN_FILE)
        self.combo.addItem("Download or import models…", MANAGE)
        self.combo.blockSignals(False)
        self.set_current(current)

    def set_current(self, ref: str) -> None:
        self._current = ref
        index = self.combo.findData(ref)
        if index >= 0:
            self.combo.setCurrentIndex(index)

    def show_progress(self, text: str, fraction: float) -> None:
        """Loading: ``fraction`` in 0..1; below 0 hides the bar."""
        loading = fraction >= 0
        self.progress.setVisible(loading)
        self.progress.setValue(int(max(0.0, fraction) * 100))
        self.progress.setFormat(f"{text} %p%" if text else "%p%")
        self.state.setText("" if loading else self.state.text())

    def show_state(self, text: str) -> None:
        self.state.setText(text)

    def _activated(self, index: int) -> None:
        ref = self.combo.itemData(index)
        if ref == MANAGE:
            self.set_current(self._current)
            self.manage_requested.emit()
            return
        if ref == OPEN_FILE:
            path, _ = QFileDialog.getOpenFileName(self, "Open a model", "", "GGUF models (*.gguf);;All files (*)")
            self.set_current(self._current)
            if not path:
                return
            self.combo.insertItem(self.combo.findData(OPEN_FILE), Path(path).name, path)
            ref = path
        if ref != self._current:
            self.set_current(ref)
            self.model_chosen.emit(ref)
