"""One app per user and data folder (ui/single_instance.py): a second launch of the window brings
the running one to the front and exits, instead of starting a second app and model process.

The running instance is the window built in this process on a scripted engine (as ``python -m app``
builds it, without its worker: it only has to answer); the second launch is a real ``python -m app``
process on the same ``HEARTH_HOME``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from app.surfaces.gui import app_parts
from tests.fakes.engine_client import ScriptedEngine
from ui import single_instance
from ui.app import build_window
from ui.single_instance import ALREADY_OPEN, Launch, SingleInstance, bring_to_front, instance_key

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_TIMEOUT_MS = 60_000  # a busy machine's start-up of Python, Qt and the app's modules; it then exits at once
pytestmark = pytest.mark.skipif(os.name != "posix", reason="sockets in a private runtime folder (Unix)")


@pytest.fixture
def runtime_dir(monkeypatch):
    """A private XDG_RUNTIME_DIR for this test and the processes it starts (short: socket paths are)."""
    folder = tempfile.mkdtemp(prefix="hearth-run-")  # 0700
    monkeypatch.setenv("XDG_RUNTIME_DIR", folder)
    yield Path(folder)
    for path in Path(folder).iterdir():
        path.unlink()
    os.rmdir(folder)


def launch_app() -> subprocess.Popen:
    """``python -m app`` as a desktop launches it, on this test's HEARTH_HOME and runtime folder."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    env.pop("HEARTH_SELF_CHECK_QUESTION", None)
    return subprocess.Popen([sys.executable, "-m", "app"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def ended(process: subprocess.Popen, qtbot) -> tuple[int, str]:
    """Wait for ``process`` while this process's event loop runs (the running instance answers in it)."""
    try:
        qtbot.waitUntil(lambda: process.poll() is not None, timeout=LAUNCH_TIMEOUT_MS)
    finally:
        if process.poll() is None:  # it started a second app (and its worker): stop them
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode, process.stderr.read()


def test_a_second_launch_brings_the_running_window_to_the_front_and_exits(qtbot, runtime_dir):
    parts = app_parts()
    window = build_window(replace(parts, make_client=ScriptedEngine))
    qtbot.addWidget(window)
    window.show()
    window.showMinimized()
    running = SingleInstance(parts.data_dir)
    assert running.claim() is Launch.FIRST
    requests: list[bool] = []
    running.raise_requested.connect(lambda: requests.append(True))
    running.raise_requested.connect(lambda: bring_to_front(window))

    code, stderr = ended(launch_app(), qtbot)

    assert (code, stderr.strip().splitlines()) == (0, [ALREADY_OPEN])
    assert requests == [True]
    assert window.isVisible() and not window.isMinimized()


def test_a_socket_left_by_a_crash_is_cleared_and_the_next_launch_is_the_app(qtbot, runtime_dir, tmp_path):
    data = tmp_path / "data"
    instance = SingleInstance(data)
    crashed = socket.socket(socket.AF_UNIX)
    crashed.bind(instance.name)  # the file stays when its process dies without closing the server
    crashed.close()
    assert Path(instance.name).exists()

    assert instance.claim() is Launch.FIRST and instance.listening
    requests: list[bool] = []
    instance.raise_requested.connect(lambda: requests.append(True))
    later = subprocess.Popen([sys.executable, "-c", "import sys; from pathlib import Path; "
                              "from ui.single_instance import SingleInstance; "
                              "print(SingleInstance(Path(sys.argv[1])).claim().value)", str(data)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    code, stderr = ended(later, qtbot)
    assert code == 0, stderr
    assert later.stdout.read().strip() == "raised" and requests == [True]


def test_an_instance_that_does_not_answer_is_reported_not_replaced(runtime_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(single_instance, "ANSWER_MS", 200)
    instance = SingleInstance(tmp_path / "data")
    hung = socket.socket(socket.AF_UNIX)  # listening (its process is alive) but never answering
    hung.bind(instance.name)
    hung.listen()
    try:
        assert instance.claim() is Launch.UNANSWERED and not instance.listening
        assert Path(instance.name).exists(), "the live instance's socket is not removed"
    finally:
        hung.close()
    message, code = single_instance.launch_message(Launch.UNANSWERED)
    assert code == 1 and "did not answer" in message and "\n" not in message


def test_each_data_folder_is_its_own_app(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert instance_key(tmp_path / "a") == instance_key(tmp_path / "link")
    assert instance_key(tmp_path / "a") != instance_key(tmp_path / "b")


@pytest.fixture
def short_tmp():
    """A temp folder short enough for a socket path (pytest's own, under xdist, is too long)."""
    folder = Path(tempfile.mkdtemp(prefix="hs", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_socket_is_only_put_where_no_other_user_can_reach_it(short_tmp, monkeypatch):
    shared = short_tmp / "shared-runtime"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    folder = single_instance.private_folder()
    assert folder == short_tmp / f"hearth-{os.getuid()}" and folder.stat().st_mode & 0o777 == 0o700
    folder.chmod(0o755)  # someone loosened it: not used
    fallback = single_instance.private_folder()
    assert fallback != folder and fallback.stat().st_mode & 0o777 == 0o700 and fallback.stat().st_uid == os.getuid()


def test_a_long_temp_folder_gives_way_to_one_a_socket_path_fits_in(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / ("deep" * 20)))
    instance = SingleInstance(tmp_path / "data")
    assert len(os.fsencode(instance.name)) <= single_instance.MAX_SOCKET_PATH
    assert Path(instance.name).parent == Path("/tmp") / f"hearth-{os.getuid()}"


def test_without_a_private_folder_hearth_still_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(single_instance, "private_folder", lambda: None)
    assert SingleInstance(tmp_path / "data").claim() is Launch.FIRST
