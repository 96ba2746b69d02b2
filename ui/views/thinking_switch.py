"""The composer's "Think before answering" switch, and what it shows for the loaded model.

A reasoning model's chat template may have an ``enable_thinking`` switch (``ModelFacts.thinking_switch``);
only then can the user choose, per conversation. For other models the switch says what happens
instead of offering a choice: a model that always thinks shows it checked and disabled, with a
tooltip saying its template has no switch; a model that never thinks (most models), or no model
loaded, hides it, so the composer stays as it was. :func:`switch_state` decides; the window's
:class:`~ui.thinking_choice.ThinkingChoice` keeps the choice.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QWidget

from engine.protocol import ModelFacts

LABEL = "Think before answering"
CHOICE_TIP = ("Let the model reason before it answers (its thinking shows above the answer, closed once the "
              "answer begins). Kept for this conversation.")
NO_SWITCH_TIP = ("This model always thinks before answering: its chat template has no switch to turn thinking "
                 "off.")


@dataclass(frozen=True)
class SwitchState:
    visible: bool
    enabled: bool
    checked: bool
    tip: str = ""


HIDDEN = SwitchState(visible=False, enabled=False, checked=False)


def switch_state(facts: ModelFacts | None, chosen: bool | None) -> SwitchState:
    """The switch for the loaded model's ``facts`` (None: none loaded) and the conversation's
    ``chosen`` setting (None: never chosen, so the model's default)."""
    if facts is None:
        return HIDDEN
    if facts.thinking_switch:
        return SwitchState(True, True, facts.thinks if chosen is None else chosen, CHOICE_TIP)
    if facts.thinks:
        return SwitchState(True, False, True, NO_SWITCH_TIP)
    return HIDDEN


class ThinkingSwitch(QCheckBox):
    """A check box whose :attr:`chosen` says the user (not the window) turned it on or off."""

    chosen = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(LABEL, parent)
        self.setObjectName("thinking_switch")
        self.state = HIDDEN
        self.show_state(HIDDEN)
        self.clicked.connect(self.chosen)  # clicks and Space; setChecked from show_state is not a choice

    def show_state(self, state: SwitchState) -> None:
        self.state = state
        self.setChecked(state.checked)
        self.setEnabled(state.enabled)
        self.setToolTip(state.tip)
        self.setAccessibleDescription(state.tip)
        self.setVisible(state.visible)
