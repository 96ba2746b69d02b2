"""The store thread: jobs in order, results on the GUI thread, a failing job reported and survived."""

import threading
from pathlib import Path

from model_store.db import database_path
from ui.store_thread import StoreThread


def test_jobs_run_in_order_and_a_failing_job_does_not_stop_the_next(qtbot, tmp_path):
    store = StoreThread(database_path(tmp_path))
    store.start()
    results, errors = [], []
    store.submit(lambda s: s.create("first").title, results.append, errors.append)
    store.submit(lambda s: {}["missing"], results.append, errors.append)  # a bug in a job
    store.submit(lambda s: [c.title for c in s.list()], results.append, errors.append)
    qtbot.waitUntil(lambda: not store.busy, timeout=10_000)
    store.stop()
    assert results == ["first", ["first"]]
    assert len(errors) == 1 and "internal error" in errors[0] and "missing" in errors[0]


def test_no_window_code_runs_on_the_store_thread(qtbot, tmp_path):
    """The hop is between modules: the store thread runs the loop and the jobs it is given, none of the
    window's code (``ui/``) of its own."""
    seen: set[str] = set()

    def note_files(frame, event, _arg):
        if event == "call" and threading.current_thread().name == "store":
            seen.add(frame.f_code.co_filename)

    threading.setprofile(note_files)
    try:
        store = StoreThread(database_path(tmp_path))
        store.start()
        results, errors = [], []
        store.submit(lambda s: s.create("first").title, results.append, errors.append)
        store.submit(lambda s: {}["missing"], results.append, errors.append)
        qtbot.waitUntil(lambda: not store.busy, timeout=10_000)
        store.stop()
    finally:
        threading.setprofile(None)
    assert results == ["first"] and len(errors) == 1
    ui_dir = str(Path(__file__).resolve().parents[2] / "ui")
    assert any(name.endswith("store_loop.py") for name in seen)
    assert not [name for name in seen if name.startswith(ui_dir)]
