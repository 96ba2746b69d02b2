"""What the window does, without the widgets: conversations, turns, the model, the worker's life.

The controller is driven by three sources, all on the GUI thread: the user (through the window's
slots), the engine bridge's events, and the store thread's results. It never waits: store work is
submitted and continues in a callback, engine requests are sent and continue when their events
arrive. The window subscribes to its signals and to the two list models.

A conversation has one writer at a time across every window and command
(:mod:`model_store.writer_lock`): a message sent while another one is answering in the conversation
is refused at once (the window never waits), said in the banner, and given back to the composer.

Loading the model and the worker's restarts live in :mod:`ui.model_loading`; the list, opening,
renaming, deleting and versions of conversations in :mod:`ui.conversation_browsing`; a question asked
before the model is in waits in :mod:`ui.held_question`; what the conversation database file
says in :mod:`ui.database_notices`. A notice about a passing state names its cause
(:mod:`ui.notices`) and goes when the cause is gone (:attr:`ChatController.cause_gone`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from app.services.sampling_defaults import ResolvedSampling, model_sampling
from app.services.settings import Settings, sampling_spec
from app.services.chat_rows import MessageRow, load_transcript
from app.services.turn import PendingTurn, TurnOptions, Writer
from app.services.turn_flow import TurnFlow
from app.services.summary_flow import SummaryFlow
from app.services.turn_start import Answering, NewAnswer, NewMessage
from engine import protocol as p
from model_store.conversations import Conversation, Message
from model_store.writer_lock import ConversationBusy
from ui.formatting import model_name
from ui.held_question import HeldQuestion, QuestionHolding
from ui.item_models.conversation_list import ConversationListModel
from ui.item_models.messages import MessageListModel
from ui.model_loading import ModelLoader
from ui.notices import MODEL, STORE
from ui.remote_text import answering_model, remote_name
from ui.store_thread import StoreThread
from ui.bridge import EngineBridge
from ui.conversation_browsing import ConversationBrowsing
from ui.database_notices import DatabaseFileNotices
from ui.summary_continuation import SummaryContinuation, continues_after
from ui.tool_rounds import ToolRounds
from app.services.tool_round import ToolResults


class ChatController(QObject, ModelLoader, QuestionHolding, DatabaseFileNotices, ConversationBrowsing,
                     SummaryContinuation, ToolRounds):
    generating_changed = Signal(bool)
    model_progress = Signal(str, float)  # (what is happening, fraction 0..1; -1 when done)
    model_loaded = Signal(object)  # p.ModelLoaded
    context_grown = Signal(object)  # p.ModelLoaded: the loaded model, with the longer context it has now
    model_failed = Signal(str)
    notice = Signal(str, str)  # (kind: info | warning | error, text) for the window's one banner
    notice_with_action = Signal(str, str, str, object)  # (kind, text, action's label, callable)
    passing_notice = Signal(str, str, str)  # (kind, text, cause): goes when cause_gone names its cause (ui.notices)
    cause_gone = Signal(str)  # a cause of ui.notices is gone (a model loaded, a write succeeded)
    conversation_notice = Signal(str, str)  # (kind, text) about the conversation on screen: goes when it is left
    status = Signal(str)  # the line under the chat header ("resumed from snapshot, …")
    telemetry = Signal(object)  # p.Telemetry
    conversation_changed = Signal(object)  # Conversation | None
    editing_changed = Signal(object)  # the user Message being edited, or None
    turn_finished = Signal(object)  # PendingTurn, after its answer is stored
    crash_loop = Signal(str)  # the worker crashed twice before decoding and is left down; the text says why
    send_refused = Signal(str)  # a message that was not sent (another writer, a failed load): its text
    tools_listed = Signal(object)  # (toolbox, specs, problems), from the listing thread (ui.tool_rounds)
    tool_done = Signal(object)  # (round, CallResult), from a tool's thread (ui.tool_rounds)

    def __init__(self, bridge: EngineBridge, store: StoreThread, settings: Settings,
                 conversations: ConversationListModel, messages: MessageListModel) -> None:
        super().__init__()
        self.bridge, self.store, self.settings = bridge, store, settings
        self.conversations, self.messages = conversations, messages
        self.conversation: Conversation | None = None
        self.editing: Message | None = None
        self.loaded: p.ModelLoaded | None = None
        self.model_ref = settings.model
        self.devices: list[p.DeviceInfo] = []  # what the worker found (Ready), CPU first
        self.search_text = ""
        # the turns in flight; this class is their screen
        self.turn_flow = TurnFlow(store.submit, self.bridge, self, WINDOW, load_transcript)
        # a turn too long for the model, continued in a new conversation (ui.summary_continuation)
        self.summary_flow = SummaryFlow(store.submit, self.bridge, self)
        self._continuing: set[str] = set()  # refused turns' request ids: continued once they are stored
        self._load_request: str | None = None
        self._open_request: str | None = None
        self._restarting = False
        self._mtp_note_for: str | None = None
        self.loading = False  # from the window's start until the model is in (or its load failed)
        self.held: HeldQuestion | None = None  # a question asked while loading, sent when the model is in
        self.name_model: Callable[[str], str] = model_name  # what the user calls a model (the window: the picker)
        # Asked before a message goes to the engine; False keeps it (ui.engine_choice: a remote engine's consent).
        self.before_sending: Callable[[], bool] = lambda: True
        # The user's "Think before answering" for the next turn (ui.thinking_choice), which a new conversation
        # keeps in its settings; None: the conversation's setting, else the model's default.
        self.thinking_choice: Callable[[], bool | None] = lambda: None
        self._init_tools()
        bridge.event.connect(self._on_event)
        bridge.died.connect(self._on_died)
        bridge.died.connect(self._summary_engine_died)
        bridge.ready.connect(self._on_ready)
        bridge.gave_up.connect(self._on_gave_up)
        bridge.crash_loop.connect(self._on_crash_loop)
        conversations.rename_requested.connect(self.rename)
        store.damaged.connect(self._on_damaged)
        store.read_only.connect(self._on_read_only)

    # -- start -----------------------------------------------------------------------------------

    def start(self) -> None:
        self.store.start()  # opening it tidies what a crash left (model_store.after_crash)
        self.tools_changed()  # the tools the user turned on, listed in the background
        self.refresh_list()
        self._loading_started(self.loading_text())  # said at once: the worker takes a while to start
        self.bridge.start()

    def shutdown(self) -> None:
        """Keep what is being written (marked interrupted), stop the worker, finish the store's work."""
        self.turn_flow.abandon("Hearth was closed before the answer was finished")
        self.stop_tools()
        self.bridge.stop()
        self.store.stop()
        if self._toolbox is not None:  # the MCP servers it started, stopped without holding the window
            threading.Thread(target=self._toolbox.close, name="hearth-tools-close").start()

    @property
    def generating(self) -> bool:
        return (self.turn_flow.busy or self.held is not None or self.summary_flow.busy or bool(self._continuing)
                or self.running_tools)

    def npu_kind(self) -> str | None:
        """``"npu"``, ``"npu-emulator"`` or None, from the worker's device probe."""
        kinds = [d.kind for d in self.devices if d.kind != "cpu" and d.available]
        return "npu" if "npu" in kinds else (kinds[0] if kinds else None)

    # -- turns -----------------------------------------------------------------------------------

    def _show_streaming_answers(self) -> None:
        """An answer streaming in the conversation just shown shows what it has written, not what is stored."""
        for turn in self.turn_flow.turns.values():
            if turn.n_deltas:
                self.messages.update_message(replace(turn.answer, content=turn.text, reasoning=turn.reasoning,
                                                     stats=_live_stats(turn)))

    def set_editing(self, message: Message | None) -> None:
        self.editing = message
        self.editing_changed.emit(message)

    def send(self, text: str) -> bool:
        """Send a message (or the edited version of one); while the model is loading, hold it and send
        it when the model is in (:mod:`ui.held_question`). False when it cannot be sent now."""
        text = text.strip()
        if not text or self.generating:
            return False
        if self.loaded is None and not self.loading:
            self.passing_notice.emit("warning", self._why_nothing_is_sent(), MODEL)
            return False
        if self.loaded is None:
            self._hold(text)
            return True
        if not self.before_sending():
            return False
        self._send_now(text)
        return True

    def _send_now(self, text: str) -> None:
        """Store the message (the edited version of :attr:`editing`, if one is edited) and have it answered."""
        conversation, editing = self.conversation, self.editing
        self.question_sent()
        self._begin(NewMessage(text, conversation.id if conversation else None, self.with_tools(self._options()),
                               model=self.model_ref,
                               reply_to=editing.parent_id if editing else None,
                               from_start=editing is not None and editing.parent_id is None))
        self.set_editing(None)

    def _why_nothing_is_sent(self) -> str:
        if self.bridge.held:
            return ("The engine is stopped after crashing, so your message was not sent; it is still in the "
                    "message box.")
        return "No model is loaded, so your message was not sent; it is still in the message box. Choose a model."

    def regenerate(self, answer_id: str | None = None) -> bool:
        """A new answer to the user message before ``answer_id`` (default: the last answer)."""
        target = self.answer_to_regenerate(answer_id)
        if target is None or self.generating:
            return False
        if self.loaded is None:
            self.passing_notice.emit("warning", "No model is loaded, so no new answer can be written; wait for it to "
                                                "load, or choose one.", MODEL)
            return False
        if not self.before_sending():
            return False
        self.question_sent()
        self._begin(NewAnswer(self.conversation, target.parent_id, self.with_tools(self._options())))
        return True

    def answer_to_regenerate(self, answer_id: str | None = None) -> Message | None:
        """The answer on screen that a regeneration would write again (default: the last one), if any."""
        if self.conversation is None:
            return None
        target = next((r.message for r in reversed(self.messages.rows()) if answer_id in (None, r.message.id)
                       and r.message.role == "assistant"), None)
        return target if target is not None and target.parent_id is not None else None

    def stop(self) -> None:
        """Stop the answer being written (it is kept, marked stopped); a question waiting for the model
        goes back to the message box."""
        self._give_back_held()
        self.stop_tools()
        self.turn_flow.stop()
        self.summary_flow.stop()

    def _options(self) -> TurnOptions:
        s = self.settings
        return TurnOptions(sampling_spec(s, self.sampling_defaults()), s.max_tokens, self._draft_choice(), s.draft_max,
                           enable_thinking=self.thinking_choice(), system_prompt=s.system_prompt,
                           when_full=s.when_full)

    def sampling_defaults(self) -> ResolvedSampling:
        """The loaded (or chosen) model's own sampling, with thinking as the next turn asks; what the
        user set in Settings goes on top (a remote engine's model: Hearth's defaults)."""
        thinking = self.thinking_choice()
        if thinking is None:
            thinking = self.loaded is not None and self.loaded.facts.thinks
        return model_sampling(self.model_path() if remote_name(self.model_ref) is None else None, thinking=thinking)

    def _draft_choice(self) -> str:
        """The drafting setting, except that MTP on a model without an MTP head falls back to auto
        (the setting is global, models are not): said once per model instead of failing answers."""
        draft = self.settings.draft
        if draft == "mtp" and self.loaded is not None and not self.loaded.facts.has_mtp:
            if self._mtp_note_for != self.model_ref:
                self._mtp_note_for = self.model_ref
                self.notice.emit("info", "This model has no MTP head, so drafting uses prompt lookup (auto).")
            return "auto"
        return draft

    def _begin(self, request: NewMessage | NewAnswer | ToolResults) -> None:
        self.turn_flow.begin(request, self._answering())
        self.generating_changed.emit(True)

    def _answering(self) -> Answering:
        """Who answers a turn sent now (app.services.turn_flow.Answering)."""
        local = self.loaded is not None and remote_name(self.model_ref) is None
        return Answering(answering_model(self.model_ref, self.loaded), self.loaded.facts if local else None)

    # -- the turn's steps, on screen (app.services.turn_flow.TurnScreen) -----------------------------

    def turn_started(self, conversation: Conversation, turn: PendingTurn, rows: list[MessageRow]) -> None:
        self.cause_gone.emit(STORE)  # the message was written: the database takes writes again
        self.show_conversation(conversation, rows)
        self.messages.update_message(replace(turn.answer, stats={"model": turn.model}))
        self._list_turn_in(conversation)

    def turn_not_saved(self, message: str, text: str) -> None:
        self.generating_changed.emit(self.generating)
        back = "; it is back in the message box" if text else ""
        self.passing_notice.emit("error", f"Could not save your message: {message.rstrip('.')}{back}.", STORE)
        if text:
            self.send_refused.emit(text)

    def turn_refused(self, busy: ConversationBusy, text: str) -> None:
        """Another window or command is answering in the conversation: nothing was stored or sent."""
        self.generating_changed.emit(self.generating)
        what = "your message was not sent; it is back in the message box" if text else "no new answer was started"
        self.conversation_notice.emit("warning", f"{_sentence(busy.holder.describe())} is answering in this conversation, so "
                                    f"{what}. Try again when that answer has finished.")
        if text:
            self.send_refused.emit(text)

    def turn_event(self, turn: PendingTurn, event: p.Event) -> None:
        if isinstance(event, p.PromptProgress):
            self.status.emit(f"Reading {event.processed:,} of {event.total:,} tokens…")
        elif isinstance(event, p.RemoteWaiting):  # a busy remote engine: said while the request waits
            self.status.emit(_sentence(event.message) + ".")
        elif continues_after(turn, event):  # said as the summary is written, not as an error
            self._continue_later(turn)
        elif isinstance(event, p.Error):
            self.conversation_notice.emit("error", event.message)
        elif isinstance(event, p.TokenDelta):  # only the delta: the answer is not copied per token
            if turn.n_deltas == 1:
                self.status.emit("")
            if event.reasoning:  # written before the delta's text
                self.messages.append_reasoning(turn.answer.id, event.reasoning)
            self.messages.append_text(turn.answer.id, event.text, _live_stats(turn))

    def turn_stored(self, turn: PendingTurn, problem: str = "") -> None:
        if problem:
            self.passing_notice.emit("error", f"Could not store the answer: {problem.rstrip('.')}. What was written "
                                              "stays on screen until the conversation is opened again.", STORE)
        else:
            self.cause_gone.emit(STORE)
            self.messages.update_message(turn.answer)
            if self.start_tool_round(turn):  # its calls run; the results go to the model when they are in
                self.generating_changed.emit(True)
                self.turn_finished.emit(turn)
                return
        self._maybe_continue(turn)
        self.generating_changed.emit(self.generating)
        if self.search_text:  # the answer's words may match the search now
            self.refresh_list()
        self.turn_finished.emit(turn)

    # -- engine events ---------------------------------------------------------------------------

    def _on_event(self, event: p.Event) -> None:
        rid = getattr(event, "request_id", None)
        if isinstance(event, p.Telemetry):
            self.telemetry.emit(event)
        elif isinstance(event, p.ContextGrown):  # for a turn or a document read: news about the model
            self._on_context_grown(event)
        elif self.turn_flow.take(event) or self.summary_flow.take(event):
            pass
        elif rid is not None and rid == self._load_request:
            self._on_model_event(event)
        elif isinstance(event, p.ConversationOpened) and rid == self._open_request:
            self._on_opened(event)
        elif isinstance(event, p.Error) and rid is None:
            self.notice.emit("error", event.message)


WINDOW = Writer("a Hearth window")  # never waits for another writer: the GUI thread must not block


def _live_stats(turn: PendingTurn) -> dict:
    """What a streaming answer shows of its statistics: which text came from drafts, the model, and
    how long it thought (once its answer has begun)."""
    stats = {"draft_spans": turn.draft_spans, "model": turn.model}
    if turn.thinking_s is not None:
        stats["thinking_s"] = turn.thinking_s
    return stats


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]
