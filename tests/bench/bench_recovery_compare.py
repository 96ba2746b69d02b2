"""Hearth's recovery (``model_store.recovery``, its own page reader) against SQLite's own recovery
(the recover extension, as the ``sqlite3`` shell's ``.recover`` runs it), on the same damaged files.

The damage table is issue 32's (tests/store/test_recovery_damage.py) plus issue 50's hostile files
(tests/store/test_recovery_hostile.py). For each case and each tool: the rows recovered intact (equal,
column for column, to a row of the undamaged file; a patched reference still counts as intact; and
the intact snapshots whose message and chunks are all intact, the only ones a turn can stand on), the
seconds taken, whether it ended within the time limit under a 4 GiB address-space limit, and whether
it wrote anything outside the data folder. SQLite's side runs
``sqlite3 damaged.db .recover | sqlite3 out.db``; it needs the ``sqlite3`` shell (Debian: sqlite3).
The ``sqlite3`` shell Debian 12 ships (3.40.1) fails every ``.recover`` with "SQL logic error": its
library has no ``sqlite_dbpage``. ``--sqlite3 PATH`` names another shell: one built from the
``shell.c`` and ``sqlite3.c`` that the ``sqlean-py`` sdist carries (3.50.4), with
``-DSQLITE_ENABLE_DBPAGE_VTAB`` (drop the file's last three lines, sqlean's own init). ``--page-size``
rewrites each undamaged file to that page size (``VACUUM``) before the damage.
Prints one JSON object.
Usage: ``python tests/bench/bench_recovery_compare.py [--sqlite3 PATH] [--page-size 4096]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import tests.store.damaged as damaged_files  # noqa: E402
import tests.store.hostile_db as hostile_files  # noqa: E402
import tests.store.test_recovery_damage as damage_table  # noqa: E402
from model_store.db import database_path  # noqa: E402
from model_store.state_files import FILE_PARTS  # noqa: E402
from tests.store.damaged import write_spread_conversations  # noqa: E402
from tests.store.hostile_db import (  # noqa: E402
    add_schema_rows, alias_one_cell, claim_pages_in_header, keep_little_of_the_longest_on_its_leaf, read_page,
    write_chat, write_wal,
)
from tests.store.test_recovery_damage import CASES  # noqa: E402
from tests.store.test_recovery_hostile import hostile_schema_rows  # noqa: E402

TABLES = ("conversations", "messages", "snapshots", "snapshot_parts")
LIMIT_S = 120
MEMORY = 4 << 30
PATCHED = {"messages": {"parent_id"}, "conversations": {"leaf_id", "updated_at", "title"}}


def rows(path: Path) -> dict[str, set[tuple]]:
    """Each table's rows as tuples of (column, value), less the references a recovery may patch."""
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        found = {}
        for table in TABLES:
            try:
                found[table] = {tuple(sorted((k, row[k]) for k in row.keys() if k not in PATCHED.get(table, ())))
                                for row in conn.execute(f"SELECT * FROM {table}")}
            except sqlite3.Error:
                found[table] = set()
        return found
    finally:
        conn.close()


def usable_snapshots(intact: dict[str, set[tuple]]) -> set[tuple]:
    """Intact snapshots whose message is intact too and whose chunks are all there: the only ones a
    turn can stand on (Hearth's recovery drops the others, SQLite's keeps them)."""
    messages = {dict(row)["id"] for row in intact["messages"]}
    held: dict[tuple[str, str], int] = {}
    for row in intact["snapshot_parts"]:
        part = dict(row)
        held[part["snapshot_id"], part["part"]] = held.get((part["snapshot_id"], part["part"]), 0) + len(part["data"])
    usable = set()
    for row in intact["snapshots"]:
        snapshot = dict(row)
        sizes = json.loads(snapshot["part_bytes"])
        if snapshot["message_id"] in messages and all(
                held.get((snapshot["id"], part), 0) == size for part, size in sizes.items() if part not in FILE_PARTS):
            usable.add(row)
    return usable


def run_limited(command: list[str], **kwargs) -> tuple[bool, float, str]:
    started = time.monotonic()
    try:
        done = subprocess.run(["prlimit", f"--as={MEMORY}", "--", *command], capture_output=True, text=True,
                              timeout=LIMIT_S, **kwargs)
        return done.returncode == 0, time.monotonic() - started, done.stderr[-300:]
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - started, f"still running after {LIMIT_S} s"


def hearth(path: Path) -> tuple[bool, float, str, Path]:
    script = "import sys; from model_store.recovery import recover_database; recover_database(sys.argv[1])"
    ok, seconds, err = run_limited([sys.executable, "-c", script, str(path)], cwd=ROOT)
    return ok, seconds, err, path


SHELL = "sqlite3"


def sqlite_recover(path: Path) -> tuple[bool, float, str, Path]:
    out = path.with_name("sqlite-recovered.db")
    shell = f"{shlex(SHELL)} {shlex(path)} .recover | {shlex(SHELL)} {shlex(out)}"
    ok, seconds, err = run_limited(["bash", "-o", "pipefail", "-c", shell], cwd=path.parent)
    return ok, seconds, err, out


def shlex(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


def cases(outside: Path) -> dict:
    damage = {name: ("spread", lambda p, f=fn: f(p)) for name, fn in CASES.items()}
    return {
        **damage,
        "schema rows holding other SQL": ("chat", lambda p: add_schema_rows(
            p, [row for name, row in hostile_schema_rows(outside).items() if name != "relative attach"])),
        "28,660 pointers aliasing one long cell": ("long", lambda p: alias_one_cell(p, 28_660)),
        "a -wal commit claiming 2^32-2 pages": ("chat", lambda p: write_wal(p, [(2, 0xFFFFFFFE, read_page(p, 2))])),
        "a header claiming 2^32-1 pages": ("chat", lambda p: claim_pages_in_header(p, 0xFFFFFFFF)),
    }


def original(kind: str, folder: Path, page_size: int | None) -> Path:
    path = database_path(folder / kind)
    if kind == "spread":
        write_spread_conversations(path, conversations=8, messages=6)
    else:
        write_chat(path, long_message=kind == "long")
    if page_size:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute(f"PRAGMA page_size = {page_size}")
        conn.execute("VACUUM")
        conn.close()
    if kind == "long":
        keep_little_of_the_longest_on_its_leaf(path)
    return path


def use_page_size(size: int) -> None:
    """The damage helpers work in pages of ``size`` bytes."""
    for module in (damaged_files, hostile_files, damage_table):
        module.PAGE_SIZE = size
    hostile_files.LEAST_LOCAL = (size - 12) * 32 // 255 - 23


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--page-size", type=int, default=None, help="rewrite each file to this page size first")
    parser.add_argument("--sqlite3", default="sqlite3", help="the sqlite3 shell whose .recover is measured")
    args = parser.parse_args()
    global SHELL
    SHELL = args.sqlite3
    if args.page_size:
        use_page_size(args.page_size)
    shell = subprocess.run([SHELL, "--version"], capture_output=True, text=True).stdout.split()[:1]
    report: dict = {"page_size": args.page_size or 65536, "sqlite3_shell": shell}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        outside = folder / "outside"
        outside.mkdir()
        originals = {kind: original(kind, folder / "originals", args.page_size) for kind in ("spread", "chat", "long")}
        before = {kind: rows(path) for kind, path in originals.items()}
        for name, (kind, damage) in cases(outside).items():
            report[name] = {}
            for tool, recover in (("hearth", hearth), ("sqlite_recover", sqlite_recover)):
                case_dir = folder / "cases" / f"{len(report)}-{tool}"
                case_dir.mkdir(parents=True)
                path = case_dir / "hearth.db"
                shutil.copyfile(originals[kind], path)
                damage(path)
                ok, seconds, err, result = recover(path)
                got = rows(result) if ok else {t: set() for t in TABLES}
                intact = {t: got[t] & before[kind][t] for t in TABLES}
                report[name][tool] = {
                    "ended": ok, "seconds": round(seconds, 2),
                    "intact_rows": {t: len(rows_of) for t, rows_of in intact.items()},
                    "snapshots_of_intact_messages": len(usable_snapshots(intact)),
                    "other_rows": {t: len(got[t] - before[kind][t]) for t in TABLES},
                    "wrote_outside": sorted(p.name for p in outside.iterdir()),
                    **({} if ok else {"error": err.strip().splitlines()[-1:] or ""}),
                }
                for leftover in outside.iterdir():
                    leftover.unlink()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
