"""``hearth engines add`` refuses control characters in an engine's address and model id with one
line, and stores nothing (issue 32, point 12)."""

from __future__ import annotations

import pytest

from tests.helpers.cli import error_line, hearth
from tests.helpers.memory_keyring import keyring_env

pytestmark = [pytest.mark.process]


@pytest.mark.parametrize("flag, value", [("--url", "http://127.0.0.1:9/v1\r\nX-Injected: 1"),
                                         ("--model", "qwen\x1b]52;c;aGk=\x07")])
def test_engines_add_refuses_control_characters_in_one_line(tmp_path, hearth_home, flag, value):
    args = ["--url", "http://127.0.0.1:9/v1", flag, value] if flag == "--model" else [flag, value]
    added = hearth("engines", "add", "gpu", *args, timeout=120, **keyring_env(tmp_path / "secrets.json"))
    line = error_line(added)
    assert "control characters" in line and "X-Injected" not in line and "\x1b" not in line
    assert not (hearth_home / "config" / "engines.json").exists()
    listed = hearth("engines", "list", "--json", timeout=120, **keyring_env(tmp_path / "secrets.json"))
    assert listed.stdout.strip() == "[]"
