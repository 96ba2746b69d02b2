"""The Linux downloads, built by the one command and used as a new user would: the tarball unpacked
into an empty folder and run with a clean environment (no .venv, no checkout, a fresh home), its
per-user install script, and the .deb installed and removed with dpkg in a throwaway root.

One build for the module (about 1.5 minutes on 2 cores); each check then runs the built files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from app.services.about import app_version

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "installers"))
sys.path.insert(0, str(ROOT / "installers" / "bundle"))
import layout  # noqa: E402
import smoke_bundle  # noqa: E402
from tests.helpers.serve import http  # noqa: E402

pytestmark = [
    pytest.mark.slow, pytest.mark.process,
    pytest.mark.skipif(sys.platform != "linux" or shutil.which("dpkg-deb") is None,
                       reason="the Linux packages need Linux and dpkg-deb"),
]
TIMEOUT_S = 300.0
QUESTION = "What is the capital of France?"
# The desktop's own caches, which the maintainer scripts refresh (where the tools exist): not the package's files.
SYSTEM_CACHES = {"icon-theme.cache", "mimeinfo.cache"}


@pytest.fixture(scope="module")
def downloads(tmp_path_factory) -> dict[str, Path]:
    """``bash installers/build_linux.sh DIST``: the tarball and the .deb."""
    work = tmp_path_factory.mktemp("linux-build")
    done = subprocess.run(["bash", str(ROOT / "installers" / "build_linux.sh"), str(work / "dist")],
                          cwd=ROOT, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "HEARTH_BUILD_DIR": str(work / "build")})
    assert done.returncode == 0, done.stderr[-3000:]
    tarball, deb = (Path(line) for line in done.stdout.split())
    return {"tarball": tarball, "deb": deb}


@pytest.fixture(scope="module")
def unpacked(downloads, tmp_path_factory) -> Path:
    """The tarball unpacked into an empty folder, as a user would."""
    target = tmp_path_factory.mktemp("unpacked")
    with tarfile.open(downloads["tarball"]) as archive:
        archive.extractall(target, filter="tar")
    (folder,) = target.iterdir()
    return folder


def test_the_downloads_are_named_by_version_and_platform(downloads):
    version = app_version()
    assert downloads["tarball"].name == f"Hearth-{version}-linux-{layout.machine()}.tar.gz"
    assert downloads["deb"].name.startswith(f"hearth_{version}_")


def test_the_tarball_holds_the_window_the_command_line_and_the_install_script(unpacked):
    for name in ("Hearth", "hearth", "install.sh"):
        assert os.access(unpacked / name, os.X_OK), name
    assert (unpacked / "hearth.desktop").is_file()
    assert (unpacked / "icons" / "hearth-256.png").is_file()
    licences = (unpacked / layout.LICENCES_FILE).read_text()
    assert "PySide6" in licences and "llama-cpp-python" in licences
    # the NPU emulator is left out where there is no NPU, and so are its licences
    assert not (unpacked / "_internal" / "onnxruntime_qnn").exists()
    assert "onnxruntime-qnn" not in licences


def test_the_command_line_works_with_nothing_of_the_development_install(unpacked):
    """--version, generate on the embedded model and doctor, in a fresh home with the system's PATH."""
    results = smoke_bundle.run_checks(unpacked, app_version(), TIMEOUT_S)
    assert [c.name for c in results] == ["version", "generate", "doctor", "window"], results
    assert all(c.ok for c in results), [c for c in results if not c.ok]


def test_the_window_answers_a_question_through_its_worker(unpacked, tmp_path):
    env = smoke_bundle.clean_environment(tmp_path / "home")
    env.update(QT_QPA_PLATFORM="offscreen", HEARTH_SELF_CHECK_QUESTION=QUESTION)
    outcome = smoke_bundle.run_cli(unpacked / "Hearth", [], env, tmp_path, TIMEOUT_S)
    assert outcome.code == 0, outcome.stderr[-2000:]
    report = json.loads(outcome.stdout.strip().splitlines()[-1])
    assert report["ok"] and report["question"] == QUESTION and report["answer"].strip()
    assert report["finish_reason"] in ("stop", "length")
    assert "Traceback" not in outcome.stderr


def test_the_bundled_command_line_serves_the_api(unpacked, tmp_path):
    env = smoke_bundle.clean_environment(tmp_path / "home")
    server = subprocess.Popen([str(unpacked / "hearth"), "serve", "--port", "0"], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        line = server.stdout.readline()
        assert "listening on http://127.0.0.1:" in line, server.stderr.read() if server.poll() is not None else line
        base = line.split("listening on ", 1)[1].split()[0]
        models = http("GET", f"{base}/models", timeout=30).json()
        assert [m["id"] for m in models["data"]] == ["default"]
    finally:
        server.terminate()
        server.wait(30)


def test_the_per_user_install_puts_the_app_on_the_path_and_removes_only_itself(unpacked, tmp_path):
    prefix, home = tmp_path / "local", tmp_path / "home"
    data = home / ".local" / "share" / "Hearth"
    data.mkdir(parents=True)
    (data / "hearth.db").write_text("the user's conversations")
    env = smoke_bundle.clean_environment(home)
    subprocess.run(["bash", str(unpacked / "install.sh"), "--prefix", str(prefix)], env=env, check=True,
                   capture_output=True, timeout=120)
    version = subprocess.run([str(prefix / "bin" / "hearth"), "--version"], env=env, capture_output=True,
                             text=True, timeout=TIMEOUT_S)
    assert version.stdout.strip().startswith(f"Hearth {app_version()}")
    entry = (prefix / "share" / "applications" / "hearth.desktop").read_text()
    assert f'Exec="{prefix}/opt/hearth/Hearth"' in entry
    subprocess.run(["bash", str(prefix / "opt" / "hearth" / "install.sh"), "--uninstall", "--prefix", str(prefix)],
                   env=env, check=True, capture_output=True, timeout=120)
    assert not any(path.is_file() or path.is_symlink() for path in prefix.rglob("*"))
    assert (data / "hearth.db").read_text() == "the user's conversations"


def dpkg(root: Path, *args: str) -> subprocess.CompletedProcess:
    """dpkg on a throwaway root: its own database, maintainer scripts run outside a chroot (they
    honour $DPKG_ROOT), and the system libraries the package depends on are not there to check."""
    return subprocess.run(["dpkg", f"--root={root}", "--force-depends", "--force-script-chrootless",
                           "--force-not-root", *args], capture_output=True, text=True, timeout=300)


def test_the_deb_installs_under_opt_with_a_command_and_a_menu_entry_and_uninstalls_cleanly(downloads, tmp_path):
    root = tmp_path / "root"
    for folder in ("var/lib/dpkg/info", "var/lib/dpkg/updates"):
        (root / folder).mkdir(parents=True)
    (root / "var/lib/dpkg/status").touch()
    installed = dpkg(root, "-i", str(downloads["deb"]))
    assert installed.returncode == 0, installed.stderr
    command = root / "usr/bin/hearth"
    assert command.is_symlink() and os.readlink(command) == "/opt/hearth/hearth"
    entry = (root / "usr/share/applications/hearth.desktop").read_text()
    assert 'Exec="/opt/hearth/Hearth"' in entry and "Icon=hearth" in entry
    assert (root / "usr/share/icons/hicolor/48x48/apps/hearth.png").is_file()
    assert (root / "usr/share/doc/hearth/copyright").is_file()
    version = subprocess.run([str(root / "opt/hearth/hearth"), "--version"], capture_output=True, text=True,
                             timeout=TIMEOUT_S, env=smoke_bundle.clean_environment(tmp_path / "home"))
    assert version.stdout.strip().startswith(f"Hearth {app_version()}")
    control = subprocess.run(["dpkg-deb", "--field", str(downloads["deb"]), "Package", "Version", "Depends"],
                             capture_output=True, text=True, check=True).stdout
    assert f"Version: {app_version()}" in control and "libxcb-cursor0" in control
    removed = dpkg(root, "-r", "hearth")
    assert removed.returncode == 0, removed.stderr
    left = [p for p in root.rglob("*") if (p.is_file() or p.is_symlink()) and "var/lib/dpkg" not in str(p)]
    assert [p for p in left if p.name not in SYSTEM_CACHES] == []
