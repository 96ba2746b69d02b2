"""The window's notice line: one notice at a time, but an offer to undo is not lost to a later notice."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from ui.views.banner import Banner


@pytest.fixture
def banner(qtbot) -> Banner:
    widget = Banner()
    qtbot.addWidget(widget)
    widget.show()
    return widget


def test_a_later_notice_replaces_an_earlier_one(banner):
    banner.show_notice("warning", "The engine stopped.")
    banner.show_notice("info", "The engine restarted and is ready.")
    assert banner.text() == "The engine restarted and is ready." and banner.kind == "info"
    assert banner.action.isHidden()


def test_a_later_notice_keeps_an_offer_to_undo_below_it(banner, qtbot):
    undone: list[str] = []
    banner.show_notice("info", "Deleted “Plans”.", "Undo", lambda: undone.append("Plans"))
    banner.show_notice("warning", "The engine stopped. Restarting it.")
    assert banner.text() == "The engine stopped. Restarting it.\nDeleted “Plans”." and banner.kind == "warning"
    assert banner.action.isVisible() and banner.action.text() == "Undo"
    qtbot.mouseClick(banner.action, Qt.MouseButton.LeftButton)
    assert undone == ["Plans"] and banner.text() == ""


def test_a_newer_offer_replaces_the_older_one(banner, qtbot):
    chosen: list[str] = []
    banner.show_notice("info", "Deleted “Plans”.", "Undo", lambda: chosen.append("undo"))
    banner.show_notice("warning", "The document is too long.", "Read the first part", lambda: chosen.append("part"))
    assert banner.text() == "The document is too long." and banner.action.text() == "Read the first part"
    qtbot.mouseClick(banner.action, Qt.MouseButton.LeftButton)
    assert chosen == ["part"]


def test_a_withdrawn_offer_leaves_the_later_notice_and_no_button(banner):
    def undo() -> None:
        raise AssertionError("a withdrawn offer is never run")

    banner.show_notice("info", "Deleted “Plans”.", "Undo", undo)
    banner.show_notice("info", "The engine restarted and is ready.")
    banner.withdraw(lambda: None)  # someone else's action: nothing changes
    assert "Deleted “Plans”." in banner.text() and banner.action.isVisible()
    banner.withdraw(undo)
    assert banner.text() == "The engine restarted and is ready." and banner.action.isHidden()


def test_withdrawing_the_only_notice_hides_the_banner(banner):
    def undo() -> None:
        pass

    banner.show_notice("info", "Deleted “Plans”.", "Undo", undo)
    banner.withdraw(undo)
    assert banner.text() == "" and banner.isHidden()


def test_dismissing_drops_the_offer_too(banner):
    banner.show_notice("info", "Deleted “Plans”.", "Undo", lambda: None)
    banner.show_notice("info", "Something else.")
    banner.close_button.click()
    banner.show_notice("info", "Later news.")
    assert banner.text() == "Later news." and banner.action.isHidden()


def test_a_notice_with_three_choices_runs_only_the_one_pressed_and_goes_away(banner, qtbot):
    chosen: list[str] = []
    banner.show_choices("error", "The engine crashed twice.", [
        ("Retry with the safe CPU build", lambda: chosen.append("retry")),
        ("Choose another model", lambda: chosen.append("model")),
        ("System check", lambda: chosen.append("check")),
    ])
    assert banner.text() == "The engine crashed twice." and banner.kind == "error"
    assert [b.text() for b in banner.buttons if b.isVisible()] == [
        "Retry with the safe CPU build", "Choose another model", "System check"]
    qtbot.mouseClick(banner.buttons[1], Qt.MouseButton.LeftButton)
    assert chosen == ["model"]
    assert banner.text() == "" and banner.isHidden()


def test_a_later_offer_with_one_action_shows_one_button(banner, qtbot):
    chosen: list[str] = []
    banner.show_choices("error", "The engine crashed twice.", [
        ("Retry", lambda: chosen.append("retry")), ("System check", lambda: chosen.append("check"))])
    banner.show_notice("info", "Deleted “Plans”.", "Undo", lambda: chosen.append("undo"))
    assert [b.text() for b in banner.buttons if b.isVisible()] == ["Undo"]
    qtbot.mouseClick(banner.action, Qt.MouseButton.LeftButton)
    assert chosen == ["undo"]
