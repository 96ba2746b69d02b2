"""The model's context in the window, on the scripted engine: the load carries the settings' context,
KV type and memory budget; changing them in Settings reloads; a context the worker grew is said once
and shown in the model picker."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QDialogButtonBox, QSpinBox

from app.services.context_info import context_state
from app.services.settings import context_key
from engine import protocol as p
from model_store.installed import embedded_model_file
from tests.fakes.engine_client import hold
from tests.helpers.gui import write_settings


def picker_state(app) -> str:
    return app.window.model_picker.state.text()


def test_the_load_carries_the_models_context_the_kv_type_and_the_budget(start_scripted, engine):
    write_settings(contexts={context_key(str(embedded_model_file())): 16384}, kv_cache_8bit=True,
                   memory_budget_percent=50)
    app = start_scripted()
    (load,) = engine.sent(p.LoadModel)
    assert (load.model, load.n_ctx, load.kv_type, load.memory_percent) == ("default", 16384, "q8_0", 50)
    loaded = app.controller.loaded
    assert picker_state(app) == context_state(loaded.context)
    assert picker_state(app).startswith("Reads up to 4,096 tokens at once · ")
    assert app.window.model_picker.state.toolTip().startswith("scripted; context 4,096 tokens (fixed: fits in ")


def test_without_a_setting_the_load_asks_for_an_automatic_context(start_scripted, engine):
    app = start_scripted()
    (load,) = engine.sent(p.LoadModel)
    assert (load.n_ctx, load.kv_type, load.memory_percent) == (0, "f16", 70)
    assert "(auto: fits in " in app.window.model_picker.state.toolTip()


def test_changing_the_context_settings_reloads_the_model_with_them(start_scripted, engine, qtbot):
    app = start_scripted()
    app.window.open_settings()
    dialog = app.window.settings_dialog
    dialog.findChild(QCheckBox, "context_auto").setChecked(False)
    dialog.findChild(QSpinBox, "context_tokens").setValue(32768)
    dialog.findChild(QCheckBox, "kv_cache_8bit").setChecked(True)
    dialog.findChild(QSpinBox, "memory_budget_percent").setValue(40)
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
    app.wait(lambda: len(engine.sent(p.LoadModel)) == 2 and app.controller.loaded is not None)

    reload = engine.sent(p.LoadModel)[1]
    assert (reload.n_ctx, reload.kv_type, reload.memory_percent) == (32768, "q8_0", 40)
    assert app.controller.settings.context_for(str(embedded_model_file())) == 32768


def test_a_grown_context_is_said_once_and_shown_in_the_picker(start_scripted, engine):
    app = start_scripted()
    notices: list[tuple[str, str]] = []
    app.controller.notice.connect(lambda kind, text: notices.append((kind, text)))
    engine.script(p.AnswerTurn, hold("Still", " going"))
    app.type_and_send("A long question.")
    app.wait(lambda: engine.holding is not None)

    engine.grow_context(engine.holding, 8192)
    app.wait(lambda: "8,192 tokens at once" in picker_state(app))
    assert notices == [("info", "The context grew from 4,096 to 8,192 tokens to hold this (the model now takes "
                                "about 108.0 MiB).")]
    assert notices[0][1] in app.window.banner.text()
    assert app.controller.loaded.n_ctx == app.controller.loaded.context.n_ctx == 8192
    assert picker_state(app) == context_state(app.controller.loaded.context)

    engine.release()
    turn = app.wait_turn()
    assert turn.status == "done" and turn.text == "Still going", "the answer goes on in the longer context"
    assert len(notices) == 1


def test_a_grown_context_is_kept_when_the_dialog_opens(start_scripted, engine):
    app = start_scripted()
    engine.grow_context("some-request", 6144)
    app.wait(lambda: app.controller.loaded.n_ctx == 6144)
    app.window.open_settings()
    details = app.window.settings_dialog.context_details.text()
    assert details.startswith("6,144 tokens") and "automatically" in details
