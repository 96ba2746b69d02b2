"""Settings → Performance: where the input is read (CPU or NPU) and how answers are drafted.

Drafting never changes an answer; it only makes writing it faster. A file is asked for only when
the choice is "Draft model" or "EAGLE-3 head".
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QFileDialog, QLabel, QLineEdit, QWidget

from app.services.settings import DRAFT_MAX_RANGE, DRAFT_PATHS_RANGE, Settings
from engine.protocol.draft_choice import PATH_KINDS
from ui.views.settings.form import FieldRows, SettingsTab, browse_button, combo, note, select, spin

DRAFT_CHOICES = (("auto", "Auto"), ("off", "Off"), ("lookup", "Prompt lookup"), ("mtp", "MTP heads"), ("model", "Draft model"),
                 ("eagle3", "EAGLE-3 head"))
DEVICE_CHOICES = (("auto", "Auto"), ("cpu", "CPU"), ("npu", "NPU"))


class PerformanceTab(SettingsTab):
    title = "Performance"
    fields = ("device_policy", "draft", "draft_max", "draft_paths")

    def __init__(self, rows: FieldRows, *, npu_available: bool, npu_label: str) -> None:
        super().__init__(rows)
        device = self.group("Device")
        self.device_policy = combo("device_policy", DEVICE_CHOICES)
        self.device_policy.setItemText(2, npu_label if npu_available else "NPU (not found on this machine)")
        rows.row(device, "D&evice:", "device_policy", self.device_policy)
        drafting = self.group("Drafting")
        self.draft_kind = combo("draft_kind", DRAFT_CHOICES)
        self.draft_path = QLineEdit(objectName="draft_path", placeholderText="A .gguf draft model")
        self.draft_browse = browse_button()
        self.draft_browse.clicked.connect(self._browse_draft_model)
        self.draft_max = spin("draft_max", *DRAFT_MAX_RANGE)
        self.draft_paths = spin("draft_paths", *DRAFT_PATHS_RANGE)
        drafting.addRow(QLabel("&Drafting:", buddy=self.draft_kind), self.draft_kind)
        rows.row(drafting, "Draft mode&l:", "draft", self.draft_path, self.draft_browse)
        rows.row(drafting, "Max dra&ft length:", "draft_max", self.draft_max)
        rows.row(drafting, "Draft pat&hs:", "draft_paths", self.draft_paths)
        drafting.addRow("", note("Drafting guesses the next words and checks them in one step: answers come "
                                 "faster and stay exactly the same. More than one path checks several guesses "
                                 "side by side; it pays only when guesses often differ."))
        self.draft_kind.currentIndexChanged.connect(self._update_draft_path_enabled)
        self.finish()

    def fill(self, s: Settings) -> None:
        select(self.device_policy, s.device_policy)
        kind, _, path = s.draft.partition(":")
        select(self.draft_kind, kind)
        self.draft_path.setText(path if kind in PATH_KINDS else "")
        self.draft_max.setValue(s.draft_max)
        self.draft_paths.setValue(s.draft_paths)
        self._update_draft_path_enabled()

    def values(self) -> dict[str, Any]:
        kind = self.draft_kind.currentData()
        draft = f"{kind}:{self.draft_path.text().strip()}" if kind in PATH_KINDS else kind
        return {"device_policy": self.device_policy.currentData(), "draft": draft, "draft_max": self.draft_max.value(),
                "draft_paths": self.draft_paths.value()}

    def focus_widget(self, field: str) -> QWidget:
        if field == "draft":
            return self.draft_path if self.draft_kind.currentData() in PATH_KINDS else self.draft_kind
        return getattr(self, field)

    def _update_draft_path_enabled(self) -> None:
        kind = self.draft_kind.currentData()
        wants_path = kind in PATH_KINDS
        self.draft_path.setPlaceholderText("A .gguf EAGLE-3 head for this model" if kind == "eagle3"
                                           else "A .gguf draft model")
        self.draft_path.setEnabled(wants_path)
        self.draft_browse.setEnabled(wants_path)

    def _browse_draft_model(self) -> None:
        what = "an EAGLE-3 head" if self.draft_kind.currentData() == "eagle3" else "a draft model"
        path, _ = QFileDialog.getOpenFileName(self, f"Choose {what}", self.draft_path.text(), "GGUF models (*.gguf)")
        if path:
            self.draft_path.setText(path)
