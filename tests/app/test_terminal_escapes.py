"""Terminals that cannot be hijacked (issue 32, point 10): no escape sequence, C1 control or bidi
override that Hearth did not write reaches the terminal, from a model's file name, an error line, a
remote engine's model ids, error body or answer.

Every command here is the real ``hearth`` command line; the remote engine is
:class:`~tests.helpers.scripted_engine.ScriptedEngine`, a real HTTP server on 127.0.0.1 saying what
the test scripts. "On a terminal" runs the command with its stdout on a pseudo-terminal (``pty``),
so it sees a terminal as a user's shell gives it. Piped, an answer is the model's text byte for
byte (a script wants it); names, ids and error lines are made visible everywhere."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess

import pytest

from app.surfaces.cli.terminal_text import AnswerText, json_text
from tests.helpers.cli import ROOT, command, hearth
from tests.helpers.scripted_engine import ScriptedEngine

OSC52 = "\x1b]52;c;aGVsbG8=\x07"  # writes "hello" to the user's clipboard
TITLE, CLEAR = "\x1b]0;pwned\x07", "\x1b[2J"
HOSTILE = f"{OSC52}{TITLE}\x9b2J\u202etxt.exe\u2066\u200f"
# what may never reach the terminal: C0 but for tab, newline (and CR, which a terminal's own line
# discipline writes before a newline), DEL, C1, bidi controls
FORBIDDEN = {*map(chr, (*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0))),
             *"\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"}
PIECES = ["Sure", f" {OSC52[:3]}", f"{OSC52[3:]} and \x1b", f"{CLEAR[1:]}\x9b", "31m red\r", "\nline two\r",
          "over\u202eevil", "\tend"]  # escapes split across pieces, CR LF split, a lone CR


def raw_controls(text: str) -> set[str]:
    return {char for char in text if char in FORBIDDEN}


def in_a_terminal(*args: str, timeout: float = 60) -> tuple[str, str, int]:
    """``hearth ARGS`` with stdout on a pseudo-terminal: (what the terminal received, stderr, exit status)."""
    leader, follower = os.openpty()
    process = subprocess.Popen(command(*args), cwd=ROOT, stdout=follower, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, env=dict(os.environ))
    os.close(follower)
    seen = bytearray()
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the command closed the terminal
            break
        if not data:
            break
        seen += data
    os.close(leader)
    stderr = process.communicate(timeout=timeout)[1].decode()
    return seen.decode(), stderr, process.returncode


def test_answer_text_on_a_terminal_shows_escapes_even_split_across_pieces():
    shown = AnswerText(terminal=True)
    out = "".join(map(shown, PIECES)) + shown.end()
    assert not raw_controls(out)
    assert out == ("Sure \\x1b]52;c;aGVsbG8=\\x07 and \\x1b[2J\\x9b31m red\nline two\\rover\\u202eevil\tend")
    piped = AnswerText(terminal=False)
    assert "".join(map(piped, PIECES)) + piped.end() == "".join(PIECES)
    held = AnswerText(terminal=True)
    assert held("a\r") + held.end() == "a\\r"  # a CR at the very end is shown, not lost


def test_json_output_escapes_what_a_terminal_would_act_on_and_reads_back_exactly():
    value = {"name": HOSTILE + "\x7f\u2028 é 中", "list": [HOSTILE]}
    line = json_text(value)
    assert not raw_controls(line) and "é 中" in line
    assert json.loads(line) == value


@pytest.fixture
def hostile_engine(hearth_home):
    """A remote engine named ``evil`` whose model id and answer are hostile."""
    with ScriptedEngine(PIECES, model_id=f"model{HOSTILE}") as engine:
        added = hearth("engines", "add", "evil", "--url", engine.base_url, timeout=60)
        assert added.returncode == 0, added.stderr
        yield engine


def test_a_remote_answer_on_a_terminal_shows_its_escapes_and_piped_is_byte_exact(hostile_engine):
    shown, stderr, status = in_a_terminal("generate", "--engine", "evil", "hi")
    assert status == 0, stderr
    assert not raw_controls(shown) and not raw_controls(stderr), (shown, stderr)
    assert "\\x1b]52;c;aGVsbG8=\\x07" in shown and "\\u202eevil" in shown
    piped = subprocess.run(command("generate", "--engine", "evil", "hi"), cwd=ROOT, capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=60)  # bytes: CRs as they came
    assert piped.stdout == ("".join(PIECES) + "\n").encode() and not raw_controls(piped.stderr.decode())
    as_json = hearth("generate", "--engine", "evil", "--json", "hi", timeout=60)
    assert not raw_controls(as_json.stdout)
    result = json.loads(as_json.stdout)
    assert result["text"] == "".join(PIECES) and result["remote"]["model"] == f"model{HOSTILE}"


def test_a_remote_engines_model_ids_are_shown_not_acted_on(hostile_engine):
    tested = hearth("engines", "test", "evil", timeout=60)
    assert tested.returncode == 0, tested.stderr
    assert not raw_controls(tested.stdout + tested.stderr) and "model\\x1b]52;c;" in tested.stdout
    as_json = hearth("engines", "test", "evil", "--json", timeout=60)
    assert not raw_controls(as_json.stdout) and json.loads(as_json.stdout)["models"] == [f"model{HOSTILE}"]
    greeting, stderr, status = in_a_terminal("chat", "--engine", "evil")  # stdin is empty: it greets and ends
    assert status == 0, stderr
    assert "Chatting with model\\x1b]52;c;" in greeting and not raw_controls(greeting + stderr)
    missing = hearth("generate", "--engine", "evil", "--model", f"other{HOSTILE}", "hi", timeout=60)
    assert missing.returncode == 1 and "has no model" in missing.stderr and not raw_controls(missing.stderr)


def test_a_remote_engines_error_body_is_shown_not_acted_on(hearth_home):
    body = json.dumps({"error": {"message": f"overloaded {HOSTILE}{CLEAR}"}}).encode()
    with ScriptedEngine(error=(500, body)) as engine:
        assert hearth("engines", "add", "evil", "--url", engine.base_url, timeout=60).returncode == 0
        failed = hearth("generate", "--engine", "evil", "--json", "hi", timeout=60)
    assert failed.returncode == 1 and "(it said: overloaded \\x1b]52;c;" in failed.stderr
    assert not raw_controls(failed.stderr + failed.stdout)
    assert "\\x1b]52" in json.loads(failed.stdout)["error"]["message"]


def test_a_hostile_model_file_name_is_shown_not_acted_on(hearth_home, hybrid_tiny, tmp_path):
    hostile = tmp_path / f"tiny{OSC52}{TITLE}\u202efoog.gguf"
    shutil.copy(hybrid_tiny, hostile)
    imported = hearth("models", "import", str(hostile), timeout=60)
    assert imported.returncode == 0, imported.stderr
    model_id = imported.stdout.split()[1]
    for args in (("models", "list"), ("models", "list", "--json"), ("info", "--model", model_id, "--json")):
        shown = hearth(*args, timeout=120)
        assert shown.returncode == 0, shown.stderr
        assert not raw_controls(shown.stdout + shown.stderr), args
    listed = json.loads(hearth("models", "list", "--json", timeout=60).stdout)
    assert str(hostile) in [model["path"] for model in listed["installed"]]  # JSON reads back the real path
    hostile.unlink()
    doctor = hearth("doctor", timeout=120)  # the missing model is a problem, named with its path
    assert "is missing (" in doctor.stdout and "\\x1b]52;c;" in doctor.stdout
    assert not raw_controls(doctor.stdout + doctor.stderr)
    for args in (("info", "--model", str(hostile)), ("info", "--model", str(hostile), "--json"),
                 ("send", "--conversation", f"nope{OSC52}", "hi")):
        failed = hearth(*args, timeout=60)
        assert failed.returncode == 1 and failed.stderr.startswith("hearth: error: "), failed.stderr
        assert not raw_controls(failed.stdout + failed.stderr), args
    removed = hearth("models", "rm", model_id, timeout=60)
    assert removed.returncode == 0 and not raw_controls(removed.stdout + removed.stderr)


def test_send_on_a_terminal_and_the_saved_conversations_json_show_no_raw_controls(hostile_engine):
    shown, stderr, status = in_a_terminal("send", "--engine", "evil", "--new", f"chat{HOSTILE}", "hi")
    assert status == 0, stderr
    assert "\\x1b]52;c;aGVsbG8=\\x07" in shown and not raw_controls(shown + stderr)
    listed = hearth("conversations", "--json", timeout=60)
    assert not raw_controls(listed.stdout) and json.loads(listed.stdout)[0]["title"] == f"chat{HOSTILE}"
    sent = hearth("send", "--engine", "evil", "--new", f"again{HOSTILE}", "--json", "hi", timeout=60)
    assert not raw_controls(sent.stdout) and json.loads(sent.stdout)["text"] == "".join(PIECES)
