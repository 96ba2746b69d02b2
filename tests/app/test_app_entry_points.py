"""What the installers rest on, from the development install: ``hearth --version`` from
pyproject.toml, child modules started through one command builder (the bundle's executable runs
them), and the window's self-check (the real window and worker, asked one question)."""

from __future__ import annotations

import json
import sys
import tomllib

import pytest

from engine.protocol import child_command
from tests.helpers.cli import ROOT, hearth, installed_hearth


def test_version_is_the_one_in_pyproject():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    done = installed_hearth("--version")
    assert done.returncode == 0 and done.stdout.startswith(f"Hearth {version} (llama-cpp-python ")


def test_child_modules_run_with_python_from_source_and_with_the_app_itself_in_a_bundle(monkeypatch):
    assert child_command.module_command("engine.worker") == [sys.executable, "-m", "engine.worker"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/hearth/Hearth")
    assert child_command.module_command("engine.worker") == ["/opt/hearth/Hearth", "--hearth-run-module",
                                                             "engine.worker"]
    with pytest.raises(ValueError):
        child_command.module_command("os")


def test_only_hearths_child_modules_run_from_the_command_line(monkeypatch):
    child_command.run_module_if_asked(["Hearth", "generate", "hi"])  # not asked: returns
    with pytest.raises(SystemExit, match="not a module Hearth runs"):
        child_command.run_module_if_asked(["Hearth", "--hearth-run-module", "http.server"])


@pytest.mark.slow
@pytest.mark.process
def test_the_window_answers_its_self_check_question_through_its_worker():
    done = hearth(QT_QPA_PLATFORM="offscreen", HEARTH_SELF_CHECK_QUESTION="What is the capital of France?",
                  HEARTH_SELF_CHECK_TIMEOUT_S="240")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["ok"] and report["answer"].strip() and report["error"] == ""
    assert report["model"] == "SmolLM2 135M Instruct"
    assert 0 < report["window_shown_ms"] < 240_000


@pytest.mark.slow
@pytest.mark.process
def test_a_self_check_that_gets_no_answer_says_why_and_fails():
    done = hearth(QT_QPA_PLATFORM="offscreen", HEARTH_SELF_CHECK_QUESTION="Hello?", HEARTH_SELF_CHECK_TIMEOUT_S="0")
    assert done.returncode == 1
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert not report["ok"] and "no answer within 0 s" in report["error"]
    assert "Traceback" not in done.stderr
