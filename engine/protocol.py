"""The wire protocol between the app and the worker process that owns the model.

Every message is a ``msgspec.Struct`` tagged by its ``kind`` field and encoded as msgpack in a
frame (see :mod:`engine.framing`). There are no pickles, no
exceptions and no method names on the wire: a frame that does not decode to a known message is
answered with an :class:`Error` and the worker keeps serving. The first exchange is
:class:`Hello` then :class:`Ready`; a different :data:`PROTOCOL_VERSION` ends the worker with a
clear error. Per-request messages carry ``request_id``. Text travels as deltas, never the whole
answer again; large data (state snapshots) never crosses the pipe, only ids and sizes.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, Union

import msgspec

from engine.backends.base import ModelFacts
from engine.command_check import InvalidCommand, out_of_range, shown
from engine.records import DraftStats, Timings
from engine.reports import (CanaryReport, ContextReport, CpuBackendInfo, DeviceInfo, DevicePlan, KvType,  # noqa: F401
                            NpuGraphReport, PhaseDevice, RemoteReport, SnapshotReport)
from model_store.fit import BUDGET_PERCENT_RANGE, DEFAULT_BUDGET_PERCENT

PROTOCOL_VERSION = 10

Unavailable = Literal["unavailable"]
UNAVAILABLE: Unavailable = "unavailable"


# ------------------------------------------------------------------- the ranges of numeric fields
# One limit per field, checked whenever a command is decoded: by the worker, and by the app before it
# sends (check_command). A value llama.cpp cannot take is refused in words, never passed on to abort
# the worker. Sampling settings are checked by sampling_problem.

MAX_TOKENS = 2**31 - 1  # llama.cpp's positions are int32: no context, answer or document is longer
# A verify batch (draft + 1 token) must stay under the CPU builds' exact-rows bound (16, see
# installers/llama_build.py), so a longer draft is never used. The same number sizes a hybrid model's
# rollback planes (n_rs_seq), which llama.cpp needs below its micro-batch (n_ubatch > n_rs_seq + 1).
MAX_DRAFT = 14
# Paths a tree of drafts verifies at once. Each is a sequence with its own recurrent state (and rollback
# planes), and every path's rows share one verify batch, which must stay under the same 16-row bound.
MAX_DRAFT_PATHS = 4
MAX_THREADS = 512  # GGML_MAX_N_THREADS
MAX_TELEMETRY_INTERVAL_MS = 3_600_000  # an hour (0 switches telemetry off)
MAX_CALIBRATION_LENGTHS = 32
MIN_CALIBRATION_LENGTH = 2  # a prefill timing needs a token before the one it reads
MAX_STORED_BYTES = 2**63 - 1  # sizes kept in SQLite, whose integers are 64-bit signed
MAX_CLOCK = 253_402_300_799.0  # 9999-12-31T23:59:59Z: the last moment a template's date can show

Tokens = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKENS)]  # 0 means "the default" where a field says so
DraftLength = Annotated[int, msgspec.Meta(ge=1, le=MAX_DRAFT)]
DraftPaths = Annotated[int, msgspec.Meta(ge=1, le=MAX_DRAFT_PATHS)]
CalibrationLength = Annotated[int, msgspec.Meta(ge=MIN_CALIBRATION_LENGTH, le=MAX_TOKENS)]


class _Message(msgspec.Struct, tag_field="kind", forbid_unknown_fields=True, omit_defaults=False):
    pass


# ---------------------------------------------------------------------------------------- commands


class Hello(_Message, tag="hello"):
    protocol_version: int
    user_dir: str = ""  # the app's data folder: the worker opens the conversation database there
    snapshot_budget_bytes: Annotated[int, msgspec.Meta(ge=0, le=MAX_STORED_BYTES)] = 4 * 1024**3
    cpu_variant: str = "auto"  # which CPU build of llama.cpp: "auto", "safe" or a build's name (engine.backends.cpu_check)


class SamplingSpec(msgspec.Struct, forbid_unknown_fields=True):
    """How the next token is drawn; these defaults are the only ones (see :data:`DEFAULTS`).
    ``top_k=0``, ``top_p=1`` and ``min_p=0`` switch a transform off; ``temperature=0`` is greedy.
    ``repeat_penalty`` (llama.cpp's rule; 1 = off) makes tokens of the answer's last
    :data:`REPEAT_WINDOW` tokens less likely (see :mod:`engine.sampling`)."""

    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    seed: int | None = None
    repeat_penalty: float = 1.0


REPEAT_PENALTY_RANGE = (1.0, 2.0)  # 1 = off; above 2 a model can no longer repeat even a needed word
REPEAT_WINDOW = 64  # the answer's last tokens the repeat penalty looks at (llama.cpp's penalty_last_n)


def sampling_problem(name: str, value: object) -> str | None:
    """What is wrong with a sampling setting's value, in words; None if it can be used. (The one
    place for these rules: the protocol, the settings form and the sampler all ask here.)"""
    if name == "temperature" and not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        return f"temperature must be 0 (greedy) or positive, got {shown(value)}"
    if name == "top_k" and value < 0:
        return f"top-k must be 0 (off) or a positive count, got {shown(value)}"
    if name == "top_p" and not 0 < value <= 1:
        return f"top-p must be in (0, 1], got {shown(value)}"
    if name == "min_p" and not 0 <= value < 1:
        return f"min-p must be in [0, 1), got {shown(value)}"
    if name == "seed" and value is not None and not 0 <= value < 2**63:
        return f"seed must be a non-negative integer below 2**63, got {shown(value)}"
    if name == "repeat_penalty" and not (isinstance(value, (int, float))
                                         and REPEAT_PENALTY_RANGE[0] <= value <= REPEAT_PENALTY_RANGE[1]):
        low, high = REPEAT_PENALTY_RANGE
        return f"repeat penalty must be between {low:g} (off) and {high:g}, got {shown(value)}"
    return None


class RequestDefaults(msgspec.Struct, frozen=True):
    """What a request asks for when nobody says otherwise: the CLI's flags, the first settings and
    the protocol's own fields all start from :data:`DEFAULTS`, so they cannot drift apart."""

    sampling: SamplingSpec = msgspec.field(default_factory=SamplingSpec)
    max_tokens: int = 1024
    draft: Literal["auto", "off", "lookup", "mtp"] = "auto"  # drafting never changes the output
    draft_max: int = 4
    draft_paths: int = 1  # one chain of drafts a round; 2 and more: a tree (see engine.speculative.tree_source)


DEFAULTS = RequestDefaults()


def add_span(spans: list[list], chars: int, drafted: bool) -> None:
    """Extend ``spans`` (runs of ``[characters, from an accepted draft]`` covering a text) by ``chars``
    characters: the last run grows when it has the same origin, else a run starts; none for 0. The
    one rule for draft spans, in the engine's text stream, its coalesced deltas and the stored answer."""
    if spans and spans[-1][1] == drafted:
        spans[-1][0] += chars
    elif chars:
        spans.append([chars, drafted])


class ChatTurn(msgspec.Struct, forbid_unknown_fields=True):
    role: str
    content: str
    id: str | None = None  # the stored message's id, so the worker can find its snapshot
    reasoning: str = ""  # an answer's reasoning, stored apart from it: the template decides whether to show it


class TemplateSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a chat template may read besides the messages (engine.chat_template.RenderOptions):
    ``now``, the clock its ``strftime_now`` sees (a conversation's start, so a date it writes stays
    the same on every later day; None: the real clock), and ``enable_thinking`` (None: the model's
    own default)."""

    now: Annotated[float, msgspec.Meta(ge=0, le=MAX_CLOCK)] | None = None
    enable_thinking: bool | None = None


# The digest of the leading messages of a branch that the worker was sent in an earlier request;
# the request's ``messages`` are then only the ones after them (see engine.transcripts). "": none.
KnownPrefix = Annotated[str, msgspec.Meta(max_length=64)]

BudgetPercent = Annotated[int, msgspec.Meta(ge=BUDGET_PERCENT_RANGE[0], le=BUDGET_PERCENT_RANGE[1])]


class LoadModel(_Message, tag="load_model"):
    request_id: str
    model: str  # "default" or a path (the app resolves installed models' ids to their paths)
    # 0 ("auto"): the longest context ``memory_percent`` % of the available memory holds, capped at
    # the trained length. Never under 256 tokens (llama.cpp's step); a fixed one is refused at once
    # when it cannot fit in memory (engine.context_memory). Either grows on demand (ContextGrown).
    n_ctx: Tokens = 0
    kv_type: KvType = "f16"
    memory_percent: BudgetPercent = DEFAULT_BUDGET_PERCENT
    n_threads: Annotated[int, msgspec.Meta(ge=0, le=MAX_THREADS)] = 0  # 0: one per available core
    # longest draft a hybrid model can roll back (sizes its recurrent snapshot planes); 0: none
    draft_max: Annotated[int, msgspec.Meta(ge=0, le=MAX_DRAFT)] = 4
    # draft paths verified at once (1: a chain); each sizes one more recurrent state with its planes
    draft_paths: DraftPaths = DEFAULTS.draft_paths
    device_policy: Literal["auto", "cpu", "npu"] = "auto"  # where prefill may run (see engine.devices.router)
    calibration: dict | None = None  # measured prefill speeds (engine.devices.calibration); None: never calibrated
    # what the app calls the model (app.services.model_refs.model_display_name): the worker names it so;
    # "": the file's own general.name
    name: str = ""


class UnloadModel(_Message, tag="unload_model"):
    request_id: str


class DraftSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Which drafter may propose tokens (it never changes the output): ``auto``, ``off``,
    ``lookup`` (prompt lookup), ``mtp`` (the model's own MTP head), ``model`` (a small draft
    model at ``path``) or ``eagle3`` (an EAGLE-3 head made for the target, at ``path``). Users
    write it as text; :func:`engine.speculative.draft_choice.parse_draft_spec` reads that. For
    ``auto``, ``path`` is the installed EAGLE-3 head the app found for the loaded model
    (app.services.draft_heads), tried first and passed over in silence if it does not fit."""

    kind: Literal["auto", "off", "lookup", "mtp", "model", "eagle3"] = "auto"
    # the draft model's or the EAGLE-3 head's file, for kinds "model" and "eagle3"; for "auto", a head to try first
    path: str | None = None


class _Answering(_Message, kw_only=True):
    """What every task that writes an answer takes: how to sample, when to stop, how to draft."""

    request_id: str
    sampling: SamplingSpec = msgspec.field(default_factory=SamplingSpec)
    max_tokens: Annotated[int, msgspec.Meta(ge=1, le=MAX_TOKENS)] = DEFAULTS.max_tokens
    stop: list[str] = []
    draft: DraftSpec = msgspec.field(default_factory=lambda: DraftSpec(DEFAULTS.draft))
    draft_max: DraftLength = DEFAULTS.draft_max
    draft_auto_off: bool = True  # let measured speed switch a losing drafter off


class Complete(_Answering, tag="complete", kw_only=True):
    """Continue ``prompt`` as plain text: no chat template, no conversation, nothing kept."""

    prompt: str


class Chat(_Answering, tag="chat", kw_only=True):
    """Answer the last of ``messages``, rendered with the model's chat template; nothing kept."""

    messages: list[ChatTurn]
    known: KnownPrefix = ""
    template: TemplateSpec = TemplateSpec()


class AnswerTurn(_Answering, tag="answer_turn", kw_only=True):
    """Answer the last message of a conversation's branch: start from the deepest snapshot on it,
    read only what follows, and snapshot the turn's end under ``answer_id``."""

    conversation_id: str
    answer_id: str  # the stored (empty) answer this request writes
    messages: list[ChatTurn]  # the branch, each message with its id
    known: KnownPrefix = ""
    template: TemplateSpec = TemplateSpec()


Answer = Union[Complete, Chat, AnswerTurn]  # every request that ends with Finished
ANSWERS = Answer.__args__


class OpenConversation(_Message, tag="open_conversation"):
    """Restore the conversation's newest snapshot now (while the user reads and types), so the
    next ``AnswerTurn`` only reads the new message."""

    request_id: str
    conversation_id: str
    messages: list[ChatTurn]
    known: KnownPrefix = ""
    template: TemplateSpec = TemplateSpec()


class MeasureText(_Message, tag="measure_text"):
    """Count a document's tokens with the loaded model; keep its first or last part if asked."""

    request_id: str
    text: str
    keep: Literal["all", "first", "last"] = "all"
    budget_tokens: Tokens = 0  # 0: the context minus room for questions and answers


class ReadDocument(_Message, tag="read_document"):
    """Read the branch up to its last message (a document) and snapshot the state under that
    message's id: every question about the document then starts from there."""

    request_id: str
    conversation_id: str
    messages: list[ChatTurn]  # the branch, ending with the document's message (which has an id)
    known: KnownPrefix = ""
    template: TemplateSpec = TemplateSpec()


class Calibrate(_Message, tag="calibrate"):
    """Measure the loaded model's prefill speed per device at a few input lengths (see
    engine.devices.measure); the answer is ``Calibrated``, which the app stores in its settings."""

    request_id: str
    # [] : a default set that fits the context; lengths that do not fit the context are left out
    lengths: Annotated[list[CalibrationLength], msgspec.Meta(max_length=MAX_CALIBRATION_LENGTHS)] = []
    include_emulator: bool = False  # also time the NPU emulator (slow; never used automatically)


class Cancel(_Message, tag="cancel"):
    request_id: str


class SetTelemetry(_Message, tag="set_telemetry"):
    interval_ms: Annotated[int, msgspec.Meta(ge=0, le=MAX_TELEMETRY_INTERVAL_MS)]  # 0 switches telemetry off


class Ping(_Message, tag="ping"):
    request_id: str


class Shutdown(_Message, tag="shutdown"):
    mode: Literal["drain", "abort"] = "drain"


Command = Union[
    Hello, LoadModel, UnloadModel, Complete, Chat, AnswerTurn, OpenConversation, MeasureText, ReadDocument,
    Calibrate, Cancel, SetTelemetry, Ping, Shutdown,
]
CARRIES_BRANCH = (Chat, AnswerTurn, OpenConversation, ReadDocument)  # requests with ``messages`` and ``known``

# ------------------------------------------------------------------------------------------ events


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
    reasoning: str = ""  # new reasoning text, written before this delta's ``text`` (engine.reasoning)


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
    # the budget if the context grew to the longest the memory holds now (engine.context_growth):
    # a text within it can be read whole, the context growing as it is read
    grown_budget_tokens: int = 0


class Calibrated(_Message, tag="calibrated"):
    request_id: str
    calibration: dict  # engine.devices.calibration.Calibration.to_dict()
    crossover: int | None  # shortest new input the NPU reads faster; None: the CPU is faster (or no NPU)
    notes: list[str] = []  # devices left out, and why


class DocumentRead(_Message, tag="document_read"):
    request_id: str
    finish_reason: Literal["stop", "cancelled", "error"]
    tokens: int  # tokens read for the document
    timings: Timings
    snapshot: SnapshotReport | None = None


class Finished(_Message, tag="finished"):
    request_id: str
    finish_reason: Literal["stop", "length", "cancelled", "error"]
    timings: Timings
    token_ids: list[int] = []
    snapshot: SnapshotReport | None = None
    draft: DraftStats | None = None
    devices: DevicePlan | None = None  # the devices that actually ran this request's phases, and why
    remote: RemoteReport | None = None  # set when a remote engine answered (engine.remote)
    # what ended a "length" answer: "max_tokens" (the request's limit) or "context" (the context is full);
    # "" for any other finish, or where it is not known
    cut_by: Literal["", "max_tokens", "context"] = ""


class RemoteWaiting(_Message, tag="remote_waiting"):
    """A remote engine said it is busy (429, 503) before the answer began: the request is sent again
    after ``wait_s`` seconds (engine.remote.retry). ``message`` says so in words."""

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
    # a remote engine (engine.remote): the message says what happened and what to do
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
# with its Error. The worker keeps this (engine.request_lifecycle); every client follows the flag.

CLOSING_EVENTS = (Finished, ModelLoaded, ModelUnloaded, Pong, ConversationOpened, TextMeasured, DocumentRead, Calibrated)


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
    return [Error(code=code, message=message, request_id=request_id, final=False), closing_event(kind, request_id, reason)]


def closing_event(kind: str, request_id: str, reason: Literal["error", "cancelled"]) -> Event:
    """The closing event of an answer or a document read that ended with ``reason`` and nothing to report."""
    if kind == ReadDocument.__struct_config__.tag:
        return DocumentRead(request_id=request_id, finish_reason=reason, tokens=0, timings=Timings())
    return Finished(request_id=request_id, finish_reason=reason, timings=Timings())


_OWN_CLOSING = frozenset(cls.__struct_config__.tag for cls in (*ANSWERS, ReadDocument))

# ------------------------------------------------------------------------------------- encoding

_encoder = msgspec.msgpack.Encoder()
_command_decoder = msgspec.msgpack.Decoder(Command)
_event_decoder = msgspec.msgpack.Decoder(Event)
_COMMANDS = {cls.__struct_config__.tag: cls for cls in Command.__args__}


def encode(message: msgspec.Struct) -> bytes:
    return _encoder.encode(message)


def decode_command(payload: bytes) -> Command:
    """The command in ``payload``. Raises :class:`InvalidCommand` (a ``msgspec.ValidationError``)
    naming the field and its range when a value is out of range, and ``msgspec.DecodeError`` /
    ``msgspec.ValidationError`` saying what is wrong with a malformed message."""
    try:
        command = _command_decoder.decode(payload)
    except msgspec.ValidationError as exc:
        raise (out_of_range(exc, payload, _COMMANDS) or exc) from None
    if isinstance(command, ANSWERS):
        _check_answer(command)
    return command


def check_command(command: Command) -> Command:
    """``command`` as the worker will read it: the app calls this before sending, so a value out of
    range is refused here with the same :class:`InvalidCommand` the worker would answer with."""
    return decode_command(encode(command))


def _check_answer(command: Answer) -> None:
    """What a type cannot say: each sampling value's range, and a draft model's path."""
    kind = command.__struct_config__.tag
    spec = command.sampling
    for name in spec.__struct_fields__:
        value = getattr(spec, name)
        if (problem := sampling_problem(name, value)) is not None:
            raise InvalidCommand(problem, kind=kind, field=f"sampling.{name}", value=value, allowed=None,
                                 request_id=command.request_id)
    if command.draft.kind == "model" and not command.draft.path:
        raise InvalidCommand("a draft model needs the path of its .gguf file (model:PATH)", kind=kind,
                             field="draft.path", value=command.draft.path, allowed=None,
                             request_id=command.request_id)


def decode_event(payload: bytes) -> Event:
    return _event_decoder.decode(payload)
