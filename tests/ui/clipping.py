"""Which words a window cuts off: a walker over a shown widget tree, for tests at any text size.

:func:`cut_off` returns one line per visible widget whose text does not fit where the layout put it:

- a single-line QLabel whose text (plain or rich) is wider than its contents;
- a word-wrapped QLabel whose wrapped text is taller than the label;
- a QLabel's picture (a logo) larger than the label;
- a QPushButton, QCheckBox or QRadioButton squeezed below the width its text needs;
- a QLineEdit's placeholder or a QComboBox's current entry wider than its text area;
- an :class:`~ui.views.elided_label.ElidedLabel` whose essential part (:attr:`essential_elided`) is cut
  (the rest of its text may be: it is in its tooltip);
- any of those reaching past the window's edge, past a parent that is not a scroll area, or past the
  side of a scroll area that does not scroll sideways.

Titles in a list are drawn by delegates, not widgets: a list may cut them (its tooltip has them whole).
"""

from __future__ import annotations

import math

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import Qt as GuiQt, QTextDocument
from PySide6.QtWidgets import (QAbstractButton, QAbstractScrollArea, QCheckBox, QComboBox, QLabel, QLineEdit,
                               QPushButton, QRadioButton, QStyle, QStyleOptionComboBox, QToolButton, QWidget)

from ui.views.elided_label import ElidedLabel

SLACK = 1  # px: rounding between a text's measured width and the pixels it is given


def cut_off(root: QWidget) -> list[str]:
    """What ``root`` (a shown window or dialog) cuts off: one line per widget, empty when all fits."""
    problems = []
    for widget in [root, *root.findChildren(QWidget)]:
        if not widget.isVisibleTo(root) and widget is not root or widget.width() <= 0:
            continue
        problem = _text_problem(widget) or _outside_problem(widget, root)
        if problem:
            problems.append(f"{_name(widget)}: {problem}")
    return problems


def _text_problem(widget: QWidget) -> str:
    if isinstance(widget, ElidedLabel):
        cut = getattr(widget, "essential_elided", widget.shown_text() != widget.text())  # (older labels: any cut)
        return f"cut to {widget.shown_text()!r}" if cut else ""
    if isinstance(widget, QLabel):
        return _label_problem(widget)
    if isinstance(widget, (QPushButton, QCheckBox, QRadioButton)) and widget.text():
        need = widget.minimumSizeHint().width()
        return f"{widget.width()} px wide, its text needs {need}" if widget.width() + SLACK < need else ""
    if isinstance(widget, QLineEdit) and widget.placeholderText() and not widget.text():
        return _line_edit_problem(widget)
    if isinstance(widget, QComboBox) and widget.currentText():
        return _combo_problem(widget)
    return ""


def _label_problem(label: QLabel) -> str:
    room = label.contentsRect()
    pixmap = label.pixmap()
    if pixmap is not None and not pixmap.isNull():
        size = pixmap.deviceIndependentSize()
        if size.width() > room.width() + SLACK or size.height() > room.height() + SLACK:
            return f"its picture is {size.width():.0f}×{size.height():.0f}, shown in {room.width()}×{room.height()}"
        return ""
    if not label.text():
        return ""
    if label.wordWrap():
        need = label.heightForWidth(label.width())
        return f"{label.height()} px tall, its wrapped text needs {need}" if label.height() + SLACK < need else ""
    need = _text_width(label)
    return f"{room.width()} px wide, its text needs {need}" if room.width() + SLACK < need else ""


def _text_width(label: QLabel) -> int:
    """The width ``label``'s text takes on one line per paragraph, plain or rich."""
    text = label.text()
    rich = label.textFormat() == Qt.TextFormat.RichText or (
        label.textFormat() == Qt.TextFormat.AutoText and GuiQt.mightBeRichText(text))
    if not rich:
        shown = text.replace("&&", "\0").replace("&", "").replace("\0", "&") if label.buddy() else text  # mnemonic
        return max(label.fontMetrics().horizontalAdvance(line) for line in shown.split("\n"))
    doc = QTextDocument()
    doc.setDefaultFont(label.font())
    doc.setDocumentMargin(0)
    doc.setHtml(text)
    return math.ceil(doc.idealWidth())


def _line_edit_problem(edit: QLineEdit) -> str:
    margins = edit.textMargins()
    buttons = sum(b.width() for b in edit.findChildren(QToolButton) if b.isVisibleTo(edit))
    room = edit.contentsRect().width() - margins.left() - margins.right() - buttons - 4  # Qt's 2 px a side
    need = edit.fontMetrics().horizontalAdvance(edit.placeholderText())
    return f"placeholder needs {need} px, has {room}" if room + SLACK < need else ""


def _combo_problem(combo: QComboBox) -> str:
    option = QStyleOptionComboBox()
    combo.initStyleOption(option)
    field = combo.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                         QStyle.SubControl.SC_ComboBoxEditField, combo)
    icon = combo.iconSize().width() + 4 if not combo.itemIcon(combo.currentIndex()).isNull() else 0
    need = combo.fontMetrics().horizontalAdvance(combo.currentText()) + icon
    return f"{combo.currentText()!r} needs {need} px, has {field.width()}" if field.width() + SLACK < need else ""


def _outside_problem(widget: QWidget, root: QWidget) -> str:
    """A widget that matters reaching past the window, or past a parent that does not scroll."""
    if widget is root or not isinstance(widget, (QLabel, QAbstractButton, QLineEdit, QComboBox)):
        return ""
    if isinstance(widget, QToolButton) and isinstance(widget.parentWidget(), QLineEdit):
        return ""  # a line edit's own clear button
    area = _scroll_area(widget, root)
    if area is not None:  # out of sight is scrolled, not cut; but a side that cannot scroll cuts
        if area.horizontalScrollBarPolicy() != Qt.ScrollBarPolicy.ScrollBarAlwaysOff:
            return ""
        inside = QRect(widget.mapTo(area.viewport(), QPoint(0, 0)), widget.size())
        if inside.left() < 0 or inside.right() > area.viewport().width():
            return f"reaches past the side of {_name(area)}, which does not scroll sideways ({_rect(inside)})"
        return ""
    rect = QRect(widget.mapTo(root, QPoint(0, 0)), widget.size())
    if not root.rect().contains(rect):
        return f"reaches past the window ({_rect(rect)} in {_rect(root.rect())})"
    parent = widget.parentWidget()
    while parent is not None and parent is not root:
        inside = QRect(widget.mapTo(parent, QPoint(0, 0)), widget.size())
        if not parent.rect().contains(inside):
            return f"reaches past {_name(parent)} ({_rect(inside)} in {_rect(parent.rect())})"
        parent = parent.parentWidget()
    return ""


def _scroll_area(widget: QWidget, root: QWidget) -> QAbstractScrollArea | None:
    """The nearest scroll area ``widget`` is in, under ``root``."""
    parent = widget.parentWidget()
    while parent is not None and parent is not root:
        if isinstance(parent, QAbstractScrollArea):
            return parent
        parent = parent.parentWidget()
    return None


def _rect(rect: QRect) -> str:
    return f"{rect.width()}×{rect.height()} at {rect.x()},{rect.y()}"


def _name(widget: QWidget) -> str:
    text = widget.text() if hasattr(widget, "text") and callable(widget.text) else ""
    text = text if isinstance(text, str) else ""
    return f"{type(widget).__name__}#{widget.objectName() or '?'} {text[:50]!r}"
