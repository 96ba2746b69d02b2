"""A compact, vertical panel of the worker's live measurements, meant for a dock or side area.

Design:

* The panel is a pure view. It holds no timers and talks to no worker: the window forwards
  :class:`engine.protocol.Telemetry` samples, the :class:`engine.protocol.DevicePlan` from
  ``ModelLoaded`` and the model's name and size, and calls :meth:`TelemetryPanel.clear` when the
  model is unloaded or the worker is gone. While a model loads, the heading says so
  (:meth:`TelemetryPanel.show_loading`), not "No model loaded".
* Every displayed value is one ``QLabel`` registered under a fixed key (see :data:`VALUE_KEYS`)
  with objectName ``telemetry_<key>``; :meth:`TelemetryPanel.values` reads them back, which is
  what tests and accessibility tools see. All text comes from :mod:`ui.formatting`, so
  "unavailable" measurements read "unavailable" and missing ones read "—".
* A speed reads "idle" only when the worker says it is idle (``Telemetry.phase``): a rate is what
  finished within the worker's window, so on a busy machine it can be 0 while an answer is being
  written, and then the row says the phase is running (:data:`RUNNING_TEXT`).
* Speeds get a :class:`~ui.views.sparkline.Sparkline` each (one sample per telemetry event, idle
  samples included, so the time axis stays regular). The row "Memory this conversation uses" shows
  the attention cache in use against what the context set aside for all its tokens
  (``Telemetry.kv_allocated_bytes``), with a :class:`~ui.views.usage_bar.UsageBar` under it that
  fills as it does.
* Row titles are in words a person knows ("Reading speed", "Memory that grows with the chat"); the
  technical term each stands for (prefill, decode, KV cache, recurrent state) is its tooltip
  (:data:`ROW_TERMS`), for whoever wants it.
* A phase's device row shows the device that last *ran* the phase (``Telemetry.phase_devices``)
  over the planned one, naming the plan when they differ; the plan's reason sits below it in a
  small wrapped label and in the tooltip.
* A sample from a remote engine (``Telemetry.remote`` names it) has only what is measured from its
  stream here: time to first token and decode speed. The memory and device rows say which remote
  engine does the work, and what does not apply there (snapshot state, drafting, this computer's
  memory and CPU) says so (:data:`~ui.remote_text.NOT_REMOTE`) instead of showing zeros.
* No colours are set here: labels use palette roles (``PlaceholderText`` for secondary text), so
  the panel follows the system light/dark palette.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from engine.protocol import DevicePlan, Telemetry
from ui.formatting import (
    NO_VALUE,
    fmt_bytes,
    fmt_device,
    fmt_fraction,
    fmt_ms,
    fmt_rate,
    fmt_temperature,
    fmt_throttle,
)
from ui.remote_text import NOT_MEASURED, NOT_REMOTE, remote_engine_text
from ui.views.sparkline import Sparkline
from ui.views.usage_bar import UsageBar

VALUE_KEYS: tuple[str, ...] = (
    "prefill_rate", "decode_rate", "ttft", "draft_acceptance", "memory", "model_size",
    "state_fixed", "state_kv", "kv_cache", "cpu_temperature", "throttling", "prefill_device", "decode_device",
)

ROW_TITLES: dict[str, str] = {
    "prefill_rate": "Reading speed",
    "decode_rate": "Writing speed",
    "ttft": "Wait for the first word",
    "draft_acceptance": "Guesses kept",
    "memory": "Memory Hearth uses",
    "model_size": "Model file",
    "state_fixed": "Memory that stays the same",
    "state_kv": "Memory that grows with the chat",
    "kv_cache": "Memory this conversation uses",
    "cpu_temperature": "Processor temperature",
    "throttling": "Slowed by heat",
    "prefill_device": "Reads on",
    "decode_device": "Writes on",
}
ROW_TERMS: dict[str, str] = {  # each title's technical term, shown as its tooltip
    "prefill_rate": "Prefill: how many tokens of your message (and documents) the model reads per second",
    "decode_rate": "Decode: how many tokens of the answer the model writes per second",
    "ttft": "Time to first token: from sending to the first word of the answer",
    "draft_acceptance": "Draft acceptance: the share of drafted tokens the model kept (answers stay the same)",
    "memory": "Resident memory of Hearth's model process, and what the computer has left",
    "model_size": "The model's weights, as loaded from its file",
    "state_fixed": "Recurrent state: the part of a hybrid model's memory that stays one size however long "
                   "the conversation",
    "state_kv": "Attention KV cache in use: the part of the model's memory that grows with every token",
    "kv_cache": "KV cache: in use, of what the context set aside for all its tokens",
    "cpu_temperature": "CPU temperature",
    "throttling": "CPU throttling: the processor runs below its top speed to cool down",
    "prefill_device": "Prefill device: where the model reads your message",
    "decode_device": "Decode device: where the model writes the answer",
}

PHASES: tuple[str, ...] = ("prefill", "decode")
# Rows that say nothing about a remote engine's work: what this computer's engine would show there.
NOT_REMOTE_KEYS = ("draft_acceptance", "model_size", "state_fixed", "state_kv", "kv_cache", "cpu_temperature",
                   "throttling")
RUNNING_TEXT = {"prefill": "reading…", "decode": "writing…"}  # the phase runs; nothing finished in the window
NO_MODEL_TEXT = "No model loaded"
SECONDARY_FONT_SCALE = 0.85


def _vertical_pair(top: QWidget, bottom: QWidget) -> QWidget:
    """Two widgets stacked tightly, to sit in one value cell."""
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(2)
    layout.addWidget(top)
    layout.addWidget(bottom)
    return box


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    font = label.font()
    font.setWeight(QFont.Weight.DemiBold)
    label.setFont(font)
    return label


class _Rows:
    """Appends rows to a two-column grid: titles top-left aligned, values taking the rest."""

    def __init__(self) -> None:
        self.grid = QGridLayout()
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setColumnStretch(1, 1)
        self._count = 0

    def add_pair(self, title: QLabel, field: QWidget) -> None:
        top_left = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop
        self.grid.addWidget(title, self._count, 0, top_left)
        self.grid.addWidget(field, self._count, 1)
        self._count += 1

    def add_full_width(self, widget: QWidget) -> None:
        self.grid.addWidget(widget, self._count, 0, 1, 2)
        self._count += 1


class TelemetryPanel(QWidget):
    """Live speeds, memory, CPU state and devices of the worker, one labelled value per row."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("telemetry_panel")
        self.setAccessibleName("Telemetry")
        self._labels: dict[str, QLabel] = {key: self._value_label(key) for key in VALUE_KEYS}
        self._reasons: dict[str, QLabel] = {phase: self._reason_label(phase) for phase in PHASES}
        self._plan: DevicePlan | None = None
        self._ran_devices: dict[str, str] = {}
        self._remote = ""  # the remote engine of the last sample, "" for this computer
        self._loading = ""  # what is loading ("Loading …"), said in the heading until the model is in
        self.model_name_label = _heading(NO_MODEL_TEXT)
        self.model_name_label.setObjectName("telemetry_model_name")
        self.model_name_label.setWordWrap(True)
        self.prefill_sparkline = self._sparkline("prefill", "Reading speed")
        self.decode_sparkline = self._sparkline("decode", "Writing speed")
        self.usage_bar = UsageBar()
        self.usage_bar.setObjectName("telemetry_usage_bar")
        self._build_layout()
        self.clear()

    # ------------------------------------------------------------------------------ building

    def _value_label(self, key: str) -> QLabel:
        label = QLabel(NO_VALUE)
        label.setObjectName(f"telemetry_{key}")
        label.setAccessibleName(ROW_TITLES[key])
        label.setAccessibleDescription(ROW_TERMS[key])
        label.setWordWrap(True)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return label

    def _reason_label(self, phase: str) -> QLabel:
        label = QLabel()
        label.setObjectName(f"telemetry_{phase}_device_reason")
        label.setWordWrap(True)
        label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        font = label.font()
        font.setPointSizeF(font.pointSizeF() * SECONDARY_FONT_SCALE)
        label.setFont(font)
        return label

    def _sparkline(self, phase: str, title: str) -> Sparkline:
        sparkline = Sparkline(
            accessible_name=f"{title} history",
            accessible_description=f"{title} in tokens per second, one sample per telemetry update",
        )
        sparkline.setObjectName(f"sparkline_{phase}")
        return sparkline

    def _add_value_row(self, rows: _Rows, key: str, below: QWidget | None = None) -> None:
        field = self._labels[key] if below is None else _vertical_pair(self._labels[key], below)
        title = QLabel(ROW_TITLES[key], wordWrap=True)  # wraps in a narrow dock rather than push the value out
        title.setToolTip(ROW_TERMS[key])
        rows.add_pair(title, field)

    def _build_layout(self) -> None:
        rows = _Rows()
        rows.add_full_width(_heading("Speed"))
        self._add_value_row(rows, "prefill_rate", self.prefill_sparkline)
        self._add_value_row(rows, "decode_rate", self.decode_sparkline)
        self._add_value_row(rows, "ttft")
        self._add_value_row(rows, "draft_acceptance")
        rows.add_full_width(_heading("Memory"))
        self._add_value_row(rows, "memory")
        self._add_value_row(rows, "model_size")
        self._add_value_row(rows, "state_fixed")
        self._add_value_row(rows, "state_kv")
        self._add_value_row(rows, "kv_cache", self.usage_bar)
        rows.add_full_width(_heading("CPU"))
        self._add_value_row(rows, "cpu_temperature")
        self._add_value_row(rows, "throttling")
        rows.add_full_width(_heading("Devices"))
        for phase in PHASES:
            self._add_value_row(rows, f"{phase}_device", self._reasons[phase])
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 6)
        outer.addWidget(self.model_name_label)
        outer.addLayout(rows.grid)
        outer.addStretch(1)

    # ----------------------------------------------------------------------------- updating

    def _set(self, key: str, text: str) -> None:
        self._labels[key].setText(text)

    def show_telemetry(self, t: Telemetry) -> None:
        """Show one sample: every value row, one point per sparkline, the devices that ran."""
        if t.remote:
            self._show_remote(t)
            return
        self._remote = ""
        self._set("prefill_rate", _rate_text("prefill", t.prefill_tok_s, t.phase))
        self._set("decode_rate", _rate_text("decode", t.decode_tok_s, t.phase))
        self.prefill_sparkline.add(t.prefill_tok_s)
        self.decode_sparkline.add(t.decode_tok_s)
        self._set("ttft", fmt_ms(t.ttft_ms))
        self._set("draft_acceptance", fmt_fraction(t.draft_acceptance))
        self._set("memory", f"{fmt_bytes(t.rss_bytes)} ({fmt_bytes(t.available_bytes)} available)")
        if t.model_bytes > 0:  # 0 while a model loads or unloads: the last known size stays
            self._set("model_size", fmt_bytes(t.model_bytes))
        self._set("state_fixed", fmt_bytes(t.state_fixed_bytes))
        self._set("state_kv", fmt_bytes(t.state_kv_bytes))
        self._set("kv_cache", _kv_cache_text(t.state_kv_bytes, t.kv_allocated_bytes))
        self.usage_bar.set_usage(t.state_kv_bytes or 0, t.kv_allocated_bytes)
        self._set("cpu_temperature", fmt_temperature(t.cpu_temp_c))
        self._show_throttling(fmt_throttle(t.throttled, t.cpu_freq_mhz, t.cpu_freq_max_mhz), t.throttled is True)
        self._ran_devices = dict(t.phase_devices)
        self._refresh_devices()

    def _show_remote(self, t: Telemetry) -> None:
        """A remote engine's sample: its measured speeds; the engine where memory and devices would be."""
        self._remote = t.remote
        self._set("prefill_rate", fmt_rate(t.prefill_tok_s) if t.prefill_tok_s > 0 else NOT_MEASURED)
        self._set("decode_rate", _rate_text("decode", t.decode_tok_s, t.phase))
        self.prefill_sparkline.add(t.prefill_tok_s)
        self.decode_sparkline.add(t.decode_tok_s)
        self._set("ttft", fmt_ms(t.ttft_ms))
        self._set("memory", remote_engine_text(t.remote))
        for key in NOT_REMOTE_KEYS:
            self._set(key, NOT_REMOTE)
        self._show_throttling(NOT_REMOTE, throttled=False)
        self.usage_bar.clear()
        self._ran_devices = {}
        self._refresh_devices()

    def _show_throttling(self, text: str, throttled: bool) -> None:
        """The text, in bold while the CPU is throttled so the row stands out."""
        label = self._labels["throttling"]
        label.setText(text)
        font = label.font()
        font.setBold(throttled)
        label.setFont(font)

    def show_device_plan(self, plan: DevicePlan) -> None:
        """Show where each phase runs and why: the plan from ``ModelLoaded``, then what the last
        answer's ``Finished`` says actually ran (a long input may go to the NPU, a short one not)."""
        self._plan = plan
        self._ran_devices = {}
        if plan.decode.device != "remote":  # back on this computer: its own samples follow
            self._remote = ""
        self._refresh_devices()

    def _refresh_devices(self) -> None:
        for phase in PHASES:
            planned = getattr(self._plan, phase) if self._plan is not None else None
            text = fmt_device(planned.device if planned else None, self._ran_devices.get(phase))
            reason = planned.reason if planned else ""
            if self._remote or (planned is not None and planned.device == "remote"):
                text, reason = remote_engine_text(self._remote) if self._remote else reason, ""
            self._set(f"{phase}_device", text)
            self._labels[f"{phase}_device"].setToolTip(reason)
            self._reasons[phase].setText(reason)
            self._reasons[phase].setToolTip(reason)
            self._reasons[phase].setVisible(bool(reason))

    def show_loading(self, text: str, fraction: float) -> None:
        """A model is loading (``text``: "Loading SmolLM2 135M Instruct…"), which the heading says instead
        of "No model loaded"; ``fraction`` below 0: the load is over (:meth:`show_model` follows a success)."""
        self._loading = text if fraction >= 0 else ""
        self.model_name_label.setText(self._loading or NO_MODEL_TEXT)
        self.model_name_label.setToolTip("")

    def show_model(self, name: str, size_bytes: int) -> None:
        self._loading = ""
        self.model_name_label.setText(name or NO_MODEL_TEXT)
        self.model_name_label.setToolTip(name)
        self._set("model_size", fmt_bytes(size_bytes))

    def clear(self) -> None:
        """No model or no worker: every value reads "—", charts and devices are emptied."""
        for key in VALUE_KEYS:
            self._set(key, NO_VALUE)
        self._show_throttling(NO_VALUE, throttled=False)
        self.prefill_sparkline.clear()
        self.decode_sparkline.clear()
        self.usage_bar.clear()
        self.model_name_label.setText(self._loading or NO_MODEL_TEXT)  # a worker that died is loading again
        self.model_name_label.setToolTip("")
        self._plan = None
        self._ran_devices = {}
        self._remote = ""
        self._refresh_devices()

    def values(self) -> dict[str, str]:
        """The text currently displayed for each key of :data:`VALUE_KEYS`."""
        return {key: self._labels[key].text() for key in VALUE_KEYS}


def _kv_cache_text(used_bytes: int | None, allocated_bytes: int) -> str:
    """``"36.0 MiB of 512.0 MiB (7 %)"``: the attention cache in use of the one set aside; "—" when none is."""
    if allocated_bytes <= 0:
        return NO_VALUE
    used = used_bytes or 0
    return f"{fmt_bytes(used)} of {fmt_bytes(allocated_bytes)} ({100 * used / allocated_bytes:.0f} %)"


def _rate_text(phase: str, tok_s: float, running: str) -> str:
    """The phase's rate; while the worker is in that phase with no rate yet, that it is running."""
    return RUNNING_TEXT[phase] if phase == running and tok_s <= 0 else fmt_rate(tok_s)
