"""Where Hearth keeps its files: platformdirs' per-user folders, or one folder under ``HEARTH_HOME``.

``HEARTH_HOME`` (tests always set it) puts data, config and cache under a single directory, so a
test or a portable install never touches the user's real profile.

The folders are private to the user (0700, files in them 0600): :meth:`UserPaths.ensure` creates
them so and tightens looser modes an older Hearth left (see :mod:`model_store.private_files`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from model_store.private_files import make_private_folder, repair_folder

APP_NAME = "Hearth"
HOME_ENV = "HEARTH_HOME"
WORKER_LOG = "worker.log"  # the GUI's worker's stderr, in the cache folder


@dataclass(frozen=True)
class UserPaths:
    data: Path
    config: Path
    cache: Path

    @property
    def worker_log(self) -> Path:
        return self.cache / WORKER_LOG

    def ensure(self) -> "UserPaths":
        """Create the folders (0700), and take away other users' access to them and to what is
        directly in them (an older Hearth made them 0755 and its files 0644)."""
        for folder in (self.data, self.config, self.cache):
            make_private_folder(folder)
            repair_folder(folder)
        return self


def user_paths() -> UserPaths:
    """The folders for this user, honouring ``HEARTH_HOME``. They are not created here."""
    home = os.environ.get(HOME_ENV)
    if home:
        root = Path(home).expanduser()
        return UserPaths(data=root / "data", config=root / "config", cache=root / "cache")
    return UserPaths(
        data=Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
        config=Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        cache=Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
    )
