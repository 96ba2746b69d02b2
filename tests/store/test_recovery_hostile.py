"""A damaged database is hostile input (issue 50, points 1 and 2): recovery runs nothing from it, and
its time and memory are bounded by the file's size, whatever the file declares.

Each file is a real ``hearth.db`` written through the stores, then changed as an attacker would
(:mod:`tests.store.hostile_db`). The bounded cases run recovery in a child process under a 4 GiB
address-space limit and a time limit, as ``hearth db recover`` runs it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.services.db_recovery import recovery_text
from model_store.db import PAGE_SIZE, database_path, open_database
from model_store.recovery import damage_found, recover_database
from tests.helpers.cli import ROOT, hearth
from tests.store.damaged import truncate, write_spread_conversations
from tests.store.hostile_db import (
    LONG_TEXT, add_schema_rows, alias_one_cell, claim_pages_in_header, keep_little_of_the_longest_on_its_leaf, read_page, write_chat, write_wal,
)

MEMORY_LIMIT = 4 << 30  # bytes of address space for the recovering process
TIME_LIMIT = 90  # seconds; each case below takes a few seconds at most when recovery is bounded


def hostile_schema_rows(outside: Path) -> dict[str, tuple[str, str, str, int, str]]:
    """Schema rows holding other SQL, by what they would do if run."""
    return {
        "attach": ("table", "evil", "evil", 2, f"ATTACH DATABASE '{outside / 'attached.db'}' AS evil"),
        "vacuum into": ("table", "copy", "copy", 2, f"VACUUM INTO '{outside / 'vacuumed.db'}'"),
        "relative attach": ("table", "rel", "rel", 2, "ATTACH 'relative.db' AS rel"),
        "trigger": ("trigger", "t", "messages", 0,
                    f"CREATE TRIGGER t AFTER INSERT ON messages BEGIN SELECT 1; END"),
        "view": ("view", "v", "v", 0, "CREATE VIEW v AS SELECT load_extension('x'), * FROM messages"),
        "virtual table": ("table", "vt", "vt", 0, "CREATE VIRTUAL TABLE vt USING fts5(x)"),
        "functions": ("table", "calls", "calls", 2,
                      "CREATE TABLE calls AS WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c"
                      " LIMIT 20000000) SELECT randomblob(n % 1000) AS r FROM c"),
    }


def schema_of(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name").fetchall()
    finally:
        conn.close()


def listing(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def places(tmp_path, monkeypatch):
    """(the database, a folder outside the data folder, the working folder), the last two empty."""
    path = database_path(tmp_path / "data")
    outside, cwd = tmp_path / "outside", tmp_path / "cwd"
    outside.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return path, outside, cwd


@pytest.mark.parametrize("case", list(hostile_schema_rows(Path("/"))))
def test_recovery_runs_no_sql_from_the_damaged_file(places, tmp_path, case):
    path, outside, cwd = places
    ids = write_chat(path)
    fresh = database_path(tmp_path / "fresh")
    open_database(fresh).close()
    add_schema_rows(path, [hostile_schema_rows(outside)[case]])

    assert damage_found(path) is not None or case in ("trigger", "view", "virtual table")
    started = time.monotonic()
    recovery = recover_database(path)

    assert time.monotonic() - started < 30
    assert listing(outside) == {} and listing(cwd) == {}, "recovery wrote outside the data folder"
    assert schema_of(path) == schema_of(fresh), "the recovered file's schema is not Hearth's own"
    assert recovery.rows["messages"] == len(ids)
    db = open_database(path)
    try:
        assert sorted(r[0] for r in db.execute("SELECT id FROM messages")) == sorted(ids)
    finally:
        db.close()


def test_hearth_db_recover_runs_nothing_from_a_file_full_of_other_sql(hearth_home, tmp_path):
    """The command a user runs, on a file whose schema holds every kind above."""
    path = database_path(hearth_home / "data")
    outside = tmp_path / "outside"
    outside.mkdir()
    ids = write_chat(path)
    add_schema_rows(path, [row for name, row in hostile_schema_rows(outside).items() if name != "relative attach"])

    recovered = hearth("db", "recover", "--json", timeout=120)

    assert recovered.returncode == 0, recovered.stderr
    report = json.loads(recovered.stdout)
    assert report["damaged"] and report["rows"]["messages"] == len(ids)
    assert listing(outside) == {}
    assert "Traceback" not in recovered.stderr


def recover_in_child(path: Path) -> dict:
    """Recover ``path`` in a child process under the memory and time limits; what it reported."""
    script = ("import json, sys\nfrom model_store.recovery import recover_database\n"
              "r = recover_database(sys.argv[1])\n"
              "print(json.dumps({'rows': r.rows, 'pages': r.pages, 'unreadable': r.unreadable}))\n")
    started = time.monotonic()
    try:
        done = subprocess.run(["prlimit", f"--as={MEMORY_LIMIT}", "--", sys.executable, "-c", script, str(path)],
                              cwd=ROOT, capture_output=True, text=True, timeout=TIME_LIMIT,
                              env={**os.environ, "OPENBLAS_NUM_THREADS": "1"}, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"recovery still running after {TIME_LIMIT} s")
    assert done.returncode == 0, f"recovery failed: {done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr
    return {**json.loads(done.stdout), "seconds": time.monotonic() - started}


def test_cell_pointers_aliasing_one_long_cell_are_read_once(tmp_path):
    """28,660 pointers at one 511 KiB cell with an overflow chain: 14 GB if each were read."""
    path = database_path(tmp_path / "data")
    ids = write_chat(path, long_message=True)
    keep_little_of_the_longest_on_its_leaf(path)
    aliases, others = alias_one_cell(path, 28_660)
    assert aliases == 28_660

    report = recover_in_child(path)

    assert report["rows"]["messages"] == len(ids) - others, "the long message is read once, its aliases are not rows"
    assert report["pages"]["cells_unreadable"] == aliases - 1
    db = open_database(path)
    try:
        long = [text for (text,) in db.execute("SELECT content FROM messages") if len(text) > LONG_TEXT]
    finally:
        db.close()
    assert len(long) == 1 and long[0].startswith("message 0.0 long ")


def test_a_wal_commit_claiming_billions_of_pages_is_read_as_the_pages_it_holds(tmp_path):
    path = database_path(tmp_path / "data")
    ids = write_chat(path)
    held = path.stat().st_size // PAGE_SIZE
    write_wal(path, [(2, 0xFFFFFFFE, read_page(path, 2))])

    report = recover_in_child(path)

    assert report["rows"]["messages"] == len(ids)
    assert report["pages"]["missing"] == 0 and report["pages"]["in_file"] == held


def test_a_header_claiming_billions_of_pages_reports_only_what_the_file_lost(tmp_path):
    path = database_path(tmp_path / "data")
    ids = write_chat(path)
    held = path.stat().st_size // PAGE_SIZE
    claim_pages_in_header(path, 0xFFFFFFFF)

    report = recover_in_child(path)

    assert report["rows"]["messages"] == len(ids)
    assert report["pages"]["missing"] == 0 and report["pages"]["in_file"] == held


def test_a_truncated_file_reports_the_pages_it_lost(tmp_path):
    """Only what the file shows: pages its own pointers lead to, up to the count in its header."""
    path = database_path(tmp_path / "data")
    write_spread_conversations(path, conversations=4, messages=6)
    cut = truncate(path, path.stat().st_size // 2)

    recovery = recover_database(path)

    assert 0 < recovery.pages["missing"] <= len(cut)
    assert recovery.pages["in_file"] == -(-path.with_name(recovery.damaged_copy.name).stat().st_size // PAGE_SIZE) \
        + recovery.pages["missing"]
    assert f"of {recovery.pages['in_file']:,} pages were missing or unreadable" in recovery_text(recovery)
