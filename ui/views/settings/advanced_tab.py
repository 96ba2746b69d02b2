"""Settings → Advanced: the memory an automatic context may use, the attention cache's precision,
and the disk kept for saved conversation state (snapshots)."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QCheckBox

from app.services.settings import SNAPSHOT_BUDGET_GIB_RANGE, Settings
from ui.views.settings.form import FieldRows, SettingsTab, double_spin, note, spin


class AdvancedTab(SettingsTab):
    title = "Advanced"
    fields = ("kv_cache_8bit", "memory_budget_percent", "snapshot_budget_gib")

    def __init__(self, rows: FieldRows) -> None:
        super().__init__(rows)
        memory = self.group("Memory")
        self.kv_cache_8bit = QCheckBox("&Halve the memory a conversation uses", objectName="kv_cache_8bit")
        self.kv_cache_8bit.setToolTip("8-bit KV cache: the attention cache is kept in 8 bits instead of 16")
        self.memory_budget_percent = spin("memory_budget_percent", 1, 100)
        self.memory_budget_percent.setSuffix(" %")
        self.memory_budget_percent.setToolTip("The share of the memory available at load time an automatic "
                                              "context may fill, with the model")
        rows.row(memory, "", "kv_cache_8bit", self.kv_cache_8bit)
        memory.addRow("", note("Answers may then differ slightly from those without it."))
        rows.row(memory, "Memory b&udget for automatic context:", "memory_budget_percent", self.memory_budget_percent)
        saved = self.group("Saved state")
        low, high = SNAPSHOT_BUDGET_GIB_RANGE
        self.snapshot_budget_gib = double_spin("snapshot_budget_gib", low, high, 0.5, decimals=1)
        self.snapshot_budget_gib.setSuffix(" GiB")
        rows.row(saved, "Disk for saved conversations' &state:", "snapshot_budget_gib", self.snapshot_budget_gib)
        self.snapshot_budget_gib.setToolTip("Snapshot budget: disk for the model's saved state after each answer")
        saved.addRow("", note("Disk for the saved state that lets a conversation go on without reading it again. "
                              "A new budget is used after Hearth restarts."))
        self.finish()

    def fill(self, s: Settings) -> None:
        self.kv_cache_8bit.setChecked(s.kv_cache_8bit)
        self.memory_budget_percent.setValue(s.memory_budget_percent)
        self.snapshot_budget_gib.setValue(s.snapshot_budget_gib)

    def values(self) -> dict[str, Any]:
        return {"kv_cache_8bit": self.kv_cache_8bit.isChecked(), "memory_budget_percent": self.memory_budget_percent.value(),
                "snapshot_budget_gib": self.snapshot_budget_gib.value()}
