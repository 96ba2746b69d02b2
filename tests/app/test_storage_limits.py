"""The real command line when ``hearth.db`` cannot be written: a read-only file or data folder, and a
full disk. Each says what and where in one line; listing keeps working read-only; nothing saved
before is lost; and once there is room again the next send works.

Read-only is real, not simulated: the command runs without the right to write the file. Tests run
as root here, and root ignores file modes, so as root the command runs with the capabilities that
let root override them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER) dropped by ``setpriv``;
as any other user a chmod is enough. A full disk is the test-only switch HEARTH_TEST_DB_MAX_PAGES,
which caps the file's size in pages on every connection, so SQLite itself fails the write with
"database or disk is full".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from model_store.conversations import ConversationStore
from model_store.db import MAX_PAGES_ENV, database_path, open_database
from tests.helpers.cli import error_line, hearth
from tests.helpers.full_disk import full_disk  # noqa: F401 (a fixture)

NO_OVERRIDE = ("setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--")


def without_override() -> tuple[str, ...]:
    """The prefix that runs a command without the power to ignore file modes."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: root would write a read-only file anyway")
    return NO_OVERRIDE


def conversation_with_a_message(path, title="Lighthouses") -> str:
    db = open_database(path)
    store = ConversationStore(db)
    conversation = store.create(title)
    user = store.add_message(conversation.id, "user", "Tell me about lighthouses.", parent_id=None)
    store.add_message(conversation.id, "assistant", "They guide ships.", parent_id=user.id)
    db.close()
    return conversation.id


def make_read_only(path, what: str) -> None:
    if what == "file":
        path.chmod(0o400)
    else:
        path.parent.chmod(0o500)


@pytest.fixture
def restore_modes(hearth_home):
    yield
    for folder, _dirs, files in os.walk(hearth_home):
        os.chmod(folder, 0o700)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o600)


@pytest.mark.parametrize("what", ["file", "folder"])
def test_read_only_database_lists_and_refuses_to_send_in_one_line(hearth_home, hybrid_tiny, what, restore_modes):
    path = database_path(hearth_home / "data")
    conversation = conversation_with_a_message(path)
    prefix = without_override()
    make_read_only(path, what)
    target = path if what == "file" else path.parent / "probe"
    probe = subprocess.run([*prefix, sys.executable, "-c", f"open({str(target)!r}, 'ab')"], capture_output=True)
    assert probe.returncode != 0, f"the test must really be unable to write the {what}"
    before = path.read_bytes()

    listed = hearth("conversations", prefix=prefix)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert listed.stdout.split()[0] == conversation and "Lighthouses" in listed.stdout
    warning = listed.stderr.splitlines()
    assert len(warning) == 1 and warning[0].startswith("hearth: warning: cannot save to"), listed.stderr
    assert "read-only" in warning[0] and str(path) in warning[0]
    as_json = hearth("conversations", "--json", prefix=prefix)
    assert [c["id"] for c in json.loads(as_json.stdout)] == [conversation]

    sent = hearth("send", "--conversation", conversation, "--model", str(hybrid_tiny), "--max-tokens", "4", "Hi",
                  prefix=prefix)
    line = error_line(sent)
    assert line.startswith(f"hearth: error: cannot save to {path}: the database or its folder is read-only"), line
    assert "write access" in line
    assert path.read_bytes() == before


def test_a_full_disk_fails_the_send_in_one_line_loses_nothing_and_the_next_send_works(hearth_home, hybrid_tiny):
    path = database_path(hearth_home / "data")
    conversation = conversation_with_a_message(path)
    db = open_database(path)
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    assert db.execute("PRAGMA freelist_count").fetchone()[0] == 0  # so a new row needs new pages
    db.close()
    full = {MAX_PAGES_ENV: str(pages)}
    long_message = "Please read this carefully. " * 4000  # 110 kB: two more 64 KiB pages than the file may grow by

    for args in (["--conversation", conversation], ["--new", "Another chat"]):
        sent = hearth("send", *args, "--model", str(hybrid_tiny), "--max-tokens", "4", long_message, **full)
        line = error_line(sent)
        assert line.startswith(f"hearth: error: cannot save to {path}: the disk holding {path.parent} is full ("), line
        assert "free some space" in line
    listed = hearth("conversations", "--json", **full)
    assert listed.returncode == 0, listed.stderr
    assert [c["id"] for c in json.loads(listed.stdout)] == [conversation], "no empty conversation is left behind"
    db = open_database(path)
    store = ConversationStore(db)
    assert [(m.role, m.content) for m in store.current_branch(conversation)] == [
        ("user", "Tell me about lighthouses."), ("assistant", "They guide ships.")]
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 2
    db.close()

    again = hearth("send", "--conversation", conversation, "--model", str(hybrid_tiny), "--max-tokens", "4",
                   "--temperature", "0", "--json", "And the tallest one?")  # the room is back
    assert again.returncode == 0, again.stderr
    db = open_database(path)
    branch = ConversationStore(db).current_branch(conversation)
    assert [m.content for m in branch[2:]] == ["And the tallest one?", json.loads(again.stdout)["text"]]
    assert branch[-1].status == "done"
    db.close()


# -- issue 32, point 9: a disk that is really full (a small tmpfs filled to the last byte) ----------------------------

def test_on_a_full_disk_reading_works_and_writing_says_the_disk_is_full_and_how_much_to_free(
        hearth_home, hybrid_tiny, full_disk, tmp_path):
    path = database_path(hearth_home / "data")
    conversation = conversation_with_a_message(path)
    assert full_disk() == 0, "the disk is full to the last block"
    before = path.read_bytes()
    full = f"cannot save to {path}: the disk holding {path.parent} is full (0 bytes free); free at least 2 MB on it"

    listed = hearth("conversations")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert listed.stdout.split()[:1] == [conversation] and "Lighthouses" in listed.stdout
    (warning,) = listed.stderr.splitlines()
    assert warning.startswith(f"hearth: warning: {full}"), warning
    assert "can still be listed and read" in warning
    found = hearth("conversations", "--search", "guide ships", "--json")  # reads the messages too
    assert found.returncode == 0, found.stderr
    assert [c["id"] for c in json.loads(found.stdout)] == [conversation]

    document = tmp_path / "notes.txt"
    document.write_text("Lighthouses guide ships.\n")
    for refused in (hearth("send", "--conversation", conversation, "--model", str(hybrid_tiny), "--max-tokens", "4",
                           "Hi"),
                    hearth("doc", "load", str(document), "--model", str(hybrid_tiny))):
        line = error_line(refused)
        assert line.startswith(f"hearth: error: {full}"), line
        assert "permission" not in line and "check that the folder" not in line
    assert path.read_bytes() == before, "nothing was written, nothing lost"

    for filler in path.parent.glob("filler*"):  # room again: the next send works
        filler.unlink()
    again = hearth("send", "--conversation", conversation, "--model", str(hybrid_tiny), "--max-tokens", "4",
                   "--temperature", "0", "--json", "And the tallest one?")
    assert again.returncode == 0, again.stderr
    db = open_database(path)
    assert [m.content for m in ConversationStore(db).current_branch(conversation)][2] == "And the tallest one?"
    db.close()
