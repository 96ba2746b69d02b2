"""Error and notice lines that echo a path or a name from a file show its control characters as
escapes (issue 50, point 5): ``hearth serve --model PATH`` whose model does not load, ``hearth db
recover`` in a data folder with such a name, and ``hearth send`` waiting for a writer whose row in
the database names it so.

Every command here is the real ``hearth`` command line in its own process (``python -m app``)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time

import pytest

from app.surfaces.cli.terminal_text import visible
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database
from tests.app.test_terminal_escapes import raw_controls
from tests.helpers.cli import error_line, hearth

# ESC, an OSC that writes the clipboard, a CSI that clears the screen, a C1 CSI, backspaces and a
# right-to-left override: printed raw, the terminal acts on them instead of showing them
HOSTILE = "tiny\x1b]52;c;aGVsbG8=\x07\x1b[2J\x9b31m\x08\x08\u202etxt"
SHOWN = "tiny\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J\\x9b31m\\x08\\x08\\u202etxt"


def test_serve_names_a_model_that_did_not_load_with_its_controls_escaped(tmp_path):
    model = tmp_path / f"{HOSTILE}.gguf"
    model.write_bytes(b"GGUF" + bytes(60))  # a file that is no model

    result = hearth("serve", "--port", "0", "--model", str(model), timeout=300)

    line = error_line(result)
    assert not raw_controls(result.stderr), result.stderr
    assert line.startswith("hearth: error: the model did not load: Cannot load model "), line
    assert f"{visible(str(tmp_path))}/{SHOWN}.gguf" in line and SHOWN == visible(HOSTILE), line


def test_db_recover_names_its_database_with_the_data_folders_controls_escaped(hearth_home, tmp_path):
    chosen = tmp_path / HOSTILE
    (hearth_home / "config").mkdir(parents=True)
    (hearth_home / "config" / "settings.json").write_text(json.dumps({"data_folder": str(chosen)}))
    open_database(database_path(chosen)).close()

    result = hearth("db", "recover", timeout=120)

    assert result.returncode == 0, result.stderr
    assert not raw_controls(result.stdout + result.stderr), result.stdout
    assert result.stdout.startswith(f"{visible(str(chosen))}/hearth.db is not damaged"), result.stdout
    as_json = hearth("db", "recover", "--json", timeout=120)
    assert json.loads(as_json.stdout)["database"] == str(database_path(chosen))  # the real path, for scripts


def test_send_waiting_for_another_writer_names_it_with_its_controls_escaped(hearth_home, hybrid_tiny):
    db = open_database(database_path(hearth_home / "data"))
    store = ConversationStore(db)
    conversation = store.create("Held")
    store.add_message(conversation.id, "user", "Hello?", parent_id=None)
    now = time.time()  # a writer on another computer (its heartbeat is fresh): it holds the conversation
    db.execute("INSERT INTO writer_locks (conversation_id, token, who, pid, host, process_started, taken_at, "
               "heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               [conversation.id, "t" * 32, f"a {HOSTILE} command", 4242, f"{socket.gethostname()}-{HOSTILE}",
                now, now, now])
    db.conn.commit()
    db.close()

    result = hearth("send", "--conversation", conversation.id, "--model", str(hybrid_tiny), "--max-tokens", "2",
                    "Hi", timeout=300, HEARTH_WRITER_WAIT_S="4")

    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert not raw_controls(result.stderr), result.stderr
    waiting = [line for line in result.stderr.splitlines() if line.startswith("hearth: waiting for ")]
    assert waiting and f"a {SHOWN} command (process 4242 on " in waiting[0], result.stderr


def test_a_warning_naming_a_path_is_written_with_its_controls_escaped(tmp_path):
    """A module's warning (here: a settings file whose loose mode cannot be tightened, as on a disk
    that keeps its own modes) goes through Python's logging, not an error line: it is escaped too."""
    home = tmp_path / HOSTILE
    settings = home / "config" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{}")
    settings.chmod(0o644)
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(settings)]).returncode != 0:
        pytest.skip("this file system cannot make a file's mode unchangeable (chattr +i)")
    try:
        result = hearth("conversations", timeout=120, HEARTH_HOME=str(home))
    finally:
        subprocess.run(["chattr", "-i", str(settings)])

    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert not raw_controls(result.stderr), result.stderr
    warned = [line for line in result.stderr.splitlines() if line.startswith("hearth: could not make ")]
    assert len(warned) == 1 and f"{visible(str(settings))} private (" in warned[0], result.stderr
