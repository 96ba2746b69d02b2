"""``hearth db recover``: copy what can still be read out of a damaged conversation database."""

from __future__ import annotations

import argparse
import json
import sqlite3

from app.surfaces.cli.commands import UserError
from app.surfaces.cli.terminal_text import json_text, visible
from app.services.db_recovery import recovery_text
from app.services.settings import app_data_dir
from model_store.db import database_path
from model_store.recovery import Recovery, damage_found, recover_database
from model_store.storage_problems import StoreError


def run_recover(args: argparse.Namespace) -> int:
    path = database_path(app_data_dir())
    if not path.is_file():
        raise UserError(f"there is no conversation database at {path}, so there is nothing to recover",
                        kind="no_database")
    damage = damage_found(path)
    if damage is None:
        if args.json:
            print(json.dumps({"damaged": False, "database": str(path)}))
        else:
            print(f"{visible(str(path))} is not damaged (PRAGMA quick_check finds nothing wrong); nothing to recover")
        return 0
    try:
        recovery = recover_database(path)
    except (OSError, StoreError, sqlite3.Error) as exc:
        raise UserError(f"could not recover {path}: {exc}; the damaged file was left where it is",
                        kind="recovery_failed") from exc
    if args.json:
        print(json_text(recovery_json(recovery, damage)))
    else:
        print("\n".join(map(visible, recovery_text(recovery).splitlines())))  # its paths, shown
    return 0


def recovery_json(recovery: Recovery, damage: str) -> dict:
    return {"damaged": True, "damage": damage, "database": str(recovery.database),
            "damaged_copy": str(recovery.damaged_copy), "rows": recovery.rows,
            "read_errors_skipped": recovery.unreadable, "repairs": recovery.repairs, "pages": recovery.pages}
