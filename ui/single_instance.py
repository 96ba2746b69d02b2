"""One window per user and data folder: a second launch brings the running window to the front
instead of starting a second app with a second model process.

The first instance listens on a ``QLocalServer`` whose name is a hash of the user and the data
folder (two data folders are two apps; two users never meet). A later launch connects, sends
``raise``, waits for ``raised`` and exits; the first instance restores, raises and activates its
window.

* **Where.** On Unix the socket is a file in a folder only this user can enter: ``XDG_RUNTIME_DIR``
  when it is private, else ``<temp>/hearth-<uid>``, else ``/tmp/hearth-<uid>`` (made 0700, refused
  when someone else owns it or others may enter). A socket's path must be short (about 100 bytes),
  so it is never under the data folder, and a long ``TMPDIR`` gives way to ``/tmp``. On Windows the
  name is a named pipe restricted to this user (``UserAccessOption``).
* **Stale sockets.** A crashed instance leaves its socket file behind; when nobody answers on it,
  ``QLocalServer.removeServer`` clears it before listening.
* **Races.** Two launches at once could both find nobody and the second remove the first's socket:
  the look-and-listen runs under a ``QLockFile`` next to the socket (stale locks of dead processes
  are taken over).
* **Failing open.** If no private folder can be had or listening fails, Hearth runs without the
  single-instance check rather than not at all.
"""

from __future__ import annotations

import enum
import getpass
import hashlib
import os
import stat
import sys
import tempfile
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Qt, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QWidget

RAISE, RAISED = b"raise\n", b"raised\n"
CONNECT_MS, ANSWER_MS, LOCK_MS = 500, 3_000, 5_000
MAX_SOCKET_PATH = 100  # bytes: sockaddr_un holds 108 on Linux, 104 on macOS
KEY_PREFIX, KEY_HEX_DIGITS = "hearth-", 16
ALREADY_OPEN = "Hearth is already open; brought its window to the front."
NOT_ANSWERING = ("Hearth is already open but its window did not answer; wait for it, or close it "
                 "(or end it in the system monitor) and start Hearth again.")


class Launch(enum.Enum):
    FIRST = "first"  # this process is the app: it listens for later launches
    RAISED = "raised"  # another instance brought its window to the front: exit
    UNANSWERED = "unanswered"  # another instance is there but did not answer in time: exit


def instance_key(data_dir: Path) -> str:
    """The same for every launch by this user on this data folder, different otherwise."""
    user = str(os.getuid()) if hasattr(os, "getuid") else getpass.getuser()
    folder = os.path.normcase(os.path.realpath(data_dir))
    return KEY_PREFIX + hashlib.sha256(f"{user}\0{folder}".encode()).hexdigest()[:KEY_HEX_DIGITS]


def _is_private_folder(folder: Path) -> bool:
    try:
        info = folder.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def private_folder() -> Path | None:
    """A folder only this user can enter, with room left for a socket's name; None if there is none."""
    room = len(KEY_PREFIX) + KEY_HEX_DIGITS
    if sys.platform == "win32":
        return Path(tempfile.gettempdir())  # the profile's own Temp folder; the pipe itself is per user
    mine = f"hearth-{os.getuid()}"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    for folder, made_here in ((Path(runtime or "relative"), False), (Path(tempfile.gettempdir()) / mine, True),
                              (Path("/tmp") / mine, True)):
        if not folder.is_absolute() or len(os.fsencode(folder)) + 1 + room > MAX_SOCKET_PATH:
            continue
        if made_here:
            try:
                folder.mkdir(mode=0o700, exist_ok=True)
            except OSError:
                continue
        if _is_private_folder(folder):
            return folder
    return None


def bring_to_front(window: QWidget) -> None:
    """Show the window where the user can see it: out of the task bar if minimised (a maximised
    window stays maximised), above the others, with the keyboard focus."""
    if window.isMinimized():
        window.setWindowState(window.windowState() & ~Qt.WindowState.WindowMinimized | Qt.WindowState.WindowActive)
    window.show()
    window.raise_()
    window.activateWindow()


class SingleInstance(QObject):
    """Claim the app for one data folder (:meth:`claim`); ``raise_requested`` fires when a later
    launch asks for the window."""

    raise_requested = Signal()

    def __init__(self, data_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        folder = private_folder()
        key = instance_key(data_dir)
        self.name = None if folder is None else key if sys.platform == "win32" else str(folder / key)
        self._lock_path = None if folder is None else str(folder / f"{key}.lock")
        self._server: QLocalServer | None = None

    def claim(self) -> Launch:
        """Ask a running instance to raise its window; if there is none, become the one that listens."""
        if self.name is None:
            return Launch.FIRST
        lock = QLockFile(self._lock_path)
        lock.tryLock(LOCK_MS)  # without it (a lock held past the wait), the check still runs
        try:
            answer = self._ask_running_instance()
            if answer is None:
                self._listen()
                return Launch.FIRST
            return answer
        finally:
            lock.unlock()

    def _ask_running_instance(self) -> Launch | None:
        socket = QLocalSocket()
        socket.connectToServer(self.name)
        if not socket.waitForConnected(CONNECT_MS):
            return None  # nobody listens (or a crash left the socket file): this is the first
        socket.write(RAISE)
        socket.waitForBytesWritten(ANSWER_MS)
        answer = b""
        while not answer.endswith(b"\n") and socket.waitForReadyRead(ANSWER_MS):
            answer += bytes(socket.readAll().data())
        socket.abort()
        return Launch.RAISED if answer == RAISED else Launch.UNANSWERED

    def _listen(self) -> None:
        QLocalServer.removeServer(self.name)  # a socket file a crashed instance left behind
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not server.listen(self.name):
            server.deleteLater()  # fail open: this instance runs without being findable
            return
        server.newConnection.connect(self._accept)
        self._server = server

    def _accept(self) -> None:
        while self._server is not None and (socket := self._server.nextPendingConnection()) is not None:
            socket.readyRead.connect(lambda s=socket: self._answer(s))
            socket.disconnected.connect(socket.deleteLater)
            if socket.bytesAvailable():
                self._answer(socket)

    def _answer(self, socket: QLocalSocket) -> None:
        if not socket.canReadLine():
            return
        if bytes(socket.readLine().data()) == RAISE:
            self.raise_requested.emit()
            socket.write(RAISED)
            socket.flush()
        socket.disconnectFromServer()

    @property
    def listening(self) -> bool:
        return self._server is not None and self._server.isListening()


def launch_message(launch: Launch) -> tuple[str, int]:
    """The one stderr line and exit status of a launch that found Hearth already open."""
    return (ALREADY_OPEN, 0) if launch is Launch.RAISED else (NOT_ANSWERING, 1)
