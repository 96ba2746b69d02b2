"""The welcome follows the loaded model (issue 51, point 4): it described the built-in SmolLM2 whatever
was loaded. Through the real window and worker, offscreen."""

from model_store.installed import EMBEDDED_NAME
from tests.helpers.gui import write_settings


def test_the_welcome_names_the_loaded_model_not_the_built_in_one(start_app, hybrid_tiny):
    write_settings(model=str(hybrid_tiny), draft="off")
    app = start_app()
    app.wait_loaded()
    said = app.window.chat_view.welcome.text()
    assert "You are talking to" in said and EMBEDDED_NAME not in said
    assert app.window.telemetry_panel.model_name_label.text() in said
