"""Where ``hearth serve`` keeps the API's conversations and their snapshots.

A server on a fixed address keeps them in a folder of that address under the data folder
(``api/127.0.0.1-8089``, 0700), so a conversation a client continues after the server restarts
stands on the state it saved, as a window's does after the app restarts. They never mix with the
app's own conversations, and the least recently continued beyond a limit are deleted
(:data:`app.surfaces.serve.api_conversations.KEPT_CONVERSATIONS`). A server on ``--port 0`` (a
free port, another each run) keeps nothing: its folder is one of the run, under the cache folder,
and goes when the server stops; folders of runs that were killed go when the next one starts.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psutil

from app.services.paths import UserPaths
from model_store.private_files import make_private_folder, repair_folder

API_FOLDER = "api"  # under the data folder: one folder per address served
RUN_PREFIX = "serve-"  # under the cache folder: one folder per run on --port 0
RUN_NAME = re.compile(rf"{RUN_PREFIX}(\d+)-")


class FolderRefused(OSError):
    """The folder cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class ServerFolder:
    path: Path
    kept: bool  # it stays after the run (a fixed address); else it is removed when the run ends

    def close(self) -> None:
        if not self.kept:
            shutil.rmtree(self.path, ignore_errors=True)


def server_folder(paths: UserPaths, host: str, port: int) -> ServerFolder:
    """The folder of a server on ``host``:``port`` (0: a run's own, see the module's docstring).

    Raises:
        FolderRefused: A link stands where the folder should be, or it cannot be made.
    """
    if port == 0:
        return ServerFolder(run_folder(paths.cache), kept=False)
    folder = paths.data / API_FOLDER / address_name(host, port)
    for path in (folder.parent, folder):
        if path.is_symlink():
            raise FolderRefused(f"{path} is a link; Hearth keeps API conversations only in a folder of its own: "
                                "remove the link, or serve on --port 0 to keep none")
    try:
        make_private_folder(folder)
        repair_folder(folder)
    except OSError as exc:
        raise FolderRefused(f"cannot keep API conversations in {folder} ({exc.strerror or exc}); free some "
                            "space or fix the folder's permissions, or serve on --port 0 to keep none") from None
    return ServerFolder(folder, kept=True)


def address_name(host: str, port: int) -> str:
    """``host``-``port`` as a folder name: any character but letters, digits, '.' and '-' becomes '_'."""
    return f"{re.sub(r'[^A-Za-z0-9.-]', '_', host)}-{port}"


def run_folder(cache: Path) -> Path:
    """This run's folder (0700), after removing those of earlier runs that were killed."""
    make_private_folder(cache)
    for old in cache.glob(f"{RUN_PREFIX}*"):
        match = RUN_NAME.match(old.name)
        if match and not psutil.pid_exists(int(match.group(1))):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-", dir=cache))
