"""The state files beside the database keep private modes, and one that is not Hearth's own private
file is never trusted (issue 50, point 6).

``states/<checksum>`` holds a conversation's model state: what a turn's answer continues from. It is
repaired like the database and the settings (the folder 0700, each file 0600) by the commands that
open the store, here ``hearth conversations`` and ``hearth send``. A state file that is a symbolic
link, that belongs to another user, or that other users can write and whose mode cannot be
repaired, is refused in a note saying why, and the turn rebuilds the state from the conversation's
token record instead (the snapshot is only a speed-up): the answer comes all the same.

Every command is the real ``hearth`` command line in its own process (started with umask 022, as a
user's shell), on real files."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.app.test_file_permissions import NOBODY, mode
from tests.helpers.cli import command, ROOT

pytestmark = pytest.mark.skipif(os.name != "posix", reason="modes are how POSIX systems protect files")
ANSWER = ("--max-tokens", "3", "--temperature", "0", "--draft", "off", "--json")


def hearth(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(command(*args), capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env=dict(os.environ), stdin=subprocess.DEVNULL, preexec_fn=lambda: os.umask(0o022))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result


def notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("hearth: note: ")]


@pytest.fixture
def conversation(hearth_home, hybrid_tiny) -> str:
    """A conversation of one answered turn, whose snapshot's state is in files under ``data/states``."""
    sent = hearth("send", "--new", "Kept", "--model", str(hybrid_tiny), *ANSWER, "Hello there.")
    assert json.loads(sent.stdout)["snapshot"]["saved_bytes"] > 0
    assert state_files(hearth_home), "the snapshot's state went to files"
    return json.loads(sent.stdout)["conversation_id"]


def states(hearth_home: Path) -> Path:
    return hearth_home / "data" / "states"


def state_files(hearth_home: Path) -> list[Path]:
    return sorted(path for path in states(hearth_home).iterdir() if not path.name.startswith("."))


def send_again(conversation: str, hybrid_tiny: Path) -> tuple[dict, list[str]]:
    """The next turn: what ``--json`` printed, and the notes on stderr."""
    sent = hearth("send", "--conversation", conversation, "--model", str(hybrid_tiny), *ANSWER, "And again?")
    return json.loads(sent.stdout), notes(sent.stderr)


def assert_rebuilt(printed: dict, said: list[str], why: str) -> None:
    """The state was refused for ``why``, said once, and the answer came from the token record."""
    refused = [line for line in said if "the saved state was refused" in line]
    assert len(refused) == 1 and why in refused[0] and "it was rebuilt from the token record" in refused[0], said
    assert printed["status"] == "done" and printed["text"], printed


@pytest.mark.parametrize("opener", ["conversations", "send"])
def test_state_files_loosened_by_another_program_are_made_private_again(hearth_home, hybrid_tiny, conversation,
                                                                        opener):
    states(hearth_home).chmod(0o755)
    for path in state_files(hearth_home):
        path.chmod(0o644)

    if opener == "conversations":
        hearth("conversations")
    else:
        printed, said = send_again(conversation, hybrid_tiny)
        assert printed["snapshot"]["restored"] and not said, said  # repaired, then trusted

    assert mode(states(hearth_home)) == 0o700
    assert {path.name: oct(mode(path)) for path in state_files(hearth_home)} == \
        {path.name: oct(0o600) for path in state_files(hearth_home)}


def test_a_state_file_that_is_a_symbolic_link_is_refused_and_its_target_untouched(hearth_home, hybrid_tiny,
                                                                                  conversation, tmp_path):
    targets = []
    for path in state_files(hearth_home):  # the same bytes, elsewhere: only the link is wrong
        target = tmp_path / f"elsewhere-{path.name}"
        shutil.copyfile(path, target)
        target.chmod(0o644)
        path.unlink()
        path.symlink_to(target)
        targets.append((target, os.stat(target)))

    printed, said = send_again(conversation, hybrid_tiny)

    assert_rebuilt(printed, said, "is a symbolic link")
    for target, before in targets:
        after = os.stat(target)
        assert (mode(target), after.st_mtime_ns) == (0o644, before.st_mtime_ns), "the target is untouched"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_a_state_file_of_another_user_is_refused(hearth_home, hybrid_tiny, conversation):
    for path in state_files(hearth_home):
        os.chown(path, NOBODY, NOBODY)

    printed, said = send_again(conversation, hybrid_tiny)

    assert_rebuilt(printed, said, "belongs to another user (")


def immutable(path: Path, on: bool) -> bool:
    """``chattr +i`` (or ``-i``): not even its owner can change the file's mode then. False where the
    file system or the system cannot."""
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True).returncode == 0


def test_a_state_file_others_can_write_whose_mode_cannot_be_repaired_is_refused(hearth_home, hybrid_tiny,
                                                                                 conversation):
    files = state_files(hearth_home)
    for path in files:
        path.chmod(0o666)
    locked = [path for path in files if immutable(path, True)]
    try:
        if locked != files:
            pytest.skip("this file system cannot make a file's mode unchangeable (chattr +i)")
        printed, said = send_again(conversation, hybrid_tiny)
    finally:
        for path in locked:
            immutable(path, False)

    assert_rebuilt(printed, said, "could not be made private")
    assert all(stat.S_IMODE(os.lstat(path).st_mode) == 0o666 for path in files)
