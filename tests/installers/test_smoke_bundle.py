"""installers/smoke_bundle.py, the platform-neutral smoke test of a built bundle: its clean
environment, where it finds the CLI, how it judges each check, and run_checks and the command
against a fake bundle whose CLI is a small script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.installers.conftest import INSTALLERS, ROOT, load_module

smoke = load_module(INSTALLERS / "smoke_bundle.py")


FAKE_CLI = """#!{python}
import json, os, pathlib, sys, time
here = pathlib.Path(__file__).parent
args = sys.argv[1:]
(here / f"seen-{{args[0].strip('-')}}.json").write_text(json.dumps({{"env": dict(os.environ), "cwd": os.getcwd()}}))
if (here / "hang").exists():
    time.sleep(60)
if args == ["--version"]:
    print("Hearth 9.9.9 (llama-cpp-python 0.3.36)")
elif args[0] == "generate":
    print(json.dumps({{"text": " Hello there!", "token_ids": [1, 2]}}))
elif args[:2] == ["--hearth-run-module", "app"]:
    question = os.environ["HEARTH_SELF_CHECK_QUESTION"]
    print(json.dumps({{"ok": os.environ["QT_QPA_PLATFORM"] == "offscreen", "question": question, "answer": "Paris."}}))
elif args[0] == "doctor":
    problems = json.loads((here / "problems.json").read_text()) if (here / "problems.json").exists() else []
    print(json.dumps({{"engine": {{}}, "problems": problems}}))
    sys.exit(1 if problems else 0)
"""


@pytest.fixture
def fake_bundle(tmp_path):
    bundle = tmp_path / "Hearth"
    bundle.mkdir()
    cli = smoke.cli_path(bundle)
    cli.write_text(FAKE_CLI.format(python=sys.executable))
    cli.chmod(0o755)
    return bundle


def test_clean_environment_has_a_fresh_home_and_nothing_of_the_development_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("PYTHONHOME", sys.prefix)
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{ROOT}:/usr/bin")
    env = smoke.clean_environment(tmp_path / "home")
    assert env["HOME"] == str(tmp_path / "home") and not any(p.is_file() for p in (tmp_path / "home").rglob("*"))
    assert not {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "HEARTH_HOME"} & set(env)
    for name in ("APPDATA", "LOCALAPPDATA", "WIN_PD_OVERRIDE_LOCAL_APPDATA", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
                 "XDG_CACHE_HOME", "TMPDIR"):
        assert Path(env[name]).is_dir() and tmp_path / "home" in Path(env[name]).parents
    assert [value for value in env.values() if str(ROOT) in value or sys.prefix in value] == []
    assert env["PATH"].split(os.pathsep) == ["/usr/bin", "/bin"]


@pytest.mark.parametrize("system, name", [("Linux", "hearth"), ("Windows", "hearth-cli.exe"), ("Darwin", "hearth-cli")])
def test_cli_path_per_platform(tmp_path, monkeypatch, system, name):
    monkeypatch.setattr(smoke.layout, "system", lambda: system)
    assert smoke.cli_path(tmp_path) == tmp_path / name
    if system == "Darwin":
        assert smoke.cli_path(tmp_path / "Hearth.app") == tmp_path / "Hearth.app" / "Contents" / "MacOS" / name


def test_each_check_needs_its_exit_status_and_its_output():
    healthy = smoke.Outcome(0, json.dumps({"problems": []}), "")
    assert smoke.judge_doctor(healthy, "1.0")[0]
    assert not smoke.judge_doctor(smoke.Outcome(1, healthy.stdout, "Traceback ..."), "1.0")[0]
    assert not smoke.judge_doctor(smoke.Outcome(0, "not json", ""), "1.0")[0]
    assert smoke.judge_generate(smoke.Outcome(0, json.dumps({"text": "Hi"}), ""), "1.0")[0]
    assert not smoke.judge_generate(smoke.Outcome(0, json.dumps({"text": "  "}), ""), "1.0")[0]
    assert not smoke.judge_generate(smoke.Outcome(1, json.dumps({"text": "Hi"}), ""), "1.0")[0]
    assert not smoke.judge_version(smoke.Outcome(0, "Hearth 1.0.1 (llama-cpp-python 0.3.36)", ""), "1.0.1x")[0]
    answered = json.dumps({"ok": True, "answer": "Paris."})
    assert smoke.judge_window(smoke.Outcome(0, f"Qt noise\n{answered}", ""), "1.0")[0]
    assert not smoke.judge_window(smoke.Outcome(1, json.dumps({"ok": False, "error": "no model"}), ""), "1.0")[0]
    assert not smoke.judge_window(smoke.Outcome(0, json.dumps({"ok": True, "answer": " "}), ""), "1.0")[0]


@pytest.mark.skipif(os.name != "posix", reason="the fake CLI is a script with a #! line")
def test_run_checks_passes_a_healthy_bundle_run_in_the_clean_environment(fake_bundle):
    results = smoke.run_checks(fake_bundle, version="9.9.9", timeout=60)
    assert [(check.name, check.ok) for check in results] == [("version", True), ("generate", True), ("doctor", True),
                                                             ("window", True)]
    seen = json.loads((fake_bundle / "seen-generate.json").read_text())
    assert ROOT not in Path(seen["cwd"]).parents and "VIRTUAL_ENV" not in seen["env"]
    assert seen["env"]["HOME"] != os.environ.get("HOME") and Path(seen["env"]["HOME"]).name == "home"


@pytest.mark.skipif(os.name != "posix", reason="the fake CLI is a script with a #! line")
def test_run_checks_stops_at_the_first_failure(fake_bundle):
    wrong_version = smoke.run_checks(fake_bundle, version="1.0.0", timeout=60)
    assert [(check.name, check.ok) for check in wrong_version] == [("version", False)]
    assert "Hearth 1.0.0" in wrong_version[0].detail
    (fake_bundle / "problems.json").write_text(json.dumps(["the model default does not answer"]))
    sick = smoke.run_checks(fake_bundle, version="9.9.9", timeout=60)
    assert [check.ok for check in sick] == [True, True, False]
    assert "does not answer" in sick[-1].detail
    (fake_bundle / "hang").touch()
    hung = smoke.run_checks(fake_bundle, version="9.9.9", timeout=1)
    assert [(check.ok, check.detail) for check in hung] == [(False, "no result within 1 s")]
    assert smoke.run_checks(fake_bundle / "missing")[0].ok is False


@pytest.mark.skipif(os.name != "posix", reason="the fake CLI is a script with a #! line")
def test_smoke_bundle_command_reports_one_line_per_check_and_its_status(fake_bundle):
    command = [sys.executable, str(INSTALLERS / "smoke_bundle.py"), str(fake_bundle), "--version", "9.9.9"]
    passed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert passed.returncode == 0, passed.stderr
    assert [line.split(":")[0] for line in passed.stdout.splitlines()[:4]] == ["ok   version", "ok   generate",
                                                                               "ok   doctor", "ok   window"]
    (fake_bundle / "problems.json").write_text(json.dumps(["the database is damaged"]))
    failed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1
    assert "FAIL doctor: exit 1, problems: the database is damaged" in failed.stdout
    assert "smoke test failed at 'doctor'" in failed.stderr


@pytest.mark.skipif(os.name != "posix", reason="the fake CLI is a script with a #! line")
def test_smoke_bundle_command_takes_a_bundle_path_relative_to_where_it_is_run(fake_bundle):
    """As docs/building-installers.md and the release workflow write it: ``python installers/smoke_bundle.py dist/Hearth``."""
    (fake_bundle.parent / "dist").mkdir()
    fake_bundle.rename(fake_bundle.parent / "dist" / "Hearth")
    command = [sys.executable, str(INSTALLERS / "smoke_bundle.py"), "dist/Hearth", "--version", "9.9.9"]
    passed = subprocess.run(command, cwd=fake_bundle.parent, capture_output=True, text=True, timeout=120)
    assert passed.returncode == 0, passed.stderr
    assert passed.stdout.splitlines()[-1] == "smoke test passed: dist/Hearth"
