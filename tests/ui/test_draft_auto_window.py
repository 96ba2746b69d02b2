"""The window's automatic drafting choice (Settings → Performance → Auto) drafts with an installed
EAGLE-3 head that fits the loaded model, as ``--draft auto`` does, and changes no token."""

from __future__ import annotations

from tests.helpers.cli import hearth
from tests.helpers.gui import write_settings

PROMPT = "the river ran past the old mill and the birds sang over the park"


def test_auto_in_the_window_drafts_with_the_installed_head(start_app, hybrid_tiny, eagle3_tiny):
    imported = hearth("models", "import", str(eagle3_tiny))
    assert imported.returncode == 0, imported.stderr
    write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=24, draft="off")
    app = start_app()
    app.wait_loaded()
    plain = app.send_and_wait(PROMPT)
    app.controller.settings = write_settings(model=str(hybrid_tiny), temperature=0.0, max_tokens=24, draft="auto")
    app.controller.new_conversation()
    auto = app.send_and_wait(PROMPT)
    assert auto.finished.draft.kind == "eagle3" and auto.finished.draft.rounds > 0 and not auto.errors, auto.finished
    assert auto.finished.token_ids == plain.finished.token_ids and len(plain.finished.token_ids) > 10
