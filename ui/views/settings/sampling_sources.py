"""Settings → Model → Answers: beside each sampling value, where it comes from.

A value the user never set follows the model shown (the loaded or chosen one): its GGUF's own
``general.sampling.*`` keys, else its family's values in the catalogue, else Hearth's
(:mod:`app.services.sampling_defaults`). The box then shows that value and its label says
"from the model", "from the catalogue" or "Hearth's default". Changing a value makes it the user's
("yours"); "Use the model's values" gives every field back to the model. What the tab saves is the
user's values only: a field left to the model is None in :class:`app.services.settings.Settings`.
"""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractSpinBox, QLabel, QPushButton

from app.services.sampling_defaults import FIELDS, ResolvedSampling
from app.services.settings import Settings

RESET_TEXT = "Use the &model's values"
RESET_TIP = "Forget the values you set here, so each follows the model's own recommendation."


class SamplingSources:
    """The source labels and the reset button of the sampling rows, and which values are the user's."""

    def __init__(self, boxes: dict[str, QAbstractSpinBox], defaults: ResolvedSampling) -> None:
        self.boxes, self.defaults = boxes, defaults
        self.yours: set[str] = set()
        self._filling = False
        self.labels = {name: QLabel(objectName=f"source_{name}") for name in FIELDS}
        self.reset_button = QPushButton(RESET_TEXT, objectName="use_model_sampling", toolTip=RESET_TIP)
        self.reset_button.setAutoDefault(False)
        self.reset_button.clicked.connect(self.use_model_values)
        for name, box in boxes.items():
            box.valueChanged.connect(lambda _value, name=name: self._edited(name))

    def fill(self, s: Settings) -> None:
        """Show ``s``'s own values, and the model's where ``s`` has none."""
        self.yours = {name for name in FIELDS if getattr(s, name) is not None}
        self._show({name: getattr(s, name) if name in self.yours else self.defaults.values[name] for name in FIELDS})

    def use_model_values(self) -> None:
        self.yours.clear()
        self._show(dict(self.defaults.values))

    def values(self) -> dict[str, float | int | None]:
        """The Settings fields: the user's values, None where the model's are followed."""
        return {name: self.boxes[name].value() if name in self.yours else None for name in FIELDS}

    def label(self, name: str) -> str:
        return self.defaults.with_yours(**{n: self.boxes[n].value() for n in self.yours}).label(name)

    def _show(self, values: dict[str, float | int]) -> None:
        self._filling = True
        try:
            for name, value in values.items():
                self.boxes[name].setValue(value)
        finally:
            self._filling = False
        self._update_labels()

    def _edited(self, name: str) -> None:
        if not self._filling:
            self.yours.add(name)
            self._update_labels()

    def _update_labels(self) -> None:
        for name, label in self.labels.items():
            label.setText(self.label(name))
            model_value = self.defaults.values[name]
            label.setToolTip(f"The model's own value is {model_value:g} ({self.defaults.label(name)})."
                             if name in self.yours else "")
        self.reset_button.setEnabled(bool(self.yours))
