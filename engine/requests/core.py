"""The engine core: the one owner of the loaded model, running one command at a time.

It turns commands into events through an ``emit`` callable and knows nothing of pipes or threads
(see :mod:`engine.worker_loop`). The commands are a closed set, dispatched with ``match`` (a new one that
is not handled fails the type check). Every request that reads into the state takes one path,
:meth:`EngineCore.run_reading`: stand on a snapshot or start clean, read, write unless it is a
document, save the turn end's snapshot, and end with one closing event (``Finished`` for an answer,
``DocumentRead`` for a document), preceded by an ``Error`` when it failed. ``LoadModel`` ends with
``ModelLoaded`` or an ``Error``. Token deltas are coalesced so a fast model sends a few events per
frame interval, not one per token; the first token goes out at once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import assert_never
from pathlib import Path

import msgspec

from engine import protocol as p
from engine.backends.base import ModelLoadError
from engine.backends.faults import PACE_ENV
from engine.backends.llama_context import STATE_PARTIAL_ONLY
from engine.templates.chat_template import ChatTemplateError
from engine.context.context_growth import ContextLimit, answer_room, context_report, cut_to_fit, grown_size
from engine.devices.calibration import Calibration, crossover, stored_calibration
from engine.devices.measure import calibration_lengths, run_calibration
from engine.protocol.devices import ProbedDevices, device_infos
from engine.devices.probe import probed_devices
from engine.context.document_fit import DocumentDoesNotFit, check_room, measure_text
from engine.models.embedded_convert import embedded_for_loading
from engine.decoding.constraint import ConstraintFactory, build_constraint
from engine.decoding.generation import Generation, GenerationSettings
from engine.decoding.scripted import scripted_answer
from engine.decoding.tool_use import forced_call, tool_use_for
from engine.models.load_progress import LoadProgress
from engine.models.model_files import DEFAULT_MODEL, embedded_model_path
from engine.npu.service import NpuPrefill, RequestPrefill, prepare_npu
from engine.decoding.progress import PrefillProgress
from engine.templates.prompts import chat_prompt, raw_prompt_tokens
from engine.decoding.reasoning import ReasoningStart
from engine.decoding.sampling import SamplingError, SamplingParams
from engine.models.session import ModelSession, open_session
from engine.protocol.reports import DraftStats, Timings
from engine.speculative.drafting import Drafting
from engine.telemetry.rates import LiveRates
from engine.decoding.request_events import PendingDelta, ReadingRequest, run_report
from engine.state.snapshot_cursor import SnapshotCursor, ReadingStart, open_snapshot_cursor, snapshot_report
from engine.templates.request_chat import chat_messages, render_options
from engine.requests.worker_store import WorkerStore
from model_store.db import StoreError
from model_store.file_hashes import hash_file
from model_store.fit import DEFAULT_BUDGET_PERCENT
from model_store.snapshots import SnapshotCorrupt

Emit = Callable[[p.Event], None]
STATE_REFRESH_S = 0.5


class LiveState:
    """What the telemetry sampler reads: sizes of the model and of the live sequence's state, and
    the phase the engine loop is in (a rate says only what finished in its window: on a busy
    machine a token can take longer than the window, and the phase still says it is being written)."""

    def __init__(self) -> None:
        self.rates = LiveRates()
        self.phase = "idle"  # "prefill" | "decode" | "idle"
        self.model_bytes = 0
        self.state_fixed_bytes = 0
        self.state_kv_bytes = 0
        self.kv_allocated_bytes = 0  # the attention cache the context holds for all its tokens


class EngineCore:
    def __init__(self, emit: Emit, is_cancelled: Callable[[str], bool],
                 probed: Callable[[], ProbedDevices] = probed_devices,
                 open_model: Callable[..., ModelSession] = open_session) -> None:
        self.emit = emit
        self.is_cancelled = is_cancelled
        self.probed = probed  # waits for the process's device probe
        self.open_model = open_model  # open_session's signature; tests load a fake backend through it
        self.calibration: Calibration | None = None  # measured prefill speeds (settings; none yet)
        self.plan: p.DevicePlan | None = None
        self.npu: NpuPrefill | None = None  # the loaded model's NPU prefill (routes each request)
        self.session: ModelSession | None = None
        self.live = LiveState()
        self.drafting: Drafting | None = None
        self.store = WorkerStore(None)  # the conversation database (snapshots, file digests): one connection
        self.snapshot_budget = 4 * 1024**3
        self._cursor: SnapshotCursor | None = None
        self.loaded_with: p.LoadModel | None = None  # the command the model was loaded by (to grow its context)
        self._cut: p.ContextCut | None = None  # the current request's branch was cut to fit (engine.protocol.context_cut)

    def configure(self, hello: p.Hello) -> None:
        self.store.move_to(Path(hello.user_dir) if hello.user_dir else None)
        self.snapshot_budget = hello.snapshot_budget_bytes

    def handle(self, command: p.Command) -> None:
        try:
            self._dispatch(command)
        finally:
            self.live.phase = "idle"

    def _dispatch(self, command: p.Command) -> None:
        match command:
            case p.LoadModel():
                self.load(command)
            case p.UnloadModel():
                self.unload()
                self.emit(p.ModelUnloaded(request_id=command.request_id))
            case p.Complete() | p.Chat() | p.AnswerTurn() | p.ReadDocument():
                self.run_reading(command)
            case p.OpenConversation():
                self.open_conversation(command)
            case p.MeasureText():
                self.measure_text(command)
            case p.Calibrate():
                self.calibrate(command)
            case p.Ping():
                self.emit(p.Pong(request_id=command.request_id))
            case p.Hello() | p.Cancel() | p.SetTelemetry() | p.Shutdown():
                pass  # the inbox acts on these itself (engine.requests.command_inbox); they never reach the core
            case _:
                assert_never(command)

    def close(self) -> None:
        self.unload()

    # -- models ----------------------------------------------------------------------------------

    def load(self, command: p.LoadModel) -> None:
        rid = command.request_id
        self.unload()
        self.live.rates.forget_answers()
        progress = LoadProgress(lambda step, f: self.emit(p.ModelLoading(request_id=rid, phase=step, fraction=f)))
        progress.step("load")
        try:
            self._open(command, command.n_ctx or None, progress)
        except ModelLoadError as exc:
            self.emit(p.Error(code="model_load_failed", message=str(exc), request_id=rid))
            return
        probed = self.probed()
        self.emit(p.ModelLoaded(request_id=rid, facts=self.session.facts, n_ctx=self.session.n_ctx,
                                context=context_report(self.session), devices=self.plan,
                                found_devices=device_infos(probed.cpu, probed.qnn), npu_graph=self.npu.report))

    def _open(self, command: p.LoadModel, n_ctx: int | None, progress: LoadProgress | None = None) -> None:
        """Load ``command``'s model with a context of ``n_ctx`` tokens (None: automatic), saying each
        step to ``progress``."""
        progress = progress or LoadProgress(lambda *_: None)
        self.session = self.open_model(self._model_file(command.model, progress), n_ctx=n_ctx,
                                       n_threads=command.n_threads or None,
                                       draft_max=command.draft_max, draft_width=command.draft_paths,
                                       kv_type=command.kv_type,
                                       memory_percent=command.memory_percent or DEFAULT_BUDGET_PERCENT,
                                       on_progress=progress.reading)
        progress.step("warm")
        self.session.warm_up()
        self.session.display_name = command.name
        self.loaded_with = command
        self.drafting = Drafting(self.session)
        self.live.model_bytes = self.session.facts.size_bytes
        self.live.kv_allocated_bytes = context_report(self.session).kv_bytes
        self.refresh_state_sizes()
        self.calibration = stored_calibration(command.calibration)
        self.npu, self.plan = prepare_npu(self.session, self.probed(), command.device_policy, self.calibration,
                                          self.store)

    def _model_file(self, ref: str, progress: LoadProgress) -> str:
        """What to load for ``ref``: the built-in model in its fast-reading copy (made now, the first
        time: engine.models.embedded_layout), anything else as it is."""
        if ref != DEFAULT_MODEL:
            return ref
        return str(embedded_for_loading(embedded_model_path(), self._digest, self.store.data_dir, progress.preparing))

    def _digest(self, path: Path) -> str:
        try:
            return self.store.file_digest(path)
        except (ValueError, StoreError):  # no data folder, or its database unreadable: hash it here
            return hash_file(path)

    def _grow(self, rid: str, n_ctx: int) -> None:
        """Load the model again with an ``n_ctx``-token context (see engine.context.context_growth); on a
        failure, with the context it had, and raise."""
        command, previous = self.loaded_with, self.session.n_ctx
        mode = "fixed" if command.n_ctx else "auto"
        self.unload()
        try:
            self._open(command, n_ctx)
        except ModelLoadError as exc:
            self.unload()
            self._open(command, previous)
            raise ContextLimit(f"a longer context ({n_ctx:,} tokens) could not be made: {exc.reason}") from exc
        self.emit(p.ContextGrown(request_id=rid, previous_n_ctx=previous, context=context_report(self.session, mode)))

    def calibrate(self, command: p.Calibrate) -> None:
        """Measure prefill speed per device; later requests route by the new crossover at once."""
        if self.session is None:
            self.emit(p.Error(code="no_model", message="load a model before calibrating", request_id=command.request_id))
            return
        lengths = calibration_lengths(command.lengths, self.session.n_ctx)
        self.calibration, notes = run_calibration(self.session, self.probed(), self.store, lengths,
                                                  command.include_emulator)
        if self.npu is not None:
            self.npu.calibration = self.calibration
        device = next((d for d in ("npu", "npu-emulator") if d in self.calibration.rates), "npu")
        self.emit(p.Calibrated(request_id=command.request_id, calibration=self.calibration.to_dict(),
                               crossover=crossover(self.calibration, device), notes=notes))

    def unload(self) -> None:
        self._cursor = None
        self.store.close()
        self.plan = self.npu = None
        if self.drafting is not None:
            self.drafting.close()
            self.drafting = None
        if self.session is not None:
            self.session.close()
            self.session = None
        self.live.model_bytes = self.live.state_fixed_bytes = self.live.state_kv_bytes = 0
        self.live.kv_allocated_bytes = 0

    # -- generation ------------------------------------------------------------------------------

    def run_reading(self, command: ReadingRequest) -> None:
        """The one path of every request that reads (and, unless it is a document, writes): stand
        on a snapshot or start clean, read the new tokens, write the answer, save the turn end's
        snapshot (a conversation's requests), and end with the request's one closing event."""
        rid = command.request_id
        self._cut = None
        if self.is_cancelled(rid):
            self.emit(run_report(command, "cancelled", Timings()))
            return
        try:
            run, turn, draft_stats, progress, prefill = self._make_generation(command)
        except DocumentDoesNotFit as too_long:
            self.emit(run_report(command, "too_long", Timings(), room=too_long.room))
            return
        except (ChatTemplateError, SamplingError, ValueError, StoreError, SnapshotCorrupt, ModelLoadError) as exc:
            code = "no_model" if self.session is None else "context_full" if isinstance(exc, ContextLimit) else \
                "bad_request"
            self._fail(command, code, str(exc))
            return
        try:
            self._stream(rid, run)
        except RuntimeError as exc:  # llama.cpp refused a decode (context full, ...)
            self._forget_live()
            self._fail(command, "generation_failed", str(exc), run.timings)
            return
        finally:
            progress.close()
        report = self._save_turn(command, turn, run) if turn is not None else None
        self.refresh_state_sizes()
        if run.source is not None and run.source.stats is not None:
            draft_stats = run.source.stats
        devices = p.DevicePlan(prefill=prefill.ran, decode=self.plan.decode, draft=self.plan.draft)
        self.emit(run_report(command, run.finish_reason or "stop", run.timings, run=run, snapshot=report,
                                draft=draft_stats, devices=devices, context_cut=self._cut))

    def open_conversation(self, command: p.OpenConversation) -> None:
        rid = command.request_id
        if self.session is None:
            self.emit(p.Error(code="no_model", message="no model is loaded; load one first", request_id=rid))
            return
        try:
            turn = self.snapshot_cursor().open(command.messages, command.template)
        except (ChatTemplateError, ValueError, StoreError) as exc:
            self.emit(p.Error(code="bad_request", message=str(exc), request_id=rid))
            return
        self.refresh_state_sizes()
        report = msgspec.structs.replace(snapshot_report(turn), snapshot_id=turn.base.id if turn.base else None)
        self.emit(p.ConversationOpened(request_id=rid, snapshot=report))

    def measure_text(self, command: p.MeasureText) -> None:
        if self.session is None:
            self.emit(p.Error(code="no_model", message="no model is loaded; load one first",
                              request_id=command.request_id))
            return
        self.emit(measure_text(self.session, command))

    def _fail(self, command: ReadingRequest, code: p.ErrorCode, message: str, timings: Timings | None = None) -> None:
        self.emit(p.Error(code=code, message=message, request_id=command.request_id))
        self.emit(run_report(command, "error", timings or Timings()))

    def _make_generation(
        self, command: ReadingRequest, may_grow: bool = True
    ) -> tuple[Generation, ReadingStart | None, DraftStats, PrefillProgress, RequestPrefill]:
        if self.session is None:
            raise ValueError("no model is loaded; load one first")
        writes = not isinstance(command, p.ReadDocument)
        turn, tokens, reasoning = self._prompt(command)
        make_source, draft_stats, settings = None, DraftStats(), GenerationSettings()
        if writes:
            make_source, draft_stats = self.drafting.plan(command.draft, command.draft_max, command.draft_auto_off)
            tools = getattr(command, "template", p.TemplateSpec()).tools
            use = tool_use_for(self.session, tools, command.tool_choice)
            forced = forced_call(self.session, use, command.tool_choice if tools else None, reasoning)
            settings = GenerationSettings(sampling=SamplingParams.from_spec(command.sampling, self.session.breakers),
                                          max_tokens=command.max_tokens, stop=tuple(command.stop), reasoning=reasoning,
                                          constraint=scripted_answer(self.session.model) or forced
                                          or self._constraint(command.constraint, reasoning),
                                          tools=use)
        held = self.session.n_past if turn is not None and turn.base is not None else 0
        if isinstance(command, (p.AnswerTurn, p.Chat)) and may_grow:
            kept, cut = cut_to_fit(self.session, command, held + len(tokens))
            if cut is not None:  # the kept branch, read from its deepest snapshot (none, the first time)
                self._cut = cut
                return self._make_generation(kept)
        if isinstance(command, p.ReadDocument) and may_grow:
            check_room(self.session, command, held + len(tokens))
        n_ctx = grown_size(self.session, held + len(tokens), answer_room(command.max_tokens if writes else 0))
        if n_ctx and may_grow:
            self._grow(command.request_id, n_ctx)
            return self._make_generation(command, may_grow=False)
        prefill = self.npu.request(len(tokens), self._prefill_ran)
        progress = self.progress_reporter(command.request_id)
        question = turn.question if turn is not None and turn.question is not None else None
        try:
            run = Generation(self.session, tokens, settings, on_progress=progress.chunk_done,
                             on_chunk_start=progress.chunk_started, cancelled=lambda: self.is_cancelled(command.request_id),
                             reset=turn is None or turn.base is None, make_source=make_source, prefiller=prefill,
                             writes=writes, checkpoint=question.n_new if question else 0,
                             on_checkpoint=lambda chunks: self._cursor.mark_question(turn, chunks))
        except Exception:
            progress.close()
            raise
        return run, turn, draft_stats, progress, prefill

    def _constraint(self, spec: p.OutputConstraint | None, reasoning: ReasoningStart) -> ConstraintFactory | None:
        """The answer's grammar, made now: a schema that cannot be used is refused (ConstraintRefused,
        a ValueError: ``bad_request``) before the prompt is read."""
        if spec is None:
            return None
        banned, eog = self.session.constraint_masks()
        return build_constraint(self.session.model, spec, reasoning, banned, eog)

    def _prefill_ran(self, device: p.PhaseDevice) -> None:
        """Telemetry shows the device reading the current request (replaced whole: the sampler reads it)."""
        self.live.rates.phase_devices = {"prefill": device.device, "decode": self.plan.decode.device}

    def _prompt(self, command: ReadingRequest) -> tuple[ReadingStart | None, list[int], ReasoningStart]:
        """Where the request starts (a snapshot, for a conversation's turn), the tokens it reads, and
        whether its answer starts inside a reasoning block."""
        model = self.session.model
        match command:
            case p.AnswerTurn():
                turn = self.snapshot_cursor().begin(command.messages, template=command.template)
                return turn, turn.new_tokens, turn.reasoning
            case p.ReadDocument():
                if not command.messages or command.messages[-1].id is None:
                    raise ValueError("the document message has no id")
                turn = self.snapshot_cursor().begin(command.messages, answer=False, template=command.template)
                return turn, turn.new_tokens, "off"
            case p.Complete():
                self._forget_live()
                return None, raw_prompt_tokens(model, command.prompt), "off"
            case p.Chat():
                self._forget_live()
                options = render_options(command.template)
                return None, *chat_prompt(model, chat_messages(command.messages), options)
            case _:
                assert_never(command)

    def snapshot_cursor(self) -> SnapshotCursor:
        if self._cursor is None:
            self._cursor = open_snapshot_cursor(self.store, self.session)
        return self._cursor

    def _forget_live(self) -> None:
        if self._cursor is not None:
            self._cursor.forget_live()

    def _save_turn(self, command: p.AnswerTurn | p.ReadDocument, turn: ReadingStart, run: Generation) -> p.SnapshotReport:
        """Snapshot the turn's end under its message (the answer, or the document read)."""
        if isinstance(command, p.ReadDocument):
            message_id, what, kept = command.messages[-1].id, "the document's snapshot", "questions will re-read it"
        else:
            message_id, what, kept = command.answer_id, "this turn's snapshot", "the answer is kept"
        record, notes = self._cursor.save_end(
            lambda: self._cursor.finish(turn, run, command.conversation_id, message_id), self.snapshot_budget, what)
        return snapshot_report(turn, record, [f"{note}; {kept}" for note in notes])

    def progress_reporter(self, rid: str) -> PrefillProgress:
        """Progress events for request ``rid``'s prefill (close it when the prefill is over)."""
        last, done_before = time.perf_counter(), 0
        self.live.phase = "prefill"

        def report(processed: int, total: int, elapsed_ms: float, estimated: bool) -> None:
            nonlocal last, done_before
            if not estimated:
                now = time.perf_counter()
                self.live.rates.record("prefill", processed - done_before, now - last)
                last, done_before = now, processed
                self.refresh_state_sizes()
            self.emit(p.PromptProgress(request_id=rid, processed=processed, total=total, elapsed_ms=elapsed_ms,
                                       estimated=estimated))

        return PrefillProgress(report, within=getattr(self.session.context, "decode_progress", None))

    def _stream(self, rid: str, run: Generation) -> None:
        pending = PendingDelta(rid)
        pace_s = float(os.environ.get(PACE_ENV) or 0) / 1000
        last_token_at: float | None = None
        last_state_refresh = time.perf_counter()
        for delta in run:
            now = time.perf_counter()
            if last_token_at is None:
                self.live.rates.ttft_ms = run.timings.ttft_ms
                self.live.phase = "decode"
            else:
                self.live.rates.record("decode", len(delta.token_ids), now - last_token_at)
            last_token_at = now
            stats = run.source.stats
            if stats is not None and stats.drafted:
                self.live.rates.draft_acceptance = stats.accepted / stats.drafted
            pending.add(delta)
            if pace_s:
                time.sleep(pace_s)
            if pending.due(now):
                self.emit(pending.take(now))
            if now - last_state_refresh > STATE_REFRESH_S:
                self.refresh_state_sizes()
                last_state_refresh = now
        if pending.n_tokens or pending.text or pending.reasoning or (last_token_at is None and run.pending_token is not None):
            # An answer that is empty from its first token (end of turn at once) still reports that
            # token now, as an empty delta: time to first token must not wait for the snapshot save.
            self.emit(pending.take(time.perf_counter()))

    def refresh_state_sizes(self) -> None:
        session = self.session
        if session is None:
            return
        total = session.context.state_size(0)
        facts = session.facts
        fixed = session.context.state_size(0, STATE_PARTIAL_ONLY) if facts.has_recurrent_state else 0
        self.live.state_fixed_bytes, self.live.state_kv_bytes = fixed, max(0, total - fixed)
