"""``hearth send --new`` makes its conversation with the default system prompt from Settings (as the
window does), and takes ``--repeat-penalty`` through a real worker."""

from __future__ import annotations

import json

from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from app.services.settings import app_data_dir
from tests.helpers.cli import hearth
from tests.helpers.gui import write_settings

PIRATE = "You are a pirate."


def test_send_new_starts_with_the_default_system_prompt_and_takes_a_repeat_penalty():
    write_settings(system_prompt=PIRATE)
    done = hearth("send", "--new", "Ahoy", "--temperature", "0", "--max-tokens", "4", "--repeat-penalty", "1.2",
                  "--draft", "off", "--json", "Who are you?")
    assert done.returncode == 0, done.stderr
    sent = json.loads(done.stdout)
    assert sent["status"] == "done"
    database = open_database(database_path(app_data_dir()))
    try:
        assert ConversationStore(database).get(sent["conversation_id"]).system_prompt == PIRATE
    finally:
        database.close()
