"""What the app asks of the worker: one tagged struct per command (the handshake, loading, answers,
conversations, documents, calibration, cancel, telemetry, ping, shutdown)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

import msgspec

from engine.protocol.limits import (DEFAULTS, MAX_CALIBRATION_LENGTHS, MAX_CLOCK, MAX_CONSTRAINT_NAME, MAX_DRAFT,
                                    MAX_STORED_BYTES, MAX_TELEMETRY_INTERVAL_MS, MAX_THREADS, MAX_TOKENS,
                                    CalibrationLength, DraftLength, DraftPaths, KnownPrefix, MemoryPercent,
                                    SamplingSpec, SchemaText, TokenCount, WhenFull)
from engine.protocol.reports import KvType
from engine.protocol.tools import MAX_TOOLS, ToolCall, ToolCalls, ToolChoice, ToolId, ToolSpec, tool_part


class _Message(msgspec.Struct, tag_field="kind", forbid_unknown_fields=True, omit_defaults=False):
    pass


class Hello(_Message, tag="hello"):
    protocol_version: int
    user_dir: str = ""  # the app's data folder: the worker opens the conversation database there
    snapshot_budget_bytes: Annotated[int, msgspec.Meta(ge=0, le=MAX_STORED_BYTES)] = 4 * 1024**3
    cpu_variant: str = "auto"  # which CPU build of llama.cpp: "auto", "safe" or a build's name (engine.backends.cpu_check)


class WireMessage(msgspec.Struct, forbid_unknown_fields=True):
    """One message of a conversation as it crosses the pipe (what a template reads is
    engine.templates.chat_template.ChatMessage)."""

    role: str
    content: str
    id: str | None = None  # the stored message's id, so the worker can find its snapshot
    reasoning: str = ""  # an answer's reasoning, stored apart from it: the template decides whether to show it
    tool_calls: ToolCalls = []  # the calls an assistant message made (protocol 17)
    tool_call_id: ToolId = ""  # the call a ``tool`` message answers

    @property
    def tool_part(self) -> str:
        """The text the message's tool part hashes as (engine.protocol.tools.tool_part)."""
        return tool_part(self.tool_calls, self.tool_call_id)


class TemplateSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a chat template may read besides the messages (engine.templates.chat_template.RenderOptions):
    ``now``, the clock its ``strftime_now`` sees (a conversation's start, so a date it writes stays
    the same on every later day; None: the real clock), ``enable_thinking`` (None: the model's
    own default) and ``tools``, the functions the model is told it may call (protocol 17)."""

    now: Annotated[float, msgspec.Meta(ge=0, le=MAX_CLOCK)] | None = None
    enable_thinking: bool | None = None
    tools: Annotated[tuple[ToolSpec, ...], msgspec.Meta(max_length=MAX_TOOLS)] = ()


class LoadModel(_Message, tag="load_model"):
    request_id: str
    model: str  # "default" or a path (the app resolves installed models' ids to their paths)
    # 0 ("auto"): the longest context ``memory_percent`` % of the available memory holds, capped at
    # the trained length. Never under 256 tokens (llama.cpp's step); a fixed one is refused at once
    # when it cannot fit in memory (engine.context.context_memory). Either grows on demand (ContextGrown).
    n_ctx: TokenCount = 0
    kv_type: KvType = "f16"
    memory_percent: MemoryPercent = 0  # of the available memory an automatic context may fill; 0: the default
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
    write it as text; :func:`engine.protocol.draft_choice.parse_draft_spec` reads that. For
    ``auto``, ``path`` is the installed EAGLE-3 head the app found for the loaded model
    (app.services.draft_heads), tried first and passed over in silence if it does not fit."""

    kind: Literal["auto", "off", "lookup", "mtp", "model", "eagle3"] = "auto"
    # the draft model's or the EAGLE-3 head's file, for kinds "model" and "eagle3"; for "auto", a head to try first
    path: str | None = None


class OutputConstraint(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the answer must be: ``json``, any JSON object (the API's ``response_format: json_object``);
    ``json_schema``, JSON that matches ``schema`` (the schema's JSON text, checked and made by
    :func:`engine.protocol.constraint.constraint_from_schema_text`); ``grammar``, text that ``grammar``
    (llama.cpp's GBNF, rule ``root``) allows. ``name`` is the API's ``json_schema.name``, passed on to a
    remote engine. The worker holds decoding to it token by token (engine.decoding.constraint)."""

    kind: Literal["json", "json_schema", "grammar"]
    schema: SchemaText = ""
    grammar: SchemaText = ""
    name: Annotated[str, msgspec.Meta(max_length=MAX_CONSTRAINT_NAME)] = ""


class _Answering(_Message, kw_only=True):
    """What every task that writes an answer takes: how to sample, when to stop, how to draft, and
    what shape the answer must have (``constraint``; None: any text)."""

    request_id: str
    sampling: SamplingSpec = msgspec.field(default_factory=SamplingSpec)
    max_tokens: Annotated[int, msgspec.Meta(ge=1, le=MAX_TOKENS)] = DEFAULTS.max_tokens
    stop: list[str] = []
    draft: DraftSpec = msgspec.field(default_factory=lambda: DraftSpec(DEFAULTS.draft))
    draft_max: DraftLength = DEFAULTS.draft_max
    draft_auto_off: bool = True  # let measured speed switch a losing drafter off
    constraint: OutputConstraint | None = None  # protocol 16
    # how the answer may call the template's tools (protocol 17); None: calls it writes stay text
    tool_choice: ToolChoice | None = None


class Complete(_Answering, tag="complete", kw_only=True):
    """Continue ``prompt`` as plain text: no chat template, no conversation, nothing kept."""

    prompt: str


class Chat(_Answering, tag="chat", kw_only=True):
    """Answer the last of ``messages``, rendered with the model's chat template; nothing kept."""

    messages: list[WireMessage]
    known: KnownPrefix = ""
    template: TemplateSpec = TemplateSpec()
    when_full: WhenFull = "stop"  # "drop-oldest": leave the oldest exchanges out when they do not fit (engine.protocol.context_cut)


class KeepAnswer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Have the worker store the answer when it ends, as the app would (engine.requests.answer_keeper): under
    the conversation's writer lock (``writer_token``; "": the app took none), then let the next writer in."""

    writer_token: Annotated[str, msgspec.Meta(max_length=64)] = ""
    model: Annotated[str, msgspec.Meta(max_length=1024)] = ""  # the answer's stats name it
    started_at: Annotated[float, msgspec.Meta(ge=0, le=MAX_CLOCK)] = 0.0  # when the app began the turn


class AnswerTurn(_Answering, tag="answer_turn", kw_only=True):
    """Answer the last message of a conversation's branch: start from the deepest snapshot on it,
    read only what follows, snapshot the turn's end under ``answer_id``, and (with ``keep``) store
    the answer there too."""

    conversation_id: str
    answer_id: str  # the stored (empty) answer this request writes
    messages: list[WireMessage]  # the branch, each message with its id
    known: KnownPrefix = ""
    template: TemplateSpec = TemplateSpec()
    keep: KeepAnswer | None = None  # None: the app stores the answer from the events (a remote engine's way)
    # When the branch would not fit the longest context the model can have: "drop-oldest" leaves its
    # oldest exchanges out (never a leading system message nor the ``pinned`` ones: documents) and
    # ``Finished.context_cut`` says where; "stop" and "summary" refuse it ("context_full"), and the
    # app starts a new conversation from a summary for "summary" (engine.protocol.context_cut).
    when_full: WhenFull = DEFAULTS.when_full
    pinned: list[str] = []  # ids of messages that always stay in what the model reads (loaded documents)


Answer = Union[Complete, Chat, AnswerTurn]  # every request that ends with Finished
ANSWERS = Answer.__args__


class OpenConversation(_Message, tag="open_conversation"):
    """Restore the conversation's newest snapshot now (while the user reads and types), so the
    next ``AnswerTurn`` only reads the new message."""

    request_id: str
    conversation_id: str
    messages: list[WireMessage]
    known: KnownPrefix = ""
    template: TemplateSpec = TemplateSpec()


class MeasureText(_Message, tag="measure_text"):
    """Count a document's tokens with the loaded model; keep its first or last part if asked."""

    request_id: str
    text: str
    keep: Literal["all", "first", "last"] = "all"
    budget_tokens: TokenCount = 0  # 0: the context minus room for questions and answers


class ReadDocument(_Message, tag="read_document"):
    """Measure, read, report: check that the branch up to its last message (a document) fits the
    context with room for questions, read it, and snapshot the state under that message's id, so
    every question about the document starts from there. One that does not fit is not read: it ends
    with ``DocumentRead(finish_reason="too_long")`` and the numbers (``DocumentRoom``)."""

    request_id: str
    conversation_id: str
    messages: list[WireMessage]  # the branch, ending with the document's message (which has an id)
    known: KnownPrefix = ""
    template: TemplateSpec = TemplateSpec()
    grow: bool = True  # False: a document that fits only once the context grows ends "too_long" instead


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
