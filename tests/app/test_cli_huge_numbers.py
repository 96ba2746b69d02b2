"""Numbers no field can take, and a settings file too deep to read (issue 32, point 16).

A flag's integer beyond what the protocol can encode (above 2**64), a negative ``models list
--context`` or a port outside 0–65535 is refused by the sub-command's parser: one usage line naming
the flag and its range, exit 2, no traceback. A settings file nested 100,000 deep is set aside as
``settings.json.broken`` like any unreadable one, instead of failing every command.

All in-process and before any model loads: each test takes milliseconds."""

from __future__ import annotations

import pytest

from app.surfaces.cli.main import main
from app.services.paths import user_paths
from app.services.settings import BROKEN_SUFFIX, Settings, load_settings, settings_path

HUGE = str(2**70)


def refused(capsys, *argv: str) -> str:
    """The last stderr line of a command the parser refused (exit 2); it must have printed no traceback."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert "Traceback" not in err and "Error:" not in err, err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, line", [
    (("generate", "--seed", HUGE, "hi"),
     f"hearth generate: error: argument --seed: seed must be a non-negative integer below 2**63, got {HUGE}"),
    (("generate", "--max-tokens", HUGE, "hi"),
     f"hearth generate: error: argument --max-tokens: must be between 1 and 2147483647, got {HUGE}"),
    (("send", "--new", "t", "--top-k", HUGE, "hi"),
     f"hearth send: error: argument --top-k: top-k must be at most {2**64 - 1} (2**64 - 1), got {HUGE}"),
    (("send", "--new", "t", "--top-k", f"-{HUGE}", "hi"),
     f"hearth send: error: argument --top-k: top-k must be 0 (off) or a positive count, got -{HUGE}"),
    (("chat", "--draft-max", HUGE),
     f"hearth chat: error: argument --draft-max: must be between 1 and 14, got {HUGE}"),
    (("generate", "--seed", f"-{HUGE}", "hi"),
     f"hearth generate: error: argument --seed: seed must be a non-negative integer below 2**63, got -{HUGE}"),
    (("models", "list", "--context", "-5"),
     "hearth models list: error: argument --context: must be between 1 and 2147483647, got -5"),
    (("serve", "--port", "99999"), "hearth serve: error: argument --port: must be between 0 and 65535, got 99999"),
    (("serve", "--port", "-1"), "hearth serve: error: argument --port: must be between 0 and 65535, got -1"),
])
def test_a_number_out_of_reach_is_one_usage_line(capsys, argv, line):
    assert refused(capsys, *argv) == line


def test_a_value_the_protocol_can_carry_is_still_refused_by_the_command_check(capsys):
    """Only what the encoder cannot carry stops at the parser; ``--draft-max 1000`` keeps its
    one-line refusal with exit 1 (and its JSON error under --json), which scripts read."""
    assert main(["generate", "--draft-max", "1000", "hi"]) == 1
    assert capsys.readouterr().err.strip() == "hearth: error: --draft-max must be between 1 and 14; got 1000"


def test_a_settings_file_nested_too_deep_is_set_aside(tmp_path):
    path = settings_path(tmp_path)
    deep = b"[" * 100_000 + b"]" * 100_000
    path.write_bytes(deep)
    loaded = load_settings(tmp_path)
    assert loaded.settings == Settings()
    kept = path.with_name(path.name + BROKEN_SUFFIX)
    assert not path.exists() and kept.read_bytes() == deep
    assert loaded.problems == [f"Could not read settings from {path}: it is nested too deeply to read. "
                               f"Default settings are in use and your file was kept as {kept}."]
    assert load_settings(tmp_path).problems == []  # the next command starts clean


def test_a_command_with_a_settings_file_too_deep_says_so_once_and_works(capsys):
    """Before, every command failed with a RecursionError until the file was removed by hand."""
    path = settings_path(user_paths().ensure().config)
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    assert main(["models", "list", "--json"]) == 0
    kept = path.with_name(path.name + BROKEN_SUFFIX)
    assert capsys.readouterr().err.splitlines() == [
        f"hearth: Could not read settings from {path}: it is nested too deeply to read. "
        f"Default settings are in use and your file was kept as {kept}."]
    assert main(["models", "list", "--json"]) == 0
    assert capsys.readouterr().err == ""  # said once: the file is aside now
