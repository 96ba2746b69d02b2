"""``hearth doctor [--json]``, the real command: the report's sections, exit status 0 on a sound
installation, and 1 with a problem a user can read for a damaged database, a registered model
whose file is gone, and a machine where no CPU build of llama.cpp runs (every canary crashes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from engine.backends.cpu_check import CHECK_FILE_ENV
from engine.backends.faults import FAULT_ENV
from tests.cpu_builds import auto_build
from engine.models.model_files import embedded_model_path
from model_store.db import database_path

HEARTH = Path(sys.executable).with_name("hearth")
SECTIONS = {"app", "engine", "cpu", "npu", "data", "database", "remote_engines", "problems"}
CANARY_STATUSES = {"ok", "unsupported", "crashed", "failed"}


def hearth(*args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    """The installed command, with this test's HEARTH_HOME (and the session's CPU check)."""
    return subprocess.run([str(HEARTH), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def doctor_json(**env: str) -> tuple[int, dict]:
    result = hearth("doctor", "--json", **env)
    assert "Traceback" not in result.stderr, result.stderr
    assert len(result.stdout.splitlines()) == 1, result.stdout
    return result.returncode, json.loads(result.stdout)


def doctor_text(**env: str) -> subprocess.CompletedProcess:
    result = hearth("doctor", **env)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_a_fresh_installation_has_no_problems_and_names_its_cpu_build(hearth_home):
    code, report = doctor_json()
    assert code == 0 and report["problems"] == [], report["problems"]
    assert set(report) == SECTIONS
    engine = report["engine"]
    assert engine["running"] and engine["versions"]["llama-cpp-python"]
    build = engine["cpu_build"]
    canaries = build["canaries"]
    assert build["variant"] in canaries and canaries[build["variant"]]["status"] == "ok"
    assert all(c["status"] in CANARY_STATUSES for c in canaries.values()), canaries
    assert report["database"]["exists"] is False
    assert report["data"]["folder"] == str(hearth_home / "data")
    assert report["remote_engines"]["engines"] == [] and report["remote_engines"]["secret_store"]["detail"]

    text = doctor_text()
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[-1] == "No problems found."
    assert any(line.startswith(f"CPU build of llama.cpp: {build['variant']}: ") for line in lines), text.stdout
    assert any(line.startswith(f"  canary {build['variant']}: ok") for line in lines), text.stdout
    assert any(line.startswith("Secret store for engine keys: ") for line in lines), text.stdout


def test_a_broken_list_of_remote_engines_is_a_problem_and_is_set_aside(hearth_home):
    engines = hearth_home / "config" / "engines.json"
    engines.parent.mkdir(parents=True, exist_ok=True)
    engines.write_text("{not json", encoding="utf-8")
    code, report = doctor_json()
    assert code == 1 and any("engines.json" in problem for problem in report["problems"]), report["problems"]
    assert (hearth_home / "config" / "engines.json.broken").read_text(encoding="utf-8") == "{not json"


def damage_the_middle(path: Path, pages: int = 16, page_size: int = 4096) -> None:
    """Overwrite whole pages in the middle of a SQLite file with garbage."""
    start = path.stat().st_size // 2 // page_size * page_size
    with path.open("r+b") as f:
        f.seek(start)
        f.write(b"\xa5" * (pages * page_size))


def test_a_damaged_database_is_a_problem(hearth_home):
    sent = hearth("send", "--new", "T", "--max-tokens", "4", "--temperature", "0", "Hello there")
    assert sent.returncode == 0, sent.stderr
    db = database_path(hearth_home / "data")
    assert db.stat().st_size > 32 * 4096  # the messages and the turn's snapshot
    damage_the_middle(db)

    code, report = doctor_json()
    assert code == 1
    assert any("database" in problem for problem in report["problems"]), report["problems"]
    assert report["database"]["integrity"] != "ok"
    text = doctor_text()
    assert text.returncode == 1 and "Problems:" in text.stdout
    assert any(line.startswith("  - the database") for line in text.stdout.splitlines()), text.stdout


def test_a_registered_model_whose_file_is_gone_is_a_problem(hearth_home, tmp_path):
    copy = tmp_path / "doctor-test-model.gguf"
    shutil.copyfile(embedded_model_path(), copy)
    imported = hearth("models", "import", "--json", str(copy), timeout=120)
    assert imported.returncode == 0, imported.stderr
    model_id = json.loads(imported.stdout)["id"]
    code, report = doctor_json()
    assert code == 0, report["problems"]
    copy.unlink()

    code, report = doctor_json()
    assert code == 1
    (problem,) = report["problems"]
    assert model_id in problem and "missing" in problem and str(copy) in problem
    (model,) = report["database"]["models"]
    assert model["id"] == model_id and model["present"] is False
    text = doctor_text()
    assert text.returncode == 1 and f"Model {model_id}: MISSING" in text.stdout


def test_a_machine_where_every_cpu_build_crashes_is_a_problem_not_a_crash(hearth_home, tmp_path):
    crashing = {FAULT_ENV: "canary:*:SIGILL", CHECK_FILE_ENV: str(tmp_path / "cpu-check.json")}
    code, report = doctor_json(**crashing)
    assert code == 1
    assert set(report) == SECTIONS and report["engine"]["running"] is False
    (problem,) = report["problems"]
    assert problem.startswith("the engine does not start: none of the CPU builds of llama.cpp runs"), problem
    assert "crashed (SIGILL) in its canary" in problem
    text = doctor_text(**crashing)  # now from the cache: every crash was recorded
    assert text.returncode == 1
    assert any(line.startswith("Engine: does not start: ") for line in text.stdout.splitlines()), text.stdout
    assert "Data folder: " in text.stdout  # the rest of the report is still there


def test_a_model_that_crashes_on_its_first_token_is_a_problem_the_canary_cannot_see(hearth_home):
    """The canary's tiny model passes; the app's model crashes at its first decode (as the AMX
    trap did with SmolLM2's Q4_1): the doctor loads that model and reads a token, so it says so."""
    code, report = doctor_json(**{FAULT_ENV: f"decode:{auto_build()}:SIGILL"})
    assert code == 1
    check = report["engine"]["model_check"]
    assert check["model"] == "default" and check["status"] == "crashed"
    (problem,) = report["problems"]
    assert problem.startswith("the model default does not answer: the inference library crashed "
                              f"(illegal instruction, SIGILL) with the CPU build {auto_build()}"), problem
    assert doctor_json()[1]["engine"]["model_check"]["status"] == "ok"  # without the switch: the check passes
