"""What the worker tells the app: one tagged struct per event, and how a request ends
(:func:`ends_request`: every request ends with exactly one event for which it is true)."""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec

from engine.protocol.commands import ANSWERS, ReadDocument, _Message
from engine.protocol.reports import DraftStats, Timings
from engine.protocol.tools import ToolCall
from engine.protocol.reports import (ContextReport, CpuBackendInfo, DeviceInfo, DevicePlan, NpuGraphReport, RemoteReport,
                            SnapshotReport)

Unavailable = Literal["unavailable"]
UNAVAILABLE: Unavailable = "unavailable"


class ModelFacts(msgspec.Struct, frozen=True):
    """What a loaded model is; sent to the GUI and printed by ``hearth info``."""

    path: str
    file_bytes: int
    arch: str
    name: str
    description: str
    n_params: int
    size_bytes: int
    n_ctx_train: int
    n_embd: int
    n_layer: int
    n_layer_mtp: int
    n_vocab: int
    is_recurrent: bool
    is_hybrid: bool
    supports_rollback: bool
    has_chat_template: bool
    backend_version: str
    # what its chat template does about reasoning (engine.templates.prompts.thinking_facts): whether the answer
    # starts in a <think> block by default, and whether ``enable_thinking`` switches that
    thinks: bool = False
    thinking_switch: bool = False
    # the form its model writes function calls in (engine.templates.tool_formats: "qwen-xml", "hermes", "lfm2",
    # "llama3"); "": its template takes no tools, so none are offered to it
    tool_form: str = ""

    # -- what the model can do, read everywhere from here (never recomputed from is_recurrent/is_hybrid) --

    @property
    def has_recurrent_state(self) -> bool:
        """A fixed-size recurrent state (SSM, Gated DeltaNet, short convolutions) besides or instead of attention."""
        return self.is_recurrent or self.is_hybrid

    @property
    def has_attention_kv(self) -> bool:
        """An attention KV cache that grows with every token (every model but a purely recurrent one)."""
        return self.is_hybrid or not self.is_recurrent

    @property
    def can_roll_back(self) -> bool:
        """Whether rejected draft tokens can be taken back out of the state (a KV cache always can;
        a recurrent state only through llama.cpp's rollback planes)."""
        return self.supports_rollback or not self.has_recurrent_state

    @property
    def has_mtp(self) -> bool:
        """A multi-token-prediction head that can draft for the model itself."""
        return self.n_layer_mtp > 0


class Ready(_Message, tag="ready"):
    protocol_version: int
    versions: dict[str, str]
    devices: list[DeviceInfo]
    pid: int
    cpu: CpuBackendInfo | None = None


class ModelLoading(_Message, tag="model_loading"):
    request_id: str
    phase: str  # "check", "load", "context"
    fraction: float


class ModelLoaded(_Message, tag="model_loaded"):
    request_id: str
    facts: ModelFacts
    n_ctx: int
    context: ContextReport
    devices: DevicePlan
    found_devices: list[DeviceInfo] = []  # the finished device probe (Ready may have been sent before it ended)
    npu_graph: NpuGraphReport | None = None  # set when the device plan may prefill on the NPU


class ContextGrown(_Message, tag="context_grown"):
    """A request needed more context than the model had: the worker made a longer one, restored the
    conversation's snapshot into it and went on with the request."""

    request_id: str
    previous_n_ctx: int
    context: ContextReport


class ModelUnloaded(_Message, tag="model_unloaded"):
    request_id: str


class PromptProgress(_Message, tag="prompt_progress"):
    request_id: str
    processed: int
    total: int
    elapsed_ms: float
    estimated: bool = False  # an estimate sent while a long chunk is being read; an exact count follows


class TokenDelta(_Message, tag="token_delta"):
    """New text of an answer. An empty one (no text, no tokens) says the first token was the end."""

    request_id: str
    text: str
    n_tokens: int
    n_from_draft: int = 0
    draft_spans: list[tuple[int, bool]] = []  # (characters, from an accepted draft) covering text
    reasoning: str = ""  # new reasoning text, written before this delta's ``text`` (engine.decoding.reasoning)


class ConversationOpened(_Message, tag="conversation_opened"):
    request_id: str
    snapshot: SnapshotReport


class TextMeasured(_Message, tag="text_measured"):
    request_id: str
    tokens: int  # of the whole text
    budget_tokens: int  # how many a document may have in this context
    fits: bool
    kept_text: str = ""  # the first or last part that fits (empty when ``keep`` was "all")
    kept_tokens: int = 0
    # the budget if the context grew to the longest the memory holds now (engine.context.context_growth):
    # a text within it can be read whole, the context growing as it is read
    grown_budget_tokens: int = 0


class Calibrated(_Message, tag="calibrated"):
    request_id: str
    calibration: dict  # engine.devices.calibration.Calibration.to_dict()
    crossover: int | None  # shortest new input the NPU reads faster; None: the CPU is faster (or no NPU)
    notes: list[str] = []  # devices left out, and why


class DocumentRoom(_Message, tag="document_room"):
    """What a conversation's context leaves for a document, measured on the rendered conversation."""

    tokens: int  # the document message's own tokens
    held_tokens: int  # the rendered conversation before it (system prompt, messages, the template's markers)
    budget_tokens: int  # how many the document may have in the context as it is, leaving room for questions
    grown_budget_tokens: int  # the same, in the longest context the memory holds now (= budget: it cannot grow)


class DocumentRead(_Message, tag="document_read"):
    request_id: str
    # "too_long": nothing was read, because the document does not fit (``room`` says by how much)
    finish_reason: Literal["stop", "cancelled", "error", "too_long"]
    tokens: int  # tokens read for the document
    timings: Timings
    snapshot: SnapshotReport | None = None
    room: DocumentRoom | None = None  # set when the finish reason is "too_long"


class ContextCut(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where a turn's branch was cut so it fits: the model read from ``first_kept_id`` on (after the
    system prompt and the pinned messages), leaving ``left_out`` more messages out than it was sent."""

    first_kept_id: str
    left_out: int


class Finished(_Message, tag="finished"):
    request_id: str
    finish_reason: Literal["stop", "length", "cancelled", "error", "tool_calls"]
    timings: Timings
    token_ids: list[int] = []
    snapshot: SnapshotReport | None = None
    draft: DraftStats | None = None
    devices: DevicePlan | None = None  # the devices that actually ran this request's phases, and why
    remote: RemoteReport | None = None  # set when a remote engine answered (app.engine_clients.remote)
    # what ended a "length" answer: "max_tokens" (the request's limit) or "context" (the context is full);
    # "" for any other finish, or where it is not known
    cut_by: Literal["", "max_tokens", "context"] = ""
    # the worker stored the answer (AnswerTurn.keep) before sending this, and let the conversation's next
    # writer in: the app stores nothing more (app.services.turn.end_answer)
    answer_stored: bool = False
    # the oldest messages were left out of what the model read, so the branch fits (AnswerTurn.when_full)
    context_cut: ContextCut | None = None
    # the calls the answer made ("tool_calls"), found in what the model wrote (engine.templates.tool_formats)
    tool_calls: list[ToolCall] = []
    # why calls the model wrote were left as text (bad JSON, an unknown function, cut off); "" otherwise
    tool_problem: str = ""


class RemoteWaiting(_Message, tag="remote_waiting"):
    """A remote engine said it is busy (429, 503) before the answer began: the request is sent again
    after ``wait_s`` seconds (app.engine_clients.remote.retry). ``message`` says so in words."""

    request_id: str
    message: str
    wait_s: float
    attempt: int  # the try that comes next: 2, 3, ...


class Pong(_Message, tag="pong"):
    request_id: str


class Telemetry(_Message, tag="telemetry"):
    t: float  # wall-clock seconds
    rss_bytes: int
    available_bytes: int
    model_bytes: int  # 0 when no model is loaded
    state_fixed_bytes: int  # recurrent part of the live sequence (does not grow)
    state_kv_bytes: int  # attention KV of the live sequence (grows per token)
    cpu_temp_c: float | Unavailable
    cpu_freq_mhz: float | Unavailable
    cpu_freq_max_mhz: float | Unavailable
    throttled: bool | Unavailable
    prefill_tok_s: float  # sliding window; 0 when idle
    decode_tok_s: float
    ttft_ms: float | Unavailable  # of the latest request
    draft_acceptance: float | Unavailable
    phase_devices: dict[str, str]  # phase -> device that ran it last
    phase: Literal["idle", "prefill", "decode"] = "idle"  # what the engine is doing now (a rate can be 0 mid-phase)
    kv_allocated_bytes: int = 0  # the attention cache the context holds for all its tokens (state_kv_bytes: used)
    remote: str = ""  # a remote engine's name: the rates are measured from its stream; memory is not this computer's


ErrorCode = Literal[
    "bad_frame", "bad_message", "protocol_mismatch", "no_model", "model_load_failed", "bad_request",
    "generation_failed", "internal", "cpu_unsupported", "context_full", "cancelled",
    # a remote engine (app.engine_clients.remote): the message says what happened and what to do
    "remote_unreachable", "remote_tls", "remote_auth", "remote_model", "remote_busy", "remote_timeout",
    "remote_disconnected", "remote_bad_reply", "remote_refused",
]


class Error(_Message, tag="error"):
    code: ErrorCode
    message: str
    request_id: str | None = None
    # whether it ends its request: False when the request's own closing event follows it (an answer's
    # Finished, a document read's DocumentRead: see :func:`ends_request`)
    final: bool = True


Event = Union[
    Ready, ModelLoading, ModelLoaded, ModelUnloaded, PromptProgress, TokenDelta, Finished, ConversationOpened, Pong,
    Telemetry, Error, TextMeasured, DocumentRead, Calibrated, ContextGrown, RemoteWaiting,
]

# -------------------------------------------------------------------------------- how a request ends
# Every request ends with exactly one event for which ends_request() is true, as llama.cpp's server
# results say is_stop(). A failed answer or document read ends with its own closing event after the
# Error (so its caller always gets the stats and the finish reason); any other failed request ends
# with its Error. The worker keeps this (engine.protocol.request_lifecycle); every client follows the flag.

CLOSING_EVENTS = (Finished, ModelLoaded, ModelUnloaded, Pong, ConversationOpened, TextMeasured, DocumentRead,
                  Calibrated)


def ends_request(event: Event) -> bool:
    """Whether ``event`` is the last one of its request."""
    if isinstance(event, Error):
        return event.request_id is not None and event.final
    return isinstance(event, CLOSING_EVENTS)


def closes_with_its_own_event(kind: str) -> bool:
    """Whether a request of this kind (its tag) ends with its own closing event even when it fails."""
    return kind in _OWN_CLOSING


def failure_events(kind: str, request_id: str, code: ErrorCode, message: str,
                   reason: Literal["error", "cancelled"] = "error") -> list[Event]:
    """How a request of ``kind`` that failed ends: its Error, then its own closing event if it has one."""
    if kind not in _OWN_CLOSING:
        return [Error(code=code, message=message, request_id=request_id)]
    return [Error(code=code, message=message, request_id=request_id, final=False),
            closing_event(kind, request_id, reason)]


def closing_event(kind: str, request_id: str, reason: str, **report: Any) -> Event:
    """The closing event of an answer or a document read (``kind``, its tag) that ended with ``reason``;
    ``report`` holds its other fields (timings, tokens read, ...), none when it has nothing to report.
    The worker and the remote client end a request with it alike."""
    timings = report.pop("timings", None) or Timings()
    if kind == ReadDocument.__struct_config__.tag:
        return DocumentRead(request_id=request_id, finish_reason=reason, tokens=report.pop("tokens", 0),
                            timings=timings, **report)
    return Finished(request_id=request_id, finish_reason=reason, timings=timings, **report)


_OWN_CLOSING = frozenset(cls.__struct_config__.tag for cls in (*ANSWERS, ReadDocument))
