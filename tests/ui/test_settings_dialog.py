"""The Settings dialog, driven offscreen through its real widgets."""

from __future__ import annotations

from pathlib import Path

import pytest
import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialogButtonBox,
    QDoubleSpinBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QTabWidget,
    QWidget,
)

from ui.views.settings.context_words import context_words
import msgspec

from app.services.settings import NO_NPU_MESSAGE, Settings, context_key
from engine.protocol import ContextReport
from ui import theme
from ui.views.settings_dialog import NO_MODEL_DETAILS, SEED_MESSAGE, SettingsDialog

INPUT_NAMES = (  # in tab order: Chat, Model, Performance, Privacy, Advanced
    "system_prompt", "when_full", "theme", "text_size", "highlight_drafts",
    "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "seed", "max_tokens", "context_auto", "context_tokens",
    "device_policy", "draft_kind", "draft_path", "draft_max", "draft_paths",
    "data_folder",
    "kv_cache_8bit", "memory_budget_percent", "snapshot_budget_gib",
)  # fmt: skip
REPORT = ContextReport(n_ctx=32768, n_ctx_train=262144, mode="auto", kv_type="f16", kv_bytes=384 << 20,
                       estimated_bytes=1900 << 20, available_bytes=16 << 30, budget_bytes=11 << 30, max_n_ctx=262144)


@pytest.fixture
def gguf(tmp_path) -> Path:
    path = tmp_path / "draft.gguf"
    path.write_bytes(b"GGUF")
    return path


@pytest.fixture
def open_dialog(qtbot):
    opened = []

    def open_(settings: Settings = Settings(), **kwargs) -> SettingsDialog:
        dialog = SettingsDialog(settings, **kwargs)
        qtbot.addWidget(dialog)
        dialog.show()
        opened.append(dialog)
        return dialog

    yield open_
    for dialog in opened:  # gone before the next test, so a later theme change re-polishes no leftover
        shiboken6.delete(dialog)


def child(dialog: SettingsDialog, kind, name: str):
    widget = dialog.findChild(kind, name)
    assert widget is not None, name
    return widget


def press_ok(dialog: SettingsDialog) -> None:
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()


def select(combo: QComboBox, value: str) -> None:
    combo.setCurrentIndex(combo.findData(value))


def error_text(dialog: SettingsDialog, field: str) -> str | None:
    """The error message shown for a field, or None when its label is hidden (a label on a tab that
    is not in front is shown all the same)."""
    label = child(dialog, QLabel, f"error_{field}")
    return label.text() if not label.isHidden() else None


def test_form_shows_the_given_settings(open_dialog, gguf, tmp_path):
    given = Settings(
        temperature=1.25, top_k=7, top_p=0.8, min_p=0.1, seed=42, max_tokens=300, draft=f"model:{gguf}",
        draft_max=6, draft_paths=3, device_policy="cpu", snapshot_budget_gib=2.5, data_folder=str(tmp_path),
        highlight_drafts=True,
    )  # fmt: skip
    dialog = open_dialog(given)
    assert dialog.windowTitle() == "Settings"
    assert child(dialog, QDoubleSpinBox, "temperature").value() == 1.25
    assert child(dialog, QSpinBox, "top_k").value() == 7
    assert child(dialog, QDoubleSpinBox, "top_p").value() == 0.8
    assert child(dialog, QDoubleSpinBox, "min_p").value() == 0.1
    assert child(dialog, QLineEdit, "seed").text() == "42"
    assert child(dialog, QSpinBox, "max_tokens").value() == 300
    assert child(dialog, QComboBox, "draft_kind").currentData() == "model"
    assert child(dialog, QLineEdit, "draft_path").text() == str(gguf)
    assert child(dialog, QSpinBox, "draft_max").value() == 6
    assert child(dialog, QSpinBox, "draft_paths").value() == 3
    assert child(dialog, QComboBox, "device_policy").currentData() == "cpu"
    assert child(dialog, QDoubleSpinBox, "snapshot_budget_gib").value() == 2.5
    assert child(dialog, QLineEdit, "data_folder").text() == str(tmp_path)
    assert child(dialog, QCheckBox, "highlight_drafts").isChecked()
    assert dialog.form_settings() == given


def test_error_labels_start_hidden(open_dialog):
    dialog = open_dialog()
    labels = [label for label in dialog.findChildren(QLabel) if label.objectName().startswith("error_")]
    assert len(labels) == 28  # 21 + the API server group's 4 + the repeat window's + the phrase penalty's + tools
    assert all(label.isHidden() for label in labels)


def test_draft_path_is_enabled_only_for_a_draft_model(open_dialog):
    dialog = open_dialog()
    kind, path = child(dialog, QComboBox, "draft_kind"), child(dialog, QLineEdit, "draft_path")
    assert not path.isEnabled()
    select(kind, "model")
    assert path.isEnabled()
    select(kind, "lookup")
    assert not path.isEnabled()


def test_edits_and_ok_give_the_new_settings(open_dialog, gguf, tmp_path):
    base = Settings(model=str(gguf))
    dialog = open_dialog(base, npu_available=True)
    child(dialog, QDoubleSpinBox, "temperature").setValue(0.0)
    child(dialog, QSpinBox, "top_k").setValue(0)
    child(dialog, QLineEdit, "seed").setText(" 99 ")
    child(dialog, QSpinBox, "max_tokens").setValue(2048)
    select(child(dialog, QComboBox, "draft_kind"), "model")
    child(dialog, QLineEdit, "draft_path").setText(str(gguf))
    child(dialog, QSpinBox, "draft_max").setValue(10)
    child(dialog, QSpinBox, "draft_paths").setValue(2)
    select(child(dialog, QComboBox, "device_policy"), "npu")
    child(dialog, QDoubleSpinBox, "snapshot_budget_gib").setValue(8.0)
    child(dialog, QLineEdit, "data_folder").setText(str(tmp_path / "new-data"))
    child(dialog, QCheckBox, "highlight_drafts").setChecked(True)
    press_ok(dialog)
    assert not dialog.isVisible()
    assert dialog.result_settings == Settings(
        model=str(gguf), temperature=0.0, top_k=0, seed=99, max_tokens=2048, draft=f"model:{gguf}", draft_max=10,
        draft_paths=2, device_policy="npu", snapshot_budget_gib=8.0, data_folder=str(tmp_path / "new-data"), highlight_drafts=True,
    )  # fmt: skip


def test_invalid_seed_keeps_the_dialog_open_and_focuses_it(open_dialog):
    dialog = open_dialog()
    seed = child(dialog, QLineEdit, "seed")
    seed.setText("abc")
    press_ok(dialog)
    assert dialog.isVisible()
    assert dialog.result_settings is None
    assert error_text(dialog, "seed") == SEED_MESSAGE
    assert seed.text() == "abc"
    assert dialog.focusWidget() is seed
    seed.setText("5")
    press_ok(dialog)
    assert dialog.result_settings == Settings(seed=5)


def test_missing_draft_model_path_shows_the_draft_error(open_dialog, tmp_path):
    dialog = open_dialog()
    select(child(dialog, QComboBox, "draft_kind"), "model")
    press_ok(dialog)
    assert dialog.isVisible()
    assert "draft model file" in error_text(dialog, "draft")
    child(dialog, QLineEdit, "draft_path").setText(str(tmp_path / "absent.gguf"))
    press_ok(dialog)
    assert dialog.isVisible()
    assert "absent.gguf" in error_text(dialog, "draft")
    assert error_text(dialog, "seed") is None


def test_an_eagle3_head_is_chosen_by_its_file_and_a_missing_file_is_said(open_dialog, gguf, tmp_path):
    dialog = open_dialog()
    kind, path = child(dialog, QComboBox, "draft_kind"), child(dialog, QLineEdit, "draft_path")
    select(kind, "eagle3")
    assert path.isEnabled() and "EAGLE-3" in path.placeholderText()
    press_ok(dialog)
    assert dialog.isVisible() and "EAGLE-3 head file" in error_text(dialog, "draft")
    path.setText(str(tmp_path / "absent.gguf"))
    press_ok(dialog)
    assert dialog.isVisible() and "absent.gguf" in error_text(dialog, "draft")
    path.setText(str(gguf))
    press_ok(dialog)
    assert dialog.result_settings.draft == f"eagle3:{gguf}"


def test_every_message_shows_and_the_first_field_gets_focus(open_dialog, tmp_path):
    dialog = open_dialog()
    child(dialog, QDoubleSpinBox, "top_p").setValue(0.0)
    select(child(dialog, QComboBox, "device_policy"), "npu")
    child(dialog, QLineEdit, "data_folder").setText("relative")
    press_ok(dialog)
    assert dialog.isVisible()
    assert error_text(dialog, "top_p").startswith("Top-p")
    assert error_text(dialog, "device_policy") == NO_NPU_MESSAGE
    assert "data folder" in error_text(dialog, "data_folder")
    assert error_text(dialog, "temperature") is None
    assert dialog.focusWidget() is child(dialog, QDoubleSpinBox, "top_p")


def test_restore_defaults_refills_the_form_and_clears_errors(open_dialog):
    dialog = open_dialog(Settings(temperature=1.5, top_k=3, draft="off", highlight_drafts=True))
    child(dialog, QLineEdit, "seed").setText("abc")
    press_ok(dialog)
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.RestoreDefaults).click()
    assert dialog.form_settings() == Settings()
    assert error_text(dialog, "seed") is None
    press_ok(dialog)
    assert dialog.result_settings == Settings()


def test_cancel_gives_none(open_dialog):
    dialog = open_dialog()
    child(dialog, QSpinBox, "top_k").setValue(1)
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Cancel).click()
    assert not dialog.isVisible()
    assert dialog.result_settings is None


def test_enter_means_ok_and_escape_means_cancel(open_dialog, qtbot):
    dialog = open_dialog()
    seed = child(dialog, QLineEdit, "seed")
    seed.setText("7")
    qtbot.keyClick(seed, Qt.Key.Key_Return)
    assert dialog.result_settings == Settings(seed=7)

    other = open_dialog()
    qtbot.keyClick(child(other, QLineEdit, "seed"), Qt.Key.Key_Escape)
    assert not other.isVisible()
    assert other.result_settings is None


def test_tab_order_follows_the_form(open_dialog):
    dialog = open_dialog()
    start: QWidget = child(dialog, QPlainTextEdit, "system_prompt")
    seen, widget = [], start
    while True:
        if widget.objectName() in INPUT_NAMES and widget.objectName() not in seen:
            seen.append(widget.objectName())
        widget = widget.nextInFocusChain()
        if widget is start:
            break
    assert seen == list(INPUT_NAMES)


def test_the_model_group_shows_the_current_models_context_and_what_the_loaded_model_got(open_dialog, gguf):
    other = str(gguf.with_name("other.gguf"))
    given = Settings(contexts={context_key(str(gguf)): 16384, context_key(other): 4096}, kv_cache_8bit=True,
                     memory_budget_percent=50)
    dialog = open_dialog(given, model_path=str(gguf), context=REPORT)
    auto, tokens = child(dialog, QCheckBox, "context_auto"), child(dialog, QSpinBox, "context_tokens")
    assert not auto.isChecked() and tokens.isEnabled() and tokens.value() == 16384
    assert child(dialog, QCheckBox, "kv_cache_8bit").isChecked()
    assert child(dialog, QSpinBox, "memory_budget_percent").value() == 50
    details = child(dialog, QLabel, "context_details").text()
    assert details == context_words(REPORT) and "32,768 tokens" in details and "automatically" in details \
        and "262,144" in details and "KV" not in details and "KV cache" in child(dialog, QLabel, "context_details").toolTip()
    assert dialog.form_settings() == given

    auto.setChecked(True)
    assert not tokens.isEnabled()
    child(dialog, QCheckBox, "kv_cache_8bit").setChecked(False)
    child(dialog, QSpinBox, "memory_budget_percent").setValue(85)
    press_ok(dialog)
    assert dialog.result_settings == Settings(contexts={context_key(other): 4096}, memory_budget_percent=85), \
        "Auto drops the current model's entry; other models keep theirs"


def test_a_fixed_context_is_kept_for_the_current_model_only(open_dialog, gguf):
    dialog = open_dialog(Settings(), model_path=str(gguf))
    tokens = child(dialog, QSpinBox, "context_tokens")
    assert child(dialog, QCheckBox, "context_auto").isChecked() and not tokens.isEnabled()
    assert child(dialog, QLabel, "context_details").text() == NO_MODEL_DETAILS
    child(dialog, QCheckBox, "context_auto").setChecked(False)
    tokens.setValue(65536)
    press_ok(dialog)
    assert dialog.result_settings.contexts == {context_key(str(gguf)): 65536}
    assert dialog.result_settings.context_for(str(gguf)) == 65536


def test_out_of_range_context_and_budget_show_the_rules_messages(open_dialog, gguf):
    dialog = open_dialog(Settings(), model_path=str(gguf))
    child(dialog, QCheckBox, "context_auto").setChecked(False)
    child(dialog, QSpinBox, "context_tokens").setValue(100)
    child(dialog, QSpinBox, "memory_budget_percent").setValue(99)
    press_ok(dialog)
    assert dialog.isVisible() and dialog.result_settings is None
    assert error_text(dialog, "contexts").startswith("A context must be Auto or between 256 and")
    assert "got 100" in error_text(dialog, "contexts")
    assert error_text(dialog, "memory_budget_percent").startswith("The memory budget")
    assert dialog.focusWidget() is child(dialog, QSpinBox, "context_tokens")


def test_without_a_model_file_the_context_cannot_be_set_and_is_left_as_it_was(open_dialog, gguf):
    given = Settings(contexts={context_key(str(gguf)): 8192})
    dialog = open_dialog(given)
    assert not child(dialog, QCheckBox, "context_auto").isEnabled()
    assert not child(dialog, QSpinBox, "context_tokens").isEnabled()
    press_ok(dialog)
    assert dialog.result_settings == given


# --- tabs ---------------------------------------------------------------------------------------

TAB_FIELDS = {  # a field of each tab, by the tab's title
    "Chat": "system_prompt", "Model": "repeat_penalty", "Performance": "device_policy", "Privacy": "data_folder",
    "Tools": "mcp_servers", "Advanced": "snapshot_budget_gib",
}


def tabs(dialog: SettingsDialog) -> QTabWidget:
    return child(dialog, QTabWidget, "settings_tabs")


def tab_of(dialog: SettingsDialog, name: str) -> str:
    """The title of the tab the widget named ``name`` is on."""
    pages = tabs(dialog)
    widget = child(dialog, QWidget, name)
    return next(pages.tabText(i) for i in range(pages.count()) if pages.widget(i).isAncestorOf(widget))


def test_settings_are_in_six_tabs_opening_on_chat(open_dialog):
    dialog = open_dialog()
    pages = tabs(dialog)
    assert [pages.tabText(i) for i in range(pages.count())] == list(TAB_FIELDS)
    assert pages.currentIndex() == 0
    assert {title: tab_of(dialog, name) for title, name in TAB_FIELDS.items()} == {t: t for t in TAB_FIELDS}
    assert tab_of(dialog, "top_k") == tab_of(dialog, "context_auto") == "Model"
    assert tab_of(dialog, "draft_kind") == "Performance" and tab_of(dialog, "api_server_port") == "Privacy"
    assert tab_of(dialog, "kv_cache_8bit") == tab_of(dialog, "memory_budget_percent") == "Advanced"
    assert tab_of(dialog, "theme") == tab_of(dialog, "text_size") == tab_of(dialog, "highlight_drafts") == "Chat"


def test_a_message_on_another_tab_brings_that_tab_forward_in_red(open_dialog):
    dialog = open_dialog()
    pages = tabs(dialog)
    budget = child(dialog, QSpinBox, "memory_budget_percent")
    budget.setValue(99)
    press_ok(dialog)
    assert dialog.isVisible() and pages.tabText(pages.currentIndex()) == "Advanced"
    assert dialog.focusWidget() is budget and error_text(dialog, "memory_budget_percent").startswith("The memory budget")
    advanced = pages.currentIndex()
    red = theme.colour("bad")  # the theme's red for what went wrong
    assert pages.tabBar().tabTextColor(advanced) == red
    assert pages.tabBar().tabTextColor(0) != red, "only the tab with a message"
    budget.setValue(70)
    press_ok(dialog)
    assert dialog.result_settings == Settings(memory_budget_percent=70)
    assert pages.tabBar().tabTextColor(advanced) != red


def test_the_new_settings_are_shown_edited_and_checked_by_the_rules(open_dialog, appearance):
    given = Settings(system_prompt="Answer like a pirate.", theme="dark", text_size=130, repeat_penalty=1.1)
    dialog = open_dialog(given)
    assert child(dialog, QPlainTextEdit, "system_prompt").toPlainText() == "Answer like a pirate."
    assert child(dialog, QComboBox, "theme").currentData() == "dark"
    assert child(dialog, QComboBox, "text_size").currentData() == 130
    assert child(dialog, QDoubleSpinBox, "repeat_penalty").value() == 1.1
    assert dialog.form_settings() == given

    child(dialog, QPlainTextEdit, "system_prompt").setPlainText("  Be brief.\nUse metric units.\n")
    child(dialog, QDoubleSpinBox, "repeat_penalty").setValue(2.5)
    press_ok(dialog)
    assert dialog.isVisible() and error_text(dialog, "repeat_penalty") == \
        "Repeat penalty must be between 1 (off) and 2, got 2.5."
    child(dialog, QDoubleSpinBox, "repeat_penalty").setValue(1.3)
    select(child(dialog, QComboBox, "theme"), "system")
    press_ok(dialog)
    assert dialog.result_settings == Settings(system_prompt="Be brief.\nUse metric units.", theme="system",
                                              text_size=130, repeat_penalty=1.3)


def test_a_text_size_not_offered_is_shown_and_kept(open_dialog):
    dialog = open_dialog(Settings(text_size=120))
    assert child(dialog, QComboBox, "text_size").currentText() == "120 %"
    press_ok(dialog)
    assert dialog.result_settings == Settings(text_size=120)


def test_ok_applies_a_new_theme_and_text_size_to_the_app(open_dialog, appearance):
    platform = appearance.font().pointSizeF()
    dialog = open_dialog()
    press_ok(dialog)
    assert appearance.font().pointSizeF() == platform and theme._state is None, "nothing changed, nothing applied"
    dialog = open_dialog()
    select(child(dialog, QComboBox, "theme"), "dark")
    select(child(dialog, QComboBox, "text_size"), 150)
    press_ok(dialog)
    assert theme.current_scheme() == "dark" and appearance.palette().color(QPalette.ColorRole.Base).lightness() < 60
    assert appearance.font().pointSizeF() == pytest.approx(platform * 1.5, abs=0.05)


def test_cancel_applies_no_appearance(open_dialog, appearance):
    dialog = open_dialog()
    select(child(dialog, QComboBox, "theme"), "dark")
    dialog.reject()
    assert theme._state is None


def test_an_api_server_problem_brings_the_privacy_tab_forward(open_dialog):
    dialog = open_dialog()
    dialog.show_api_server_problem("The local API server could not start: port 8089 is already in use.")
    pages = tabs(dialog)
    assert pages.tabText(pages.currentIndex()) == "Privacy"
    assert child(dialog, QLabel, "error_api_server").isVisible()


def test_the_tools_tab_keeps_what_it_is_given_and_refuses_a_server_without_a_way_to_reach_it(open_dialog):
    from app.services.tools.tool_settings import McpServer, ToolSettings

    server = McpServer("files", "python", ["-m", "files_server"])
    tools = ToolSettings(["calculator", "files"], ["files_read"], ["/tmp/notes"], [server])
    dialog = open_dialog(msgspec.structs.replace(Settings(), tools=tools))
    assert dialog.form_settings().tools == tools
    dialog.tools_tab.builtin["current_time"].setChecked(True)
    assert dialog.form_settings().tools.enabled == ["calculator", "current_time", "files"]
    dialog.tools_tab.forget_always.click()
    assert dialog.form_settings().tools.always == []
    dialog.tools_tab.add_server(McpServer("bad name!", "x"))
    assert "letters, digits" in dialog.form_errors()["tools"]
