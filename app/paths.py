"""Where Hearth keeps its files: platformdirs' per-user folders, or one folder under ``HEARTH_HOME``.

``HEARTH_HOME`` (tests always set it) puts data, config and cache under a single directory, so a
test or a portable install never touches the user's real profile.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "Hearth"
HOME_ENV = "HEARTH_HOME"


@dataclass(frozen=True)
class UserPaths:
    data: Path
    config: Path
    cache: Path

    def ensure(self) -> "UserPaths":
        for folder in (self.data, self.config, self.cache):
            folder.mkdir(parents=True, exist_ok=True)
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
