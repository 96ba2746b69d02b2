"""``hearth doctor [--json]``: one report a user can paste into a bug report.

What runs here and how: the app and llama.cpp versions and build (``llama_print_system_info``, as
the worker reports it in its handshake), the CPU and its features, the CPU build of llama.cpp in
use and why, each build's canary, the NPU check, the data folder and its free disk, the database's
``PRAGMA integrity_check``, the snapshots' size against their budget, and every installed model:
present or not, and its SHA-256 against the one recorded at download. The engine is asked in a
worker process, so a build that crashes is reported, not fatal. ``problems`` lists what is broken;
the exit status is 1 when there is any. The GUI's Help → System check runs this command.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sqlite3
from pathlib import Path

import msgspec

from app.surfaces.cli.terminal_text import json_text, visible_strings
from app.services.doctor_report import report_lines
from app.services.engine_keys import secret_store
from app.services.engines import EngineRegistry, entry_json
from app.services.settings import app_data_dir, current_settings, snapshot_budget_bytes
from app.services.model_refs import ModelRefError, resolve_model_ref
from engine import protocol as p
from app.engine_clients.client import EngineDead, EngineError, new_request_id
from engine.devices.cpu import probe_cpu
from engine.protocol.devices import device_infos
from engine.devices.probe import start_probe
from app.engine_clients.process_client import ProcessClient
from model_store.db import StoreError, database_path, open_database
from model_store.download_errors import format_bytes
from model_store.file_hashes import file_sha256
from model_store.installed import ModelLibrary, models_folder
from model_store.snapshots import SnapshotStore

PROBE_WAIT_S = 40.0
LOW_DISK_BYTES = 2 * 1024**3


def engine_section(data_dir: Path) -> tuple[dict, list[str]]:
    """What the worker says at its handshake (versions, build, CPU build and canaries), and whether
    it loads the model the app uses and reads and writes a token with it, as the app would."""
    client = ProcessClient(data_dir=data_dir)
    try:
        ready = client.start(timeout=600.0)
    except EngineError as exc:
        client.close(mode="abort")
        return {"running": False, "error": str(exc)}, [f"the engine does not start: {exc}"]
    try:
        model_check, problems = check_model(client, data_dir)
    finally:
        client.close(mode="abort")
    cpu = msgspec.to_builtins(ready.cpu) if ready.cpu is not None else None
    return {"running": True, "versions": ready.versions, "cpu_build": cpu, "model_check": model_check}, problems


def check_model(client: ProcessClient, data_dir: Path) -> tuple[dict, list[str]]:
    """Load the settings' model and answer one token: a crash on load or on the first decode
    (which the canary's tiny model may not show) is found here."""
    ref = current_settings().model
    check = {"model": ref, "status": "ok", "message": ""}
    try:
        client.load_model(resolve_model_ref(ref, data_dir), timeout=600.0)
        command = p.Complete(request_id=new_request_id("doctor"), prompt="Hello", max_tokens=1,
                             sampling=p.SamplingSpec(temperature=0.0), draft=p.DraftSpec("off"))
        for event in client.stream(command, timeout=600.0):
            if isinstance(event, (p.Error, EngineDead)):
                raise EngineError("failed", event.message, event if isinstance(event, EngineDead) else None)
    except (EngineError, ModelRefError) as exc:
        dead = getattr(exc, "dead", None)
        check.update(status="crashed" if dead is not None and dead.crashed else "failed", message=str(exc))
        return check, [f"the model {ref} does not answer: {exc}"]
    return check, []


def database_section(data_dir: Path) -> tuple[dict, list[str]]:
    path = database_path(data_dir)
    section: dict = {"path": str(path), "exists": path.exists()}
    if not path.exists():
        return section, []
    try:
        db = open_database(path)
    except (StoreError, sqlite3.Error) as exc:
        section["integrity"] = str(exc)
        return section, [f"the database cannot be opened: {exc}"]
    try:
        section["integrity"] = integrity(db)
        problems = [] if section["integrity"] == "ok" else [f"the database is damaged: {section['integrity']}"]
        problems += contents_section(db, data_dir, section)
    finally:
        db.close()
    return section, problems


def integrity(db) -> str:
    """``ok``, or what SQLite found wrong (a badly damaged file fails the check itself)."""
    try:
        rows = [row[0] for row in db.execute("PRAGMA integrity_check").fetchall()]
    except sqlite3.Error as exc:
        return str(exc)
    return "ok" if rows == ["ok"] else "; ".join(rows[:10])


def contents_section(db, data_dir: Path, section: dict) -> list[str]:
    """The snapshots' size and the installed models, into ``section``; the problems found."""
    try:
        budget = snapshot_budget_bytes(current_settings())
        section["snapshots"] = {"bytes": SnapshotStore(db).total_bytes(), "budget_bytes": budget}
        section["models"], problems = models_section(db, data_dir)
    except (StoreError, sqlite3.Error) as exc:
        return [f"the database cannot be read: {exc}"]
    return problems


def models_section(db, data_dir: Path) -> tuple[list[dict], list[str]]:
    models, problems = [], []
    for model in ModelLibrary(db, models_folder(data_dir)).list():
        entry = {"id": model.id, "name": model.name, "path": str(model.path), "present": not model.missing,
                 "sha256": "not recorded"}
        if model.missing:
            problems.append(f"the model {model.id or model.name} is missing ({model.path})")
        elif model.sha256:
            try:
                same = file_sha256(db, model.path) == model.sha256
            except OSError as exc:
                same, entry["sha256"] = False, f"unreadable: {exc}"
            if same:
                entry["sha256"] = "ok"
            elif entry["sha256"] == "not recorded":
                entry["sha256"] = "mismatch"
            if not same:
                problems.append(f"the model {model.id or model.name} does not match its recorded SHA-256; "
                                "download it again")
        models.append(entry)
    return models, problems


def remote_engines_section() -> tuple[dict, list[str]]:
    """Where engine keys can be kept here, and the remote engines set up (not contacted: the doctor
    works offline; ``hearth engines test NAME`` reaches one)."""
    usable, detail = secret_store()
    registry = EngineRegistry()
    engines = [entry_json(entry) for entry in registry.entries()]
    return {"secret_store": {"available": usable, "detail": detail}, "engines": engines}, list(registry.problems)


def collect() -> dict:
    data_dir = app_data_dir()
    database, store_problems = database_section(data_dir)  # as it was found: starting an engine prepares it
    engine, problems = engine_section(data_dir)
    cpu = probe_cpu()
    probed = start_probe(data_dir).wait(PROBE_WAIT_S)
    npu = [msgspec.to_builtins(d) for d in device_infos(probed.cpu, probed.qnn) if d.kind != "cpu"]
    disk = shutil.disk_usage(data_dir)
    remote, remote_problems = remote_engines_section()
    problems += store_problems + remote_problems
    if disk.free < LOW_DISK_BYTES:
        problems.append(f"only {format_bytes(disk.free)} free in {data_dir}")
    return {"app": {"python": platform.python_version(), "system": platform.platform()},
            "engine": engine, "cpu": {"name": cpu.name, "machine": cpu.machine, "cores": cpu.cores,
                                      "features": list(cpu.features)},
            "npu": npu, "data": {"folder": str(data_dir), "free_bytes": disk.free}, "database": database,
            "remote_engines": remote, "problems": problems}


def run_doctor(args: argparse.Namespace) -> int:
    report = collect()
    if args.json:
        print(json_text(report))
    else:  # model names and paths, engine names and addresses, errors' words: shown, never acted on
        print("\n".join(report_lines(visible_strings(report))))
    return 1 if report["problems"] else 0
