"""A new user's first hour (issue 17), in the real window with a real worker: what the window offers,
says and shows when nothing has happened yet, and when the first things go wrong."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import msgspec
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QFileDialog, QTreeView

from model_store.catalogue import load_catalogue
from model_store.documents import DocumentStore
from model_store.installed import EMBEDDED_NAME
from tests.helpers.documents import write_document
from tests.helpers.gui import LONG_ANSWER, stored, write_settings
from ui.theme import column_width


# -- 5. Regenerate ---------------------------------------------------------------------------------

def test_regenerate_is_offered_only_when_there_is_an_answer_to_regenerate(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    window = app.window
    assert not window.regenerate_action.isEnabled(), "an empty chat has nothing to regenerate"
    app.send_and_wait("Hello there.")
    answer = window.chat_view.widgets[1]
    assert window.regenerate_action.isEnabled() and not answer.regenerate.isHidden()
    app.qtbot.mouseClick(answer.regenerate, Qt.MouseButton.LeftButton)  # the answer's own action (shown on hover)
    assert not window.regenerate_action.isEnabled(), "not while the new answer is written"
    app.wait_turn(2)
    assert window.regenerate_action.isEnabled()
    window.new_chat()
    assert not window.regenerate_action.isEnabled()


# -- 6. Import errors in the Models dialog ---------------------------------------------------------

def test_an_import_that_fails_says_why_in_the_models_dialog_not_behind_it(start_app, tiny_settings, tmp_path):
    app = start_app()
    app.window.open_models()
    dialog = app.window.models_dialog
    bogus = tmp_path / "notes.gguf"
    bogus.write_bytes(b"this is a plain text file, not a model at all " * 4)
    dialog.manager.import_file(str(bogus))
    app.qtbot.waitUntil(lambda: "notes.gguf" in dialog.status.text(), timeout=60_000)
    said = dialog.status.text()
    assert said.startswith("Could not import notes.gguf: ") and "not a GGUF model file: it starts with 'this'" in said
    assert "b'" not in said, "in words, not Python's bytes notation"
    assert str(bogus) not in said, "the file is named once, by its name, not again by its path"
    assert dialog.status.font().bold(), "a failure stands out"
    assert "notes.gguf" not in app.window.banner.text(), "nothing on the main window behind the dialog"


# -- 10. Line breaks -------------------------------------------------------------------------------

def test_line_breaks_written_in_a_message_are_kept(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    haiku = "An old silent pond\nA frog jumps into the pond\nsplash! Silence again."
    app.send_and_wait(haiku)
    question = app.window.chat_view.widgets[0]
    assert question.rendered_text().splitlines() == haiku.splitlines()


# -- 11. The document card -------------------------------------------------------------------------

def test_the_document_card_shows_the_tokens_read_and_its_title_once(start_app, tiny_settings, tmp_path):
    app = start_app()
    app.wait_loaded()
    window = app.window
    assert window.documents.attach(write_document(tmp_path / "report.txt", 300))
    app.qtbot.waitUntil(lambda: window.status_line.text().startswith("Read report.txt"), timeout=60_000)
    read = int(re.search(r"([\d,]+) tokens", window.status_line.text()).group(1).replace(",", ""))
    card = window.chat_view.widgets[-1]
    app.qtbot.waitUntil(lambda: f"{read:,} tokens" in card.who.text(), timeout=10_000)
    conversation_id = app.controller.conversation.id
    (document,) = stored(app, lambda s: DocumentStore(s.db).for_conversation(conversation_id))
    assert document.tokens == read, "the count that was read is the one kept"
    shown = card.who.text() + "\n" + card.rendered_text()
    assert shown.count("report.txt") == 1, shown[:200]


# -- 13. The embedded model is installed -----------------------------------------------------------

def test_the_models_dialog_lists_the_embedded_model_and_it_cannot_be_deleted(start_app, tiny_settings):
    app = start_app()
    app.window.open_models()
    dialog = app.window.models_dialog
    app.qtbot.waitUntil(lambda: dialog.installed.count() > 0, timeout=30_000)
    embedded = dialog.installed.item(0)
    assert embedded.text().startswith(EMBEDDED_NAME) and "cannot be deleted" in embedded.text()
    dialog.installed.setCurrentItem(embedded)
    assert not dialog.delete_button.isEnabled()


def test_models_list_shows_the_embedded_model_and_rm_refuses_it():
    def hearth(*argv):
        return subprocess.run([sys.executable, "-m", "app", *argv], capture_output=True, text=True, timeout=120)

    listed = hearth("models", "list").stdout
    installed = listed[listed.index("Installed:"):].splitlines()
    assert EMBEDDED_NAME in installed[1] and "cannot be removed" in installed[1]
    listing = json.loads(hearth("models", "list", "--json").stdout)
    assert listing["embedded"]["id"] == "default" and listing["embedded"]["name"] == EMBEDDED_NAME
    assert listing["embedded"]["size_bytes"] > 0 and listing["installed"] == []
    refused = hearth("models", "rm", "default")
    assert refused.returncode == 1 and "part of Hearth" in refused.stderr


# -- 14. The attach dialog -------------------------------------------------------------------------

def test_attach_opens_in_the_documents_folder_wide_enough_for_names_then_where_the_last_one_was(
        start_app, tiny_settings, tmp_path, monkeypatch, qtbot):
    home = tmp_path / "home"
    documents = home / "Documents"
    documents.mkdir(parents=True)
    long_name = "Quarterly report for the regional board, final version.txt"
    (documents / long_name).write_text("numbers", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    app = start_app()
    composer = app.window.composer

    def look_at_the_dialog() -> dict:
        seen: dict = {}

        def look() -> None:  # runs in the dialog's own loop if it is a blocking one
            dialog = QApplication.activeModalWidget()
            view = dialog.findChild(QTreeView, "treeView") if isinstance(dialog, QFileDialog) else None
            if view is None or view.model().rowCount(view.rootIndex()) == 0:  # (the folder is read in a thread)
                QTimer.singleShot(50, look)
                return
            seen.update(folder=Path(dialog.directory().absolutePath()), name_width=view.header().sectionSize(0),
                        needed=view.sizeHintForColumn(0))  # what the longest name shown needs, whole
            dialog.reject()

        QTimer.singleShot(300, look)
        qtbot.mouseClick(composer.attach_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: bool(seen), timeout=10_000)
        return seen

    first = look_at_the_dialog()
    assert first["folder"] == documents, "not the folder Hearth was started in"
    assert first["name_width"] >= first["needed"], "a long file name is not cut off"

    elsewhere = write_document(tmp_path / "elsewhere.txt", 50)
    composer._attach_chosen(str(elsewhere))  # what choosing it in the dialog does
    app.qtbot.waitUntil(lambda: not app.window.documents.busy and not app.controller.generating, timeout=60_000)
    assert look_at_the_dialog()["folder"] == tmp_path, "the next attach starts where the last document was"


# -- 15. Telemetry while writing -------------------------------------------------------------------

def test_decode_is_not_called_idle_while_an_answer_is_written(start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=LONG_ANSWER, draft="off")
    app = start_app()
    app.wait_loaded()
    samples = []
    app.controller.telemetry.connect(samples.append)
    app.type_and_send("Keep talking.")
    app.qtbot.waitUntil(lambda: any(s.phase == "decode" for s in samples), timeout=60_000)
    writing = next(s for s in samples if s.phase == "decode")
    busy = msgspec.structs.replace(writing, decode_tok_s=0.0)  # no token finished in the worker's window
    app.controller.telemetry.emit(busy)
    assert app.window.telemetry_panel.values()["decode_rate"] == "writing…"
    app.controller.stop()
    app.wait_turn()
    app.qtbot.waitUntil(lambda: samples[-1].phase == "idle" and samples[-1].decode_tok_s == 0, timeout=30_000)
    assert app.window.telemetry_panel.values()["decode_rate"] == "idle"


# -- 18. The window ---------------------------------------------------------------------------------

def test_the_window_has_an_icon(start_app, tiny_settings):
    app = start_app()
    icon = app.window.windowIcon()
    assert not icon.isNull() and not icon.pixmap(64, 64).isNull()


def test_the_empty_conversation_welcomes_and_the_welcome_goes_when_a_message_arrives(start_app, tiny_settings):
    app = start_app()
    app.wait_loaded()
    view = app.window.chat_view
    assert view.welcome.isVisible()
    said = view.welcome.text()
    assert "on this computer" in said and "leaves this computer" in said and "Models" in said
    app.qtbot.mouseClick(view.welcome.models_button, Qt.MouseButton.LeftButton)
    assert app.window.models_dialog is not None and app.window.models_dialog.isVisible()
    app.window.models_dialog.close()
    app.send_and_wait("Hello there.")
    assert not view.welcome.isVisible()
    app.window.new_chat()
    app.qtbot.waitUntil(view.welcome.isVisible, timeout=5_000)


def test_questions_and_answers_are_laid_out_apart_with_the_model_named_on_answers(start_app, tiny_settings,
                                                                                   hybrid_tiny):
    app = start_app()
    app.wait_loaded()
    window = app.window
    window.resize(2400, 900)  # a wide window: the chat keeps a readable line length
    turn = app.send_and_wait("Hi")
    view = window.chat_view
    question, answer = view.widgets
    app.qtbot.waitUntil(lambda: question.bubble.width() > 0 and answer.bubble.width() > 0, timeout=5_000)
    assert (question.kind, answer.kind) == ("question", "answer")
    row = question.width()
    assert question.bubble.geometry().right() >= row - 2 and question.bubble.x() > row // 2, \
        "a short question sits on the right, as wide as its text"
    assert answer.bubble.x() == 0 and answer.bubble.width() > row * 0.9, "an answer runs across the column"
    assert view.column.width() <= column_width() < window.width() // 2, "a readable column, centred"
    centre = view.column.mapTo(view, view.column.rect().center()).x()
    assert abs(centre - view.viewport().width() // 2) < 40, "the column is centred"
    model = Path(hybrid_tiny).stem
    assert answer.who.text() == model and answer.who.isVisible() and not question.who.isVisible()
    message = stored(app, lambda s: s.message(turn.answer.id))
    assert message.stats["model"] == model, "the name is kept with the answer"


def test_the_models_dialog_shows_each_models_description_and_licence(start_app, tiny_settings):
    app = start_app()
    app.window.open_models()
    dialog = app.window.models_dialog
    entries = list(load_catalogue())
    app.qtbot.waitUntil(lambda: dialog.card(entries[-1].id) is not None, timeout=30_000)
    for entry in entries:
        card = dialog.card(entry.id)
        dialog.catalogue.ensureWidgetVisible(card)
        app.qtbot.waitUntil(card.good_for.isVisible, timeout=5_000)  # on its card, not in a tooltip
        assert entry.good_for in card.text() and entry.licence in card.text()
        card.show_details(True)
        assert entry.description in card.technical.text()
