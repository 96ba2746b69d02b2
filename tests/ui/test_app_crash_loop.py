"""A worker that crashes before it could answer, twice in a row, through the real window.

The crashes are real: ``HEARTH_TEST_CPU_FAULT`` (engine.backends.faults) makes the worker process
kill itself with the signal when it loads a model, or first decodes, with the named CPU build. On
the builds are asked for, not named (``tests/cpu_builds.py``): they differ between CPUs.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.engine_clients.client import EngineDead
from app.engine_clients.process_client import ProcessClient
from app.services.chat_rows import load_transcript
from engine import protocol as p
from tests.cpu_builds import auto_build, safe_build
from tests.helpers.gui import watch_notices, write_settings
from ui.bridge import EngineBridge

FAULT_ENV = "HEARTH_TEST_CPU_FAULT"
CHOICES = ["Retry with the safe CPU build", "Choose another model", "System check"]
HELD_MS = 1_000  # how long a held worker must stay down: a restart would start a process at once, in the
# bridge's thread right after the death, so a second is ample to see one


@pytest.fixture(autouse=True)
def short_greedy_answers():
    write_settings(temperature=0.0, max_tokens=8, draft="off")  # the embedded default model


class Watch:
    """What the app reported while crashing, in order: the bridge's worker starts ("ready", pid) and
    deaths ("died", EngineDead), the controller's notices and its crash-loop texts."""

    def __init__(self, app) -> None:
        self.workers: list[tuple[str, object]] = []
        self.notices = watch_notices(app)  # (kind, text)
        self.crash_loops: list[str] = []
        app.controller.bridge.ready.connect(lambda ready: self.workers.append(("ready", ready.pid)))
        app.controller.bridge.died.connect(lambda dead: self.workers.append(("died", dead)))
        app.controller.crash_loop.connect(self.crash_loops.append)

    def deaths(self) -> list[EngineDead]:
        return [dead for kind, dead in self.workers if kind == "died"]

    def starts_after_first_death(self) -> list[int]:
        first = next(i for i, (kind, _) in enumerate(self.workers) if kind == "died")
        return [pid for kind, pid in self.workers[first:] if kind == "ready"]


def start_crashing(start_app, monkeypatch, fault: str):
    monkeypatch.setenv(FAULT_ENV, fault)  # the worker inherits the window's environment
    app = start_app()
    return app, Watch(app)


def wait_crash_loop(app, watch: Watch, count: int = 1) -> None:
    app.qtbot.waitUntil(lambda: len(watch.crash_loops) == count and app.window.banner.kind == "error",
                        timeout=120_000)


def visible_choices(app) -> list[str]:
    return [button.text() for button in app.window.banner.buttons if button.isVisible()]


def press(app, label: str) -> None:
    button = next(b for b in app.window.banner.buttons if b.isVisible() and b.text() == label)
    app.qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def assert_stays_down(app, watch: Watch) -> None:
    workers, bridge = list(watch.workers), app.controller.bridge
    app.qtbot.wait(HELD_MS)
    assert watch.workers == workers, "no worker is started or reported after the crash loop"
    assert bridge.held and not bridge.alive
    assert bridge.client.process is None or bridge.client.process.poll() is not None


def test_a_worker_crashing_while_loading_twice_is_left_down_and_the_banner_says_why(start_app, monkeypatch):
    app, watch = start_crashing(start_app, monkeypatch, f"load:{auto_build()}:SIGILL")
    wait_crash_loop(app, watch)

    assert [(d.signal, d.cpu_variant) for d in watch.deaths()] == [("SIGILL", auto_build())] * 2
    assert len(watch.starts_after_first_death()) == 1, "restarted once, not a second time"
    assert_stays_down(app, watch)
    assert app.controller.loaded is None and app.window.model_picker.state.text() == "engine stopped"
    assert not app.window.model_picker.progress.isVisible()
    assert [n for _, n in watch.notices if "Restarting" in n] == [watch.notices[0][1]], \
        "the first death says it restarts; the second does not claim to"

    banner = app.window.banner
    text = banner.text()
    assert banner.kind == "error" and text == watch.crash_loops[0]
    assert "illegal instruction" in text and f"CPU build {auto_build()}" in text
    assert "while loading the embedded default model" in text and "stopped restarting" in text
    assert "Traceback" not in text and "status -4" not in text
    assert visible_choices(app) == CHOICES


def test_retry_with_the_safe_cpu_build_loads_the_model_and_answers(start_app, monkeypatch):
    app, watch = start_crashing(start_app, monkeypatch, f"load:{auto_build()}:SIGILL")
    wait_crash_loop(app, watch)
    held_pid = app.controller.bridge.client.ready.pid

    press(app, CHOICES[0])
    app.wait_loaded()
    ready = app.controller.bridge.client.ready
    assert ready.pid != held_pid and ready.cpu.variant == safe_build()
    assert not app.controller.bridge.held and app.window.banner.text() == ""

    turn = app.send_and_wait("What colour is the sky?")
    assert turn.dead is None and turn.finished.finish_reason in ("stop", "length") and turn.text.strip()
    assert app.transcript() == [("user", "What colour is the sky?", "done"), ("assistant", turn.text, "done")]
    assert len(watch.deaths()) == 2 and len(watch.crash_loops) == 1

    check = app.window.open_system_check()  # describes the engine in use: the safe build, answering
    app.qtbot.waitUntil(lambda: check.report is not None, timeout=180_000)
    engine = check.report["engine"]
    assert engine["cpu_build"]["variant"] == safe_build() and engine["model_check"]["status"] == "ok"
    check.reject()


def test_messages_sent_while_the_first_decode_crashes_are_kept(start_app, monkeypatch):
    app, watch = start_crashing(start_app, monkeypatch, f"decode:{auto_build()}:SIGILL")
    app.wait_loaded()  # loading does not decode: the load succeeds
    first = app.send_and_wait("Hello, are you there?")
    assert first.dead is not None and first.dead.signal == "SIGILL" and not watch.crash_loops
    assert "Restarting" in app.window.banner.text()
    app.wait_loaded()  # restarted once (nothing is re-sent by itself); the user tries again
    app.type_and_send("Hello again?")
    wait_crash_loop(app, watch)

    assert "while the embedded default model read its first input" in app.window.banner.text()
    assert visible_choices(app) == CHOICES
    assert_stays_down(app, watch)
    app.wait_turn(2)
    expected = [("user", "Hello, are you there?", "done"), ("assistant", "", "interrupted"),
                ("user", "Hello again?", "done"), ("assistant", "", "interrupted")]
    assert app.transcript() == expected
    assert stored_transcript(app) == expected
    assert app.window.composer.text() == ""

    app.type_and_send("A third try")  # while the engine is down: kept in the box, and said why
    assert app.window.composer.text() == "A third try" and app.transcript() == expected
    banner = app.window.banner.text()
    assert banner.startswith("The engine is stopped after crashing, so your message was not sent")
    assert banner.endswith(watch.crash_loops[0]) and visible_choices(app) == CHOICES


def stored_transcript(app) -> list[tuple[str, str, str]]:
    conversation_id = app.controller.conversation.id
    rows: list = []
    app.controller.store.submit(lambda store: load_transcript(store, conversation_id), rows.append)
    app.qtbot.waitUntil(lambda: len(rows) == 1, timeout=10_000)
    return [(r.message.role, r.message.content, r.message.status) for r in rows[0]]


def test_the_system_check_and_the_models_dialog_are_a_press_away_and_keep_the_choices(start_app, monkeypatch):
    app, watch = start_crashing(start_app, monkeypatch, f"load:{auto_build()}:SIGILL")
    wait_crash_loop(app, watch)
    window = app.window

    press(app, "System check")
    dialog = window.system_check
    app.qtbot.waitUntil(dialog.isVisible, timeout=5_000)
    assert dialog.windowTitle() == "System check" and dialog.job.running
    assert window.banner.text() == watch.crash_loops[0] and visible_choices(app) == CHOICES, \
        "looking at the system check is no choice: the ways on stay offered"
    dialog.reject()
    assert window.system_check is None and not dialog.job.running

    press(app, "Choose another model")
    app.qtbot.waitUntil(lambda: window.models_dialog is not None and window.models_dialog.isVisible(), timeout=5_000)
    assert visible_choices(app) == CHOICES
    window.models_dialog.reject()
    assert_stays_down(app, watch)


def test_another_model_chosen_after_the_crash_loop_starts_the_engine_and_the_crash_notice_goes(
        start_app, monkeypatch, hybrid_tiny):
    app, watch = start_crashing(start_app, monkeypatch, f"load:{auto_build()}:SIGILL")
    wait_crash_loop(app, watch)
    monkeypatch.delenv(FAULT_ENV)  # the model chosen now loads with this build

    app.window.model_picker.model_chosen.emit(str(hybrid_tiny))  # as "Open a GGUF file…" does
    app.wait_loaded()
    assert app.controller.loaded.facts.path == str(hybrid_tiny)
    assert app.controller.bridge.client.ready.cpu.variant == auto_build()
    assert app.window.banner.text() == "" and visible_choices(app) == [], "no stale crash notice or choices"
    assert len(watch.starts_after_first_death()) == 2 and len(watch.crash_loops) == 1


def test_only_a_token_or_an_exact_prompt_count_shows_that_the_worker_decoded(qtbot):
    """The rule beneath: an *estimated* count is a timer's heartbeat while the first chunk is read,
    so a crash after one is still a crash before the worker ever decoded."""
    bridge = EngineBridge(ProcessClient)  # never started: only its bookkeeping is used
    bridge.early_deaths = 1
    bridge._pending_reads.add("read1")  # as send() does for an answer
    bridge._track(p.PromptProgress(request_id="read1", processed=0, total=900, elapsed_ms=500.0, estimated=True))
    assert bridge._early_death() == "reading the input" and bridge.early_deaths == 1
    bridge._track(p.PromptProgress(request_id="read1", processed=512, total=900, elapsed_ms=900.0))
    assert bridge._early_death() is None and bridge.early_deaths == 0
