"""``hearth doc load`` keeps the number of tokens it reports: the ones the engine read (the window's
document card shows the same number, tests/ui/test_first_hour.py)."""

import json
import subprocess
import sys

from app.services.settings import app_data_dir
from model_store.db import database_path, open_database
from model_store.documents import DocumentStore


def test_doc_load_stores_the_tokens_it_read(hybrid_tiny, hearth_home, tmp_path):
    document = tmp_path / "report.txt"
    document.write_text("The bridge by the old mill was rebuilt in spring.\n" * 40, encoding="utf-8")
    loaded = subprocess.run([sys.executable, "-m", "app", "doc", "load", "--model", str(hybrid_tiny), "--json",
                             str(document)], capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    result = json.loads(loaded.stdout)
    db = open_database(database_path(app_data_dir()))
    try:
        (kept,) = DocumentStore(db).for_conversation(result["conversation_id"])
    finally:
        db.close()
    assert kept.tokens == result["tokens"]
