"""What every Settings tab is built with: labelled rows with an error label under each, input
widgets, and the tab base class.

Each input widget's ``objectName`` is its Settings field name; each row has a hidden
``error_<field>`` label under it, kept by the dialog's one :class:`FieldRows`, that shows that
field's message. A tab edits some fields (:attr:`SettingsTab.fields`, in form order): it fills its
widgets from a :class:`Settings` and gives back what they say (:meth:`SettingsTab.values`). Number
boxes allow more than the rules do, so an out-of-range value gets the rules' message
(:func:`app.services.settings.validate_settings`) rather than a silent clamp.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFormLayout, QFrame, QGroupBox, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QScrollArea, QSpinBox, QVBoxLayout, QWidget)

from app.services.settings import Settings
from ui.theme import SPACE_S, set_tone


def spin(name: str, low: int, high: int) -> QSpinBox:
    box = QSpinBox(objectName=name)
    box.setRange(low, high)
    return box


def double_spin(name: str, low: float, high: float, step: float, decimals: int = 3) -> QDoubleSpinBox:
    box = QDoubleSpinBox(objectName=name)
    box.setDecimals(decimals)
    box.setRange(low, high)
    box.setSingleStep(step)
    return box


def combo(name: str, choices: tuple[tuple[Any, str], ...]) -> QComboBox:
    box = QComboBox(objectName=name)
    for value, text in choices:
        box.addItem(text, value)
    return box


def select(box: QComboBox, value: Any) -> None:
    """Show ``value``'s item (the first item when there is none)."""
    box.setCurrentIndex(max(box.findData(value), 0))


def browse_button() -> QPushButton:
    button = QPushButton("Browse…")
    button.setAutoDefault(False)  # Enter still means OK when the button has focus
    return button


def wrapping_form() -> QFormLayout:
    """A form whose rows put the field under its caption when both do not fit side by side (a narrow
    screen, a large text size), so the page is never wider than its widest field."""
    form = QFormLayout()
    form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
    return form


def note(text: str) -> QLabel:
    """A line of explanation under a row."""
    return QLabel(text, wordWrap=True)


class FieldRows:
    """The dialog's rows: each made with an error label for its field, kept here by field name."""

    def __init__(self) -> None:
        self.errors: dict[str, QLabel] = {}

    def row(self, form: QFormLayout, label: str, field: str, *widgets: QWidget) -> None:
        """One labelled row: the widgets side by side, with the field's error label underneath."""
        error = QLabel(objectName=f"error_{field}", wordWrap=True, visible=False)
        set_tone(error, "bad")  # red in light and dark (ui.theme)
        self.errors[field] = error
        cell = QWidget()
        column = QVBoxLayout(cell)
        column.setContentsMargins(0, 0, 0, 0)
        line = QHBoxLayout()
        for widget in widgets:
            line.addWidget(widget, stretch=1 if isinstance(widget, QLineEdit) else 0)
        column.addLayout(line)
        column.addWidget(error)
        caption = QLabel(label)
        caption.setBuddy(widgets[0])
        form.addRow(caption, cell)

    def show(self, errors: dict[str, str]) -> None:
        for name, label in self.errors.items():
            label.setText(errors.get(name, ""))
            label.setVisible(name in errors)


class SettingsTab(QWidget):
    """One page of the dialog: its groups in a column, built with the dialog's rows."""

    title = ""
    fields: tuple[str, ...] = ()  # the Settings fields whose messages it shows, in form order

    def __init__(self, rows: FieldRows) -> None:
        super().__init__()
        self.rows = rows
        self.column = QVBoxLayout(self)
        self.column.setContentsMargins(SPACE_S, SPACE_S, SPACE_S, SPACE_S)

    def group(self, title: str) -> QFormLayout:
        """A titled group at the end of the page; its form, for rows."""
        box, form = QGroupBox(title), wrapping_form()
        box.setLayout(form)
        self.column.addWidget(box)
        return form

    def finish(self) -> None:
        """Keep the groups at the top of a tall page."""
        self.column.addStretch(1)

    def fill(self, s: Settings) -> None:
        raise NotImplementedError

    def values(self) -> dict[str, Any]:
        """The Settings fields this tab edits, as its widgets say."""
        raise NotImplementedError

    def focus_widget(self, field: str) -> QWidget:
        """The widget that takes focus when ``field`` has a message."""
        return getattr(self, field)


class PageScroll(QScrollArea):
    """A page that scrolls up and down, never sideways: as narrow as the page can be (its wrapped
    labels wrap), and as tall as the page up to ``room`` pixels. The sizes follow the text size."""

    def __init__(self, page: QWidget, room: int) -> None:
        super().__init__(widgetResizable=True, frameShape=QFrame.Shape.NoFrame)
        self.room = room
        self.setWidget(page)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def _size(self, page: QSize) -> QSize:
        return QSize(page.width() + self.verticalScrollBar().sizeHint().width(), min(page.height(), self.room))

    def sizeHint(self) -> QSize:
        return self._size(self.widget().sizeHint())

    def minimumSizeHint(self) -> QSize:
        return self._size(QSize(self.widget().minimumSizeHint().width(), self.widget().sizeHint().height()))


def scrolling(page: QWidget, room: int) -> QScrollArea:
    """``page`` in a frameless scroll area (:class:`PageScroll`)."""
    return PageScroll(page, room)
