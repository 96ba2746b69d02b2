"""The installed ``hearth`` entry point and ``python -m app`` work as separate processes."""

import json
import subprocess
import sys
from pathlib import Path

HEARTH = Path(sys.executable).with_name("hearth")


def test_hearth_entry_point_generates_json(hybrid_tiny, hearth_home):
    result = subprocess.run(
        [str(HEARTH), "generate", "--model", str(hybrid_tiny), "--temperature", "0", "--max-tokens", "6", "--json", "hi"],
        capture_output=True, text=True, timeout=120, env={"HEARTH_HOME": str(hearth_home), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["token_ids"]) == 6


def test_terminal_chat_answers_and_quits(hybrid_tiny, hearth_home):
    result = subprocess.run(
        [sys.executable, "-m", "app", "chat", "--model", str(hybrid_tiny), "--max-tokens", "5", "--seed", "3"],
        input="hello there\nand again\n/exit\n", capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("> ") == 3  # two answers, then the prompt that read /exit


def test_bad_model_exits_1_with_one_line(tmp_path):
    result = subprocess.run([str(HEARTH), "info", "--model", str(tmp_path / "x.gguf")], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.startswith("hearth: error: Cannot load model") and result.stderr.count("\n") == 1
