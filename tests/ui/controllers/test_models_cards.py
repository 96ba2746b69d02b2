"""The Models page as cards people can read (issue 51, point 7), in the real window on the scripted
engine: a card per catalogue model (good for, size, fits or why not, reads at once, licence), figures
that hold still while free memory wobbles, the page centred on the window and no taller than it, and
nothing cut at 150 and 200 % text."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QMargins
from PySide6.QtWidgets import QApplication, QLabel

from app.services.model_refs import app_catalogue
from model_store.fit import AVAILABLE_MEMORY_ENV
from tests.helpers.gui import write_settings
from ui import theme

GIB = 1024**3


@pytest.fixture(autouse=True)
def small_machine(monkeypatch):
    monkeypatch.setenv(AVAILABLE_MEMORY_ENV, str(3 * GIB))


@pytest.fixture
def windows_deleted(appearance):
    """The app's look put back, after each test's windows are deleted (a style sheet applied to a
    closed window, half torn down, crashes Qt)."""
    yield appearance
    for widget in QApplication.topLevelWidgets():
        widget.close()
        widget.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete.value)


def open_models(app):
    app.window.open_models()
    dialog = app.window.models_dialog
    app.wait(lambda: dialog.listing is not None and bool(dialog.cards))
    return dialog


def test_each_model_has_a_card_in_plain_words(start_scripted):
    app = start_scripted()
    dialog = open_models(app)
    catalogue = list(app_catalogue(app.window.models.cache_dir))
    assert list(dialog.cards) == [entry.id for entry in catalogue]
    for entry in catalogue:
        card = dialog.card(entry.id)
        text = card.text()
        assert entry.good_for and f"Good for: {entry.good_for}" in text
        assert f"Licence: {entry.licence}" in text and " download" in text
        variant = card.variant()
        assert ("Reads about " in text and " words at once" in text) if variant["max_context_tokens"] else \
            "Too little free memory left to read anything at once" in text
        assert "tokens" not in text and "KV" not in text and "quantization" not in text.lower()
        assert f"{variant['max_context_tokens']:,} tokens" in card.reads.toolTip()
    big = dialog.card("qwen3.5-9b")
    assert big.choose("Q8_0")
    assert big.fit.text().startswith("Too big for this computer: it needs about ")
    assert big.fit.text().endswith("of memory, this computer has 3 GB free")
    assert dialog.card("lfm2-350m").fit.text() == "Fits this computer"


def shown(dialog) -> list[str]:
    """Everything the page says that follows the free memory."""
    return [dialog.memory.text()] + [card.text() + card.reads.toolTip() + card.fit.toolTip()
                                     for card in dialog.cards.values()]


def test_figures_hold_still_while_free_memory_moves_by_1_percent_and_follow_a_20_percent_change(start_scripted):
    app = start_scripted()
    dialog = open_models(app)
    manager, listings = app.window.models, []
    manager.listing_changed.connect(listings.append)

    def reading(n_bytes: int) -> list[str]:
        manager.read_memory = lambda: n_bytes
        before = len(listings)
        manager.refresh()
        app.wait(lambda: len(listings) > before)
        return shown(dialog)

    first = reading(int(6.3 * GIB))
    assert reading(int(6.3 * GIB * 1.01)) == first, "1 % more free memory changes nothing on screen"
    assert reading(int(6.3 * GIB * 0.99)) == first
    later = reading(int(6.3 * GIB * 1.2))
    assert later != first and "about 7.6 GB of memory free" in later[0]


def test_the_page_opens_centred_on_the_window_no_taller_than_it_and_resizable(start_scripted):
    app = start_scripted()
    window = app.window
    screen = window.screen().availableGeometry()
    for size in ((780, 560), (640, 420)):  # the offscreen screen is 800 pixels square
        window.resize(*size)
        window.move(screen.left() + (screen.width() - size[0]) // 2, screen.top() + 20)  # room to centre on it
        if window.models_dialog is not None:
            window.models_dialog.close()
            window.models_dialog.deleteLater()
            window.models_dialog = None
        dialog = open_models(app)
        app.wait(dialog.isVisible)
        app.qtbot.wait(150)  # laid out
        frame, over = dialog.frameGeometry(), window.frameGeometry()
        assert frame.height() <= over.height() and frame.height() <= screen.height()
        assert abs(frame.center().x() - over.center().x()) <= 2 and abs(frame.center().y() - over.center().y()) <= 2
        assert dialog.isSizeGripEnabled() and dialog.minimumHeight() < frame.height()
        smaller = dialog.size().shrunkBy(QMargins(0, 0, 100, 100))
        dialog.resize(smaller)
        assert dialog.size() == smaller, "the user can make it smaller"


def cut_labels(widget) -> list[str]:
    """Labels whose text does not show whole: wrapped ones shorter than their text needs, single-line
    ones narrower than their text."""
    cut = []
    for label in widget.findChildren(QLabel):
        if not label.isVisibleTo(widget) or not label.text():
            continue
        if label.wordWrap():
            if label.height() < label.heightForWidth(label.width()):
                cut.append(label.text())
        elif label.fontMetrics().horizontalAdvance(label.text()) > label.contentsRect().width():
            cut.append(label.text())
    return cut


@pytest.mark.parametrize("text_size", [150, 200])
def test_nothing_on_the_cards_is_cut_at_large_text(windows_deleted, start_scripted, text_size):
    theme.apply_appearance(windows_deleted, theme="light", text_size=text_size)
    write_settings(text_size=text_size)
    app = start_scripted()
    app.window.resize(1280, 720)
    dialog = open_models(app)
    app.wait(dialog.isVisible)
    app.qtbot.wait(150)  # laid out
    for card in dialog.cards.values():
        dialog.catalogue.ensureWidgetVisible(card)
        assert not cut_labels(card), card.entry_id
        for button in (card.download, card.details_button):
            assert button.fontMetrics().horizontalAdvance(button.text()) <= button.contentsRect().width()
        assert card.quant.width() >= card.quant.sizeHint().width() or not card.quant.isVisible()
    assert not cut_labels(dialog)
