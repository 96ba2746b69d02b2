"""A scripted :class:`~app.engine_clients.client.EngineClient`: the real protocol, without a worker or a model.

Tests of the GUI's controllers use it in place of a worker process, so they run in milliseconds. It
speaks the messages of :mod:`engine.protocol`, and every command goes through
:func:`app.engine_clients.client.checked` as with the real clients, so a value out of range is refused the same
way (:class:`~app.engine_clients.client.InvalidRequest`). Each command gets the answer a healthy worker gives,
unless the test scripted another one for the next command of its type::

    engine.script(p.AnswerTurn, answer("Hel", "lo"))   # these deltas, then Finished(stop)
    engine.script(p.AnswerTurn, fail("generation_failed", "the context is full"))  # Error, then Finished(error)
    engine.script(p.AnswerTurn, hold("Once", " upon"))  # these deltas, then wait for Cancel or release()
    engine.script(p.AnswerTurn, hold(reasoning=("Let me", " think")))  # reasoning deltas only, then wait
    engine.delta(" upon", reasoning="")                 # one more delta of the held request
    engine.script(p.LoadModel, die())                   # the worker dies when the command arrives
    engine.die()                                        # ... or now
    engine.grow_context(request_id, 8192)               # ContextGrown for that request, as the worker sends it

A reasoning model is ``ScriptedEngine(thinks=True, thinking_switch=True)`` (its ``ModelFacts``); an
answer's reasoning is scripted with ``answer("Hi", reasoning=("Let me", " think"))``: reasoning deltas
(``TokenDelta.reasoning``, no text) before the answer's, as the worker sends them, and none when the
request's ``template.enable_thinking`` is False.

``document_budget_tokens`` is the words a document may have in an empty context; ``grown_budget_tokens``
what it could have if the context grew (0: it cannot grow). A ReadDocument measures as the worker
does: a document (its message's words) that does not fit after the words before it ends ``too_long``
with the numbers (a ``DocumentRoom``); one longer than the context grows it first.

As with the real worker, a request that needs a model gets ``Error(no_model)`` before a model is
loaded; an ``Error`` for a request that writes an answer (``p.ANSWERS``) or a ``ReadDocument`` is
followed by its own ending (``Finished`` / ``DocumentRead`` with ``error``); and a death is one
:class:`~app.engine_clients.client.EngineDead` (worded by :func:`engine.protocol.deaths.engine_dead`), after which
:meth:`~EngineClient.restart` brings up a fresh one.

What it does NOT do (tests/process and tests/ui/test_app_*.py cover these with a real worker):

* no model: an answer's text is the script's; "tokens" are whitespace-separated words; sampling,
  drafting, stop strings, ``max_tokens`` and the chat template play no part;
* no snapshots: it writes nothing to the conversation database, and ``ConversationOpened`` always
  says nothing was restored;
* no queue: each command is answered at once, in the order sent; a held request does not hold up
  the commands after it as the worker's one engine thread does;
* ``Cancel`` ends only the request being held (a load is not cancellable, as in the worker); a Cancel
  for anything else is ignored;
* no timer: a ``Telemetry`` event arrives when the test calls :meth:`ScriptedEngine.telemetry`
  (and only while ``SetTelemetry`` left it on), never by itself;
* no ``Calibrate`` (refused with an Error), no frames (there is no ``send_raw``), no CPU builds.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from engine import protocol as p
from engine.protocol import ModelFacts
from app.engine_clients.client import EngineClient, EngineDead, EngineError, checked
from app.engine_clients.outlet import EventOutlet
from engine.protocol.deaths import engine_dead
from engine.protocol.reports import Timings
from model_store.fit import DEFAULT_BUDGET_PERCENT

DEFAULT_ANSWER = ("Hello", " from", " the", " scripted", " engine.")
NO_MODEL = "no model is loaded; load one first"  # the real worker's words
CPU = p.DeviceInfo(kind="cpu", name="scripted CPU", detail="tests.fakes.engine_client")
ON_CPU = p.PhaseDevice("cpu", "the scripted engine runs everything on its CPU")
NEEDS_A_MODEL = (*p.ANSWERS, p.OpenConversation, p.MeasureText, p.ReadDocument, p.Calibrate)


@dataclass(frozen=True)
class Step:
    """How the fake answers one command; made by :func:`answer`, :func:`fail`, :func:`hold`, :func:`die`."""

    pieces: tuple[str, ...] = DEFAULT_ANSWER  # an answer's deltas (sent before a hold or a death too)
    reasoning: tuple[str, ...] = ()  # its reasoning's deltas, sent before the pieces
    error: tuple[p.ErrorCode, str] | None = None
    hold: bool = False  # after the pieces, wait for Cancel or ScriptedEngine.release()
    exit_code: int | None = None  # set: the worker dies (a negative code is the signal that killed it)
    calls: tuple[p.ToolCall, ...] = ()  # the calls the answer makes (it ends with "tool_calls")


def answer(*pieces: str, reasoning: tuple[str, ...] = ()) -> Step:
    return Step(pieces=pieces or _default_pieces(reasoning), reasoning=reasoning)


def call(*calls: p.ToolCall, pieces: tuple[str, ...] = ()) -> Step:
    """An answer that calls tools (after ``pieces`` of text, if any)."""
    return Step(pieces=pieces, calls=calls)


def fail(code: p.ErrorCode, message: str) -> Step:
    return Step(pieces=(), error=(code, message))


def hold(*pieces: str, reasoning: tuple[str, ...] = ()) -> Step:
    return Step(pieces=pieces or _default_pieces(reasoning), reasoning=reasoning, hold=True)


def _default_pieces(reasoning: tuple[str, ...]) -> tuple[str, ...]:
    """No pieces given: the default answer, or none after reasoning (a request held while it thinks)."""
    return () if reasoning else DEFAULT_ANSWER


def die(*pieces: str, exit_code: int = -signal.SIGKILL) -> Step:
    return Step(pieces=pieces, exit_code=exit_code)


@dataclass
class _Held:
    request_id: str
    release: Callable[[], None]
    cancel: Callable[[], None] | None  # None: Cancel does not end it


class ScriptedEngine(EngineClient):
    """An engine client answering from a script; see the module's docstring for what it leaves out."""

    def __init__(self, *, n_ctx: int = 4096, n_ctx_train: int = 32768, document_budget_tokens: int = 3000,
                 grown_budget_tokens: int = 0, thinks: bool = False, thinking_switch: bool = False,
                 tool_form: str = "hermes") -> None:
        self.n_ctx = n_ctx
        self.tool_form = tool_form  # the form its model writes calls in ("": it takes no tools)
        self.thinks, self.thinking_switch = thinks, thinking_switch  # the loaded model's facts say so
        self.n_ctx_train = n_ctx_train
        self.document_budget_tokens = document_budget_tokens  # a MeasureText's budget when it asks for the default
        self.grown_budget_tokens = grown_budget_tokens  # the default budget after growing as far as memory allows
        self.received: list[p.Command] = []  # every command accepted, as checked() returned it
        self.loaded: p.ModelLoaded | None = None
        self.telemetry_interval_ms = 0
        self.starts = 0  # handshakes answered: 2 after one restart
        self.load_steps: list[tuple[str, float]] = [("load", 0.5)]  # the ModelLoading events a load sends
        self._events = EventOutlet()
        self._scripts: dict[type, deque[Step]] = defaultdict(deque)
        self._held: _Held | None = None
        self._alive = False
        self._dead = False
        self._lock = threading.RLock()  # send() runs on the GUI thread and on the bridge's thread

    # -- the test's side -------------------------------------------------------------------------

    def script(self, command_type: type, *steps: Step) -> None:
        """Answer the next commands of ``command_type`` with ``steps``, one each, then as usual."""
        with self._lock:
            self._scripts[command_type].extend(steps)

    def sent(self, command_type: type | tuple[type, ...]) -> list:
        """The commands of ``command_type`` (or of any of a tuple of types) received so far."""
        with self._lock:
            return [c for c in self.received if isinstance(c, command_type)]

    @property
    def holding(self) -> str | None:
        """The request id being held, if any."""
        return self._held.request_id if self._held is not None else None

    def delta(self, text: str = "", reasoning: str = "") -> None:
        """One more TokenDelta of the held answer (its ``reasoning`` comes before its ``text``)."""
        with self._lock:
            assert self._held is not None, "nothing is being held"
            self._emit(p.TokenDelta(request_id=self._held.request_id, text=text, n_tokens=1, reasoning=reasoning))

    def release(self) -> None:
        """End the held request as if it ran to its end."""
        with self._lock:
            held, self._held = self._held, None
            assert held is not None, "nothing is being held"
            held.release()

    def die(self, exit_code: int = -signal.SIGKILL) -> None:
        """The worker dies now (SIGKILL by default): one EngineDead, then every send fails until a restart."""
        with self._lock:
            self._alive, self._dead, self._held, self.loaded = False, True, None, None
            self._emit(engine_dead(exit_code))

    def grow_context(self, request_id: str, n_ctx: int) -> None:
        """The worker grew the loaded model's context to ``n_ctx`` for ``request_id`` (a ContextGrown);
        the document budget grows by as much."""
        with self._lock:
            assert self.loaded is not None, "a context grows only while a model is loaded"
            previous, report = self.n_ctx, self.loaded.context
            grown = msgspec.structs.replace(report, n_ctx=n_ctx, kv_bytes=n_ctx * 1024,
                                            estimated_bytes=report.estimated_bytes + (n_ctx - previous) * 1024,
                                            max_n_ctx=max(report.max_n_ctx, n_ctx))
            self.n_ctx, self.document_budget_tokens = n_ctx, self.document_budget_tokens + n_ctx - previous
            self.loaded = msgspec.structs.replace(self.loaded, n_ctx=n_ctx, context=grown)
            self._emit(p.ContextGrown(request_id=request_id, previous_n_ctx=previous, context=grown))

    def telemetry(self, **fields) -> None:
        """One Telemetry event (the fields given over quiet defaults), if telemetry is on."""
        if self.telemetry_interval_ms:
            self._emit(p.Telemetry(**{**_quiet_telemetry(self.loaded), **fields}))

    # -- EngineClient ----------------------------------------------------------------------------

    def _launch(self) -> None:
        with self._lock:
            self._new_outlet()
            self._alive, self._dead, self._held, self.loaded = True, False, None, None

    def send(self, command: p.Command) -> None:
        command = checked(command)  # as every client does: an out-of-range value raises InvalidRequest
        with self._lock:
            if not self._alive:
                raise (EngineError("engine_dead", "the engine is not running") if self._dead
                       else EngineError("not_started", "the engine is not running; start it first"))
            self.received.append(command)
            steps = self._scripts[type(command)]
            self._react(command, steps.popleft() if steps else answer())

    def close(self, mode: str = "drain", timeout: float = 10.0) -> None:
        with self._lock:
            self._alive, self._held = False, None

    # -- answers ---------------------------------------------------------------------------------

    def _emit(self, event: p.Event | EngineDead) -> None:
        self._events.put(event)

    def _react(self, command: p.Command, step: Step) -> None:
        if step.exit_code is not None:
            if isinstance(command, p.ANSWERS) and (step.pieces or step.reasoning):
                self._stream(command, step.pieces, step.reasoning)
            self.die(step.exit_code)
        elif step.error is not None:
            self._refuse(command, *step.error)
        elif isinstance(command, NEEDS_A_MODEL) and self.loaded is None:
            self._refuse(command, "no_model", NO_MODEL)
        elif isinstance(command, p.Cancel):
            self._cancel(command.request_id)
        else:
            handler = _HANDLERS.get(type(command))
            if handler is not None:
                handler(self, command, step)

    def _refuse(self, command: p.Command, code: p.ErrorCode, message: str) -> None:
        rid = getattr(command, "request_id", None)
        if rid is None:
            self._emit(p.Error(code=code, message=message))
            return
        for event in p.failure_events(command.__struct_config__.tag, rid, code, message):
            self._emit(event)

    def _cancel(self, request_id: str) -> None:
        held = self._held
        if held is not None and held.request_id == request_id and held.cancel is not None:
            self._held = None
            held.cancel()

    def _hold_or_end(self, request_id: str, step: Step, end: Callable[[str], None], cancellable: bool = True) -> None:
        """``end("stop")`` now, or hold the request until release() (stop) or Cancel (cancelled)."""
        if step.hold:
            assert self._held is None, "the scripted engine holds one request at a time"
            self._held = _Held(request_id, lambda: end("stop"), (lambda: end("cancelled")) if cancellable else None)
        else:
            end("stop")

    # -- one handler per command -----------------------------------------------------------------

    def _hello(self, command: p.Hello, step: Step) -> None:
        if command.protocol_version != p.PROTOCOL_VERSION:
            self._emit(p.Error(code="protocol_mismatch",
                               message=f"the app speaks protocol {command.protocol_version} but this worker speaks "
                                       f"{p.PROTOCOL_VERSION}"))
            return
        self.starts += 1
        self._emit(p.Ready(protocol_version=p.PROTOCOL_VERSION, versions={"hearth": "scripted"}, devices=[CPU],
                           pid=0))

    def _load(self, command: p.LoadModel, step: Step) -> None:
        rid = command.request_id
        for phase, fraction in self.load_steps:
            self._emit(p.ModelLoading(request_id=rid, phase=phase, fraction=fraction))

        def end(_: str) -> None:
            facts = msgspec.structs.replace(_facts(command.model, self.n_ctx_train), thinks=self.thinks,
                                            thinking_switch=self.thinking_switch, tool_form=self.tool_form)
            self.loaded = p.ModelLoaded(request_id=rid, facts=facts,
                                        n_ctx=self.n_ctx, context=self._context(command),
                                        devices=p.DevicePlan(prefill=ON_CPU, decode=ON_CPU), found_devices=[CPU])
            self._emit(self.loaded)

        self._hold_or_end(rid, step, end, cancellable=False)

    def _context(self, command: p.LoadModel) -> p.ContextReport:
        """The context now, at 1 KiB a token, in 1 GiB of which ``memory_percent`` is the budget;
        it can grow as far as ``grown_budget_tokens`` says."""
        growth = max(0, self.grown_budget_tokens - self.document_budget_tokens)
        return p.ContextReport(n_ctx=self.n_ctx, n_ctx_train=self.n_ctx_train,
                               mode="fixed" if command.n_ctx else "auto", kv_type=command.kv_type,
                               kv_bytes=self.n_ctx * 1024, estimated_bytes=(100 << 20) + self.n_ctx * 1024,
                               available_bytes=1 << 30,
                               budget_bytes=(1 << 30) * (command.memory_percent or DEFAULT_BUDGET_PERCENT) // 100,
                               max_n_ctx=min(self.n_ctx + growth, self.n_ctx_train))

    def _unload(self, command: p.UnloadModel, step: Step) -> None:
        self.loaded = None
        self._emit(p.ModelUnloaded(request_id=command.request_id))

    def _stream(self, command: p.Answer, pieces: tuple[str, ...], reasoning: tuple[str, ...] = ()) -> None:
        prompt = _prompt_words(command)
        self._emit(p.PromptProgress(request_id=command.request_id, processed=prompt, total=prompt, elapsed_ms=1.0))
        template = getattr(command, "template", None)
        for thought in reasoning if template is None or template.enable_thinking is not False else ():
            self._emit(p.TokenDelta(request_id=command.request_id, text="", n_tokens=1, reasoning=thought))
        for piece in pieces:
            self._emit(p.TokenDelta(request_id=command.request_id, text=piece, n_tokens=1))

    def _answer(self, command: p.Answer, step: Step) -> None:
        rid = command.request_id
        self._stream(command, step.pieces, step.reasoning)

        def end(reason: str) -> None:
            timings = Timings(prompt_n=_prompt_words(command), prompt_ms=1.0, gen_n=len(step.pieces),
                              gen_ms=float(len(step.pieces)))
            report = p.SnapshotReport(prefilled_tokens=timings.prompt_n) if isinstance(command, p.AnswerTurn) else None
            calls = list(step.calls) if reason == "stop" else []
            self._emit(p.Finished(request_id=rid, finish_reason="tool_calls" if calls else reason, timings=timings,
                                  snapshot=report, devices=self.loaded.devices if self.loaded else None,
                                  tool_calls=calls))

        self._hold_or_end(rid, step, end)

    def _open(self, command: p.OpenConversation, step: Step) -> None:
        self._emit(p.ConversationOpened(request_id=command.request_id,
                                        snapshot=p.SnapshotReport(notes=["the scripted engine keeps no snapshots"])))

    def _measure(self, command: p.MeasureText, step: Step) -> None:
        words = command.text.split()
        budget = command.budget_tokens or self.document_budget_tokens
        fits = len(words) <= budget
        if command.keep == "all" or fits:
            kept_text, kept_tokens = ("" if command.keep == "all" else command.text), (len(words) if fits else 0)
        else:
            kept = words[:budget] if command.keep == "first" else words[len(words) - budget:]
            kept_text, kept_tokens = " ".join(kept), len(kept)
        growth = max(0, self.grown_budget_tokens - self.document_budget_tokens)
        self._emit(p.TextMeasured(request_id=command.request_id, tokens=len(words), budget_tokens=budget, fits=fits,
                                  kept_text=kept_text, kept_tokens=kept_tokens,
                                  grown_budget_tokens=budget + growth if growth else 0))

    def _room(self, command: p.ReadDocument) -> p.DocumentRoom:
        held = _words(*(turn.content for turn in command.messages[:-1]))
        budget = max(0, self.document_budget_tokens - held)
        grown = max(0, self.grown_budget_tokens - held) if self.grown_budget_tokens else budget
        return p.DocumentRoom(tokens=_words(command.messages[-1].content), held_tokens=held, budget_tokens=budget,
                              grown_budget_tokens=grown)

    def _read(self, command: p.ReadDocument, step: Step) -> None:
        rid = command.request_id
        room = self._room(command)
        if room.tokens > (room.grown_budget_tokens if command.grow else room.budget_tokens):
            self._emit(p.DocumentRead(request_id=rid, finish_reason="too_long", tokens=0, timings=Timings(), room=room))
            return
        total = _words(*(turn.content for turn in command.messages))
        if self.grown_budget_tokens and total > self.n_ctx:  # as the worker does, with room left for questions
            self.grow_context(rid, _steps_of_256(total + self.n_ctx - self.document_budget_tokens))
        self._emit(p.PromptProgress(request_id=rid, processed=total // 2, total=total, elapsed_ms=1.0))

        def end(reason: str) -> None:
            read = total if reason == "stop" else total // 2
            self._emit(p.DocumentRead(request_id=rid, finish_reason=reason, tokens=read,
                                      timings=Timings(prompt_n=read, prompt_ms=2.0)))

        self._hold_or_end(rid, step, end)

    def _calibrate(self, command: p.Calibrate, step: Step) -> None:
        self._emit(p.Error(code="bad_request", message="the scripted engine does not calibrate",
                           request_id=command.request_id))

    def _ping(self, command: p.Ping, step: Step) -> None:
        self._emit(p.Pong(request_id=command.request_id))

    def _set_telemetry(self, command: p.SetTelemetry, step: Step) -> None:
        self.telemetry_interval_ms = command.interval_ms


_HANDLERS = {
    p.Hello: ScriptedEngine._hello, p.LoadModel: ScriptedEngine._load, p.UnloadModel: ScriptedEngine._unload,
    **{answering: ScriptedEngine._answer for answering in p.ANSWERS}, p.OpenConversation: ScriptedEngine._open,
    p.MeasureText: ScriptedEngine._measure, p.ReadDocument: ScriptedEngine._read,
    p.Calibrate: ScriptedEngine._calibrate, p.Ping: ScriptedEngine._ping, p.SetTelemetry: ScriptedEngine._set_telemetry,
}  # Cancel is handled in _react; Shutdown needs no answer (close() ends the fake)


def _words(*texts: str) -> int:
    return sum(len(text.split()) for text in texts)


def _steps_of_256(tokens: int) -> int:
    """``tokens`` rounded up to llama.cpp's context step."""
    return -(-tokens // 256) * 256


def _prompt_words(command: p.Answer) -> int:
    """The "tokens" an answer reads: its messages' words, or its raw prompt's."""
    return _words(*(turn.content for turn in getattr(command, "messages", ())), getattr(command, "prompt", ""))


def _facts(model: str, n_ctx_train: int) -> ModelFacts:
    return ModelFacts(path=model, file_bytes=0, arch="scripted", name="scripted", description="a scripted engine",
                      n_params=0, size_bytes=0, n_ctx_train=n_ctx_train, n_embd=0, n_layer=0, n_layer_mtp=0, n_vocab=0,
                      is_recurrent=False, is_hybrid=False, supports_rollback=True, has_chat_template=True,
                      backend_version="scripted")


def _quiet_telemetry(loaded: p.ModelLoaded | None) -> dict:
    return dict(t=time.time(), rss_bytes=100 * 1024**2, available_bytes=8 * 1024**3,
                model_bytes=loaded.facts.size_bytes if loaded else 0, state_fixed_bytes=0, state_kv_bytes=0,
                cpu_temp_c=p.UNAVAILABLE, cpu_freq_mhz=p.UNAVAILABLE, cpu_freq_max_mhz=p.UNAVAILABLE,
                throttled=p.UNAVAILABLE, prefill_tok_s=0.0, decode_tok_s=0.0, ttft_ms=p.UNAVAILABLE,
                draft_acceptance=p.UNAVAILABLE, phase_devices={})
