"""The theme and the text size (ui/theme.py): light and dark palettes, following the system's colour
scheme, and a text size that scales the app's font (from the platform's, not from the last size)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QLabel

from ui import theme


@pytest.fixture
def app(appearance):
    return appearance


def lightness(app: QApplication, role: QPalette.ColorRole) -> int:
    return app.palette().color(role).lightness()


def test_light_and_dark_set_the_palette_the_widgets_paint_with(app, qtbot):
    label = QLabel("Hello")
    qtbot.addWidget(label)
    theme.apply_appearance(app, theme="dark", text_size=100)
    assert lightness(app, QPalette.ColorRole.Base) < 60 and lightness(app, QPalette.ColorRole.Text) > 200
    qtbot.waitUntil(lambda: label.palette().color(QPalette.ColorRole.WindowText).lightness() > 200, timeout=2_000)
    assert theme.current_scheme() == "dark"
    theme.apply_appearance(app, theme="light", text_size=100)
    assert lightness(app, QPalette.ColorRole.Base) > 240 and lightness(app, QPalette.ColorRole.Text) < 60
    qtbot.waitUntil(lambda: label.palette().color(QPalette.ColorRole.WindowText).lightness() < 60, timeout=2_000)
    assert theme.current_scheme() == "light"


def test_system_follows_the_colour_scheme_the_os_reports_and_a_chosen_theme_does_not(app):
    theme.apply_appearance(app, theme="system", text_size=100)
    hints = app.styleHints()
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)  # what Qt emits when the OS switches to dark
    assert theme.current_scheme() == "dark" and lightness(app, QPalette.ColorRole.Window) < 60
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Light)
    assert theme.current_scheme() == "light" and lightness(app, QPalette.ColorRole.Window) > 200

    theme.apply_appearance(app, theme="light", text_size=100)
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert theme.current_scheme() == "light", "a chosen theme stays when the OS switches"


def test_text_size_scales_the_app_font_from_the_platform_size(app, qtbot):
    platform = app.font().pointSizeF()
    theme.apply_appearance(app, theme="light", text_size=150)
    label = QLabel("Hello")
    qtbot.addWidget(label)
    assert app.font().pointSizeF() == pytest.approx(platform * 1.5, abs=0.05)
    assert label.font().pointSizeF() == pytest.approx(platform * 1.5, abs=0.05), "widgets made after"
    theme.apply_appearance(app, theme="light", text_size=150)
    assert app.font().pointSizeF() == pytest.approx(platform * 1.5, abs=0.05), "not compounded"
    theme.apply_appearance(app, theme="dark", text_size=100)
    assert app.font().pointSizeF() == pytest.approx(platform, abs=0.05)
    qtbot.waitUntil(lambda: label.font().pointSizeF() == pytest.approx(platform, abs=0.05), timeout=2_000)


def test_the_type_scale_follows_the_text_size(app, qtbot):
    caption, title = QLabel("small"), QLabel("Big")
    for label, kind in ((caption, "caption"), (title, "title")):
        qtbot.addWidget(label)
        theme.set_type(label, kind)
        label.show()
    theme.apply_appearance(app, theme="light", text_size=100)
    small, big = caption.font().pointSizeF(), title.font().pointSizeF()
    assert small < app.font().pointSizeF() < big
    theme.apply_appearance(app, theme="light", text_size=130)
    assert caption.font().pointSizeF() == pytest.approx(small * 1.3, abs=0.15)
    assert title.font().pointSizeF() == pytest.approx(big * 1.3, abs=0.15)


def test_a_message_on_screen_is_shown_at_the_new_text_size(app, qtbot):
    from model_store.conversations import Message
    from app.services.chat_rows import MessageRow
    from ui.views.message_widget import MessageWidget

    theme.apply_appearance(app, theme="light", text_size=100)
    widget = MessageWidget(MessageRow(Message("m1", "c1", None, "assistant", "Some **text**.", "done", 0.0, {}),
                                      ["m1"]))
    qtbot.addWidget(widget)
    before = widget.body.sizeHint().height()
    theme.apply_appearance(app, theme="light", text_size=150)
    bigger = f"font-size:{app.font().pointSizeF():g}pt"
    qtbot.waitUntil(lambda: bigger in widget.body.text(), timeout=2_000)
    assert widget.body.heightForWidth(400) > before, "the text takes more room"
