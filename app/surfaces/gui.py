"""``python -m app``: the desktop app. Wires the user's folders and settings to the window."""

from __future__ import annotations

import os
import sys
from functools import partial

from app.services.engines import EngineRegistry
from app.services.paths import user_paths
from app.services.settings import data_dir, load_settings, save_settings, snapshot_budget_bytes
from app.engine_clients.client import EngineClient
from app.engine_clients.process_client import ProcessClient
from app.engine_clients.remote.routing import RoutingClient
from model_store.db import database_path
from model_store.installed import models_folder
from model_store.storage_problems import StoreError
from model_store.private_files import make_private_folder


def app_parts():
    """Everything the window needs, from the user's folders and saved settings."""
    from ui.app import AppParts  # Qt is loaded only for the GUI, not for the CLI

    paths = user_paths().ensure()
    # The worker probes the devices after start-up, so a saved NPU choice is kept here; if there is
    # none, the router runs the prefill on the CPU and says why.
    loaded = load_settings(paths.config, npu_available=True)
    settings = loaded.settings
    data = data_dir(settings, paths)
    make_private_folder(data)

    engines = EngineRegistry(paths.config)

    def make_client() -> EngineClient:
        """This computer's worker, behind the client that switches to a remote engine when one is chosen."""
        client = ProcessClient(data_dir=data, log_path=paths.worker_log)
        client.snapshot_budget_bytes = snapshot_budget_bytes(settings)
        return RoutingClient(client, engines.remote_engine)

    return AppParts(
        settings=settings, make_client=make_client, db_path=database_path(data), data_dir=data,
        models_dir=models_folder(data),
        save_settings=partial(save_settings, config_dir=paths.config), cache_dir=paths.cache,
        startup_notes=tuple(loaded.problems) + tuple(engines.problems), engines=engines, config_dir=paths.config,
    )


def use_a_utf8_locale(environ=os.environ, platform: str = sys.platform) -> None:
    """Where no locale is set (or only "C"/"POSIX", as in a bare terminal or a service), choose
    C.UTF-8 before Qt starts: Qt needs a UTF-8 locale and otherwise switches to it itself, with a
    four-line warning. (The python command does so too, PEP 538, but not an embedded Python such
    as the bundle's.) A locale the user chose is left as it is; macOS and Windows need nothing."""
    if platform in ("darwin", "win32"):
        return
    chosen = next((environ[name] for name in ("LC_ALL", "LC_CTYPE", "LANG") if environ.get(name)), "")
    if chosen in ("", "C", "POSIX"):
        environ["LC_ALL" if environ.get("LC_ALL") else "LC_CTYPE"] = "C.UTF-8"


def main() -> int:
    use_a_utf8_locale()
    from ui.app import run
    from ui.startup_failure import show_startup_failure

    try:
        parts = app_parts()
    except StoreError as exc:  # e.g. a settings or engines file that is not the user's own
        return show_startup_failure(str(exc))
    return run(parts)
