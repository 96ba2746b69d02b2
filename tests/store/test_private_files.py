"""model_store.private_files on real files: what it creates is 0700/0600 whatever the umask, what it
repairs loses only its group and other bits, symlinks are never followed, a refused chmod is logged."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from model_store import private_files
from model_store.private_files import (
    make_private_folder, open_private, repair, repair_folder, touch_private, write_private,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="modes are how POSIX systems protect files")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture(params=[0o022, 0o000, 0o277], ids=["umask022", "umask000", "umask277"])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_new_folders_and_their_missing_parents_are_0700(tmp_path, umask):
    folder = make_private_folder(tmp_path / "home" / "data" / "models")
    assert folder.is_dir()
    assert [mode(p) for p in (tmp_path / "home", tmp_path / "home" / "data", folder)] == [0o700] * 3


def test_an_existing_folder_is_left_as_it_is_and_a_file_in_the_way_is_an_error(tmp_path):
    existing = tmp_path / "chosen"
    existing.mkdir()
    existing.chmod(0o755)
    make_private_folder(existing)
    assert mode(existing) == 0o755  # tightening is repair's job, for Hearth's own folders only
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        make_private_folder(tmp_path / "file")


def test_written_files_are_0600(tmp_path, umask):
    write_private(tmp_path / "probe.json", '{"a": 1}')
    with open_private(tmp_path / "worker.log", "ab") as log:
        log.write(b"line\n")
    touch_private(tmp_path / "hearth.db")
    assert (tmp_path / "probe.json").read_text() == '{"a": 1}'
    assert (tmp_path / "hearth.db").read_bytes() == b""
    assert {mode(tmp_path / name) for name in ("probe.json", "worker.log", "hearth.db")} == {0o600}


def test_opening_an_existing_file_tightens_it_and_keeps_what_it_holds(tmp_path):
    log = tmp_path / "worker.log"
    log.write_bytes(b"old\n")
    log.chmod(0o644)
    with open_private(log, "ab") as f:
        f.write(b"new\n")
    assert log.read_bytes() == b"old\nnew\n" and mode(log) == 0o600
    db = tmp_path / "hearth.db"
    db.write_bytes(b"SQLite format 3\0")
    db.chmod(0o664)
    touch_private(db)
    assert db.read_bytes() == b"SQLite format 3\0" and mode(db) == 0o600


def test_a_special_file_in_the_way_keeps_its_mode(tmp_path):
    pipe = tmp_path / "hearth.db"
    os.mkfifo(pipe, 0o644)
    os.chmod(pipe, 0o644)
    touch_private(pipe)  # opened without blocking; only regular files are Hearth's to change
    assert mode(pipe) == 0o644


def test_repair_removes_only_group_and_other_bits(tmp_path):
    folder, tool, owner_only = tmp_path / "data", tmp_path / "tool", tmp_path / "ro"
    db = folder / "hearth.db"
    folder.mkdir()
    for path in (db, tool, owner_only):
        path.touch()
    for path, before in ((folder, 0o755), (db, 0o644), (tool, 0o775), (owner_only, 0o400)):
        path.chmod(before)
    repair([folder, db, tool, owner_only, tmp_path / "missing"])
    assert (mode(folder), mode(db), mode(tool), mode(owner_only)) == (0o700, 0o600, 0o700, 0o400)


def test_repair_never_follows_a_symlink_out_of_hearths_folders(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target_file, target_folder = outside / "notes.txt", outside / "shared"
    target_file.write_text("not Hearth's")
    target_folder.mkdir()
    target_file.chmod(0o644)
    target_folder.chmod(0o755)
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o755)
    (cache / "worker.log").symlink_to(target_file)
    (cache / "linked").symlink_to(target_folder)
    repair_folder(cache)
    repair([cache / "worker.log", cache / "linked"])
    assert mode(cache) == 0o700
    assert (mode(target_file), mode(target_folder)) == (0o644, 0o755)


def test_repair_folder_goes_one_level_deep(tmp_path):
    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    (data / "models" / "copied-by-hand.gguf").write_bytes(b"GGUF")
    (data / "hearth.db").write_bytes(b"")
    for path, before in ((data, 0o755), (data / "models", 0o755), (data / "hearth.db", 0o644),
                         (data / "models" / "copied-by-hand.gguf", 0o644)):
        path.chmod(before)
    repair_folder(data)
    assert (mode(data), mode(data / "models"), mode(data / "hearth.db")) == (0o700, 0o700, 0o600)
    assert mode(data / "models" / "copied-by-hand.gguf") == 0o644


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_a_refused_chmod_is_logged_once_and_not_raised(caplog, monkeypatch):
    monkeypatch.setattr(private_files, "_warned", set())
    refused = Path("/proc/self/status")  # a real file whose mode even root cannot change (0444)
    with caplog.at_level(logging.WARNING, logger="model_store.private_files"):
        repair([refused])
        repair([refused])
    assert mode(refused) == 0o444
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and str(refused) in warnings[0] and "chmod go-rwx" in warnings[0]


def test_repairing_a_database_sqlite_has_open_keeps_its_locks(tmp_path):
    """Closing any descriptor of a file drops the process's POSIX locks on it, SQLite's included:
    repair must change modes without opening the database or its -wal and -shm files."""
    from model_store.db import database_path, open_database

    path = database_path(tmp_path)
    db = open_database(path)
    try:
        db.conn.execute("BEGIN IMMEDIATE")  # the write lock, held in this process
        files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
        for file in files:
            file.chmod(0o644)
        repair_folder(tmp_path)
        touch_private(path)
        assert [mode(file) for file in files] == [0o600] * 3
        writer = "import sqlite3, sys; sqlite3.connect(sys.argv[1], timeout=0).execute('BEGIN IMMEDIATE')"
        other = subprocess.run([sys.executable, "-c", writer, str(path)], capture_output=True, text=True, timeout=60)
        assert other.returncode != 0 and "locked" in other.stderr, other.stderr  # still ours
    finally:
        db.conn.execute("ROLLBACK")
        db.close()


# -- issue 32, point 7: Hearth opens only its own files (model_store.own_files) ------------------------------------


def _stamp(path: Path) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_size, info.st_mtime_ns


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_the_database_is_not_opened_through_a_symlink_at_it_or_at_its_sidecars(tmp_path, suffix):
    from model_store.db import open_database
    from model_store.own_files import NotOwnFile

    folder = tmp_path / "data"
    folder.mkdir()
    target = tmp_path / "loot"
    target.write_bytes(b"")
    stamp = _stamp(target)
    if suffix:
        open_database(folder / "hearth.db").close()
    (folder / f"hearth.db{suffix}").symlink_to(target)
    for read_only_ok in (False, True):
        with pytest.raises(NotOwnFile, match=f"Refused to open .*hearth.db{suffix}: it is a symbolic link to "
                                             f"{target}; Hearth only opens its own files"):
            open_database(folder / "hearth.db", read_only_ok=read_only_ok)
    assert _stamp(target) == stamp


def test_settings_and_engines_files_are_not_read_through_a_symlink(tmp_path):
    from app.services.engines import EngineRegistry
    from app.services.settings import load_settings
    from model_store.own_files import NotOwnFile

    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"engines": [], "data_folder": "/tmp"}')
    config = tmp_path / "config"
    config.mkdir()
    for name in ("settings.json", "engines.json"):
        (config / name).symlink_to(elsewhere)
    with pytest.raises(NotOwnFile, match="settings.json: it is a symbolic link"):
        load_settings(config)
    with pytest.raises(NotOwnFile, match="engines.json: it is a symbolic link"):
        EngineRegistry(config)
    assert (config / "settings.json").is_symlink() and (config / "engines.json").is_symlink(), "not set aside"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_a_file_of_another_user_is_refused(tmp_path):
    from model_store.db import open_database
    from model_store.own_files import NotOwnFile, read_own_bytes

    db = tmp_path / "hearth.db"
    open_database(db).close()
    settings = tmp_path / "settings.json"
    settings.write_text("{}")
    for path in (db, settings):
        os.chown(path, 65534, 65534)
    with pytest.raises(NotOwnFile, match="belongs to another user"):
        open_database(db)
    with pytest.raises(NotOwnFile, match="belongs to another user"):
        read_own_bytes(settings)


def test_a_pipe_in_place_of_a_file_is_refused_at_once(tmp_path):
    from model_store.own_files import read_own_bytes

    fifo = tmp_path / "settings.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        read_own_bytes(fifo)
