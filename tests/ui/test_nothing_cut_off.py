"""Nothing cut off at any text size (issue 51, point 6): the real window on a real worker and the
built-in model, at 100, 150 and 200 % text size, at 1280×720, light and dark. The welcome, a
conversation with a document read and the telemetry panel open, and the document dialogs show every
word that matters (:func:`tests.ui.clipping.cut_off`); titles in the conversation list may be cut
(their tooltip has them whole), and the model line may cut what follows its essential part.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QPoint, QSize
from PySide6.QtWidgets import QApplication, QTabWidget, QWidget

from tests.helpers.documents import write_document
from tests.helpers.gui import write_settings
from tests.ui.clipping import cut_off
from ui import theme
from ui.views.attach_dialog import attach_dialog
from ui.views.document_progress import PartChoice

SIZES = (100, 150, 200)
SCREEN = QSize(1280, 720)
FRAME = 40  # px of a screen a window manager's frame and a panel take
TOO_LONG = ("notes.txt is 12,480 tokens long; this model reads up to 8,192 tokens at once, and the conversation "
            "already uses 1,050 of them, so 7,142 are left for the document. Read the first or the last 7,142 "
            "tokens of it, or choose a model that reads more at once.")


@pytest.fixture(autouse=True)
def no_window_left_behind(appearance):
    """Each test's windows deleted when it ends: the next test's new style sheet repolishes every widget
    left, and a closed window's, half torn down, crashed Qt there."""
    yield
    for widget in QApplication.topLevelWidgets():
        widget.close()
        widget.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete.value)


def _shown_at(app, size: int, scheme: str) -> list[str]:
    """What the window cuts off in ``scheme`` at ``size`` %, laid out again at 1280×720."""
    theme.apply_appearance(QApplication.instance(), theme=scheme, text_size=size)
    app.window.resize(SCREEN)
    app.qtbot.wait(150)  # laid out again
    return cut_off(app.window)


def _logo_in_sight(window) -> bool:
    view, logo = window.chat_view, window.chat_view.welcome.logo
    top = logo.mapTo(view.viewport(), QPoint(0, 0)).y()
    return logo.isVisible() and 0 <= top and top + logo.height() <= view.viewport().height()


@pytest.mark.parametrize("size", SIZES)
def test_the_window_cuts_off_no_word_at_any_text_size(appearance, start_app, tmp_path, size):
    write_settings(temperature=0.0, max_tokens=8, draft="off", telemetry_open=False)
    theme.apply_appearance(appearance, theme="light", text_size=size)  # as the app starts: before the window
    app = start_app()
    window = app.window
    window.resize(SCREEN)
    app.wait_loaded()
    app.qtbot.wait(150)
    state = window.model_picker.state
    assert state.text().startswith("Reads up to ")

    for scheme in ("light", "dark"):
        window.chat_view.verticalScrollBar().setValue(0)
        assert _shown_at(app, size, scheme) == [], f"the welcome at {size} % ({scheme})"
        assert window.size() == SCREEN, "the window fits a 1280×720 screen"
        assert _logo_in_sight(window), "the welcome is shown from its top, logo and all"

    window.telemetry_dock.toggleViewAction().trigger()
    assert app.documents.attach(write_document(tmp_path / "notes.txt", 200))
    app.wait(lambda: window.status_line.text().startswith("Read notes.txt"), 120_000)
    assert window.status_line.text().endswith("every question starts from the saved state.")
    for scheme in ("light", "dark"):
        assert _shown_at(app, size, scheme) == [], f"a document read, telemetry open, at {size} % ({scheme})"
        assert window.size() == SCREEN, "the window fits a 1280×720 screen with the telemetry open"
    assert state.toolTip().startswith(state.text()) or not state.elided, "the whole model line is in its tooltip"



@pytest.mark.parametrize("size", SIZES)
def test_the_document_dialogs_cut_off_no_word(appearance, qtbot, tmp_path, size):
    for scheme in ("light", "dark"):
        theme.apply_appearance(appearance, theme=scheme, text_size=size)
        parent = QWidget()
        parent.resize(SCREEN)
        qtbot.addWidget(parent)
        choice = PartChoice(TOO_LONG, parent, whole_tokens=12_480, model_button="Get Qwen3.5 4B (reads 262,144 tokens)")
        choice.show()
        qtbot.waitExposed(choice)
        qtbot.wait(50)
        assert cut_off(choice) == [], f"the too-long dialog at {size} % ({scheme})"
        choice.reject()
        dialog = attach_dialog(parent, tmp_path)
        dialog.setOption(dialog.Option.DontUseNativeDialog)
        dialog.show()
        qtbot.waitExposed(dialog)
        qtbot.wait(50)
        cut = [line for line in cut_off(dialog) if "#lookInCombo" not in line]  # a folder's path may be cut, as a title
        assert cut == [], f"the attach dialog at {size} % ({scheme})"
        dialog.reject()


@pytest.mark.parametrize("size", SIZES)
def test_settings_cut_off_no_word_on_any_tab(appearance, start_app, size):
    write_settings(temperature=0.0, max_tokens=8, draft="off")
    theme.apply_appearance(appearance, theme="light", text_size=size)
    app = start_app()
    app.window.resize(SCREEN)
    app.wait_loaded()
    app.window.open_settings()
    dialog = app.window.settings_dialog
    app.qtbot.waitExposed(dialog)
    tabs = dialog.findChild(QTabWidget)
    for scheme in ("light", "dark"):
        theme.apply_appearance(appearance, theme=scheme, text_size=size)
        for index in range(tabs.count()):
            tabs.setCurrentIndex(index)
            app.qtbot.wait(50)
            assert cut_off(dialog) == [], f"Settings → {tabs.tabText(index)} at {size} % ({scheme})"
    screen = dialog.screen().availableGeometry()
    assert dialog.width() <= max(SCREEN.width(), screen.width()) and dialog.height() <= max(SCREEN.height(), screen.height())
    dialog.reject()


@pytest.mark.parametrize("size", SIZES)
def test_settings_fits_a_1280x720_screen_with_nothing_cut(appearance, start_app, size):
    """On a 1280×720 screen the dialog may be no larger than the screen's free area (a window
    manager's frame and a panel take some): at its smallest each tab wraps its long lines and
    scrolls up and down, and still cuts off no word."""
    write_settings(temperature=0.0, max_tokens=8, draft="off")
    theme.apply_appearance(appearance, theme="dark", text_size=size)
    app = start_app()
    app.wait_loaded()
    app.window.open_settings()
    dialog = app.window.settings_dialog
    app.qtbot.waitExposed(dialog)
    smallest = dialog.minimumSizeHint()
    assert smallest.width() <= SCREEN.width() - FRAME and smallest.height() <= SCREEN.height() - FRAME, (
        f"at {size} % the Settings dialog is at least {smallest.width()}×{smallest.height()}")
    dialog.resize(smallest)
    tabs = dialog.findChild(QTabWidget)
    for index in range(tabs.count()):
        tabs.setCurrentIndex(index)
        app.qtbot.wait(50)
        assert cut_off(dialog) == [], f"Settings → {tabs.tabText(index)} at its smallest, {size} %"
    dialog.reject()


LONGER = ("long-notes.txt has 14,579 tokens but this model's context leaves room for 6,972 after the 196 tokens already "
          "in this conversation (7,607 too many), even in the longest context it can have now (the rest of the context "
          "is kept free for questions and answers), because SmolLM2 135M Instruct was trained on 8,192 tokens at most "
          "(the model's limit, not the memory's).\n\nTo read all of it, start a new chat with it, choose a model with a "
          "longer context. LFM2 350M reads it whole on this machine (trained on 32,768 tokens; a 218.7 MiB download). "
          "Or read only as much of its beginning or its end as fits.")  # what the window said for a 12,000-word file


@pytest.mark.parametrize("size", SIZES)
def test_the_too_long_dialog_fits_a_1280x720_screen(appearance, qtbot, size):
    """The longest too-long text the window writes keeps its lines as long in words at any text size,
    so the dialog, all its choices included, stays within a 1280×720 screen."""
    theme.apply_appearance(appearance, theme="light", text_size=size)
    parent = QWidget()
    parent.resize(SCREEN)
    qtbot.addWidget(parent)
    choice = PartChoice(LONGER, parent, model_button="Download LFM2 350M (218.7 MiB)")
    choice.show()
    qtbot.waitExposed(choice)
    assert cut_off(choice) == []
    assert choice.height() <= SCREEN.height() - FRAME, f"at {size} % the dialog is {choice.height()} px tall"
    assert choice.width() <= SCREEN.width() - FRAME
    choice.reject()
