"""The Linux downloads, built by the one command and used as a new user would: the tarball unpacked
into an empty folder and run with a clean environment (no .venv, no checkout, a fresh home), its
per-user install script and the window started from its menu entry by GLib, and the .deb installed
and removed with dpkg in a throwaway root.

docs/building-installers.md's build and smoke-test commands run exactly as it writes them (and the
release workflow runs them), in a folder shaped like the checkout: its ``installers/`` and ``.venv``
are this checkout's, its ``dist/`` and ``build/`` are the test's, so the build leaves the checkout alone.
One build for the module (about 1.5 minutes on 2 cores); each check then runs the built files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from app.services.about import app_version
from app.services.paths import user_paths

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


def readme_command(script: str) -> str:
    """The line of docs/building-installers.md's first commands block that runs ``script``."""
    section = (ROOT / "docs" / "building-installers.md").read_text()
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    (line,) = [line for line in block.splitlines() if f"installers/{script}" in line]
    return line


def workflow_command(script: str) -> str:
    """The release workflow's Linux step that runs ``script``, with the Linux job's Python."""
    build = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())["jobs"]["build"]
    (linux,) = [entry for entry in build["strategy"]["matrix"]["include"] if entry["platform"].startswith("linux")]
    (run,) = [step["run"] for step in build["steps"]
              if f"installers/{script}" in step.get("run", "") and step.get("if") != "runner.os != 'Linux'"]
    return run.strip().replace("${{ matrix.python }}", linux["python"])


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A folder shaped like the checkout for the documented commands: this checkout's installers/ and
    .venv (the Python running the tests), and room for its own dist/ and build/."""
    folder = tmp_path_factory.mktemp("checkout")
    (folder / "installers").symlink_to(ROOT / "installers")
    if sys.prefix != sys.base_prefix:
        (folder / ".venv").symlink_to(sys.prefix)
    else:
        (folder / ".venv" / "bin").mkdir(parents=True)
        (folder / ".venv" / "bin" / "python").symlink_to(sys.executable)
    return folder


def run_as_written(command: str, checkout: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=checkout, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, **env})


@pytest.fixture(scope="module")
def downloads(checkout) -> dict[str, Path]:
    """docs/building-installers.md's ``bash installers/build_linux.sh``: the tarball and the .deb. The
    build runs with the tests' Python (PYTHON), not through the .venv link: PyInstaller collects by
    real paths."""
    done = run_as_written(readme_command("build_linux.sh"), checkout, PYTHON=sys.executable)
    assert done.returncode == 0, done.stderr[-3000:]
    tarball, deb = (Path(line) for line in done.stdout.split())
    assert tarball.parent == checkout / "dist" == deb.parent
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


def test_the_readme_and_the_workflow_build_and_smoke_test_with_the_same_commands():
    assert readme_command("build_linux.sh").split("#")[0].split() == ["bash", "installers/build_linux.sh"]
    assert workflow_command("build_linux.sh") == "bash installers/build_linux.sh dist"  # dist/ is the default
    assert readme_command("smoke_bundle.py").split("#")[0].strip() == workflow_command("smoke_bundle.py")


def test_the_readme_smoke_command_passes_with_nothing_of_the_development_install(checkout, downloads):
    """``.venv/bin/python installers/smoke_bundle.py dist/Hearth`` as written, from the checkout:
    --version, generate on the embedded model, doctor and the window answering through its worker,
    in a fresh home with the system's PATH."""
    done = run_as_written(readme_command("smoke_bundle.py"), checkout)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:4]] == ["ok   version", "ok   generate", "ok   doctor", "ok   window"]
    assert lines[-1] == "smoke test passed: dist/Hearth"


def launch_from_menu(entry: Path, env: dict[str, str], out: Path) -> dict:
    """``gio launch ENTRY``, as a GLib desktop starts a menu entry (GLib reads TryExec, then runs
    Exec); the window inherits gio's output and prints its self-check's report there."""
    with out.open("wb") as sink:
        done = subprocess.run(["gio", "launch", str(entry)], env=env, stdout=sink, stderr=subprocess.PIPE, timeout=60)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + TIMEOUT_S + 30  # the self-check ends the window by itself within TIMEOUT_S
    while time.monotonic() < deadline:
        lines = out.read_text(errors="replace").strip().splitlines()
        if lines and lines[-1].startswith("{") and lines[-1].endswith("}"):
            return json.loads(lines[-1])
        time.sleep(0.5)
    raise AssertionError(f"the window started from the menu gave no report: {out.read_text(errors='replace')[-2000:]}")


def kept_folders(env: dict[str, str], monkeypatch) -> list[Path]:
    """Hearth's own folders for the user of ``env`` (app/services/paths.py)."""
    monkeypatch.delenv("HEARTH_HOME", raising=False)
    for name in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, env[name])
    paths = user_paths()
    return [paths.data, paths.config, paths.cache]


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


@pytest.mark.skipif(shutil.which("gio") is None, reason="GLib's gio (Debian's libglib2.0-bin) is not installed, "
                                                        "so the menu entry cannot be started as a GLib desktop does")
def test_the_per_user_install_opens_the_window_from_the_menu_and_removes_only_itself(unpacked, tmp_path, monkeypatch):
    prefix, home = tmp_path / "my apps", tmp_path / "home"
    env = smoke_bundle.clean_environment(home)
    subprocess.run(["bash", str(unpacked / "install.sh"), "--prefix", str(prefix)], env=env, check=True,
                   capture_output=True, timeout=120)
    version = subprocess.run([str(prefix / "bin" / "hearth"), "--version"], env=env, capture_output=True,
                             text=True, timeout=TIMEOUT_S)
    assert version.stdout.strip().startswith(f"Hearth {app_version()}")
    entry = prefix / "share" / "applications" / "hearth.desktop"
    assert f'Exec="{prefix}/opt/hearth/Hearth"' in entry.read_text()

    window_env = {**env, "QT_QPA_PLATFORM": "offscreen", "HEARTH_SELF_CHECK_QUESTION": QUESTION,
                  "HEARTH_SELF_CHECK_TIMEOUT_S": str(TIMEOUT_S)}
    report = launch_from_menu(entry, window_env, tmp_path / "window.txt")
    assert report["ok"] and report["question"] == QUESTION and report["answer"].strip(), report
    assert report["finish_reason"] in ("stop", "length")

    data = kept_folders(env, monkeypatch)[0]
    (data / "notes.txt").write_text("the user's own")
    removed = subprocess.run(["bash", str(prefix / "opt" / "hearth" / "install.sh"), "--uninstall", "--prefix",
                              str(prefix)], env=env, check=True, capture_output=True, text=True, timeout=120)
    assert not any(path.is_file() or path.is_symlink() for path in prefix.rglob("*"))
    assert (data / "notes.txt").read_text() == "the user's own"
    for folder in kept_folders(env, monkeypatch):  # the window made all three
        assert re.search(rf"{re.escape(str(folder))} \([\d.]+[KMG]\)", removed.stdout), removed.stdout
        assert f"rm -rf {folder}" in removed.stdout


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
    for kept in ("~/.local/share/Hearth", "~/.config/Hearth", "~/.cache/Hearth", "~/.cache/huggingface/hub"):
        assert kept in removed.stdout, removed.stdout  # apt remove says what it leaves
    left = [p for p in root.rglob("*") if (p.is_file() or p.is_symlink()) and "var/lib/dpkg" not in str(p)]
    assert [p for p in left if p.name not in SYSTEM_CACHES] == []
