"""The Linux menu entry read by GLib, as GNOME and every GLib desktop read it (``gio launch``), and
what removing Hearth says it keeps, without building the bundle.

The entries package_linux.py writes for the .deb and install.sh writes for one user name a stand-in
window here (a script that leaves a marker), in folders with a space; the bundle test
(test_bundle_linux.py) launches the real window through the installed entry and removes the real .deb.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.installers.conftest import INSTALLERS, load_module

package_linux = load_module(INSTALLERS / "linux" / "package_linux.py")

GIO = shutil.which("gio")
needs_gio = pytest.mark.skipif(GIO is None, reason="GLib's gio (Debian's libglib2.0-bin) is not installed, so the "
                                                   "menu entry cannot be read with GLib's own parser")
pytestmark = pytest.mark.skipif(os.name != "posix", reason="the Linux installers' scripts")
STAND_IN = '#!/bin/sh\necho "launched with $# arguments" > "$MARKER"\n'


def user_env(home: Path, **extra: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **extra}


def stand_in_bundle(folder: Path) -> Path:
    """A folder shaped like the unpacked download: the window is a script that leaves a marker."""
    (folder / "icons").mkdir(parents=True)
    for name, text in (("Hearth", STAND_IN), ("hearth", "#!/bin/sh\necho 'Hearth (stand-in)'\n")):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    (folder / "icons" / "hearth-48.png").write_bytes(b"png")
    shutil.copy2(INSTALLERS / "linux" / "hearth.desktop", folder / "hearth.desktop")
    shutil.copy2(INSTALLERS / "linux" / "install_local.sh", folder / "install.sh")
    return folder


def launch_through_glib(entry: Path, home: Path) -> str:
    """``gio launch ENTRY``: GLib loads the entry (its TryExec must name an executable) and starts its Exec."""
    marker = home / "launched.txt"
    done = subprocess.run([GIO, "launch", str(entry)], env=user_env(home, MARKER=str(marker)), capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return marker.read_text().strip()


def install_for_user(bundle: Path, prefix: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["bash", str(bundle / "install.sh"), *args, "--prefix", str(prefix)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@needs_gio
def test_the_debs_menu_entry_is_loaded_by_glib_and_starts_its_window(tmp_path):
    window = stand_in_bundle(tmp_path / "opt with space" / "hearth") / "Hearth"
    entry = tmp_path / "hearth.desktop"
    entry.write_text(package_linux.desktop_entry(str(window), "hearth"))
    assert f"TryExec={window}\n" in entry.read_text()
    assert launch_through_glib(entry, tmp_path / "home") == "launched with 0 arguments"  # %F, no files


def test_the_debs_menu_entry_refuses_a_path_its_exec_line_cannot_hold():
    with pytest.raises(ValueError, match="cannot hold"):
        package_linux.desktop_entry('/opt/"odd"/Hearth', "hearth")


@needs_gio
def test_the_per_user_menu_entry_is_loaded_by_glib_and_starts_its_window(tmp_path):
    bundle, prefix = stand_in_bundle(tmp_path / "unpacked"), tmp_path / "my prefix"
    install_for_user(bundle, prefix, user_env(tmp_path / "home"))
    entry = prefix / "share" / "applications" / "hearth.desktop"
    assert launch_through_glib(entry, tmp_path / "home") == "launched with 0 arguments"


def test_the_per_user_uninstall_lists_every_folder_it_keeps_with_its_size_and_how_to_delete_it(tmp_path):
    home, chosen = tmp_path / "home", tmp_path / "chosen data"
    kept = {"data": home / ".local/share/Hearth", "config": home / ".config/Hearth", "cache": home / ".cache/Hearth",
            "models": tmp_path / "hf home" / "hub", "chosen": chosen}
    for folder in kept.values():
        folder.mkdir(parents=True)
    (kept["models"] / "models--org--name").mkdir()
    (kept["models"] / "models--org--name" / "model.gguf").write_bytes(os.urandom(3 * 1024 * 1024))
    (kept["config"] / "settings.json").write_text(f'{{\n  "data_folder": "{chosen}",\n  "model": "default"\n}}\n')
    env = user_env(home, HF_HOME=str(tmp_path / "hf home"))
    bundle, prefix = stand_in_bundle(tmp_path / "unpacked"), tmp_path / "prefix"
    install_for_user(bundle, prefix, env)
    said = install_for_user(bundle, prefix, env, "--uninstall")
    for folder in kept.values():
        assert f"{folder} (" in said, (folder, said)
        assert folder.is_dir(), "nothing of the user's is deleted"
    assert re.search(rf"{re.escape(str(kept['models']))} \(3(\.\d)?M\)", said), said  # the size, as du -h says it
    assert f"rm -rf {home}/.cache/Hearth\n" in said and "rm -rf /" + str(chosen)[1:].replace(" ", "\\ ") in said
    assert "models--ORG--NAME" in said and "other programs share" in said


def test_the_per_user_uninstall_says_so_when_nothing_was_left_behind(tmp_path):
    env = user_env(tmp_path / "home", XDG_CACHE_HOME=str(tmp_path / "elsewhere"))
    bundle, prefix = stand_in_bundle(tmp_path / "unpacked"), tmp_path / "prefix"
    install_for_user(bundle, prefix, env)
    said = install_for_user(bundle, prefix, env, "--uninstall")
    assert "none: Hearth left no conversations, settings or models" in said


def test_the_debs_removal_notice_is_for_apt_remove_only(tmp_path):
    """postrm runs with "remove" on `apt remove`, and with "upgrade" when a newer Hearth replaces this one."""
    script = tmp_path / "postrm"
    script.write_text(package_linux.MAINTAINER_SCRIPTS["postrm"])
    env = {"PATH": "/usr/bin:/bin", "DPKG_ROOT": str(tmp_path / "root")}
    removed = subprocess.run(["sh", str(script), "remove"], env=env, capture_output=True, text=True, timeout=30)
    upgraded = subprocess.run(["sh", str(script), "upgrade", "1.0"], env=env, capture_output=True, text=True, timeout=30)
    assert removed.returncode == upgraded.returncode == 0
    for folder in ("~/.local/share/Hearth", "~/.config/Hearth", "~/.cache/Hearth", "~/.cache/huggingface/hub",
                   "$HF_HOME/hub"):
        assert folder in removed.stdout
    assert len(removed.stdout.splitlines()) <= 8
    assert upgraded.stdout == ""
