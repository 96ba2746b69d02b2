"""The window notices what another program changes (issue 51, point 5): a model registered by
`hearth models import` (here: through the store, from another connection, as that command does), a
model file copied into the models folder, and a conversation written by `hearth send`, each shown
without a restart and without opening the Models page."""

from __future__ import annotations

import shutil

from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from model_store.installed import ModelLibrary


def listed_models(app) -> list[str]:
    combo = app.window.model_picker.combo
    return [combo.itemText(i) for i in range(combo.count())]


def listed_titles(app) -> list[str]:
    model = app.controller.conversations
    return [model.conversation(i).title for i in range(model.rowCount())]


def test_a_model_imported_by_another_program_appears_in_the_picker(start_scripted, hearth_home, hybrid_tiny):
    app = start_scripted()
    app.wait_idle_store()  # the window's own first listing is done
    before = listed_models(app)
    db = open_database(database_path(hearth_home / "data"))
    try:
        ModelLibrary(db, app.window.models.models_dir).add(name="Imported elsewhere", path=hybrid_tiny,
                                                             size_bytes=hybrid_tiny.stat().st_size, source="import")
    finally:
        db.close()
    app.qtbot.waitUntil(lambda: any("Imported elsewhere" in name for name in listed_models(app)), timeout=15_000)
    assert len(listed_models(app)) == len(before) + 1


def test_a_model_file_copied_into_the_models_folder_appears(start_scripted, hybrid_tiny):
    app = start_scripted()
    app.wait_idle_store()
    before = len(listed_models(app))
    folder = app.window.models.models_dir
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(hybrid_tiny, folder / "copied-in.gguf")
    app.qtbot.waitUntil(lambda: len(listed_models(app)) == before + 1, timeout=15_000)


def test_a_conversation_written_by_another_program_appears_in_the_list(start_scripted, hearth_home):
    app = start_scripted()
    app.wait_idle_store()
    db = open_database(database_path(hearth_home / "data"))
    try:
        store = ConversationStore(db)
        conversation = store.create("Sent from the command line")
        store.add_message(conversation.id, "user", "hello", parent_id=None)
    finally:
        db.close()
    app.qtbot.waitUntil(lambda: "Sent from the command line" in listed_titles(app), timeout=15_000)
