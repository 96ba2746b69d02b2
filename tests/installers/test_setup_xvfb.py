"""The set-up installs Xvfb for the screenshots where it is missing, as root with apt-get, and never
fails because of it (installers/setup_xvfb.sh, run by installers/setup_dev.sh): one line, exit 0."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "installers" / "setup_xvfb.sh"


def _tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def run(tmp_path: Path, *, xvfb: bool, uid: int = 0, apt_works: bool = True) -> tuple[subprocess.CompletedProcess, str]:
    """The script on a PATH of stand-ins only: ``id``, ``apt-get`` (logging its arguments), maybe ``Xvfb``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt.log"
    _tool(bin_dir, "id", f"echo {uid}")
    _tool(bin_dir, "apt-get", f'echo "$@" >> {log}\nexit {0 if apt_works else 100}')
    if xvfb:
        _tool(bin_dir, "Xvfb", "exit 0")
    done = subprocess.run(["/bin/bash", str(SCRIPT)], env={"PATH": str(bin_dir)}, capture_output=True, text=True,
                          timeout=30)
    return done, log.read_text() if log.exists() else ""


def test_nothing_is_done_or_said_where_xvfb_is_there(tmp_path):
    done, apt = run(tmp_path, xvfb=True)
    assert (done.returncode, done.stdout, apt) == (0, "", "")


@pytest.mark.parametrize("apt_works, said", [(True, "Installed Xvfb"), (False, "Could not install Xvfb")])
def test_root_with_apt_get_installs_it_and_goes_on_either_way(tmp_path, apt_works, said):
    done, apt = run(tmp_path, xvfb=False, apt_works=apt_works)
    assert done.returncode == 0 and done.stdout.count("\n") == 1 and done.stdout.startswith(said)
    assert "update" in apt
    if apt_works:
        assert "install" in apt and "xvfb" in apt.split() and "libxkbcommon-x11-0" in apt.split()


def test_without_root_it_says_how_in_one_line_and_installs_nothing(tmp_path):
    done, apt = run(tmp_path, xvfb=False, uid=1000)
    assert done.returncode == 0 and done.stdout.count("\n") == 1 and "apt-get install xvfb" in done.stdout
    assert apt == ""


def test_the_set_up_runs_it_without_failing_on_it():
    setup = (ROOT / "installers" / "setup_dev.sh").read_text()
    assert "bash installers/setup_xvfb.sh || true" in setup
