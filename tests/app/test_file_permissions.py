"""The real ``hearth`` command under the usual umask (022): every folder Hearth creates is 0700 and
every file 0600, looser ones left by an older version are tightened at start (by the app, by the
store and by the worker), and a data folder the user chose keeps its own mode.

Also (issue 16, point 4): titles, file names and paths from the database or the disk are printed
with their control characters escaped, so they cannot move the cursor, recolour or retitle the
terminal or forge rows; ``--json`` still carries them as they are."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engine.backends.cpu_check import CHECK_FILE, CHECK_FILE_ENV
from engine.devices.probe import CACHE_FILE
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.name != "posix", reason="modes are how POSIX systems protect files")


def hearth(*args: str, own_cpu_check: bool = False) -> subprocess.CompletedProcess:
    """``python -m app ARGS`` with this test's HEARTH_HOME, started with umask 022.

    ``own_cpu_check`` drops the session's shared CPU-check file (tests/conftest.py), so the worker
    keeps its ``cpu-check.json`` in the data folder as it does for a user (its canaries then run)."""
    env = {name: value for name, value in os.environ.items() if not (own_cpu_check and name == CHECK_FILE_ENV)}
    result = subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT,
                            timeout=300, env=env, stdin=subprocess.DEVNULL, preexec_fn=lambda: os.umask(0o022))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def modes_under(root: Path) -> dict[str, int]:
    """Every folder and file under ``root`` (``root`` included), by path relative to it."""
    found = {".": mode(root)}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            found[str(path.relative_to(root))] = mode(path)
    return found


def assert_private(found: dict[str, int], root: Path) -> None:
    loose = {name: oct(m) for name, m in found.items()
             if m != (0o700 if (root / name).is_dir() else 0o600)}
    assert not loose, f"readable by others: {loose}"


def send_new() -> str:
    result = hearth("send", "--new", "Private", "--max-tokens", "3", "--temperature", "0", "--json",
                    "hello", own_cpu_check=True)
    return json.loads(result.stdout)["conversation_id"]


# -- point 2: permissions -------------------------------------------------------------------------


def test_everything_a_fresh_install_creates_is_private(hearth_home):
    conversation = send_new()
    hearth("send", "--conversation", conversation, "--max-tokens", "2", "--temperature", "0", "again",
           own_cpu_check=True)
    hearth("devices", "--json", own_cpu_check=True)
    hearth("doctor", "--json", own_cpu_check=True)
    found = modes_under(hearth_home)
    data = Path("data")
    assert {str(data / "hearth.db"), str(data / CHECK_FILE), str(data / CACHE_FILE), "config", "cache"} <= set(found)
    assert_private(found, hearth_home)


def test_a_new_database_and_its_wal_and_shm_files_are_private(tmp_path):
    old = os.umask(0o022)
    try:
        db = open_database(database_path(tmp_path / "data"))
        ConversationStore(db).create("while it is open")  # SQLite now has hearth.db-wal and -shm
        found = modes_under(tmp_path / "data")
        db.close()
    finally:
        os.umask(old)
    assert {"hearth.db", "hearth.db-wal", "hearth.db-shm"} <= set(found)
    assert_private(found, tmp_path / "data")


def test_looser_modes_left_by_an_older_version_are_tightened_at_start(hearth_home):
    data, config, cache = (hearth_home / name for name in ("data", "config", "cache"))
    for folder in (data, config, cache):
        folder.mkdir(parents=True)
    with sqlite3.connect(database_path(data)) as db:  # a database an older Hearth made (0644)
        db.execute("CREATE TABLE kept (x)")
    db.close()
    (config / "settings.json").write_text("{}")
    (cache / "worker.log").write_text("an old log\n")
    (data / "models").mkdir()
    for path in (data, config, cache, data / "models"):
        path.chmod(0o755)
    for path in (database_path(data), config / "settings.json", cache / "worker.log"):
        path.chmod(0o644)

    hearth("conversations")

    for folder in (data, config, cache):  # HEARTH_HOME itself may be a folder the user made
        assert_private({str(folder.relative_to(hearth_home) / name): m for name, m in modes_under(folder).items()},
                       hearth_home)
    with sqlite3.connect(database_path(data)) as db:
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'kept'").fetchone()
    db.close()


def test_a_chosen_data_folder_keeps_its_mode_and_hearths_files_in_it_are_tightened(hearth_home, tmp_path):
    chosen = tmp_path / "Documents"
    chosen.mkdir()
    chosen.chmod(0o755)
    (hearth_home / "config").mkdir(parents=True)
    (hearth_home / "config" / "settings.json").write_text(json.dumps({"data_folder": str(chosen)}))
    conversation = send_new()
    files = [database_path(chosen), chosen / CHECK_FILE, chosen / CACHE_FILE]
    assert [mode(path) for path in files] == [0o600] * 3
    other_window = sqlite3.connect(database_path(chosen))  # keeps the -wal and -shm files in place
    other_window.execute("SELECT count(*) FROM conversations").fetchone()
    files += [Path(f"{database_path(chosen)}-{suffix}") for suffix in ("wal", "shm")]
    for path in files:  # as an older Hearth left them
        path.chmod(0o644)

    hearth("send", "--conversation", conversation, "--max-tokens", "2", "--temperature", "0", "again",
           own_cpu_check=True)

    found = {path.name: oct(mode(path)) for path in files}
    other_window.close()
    assert found == {path.name: oct(0o600) for path in files}
    assert mode(chosen) == 0o755  # the user's folder, not Hearth's to change


def test_the_gui_worker_log_is_private(hearth_home):
    from app.surfaces.gui import app_parts

    old = os.umask(0o022)
    try:
        client = app_parts().make_client()
        client.start(timeout=300)
        client.close(mode="abort", timeout=10)
    finally:
        os.umask(old)
    log = hearth_home / "cache" / "worker.log"
    assert log.exists()
    assert_private(modes_under(hearth_home), hearth_home)


# -- point 4: control characters in printed names -------------------------------------------------

HOSTILE = "Notes\x1b]0;owned\x07\x1b[2J\r\nfake-id  2001-01-01 00:00  forged row\x9b1m\u202etxt.exe\tend"
ESCAPED = "Notes\\x1b]0;owned\\x07\\x1b[2J\\r\\nfake-id  2001-01-01 00:00  forged row\\x9b1m\\u202etxt.exe\\tend"


def assert_no_raw_controls(out: str) -> None:
    rows = out.split("\n")
    assert rows[-1] == ""  # the only newlines end rows
    for row in rows:
        bad = [hex(ord(c)) for c in row if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c == "\u202e"]
        assert not bad, (bad, row)


def test_conversation_titles_are_printed_escaped_and_kept_raw_in_json(hearth_home):
    db = open_database(database_path(hearth_home / "data"))
    created = ConversationStore(db).create(HOSTILE)
    db.close()

    out = hearth("conversations").stdout
    assert_no_raw_controls(out)
    rows = out.splitlines()
    assert len(rows) == 1 and rows[0].startswith(created.id) and rows[0].endswith(ESCAPED)

    listed = json.loads(hearth("conversations", "--json").stdout)
    assert [c["title"] for c in listed] == [HOSTILE]


def test_model_file_names_and_paths_are_printed_escaped_and_kept_raw_in_json(hearth_home):
    models = hearth_home / "data" / "models"
    models.mkdir(parents=True)
    loose = models / f"{HOSTILE}.gguf"
    loose.write_bytes(b"GGUF")

    out = hearth("models", "list").stdout
    assert_no_raw_controls(out)
    row = [line for line in out.splitlines() if "Notes" in line]
    assert len(row) == 1 and ESCAPED in row[0] and str(models / ESCAPED) + ".gguf" in row[0]

    installed = json.loads(hearth("models", "list", "--json").stdout)["installed"]
    assert [(m["name"], m["path"]) for m in installed] == [(HOSTILE, str(loose))]


# -- issue 32, point 7: a link planted at a file Hearth opens, or a file of another user --------------------------

PLANTED = {"data/hearth.db": ("conversations",), "config/settings.json": ("conversations",),
           "config/engines.json": ("engines", "list")}
NOBODY = 65534


def refusal(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1 and "Traceback" not in result.stderr, (result.returncode, result.stderr)
    (line,) = result.stderr.splitlines()
    return line


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, stdin=subprocess.DEVNULL)


def loot(path: Path, name: str) -> Path:
    """A file someone else wants Hearth to write into, or to read as its own: a database, or JSON."""
    if name.endswith(".db"):
        with sqlite3.connect(path) as other:
            other.execute("CREATE TABLE secrets (x)")
    else:
        path.write_text(json.dumps({"data_folder": str(path.parent), "engines": []}))
    os.chmod(path, 0o666)
    return path


@pytest.mark.parametrize("planted", PLANTED)
def test_a_symlink_at_a_hearth_file_is_refused_in_one_line_and_its_target_is_untouched(hearth_home, tmp_path,
                                                                                        planted):
    hearth("conversations")  # Hearth's folders exist
    target = loot(tmp_path / ("loot.db" if planted.endswith(".db") else "elsewhere.json"), planted)
    before = os.stat(target)
    link = hearth_home / planted
    for stale in link.parent.glob(link.name + "*"):  # Hearth's own, replaced by whoever can write the folder
        stale.unlink()
    link.symlink_to(target)

    line = refusal(run(*PLANTED[planted]))
    assert line == (f"hearth: error: Refused to open {link}: it is a symbolic link to {target}; Hearth only opens "
                    "its own files. Remove the link and start again.")
    after = os.stat(target)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns), "the target is untouched"
    assert link.is_symlink() and not list(tmp_path.glob("loot.db-*")), "no -wal or -shm beside the target either"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
@pytest.mark.parametrize("planted", PLANTED)
def test_a_hearth_file_owned_by_another_user_is_refused_in_one_line(hearth_home, planted):
    hearth("conversations")
    path = hearth_home / planted
    if planted.endswith(".db"):
        open_database(path).close()
    else:
        path.write_text(json.dumps({"engines": []}) if "engines" in planted else "{}")
    os.chown(path, NOBODY, NOBODY)

    line = refusal(run(*PLANTED[planted]))
    assert line.startswith(f"hearth: error: Refused to open {path}: it belongs to another user (nobody, uid 65534); "
                           "Hearth only opens its own files. Move it out of the way"), line


@pytest.mark.parametrize("planted", ["config/settings.json", "config/engines.json"])
def test_the_window_does_not_start_on_a_planted_settings_or_engines_file_and_says_why(hearth_home, tmp_path,
                                                                                      planted, monkeypatch):
    hearth("conversations")
    target = loot(tmp_path / "elsewhere.json", planted)
    link = hearth_home / planted
    link.unlink(missing_ok=True)
    link.symlink_to(target)
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")  # no dialog there: the stderr line is what is said

    line = refusal(run())  # `python -m app`: the window
    assert line == (f"hearth: error: Refused to open {link}: it is a symbolic link to {target}; Hearth only opens "
                    "its own files. Remove the link and start again.")
