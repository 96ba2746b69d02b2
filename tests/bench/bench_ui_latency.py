"""How long the GUI's event loop stalls while the worker decodes, reads a long prompt and saves a snapshot.

A timer probe fires every ``--interval-ms`` on the GUI thread of the real app (window, bridge,
store thread, worker process); a stall is how much later than due a tick arrives. Ticks are
grouped by phase: ``prefill`` (message sent → first token), ``decode`` (first → last token),
``snapshot_save`` (last token → the answer stored, which spans the worker saving the turn's
snapshot into SQLite and the GUI's store thread writing the answer). Prints one JSON object.
Target: the worst stall ≤ 50 ms.

Then ``streaming`` measures what one streamed delta costs the GUI thread early and late in a long
answer: the same window answers once more, but the engine's reply is scripted (``--stream-tokens``
one-token deltas, one every ``--stream-pace-ms``, delivered through the bridge's event signal as
its reader thread delivers them). Per delta it times the synchronous path (controller, message
model, chat view, message widget: ``append_us``) and the event loop run after it (the throttled
re-render with its layout and paint: ``loop_us``), and compares the means over the first and the
last ``--window`` deltas; ``*_busy_share`` is the part of the wall time the GUI thread was busy
there. Appending costs O(delta) when ``append_ratio`` (late / early) stays near 1.

Usage: ``QT_QPA_PLATFORM=offscreen python tests/bench/bench_ui_latency.py [--model default]
[--prefill-words 2500] [--tokens 300] [--stream-tokens 4000] [--stream-pace-ms 5] [--window 200]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HEARTH_HOME", tempfile.mkdtemp(prefix="hearth-bench-ui-"))

import msgspec  # noqa: E402
from PySide6.QtCore import QElapsedTimer, QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.surfaces.gui import app_parts  # noqa: E402
from app.services.paths import user_paths  # noqa: E402
from app.services.settings import Settings, save_settings  # noqa: E402
from engine import protocol as p  # noqa: E402
from ui.app import build_window  # noqa: E402

TARGET_WORST_MS = 50.0
WORDS = "the keeper climbed the stairs of the lighthouse while the storm rolled over the dark sea".split()


class StallProbe:
    """Records when each timer tick arrived and how late it was."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self.ticks: list[tuple[float, float]] = []  # (arrival, lateness) in ms on the probe's clock
        self.clock = QElapsedTimer()
        self.timer = QTimer(interval=interval_ms)
        self.timer.timeout.connect(self._tick)
        self._last = 0.0

    def start(self) -> None:
        self.clock.start()
        self.timer.start()

    def now(self) -> float:
        return self.clock.nsecsElapsed() / 1e6

    def _tick(self) -> None:
        now = self.now()
        self.ticks.append((now, max(0.0, now - self._last - self.interval_ms)))
        self._last = now

    def between(self, start: float, end: float) -> list[float]:
        return [late for at, late in self.ticks if start < at <= end]


def summary(stalls: list[float]) -> dict:
    ordered = sorted(stalls)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0
    return {"ticks": len(ordered), "worst_ms": round(max(ordered, default=0.0), 2), "p99_ms": round(p99, 2)}


def wait_for(done: Callable[[], bool], signal, timeout_s: float) -> None:
    """Run a Qt event loop, as the app's own does, until ``signal`` fires and ``done()`` holds."""
    loop = QEventLoop()
    stop = lambda *args: loop.quit() if done() else None  # noqa: E731
    signal.connect(stop)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    if not done():
        loop.exec()
    signal.disconnect(stop)


def run_reading(window, probe: StallProbe, text: str, phases: dict[str, list[float]],
             timeout_s: float = 600) -> p.Finished:
    """Send ``text``, wait until the answer is stored, and file the probe's ticks under their phases."""
    controller = window.controller
    stored: list = []
    deltas: list[float] = []
    controller.turn_finished.connect(stored.append)
    on_event = lambda event: deltas.append(probe.now()) if isinstance(event, p.TokenDelta) else None  # noqa: E731
    controller.bridge.event.connect(on_event)
    sent = probe.now()
    window.composer.edit.setPlainText(text)
    window.composer._submit()
    wait_for(lambda: bool(stored), controller.turn_finished, timeout_s)
    done = probe.now()
    controller.bridge.event.disconnect(on_event)
    controller.turn_finished.disconnect(stored.append)
    if not stored or stored[0].finished is None or not deltas:
        raise SystemExit("the answer did not finish")
    phases.setdefault("prefill", []).extend(probe.between(sent, deltas[0]))
    phases.setdefault("decode", []).extend(probe.between(deltas[0], deltas[-1]))
    phases.setdefault("snapshot_save", []).extend(probe.between(deltas[-1], done))
    return stored[0].finished


def stream_scripted(window, n_deltas: int, edge: int, pace_ms: float, timeout_s: float = 60) -> dict:
    """Send a message whose answer is ``n_deltas`` scripted one-token deltas, one every ``pace_ms``;
    time what each costs the GUI thread."""
    app, controller = QApplication.instance(), window.controller
    bridge = controller.bridge
    sent: list[p.Command] = []
    real_send = bridge.send

    def send(command: p.Command) -> bool:  # the engine never hears of this answer: the bench writes it
        if not isinstance(command, p.ANSWERS):
            return real_send(command)
        sent.append(command)  # on the store's thread (app.services.turn_flow)
        return True

    bridge.send = send
    try:
        window.composer.edit.setPlainText("Tell me a long story about the lighthouse.")
        window.composer._submit()
        deadline = time.monotonic() + timeout_s
        while not (sent and sent[0].request_id in controller.turn_flow.turns) and time.monotonic() < deadline:
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)  # until the turn is on screen
        if not sent:
            raise SystemExit("the scripted turn was not started")
        deltas = [p.TokenDelta(request_id=sent[0].request_id, text=piece, n_tokens=1)
                  for piece in story_pieces(n_deltas)]
        append_ns, loop_ns, wall_ns = stream(app, bridge, deltas, pace_ms)
        stored: list = []
        controller.turn_finished.connect(stored.append)
        bridge.event.emit(p.Finished(request_id=sent[0].request_id, finish_reason="stop",
                                     timings=p.Timings(gen_n=n_deltas)))
        wait_for(lambda: bool(stored), controller.turn_finished, timeout_s)
        controller.turn_finished.disconnect(stored.append)
    finally:
        del bridge.send  # the bridge's own method again
    text = "".join(d.text for d in deltas)
    busy_ns = [a + b for a, b in zip(append_ns, loop_ns)]
    return {
        "deltas": n_deltas,
        "chars": len(text),
        "window": edge,
        "pace_ms": pace_ms,
        **compare("append_us", append_ns, edge),
        **compare("loop_us", loop_ns, edge),
        "early_busy_share": round(sum(busy_ns[:edge]) / sum(wall_ns[:edge]), 3),
        "late_busy_share": round(sum(busy_ns[-edge:]) / sum(wall_ns[-edge:]), 3),
        "shown_equals_stored": bool(stored) and stored[0].answer.content == text
                                and window.chat_view.widgets[-1].row.message.content == text,
    }


def stream(app, bridge, deltas: list[p.TokenDelta], pace_ms: float) -> tuple[list[int], list[int], list[int]]:
    """Deliver each delta as the bridge's reader thread does (its event signal, on the GUI thread),
    then run the event loop once and rest until the next delta is due. Per delta: the delivery's
    time, the event loop's time, and the wall time (ns)."""
    append_ns, loop_ns, wall_ns = [], [], []
    for delta in deltas:
        started = time.perf_counter_ns()
        bridge.event.emit(delta)
        appended = time.perf_counter_ns()
        app.processEvents()
        looped = time.perf_counter_ns()
        time.sleep(max(0.0, pace_ms / 1000 - (looped - started) / 1e9))
        append_ns.append(appended - started)
        loop_ns.append(looped - appended)
        wall_ns.append(time.perf_counter_ns() - started)
    return append_ns, loop_ns, wall_ns


def story_pieces(n: int) -> list[str]:
    """``n`` token-sized pieces of a Markdown answer: words, some bold, a paragraph every 40 words."""
    pieces = []
    for i in range(n):
        word = WORDS[i % len(WORDS)]
        word = f"**{word}**" if i % 17 == 0 else word
        pieces.append(("\n\n" if i and i % 40 == 0 else " ") + word)
    return pieces


def compare(name: str, samples_ns: list[int], edge: int) -> dict:
    """Mean of the first and last ``edge`` samples (µs) and their ratio (late / early)."""
    early = sum(samples_ns[:edge]) / max(1, len(samples_ns[:edge])) / 1000
    late = sum(samples_ns[-edge:]) / max(1, len(samples_ns[-edge:])) / 1000
    return {f"early_{name}": round(early, 1), f"late_{name}": round(late, 1),
            f"{name.removesuffix('_us')}_ratio": round(late / early, 2) if early else None}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="default")
    parser.add_argument("--prefill-words", type=int, default=2500)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--interval-ms", type=int, default=5)
    parser.add_argument("--stream-tokens", type=int, default=4000, help="scripted deltas (0: skip that part)")
    parser.add_argument("--window", type=int, default=200, help="deltas compared at each end of the answer")
    parser.add_argument("--stream-pace-ms", type=float, default=5.0, help="time between scripted deltas")
    args = parser.parse_args()

    settings = msgspec.structs.replace(Settings(), model=args.model, temperature=0.0, max_tokens=args.tokens,
                                       draft="off")
    save_settings(settings, user_paths().ensure().config)
    app = QApplication.instance() or QApplication([])
    window = build_window(app_parts())
    window.show()
    wait_for(lambda: window.controller.loaded is not None, window.controller.model_loaded, 120)
    probe = StallProbe(args.interval_ms)
    probe.start()
    long_text = "Summarise this: " + " ".join(WORDS[i % len(WORDS)] for i in range(args.prefill_words))
    stalls: dict[str, list[float]] = {}
    first = run_reading(window, probe, long_text, stalls)
    second = run_reading(window, probe, "Now tell me the story again, in more detail.", stalls)
    probe.timer.stop()
    streaming = (stream_scripted(window, args.stream_tokens, args.window, args.stream_pace_ms)
                 if args.stream_tokens else None)
    window.close()
    app.processEvents()
    phases = {name: summary(values) for name, values in stalls.items()}
    worst = max(s["worst_ms"] for s in phases.values())
    print(json.dumps({
        "model": args.model,
        "interval_ms": args.interval_ms,
        "prompt_tokens": [first.timings.prompt_n, second.timings.prompt_n],
        "generated_tokens": [first.timings.gen_n, second.timings.gen_n],
        "snapshot_bytes": [(f.snapshot.saved_bytes if f.snapshot else 0) for f in (first, second)],
        "phases": phases,
        "worst_ms": worst,
        "target_worst_ms": TARGET_WORST_MS,
        "meets_target": worst <= TARGET_WORST_MS,
        "streaming": streaming,
    }))


if __name__ == "__main__":
    main()
