"""The wire protocol between the app and the worker process that owns the model.

Every message is a ``msgspec.Struct`` tagged by its ``kind`` field and encoded as msgpack in a
frame (see :mod:`engine.protocol.framing`). There are no pickles, no
exceptions and no method names on the wire: a frame that does not decode to a known message is
answered with an :class:`Error` and the worker keeps serving. The first exchange is
:class:`Hello` then :class:`Ready`; a different :data:`PROTOCOL_VERSION` ends the worker with a
clear error. Per-request messages carry ``request_id``. Text travels as deltas, never the whole
answer again; large data (state snapshots) never crosses the pipe, only ids and sizes.

The package: :mod:`~engine.protocol.limits` (each field's range, the sampling rules, the request
defaults), :mod:`~engine.protocol.commands`, :mod:`~engine.protocol.events` (with how a request ends),
:mod:`~engine.protocol.codec` and :mod:`~engine.protocol.constraint` (the JSON schemas an answer can be
held to, checked the same on both sides). It imports nothing from the backends or the store. This module
names every wire type, so ``from engine import protocol as p`` reaches them all.
"""

from engine.protocol.codec import check_command, decode_command, decode_event, encode  # noqa: F401
from engine.protocol.commands import (  # noqa: F401
    ANSWERS, CARRIES_BRANCH, Answer, AnswerTurn, Calibrate, Cancel, Chat, WireMessage, Command, Complete, DraftSpec, Hello,
    KeepAnswer, LoadModel, MeasureText, OpenConversation, OutputConstraint, Ping, ReadDocument, SetTelemetry, Shutdown,
    TemplateSpec, UnloadModel,
)
from engine.protocol.events import (  # noqa: F401
    CLOSING_EVENTS, UNAVAILABLE, Calibrated, ContextCut, ContextGrown, ConversationOpened, DocumentRead, DocumentRoom, Error,
    ErrorCode, Event, Finished, ModelFacts, ModelLoaded, ModelLoading, ModelUnloaded, Pong, PromptProgress, Ready,
    RemoteWaiting, Telemetry, TextMeasured, TokenDelta, Unavailable, closes_with_its_own_event, closing_event,
    ends_request, failure_events,
)
from engine.protocol.limits import (  # noqa: F401
    DEFAULTS, MAX_CALIBRATION_LENGTHS, MAX_CLOCK, MAX_CONSTRAINT_NAME, MAX_DRAFT, MAX_DRAFT_PATHS, MAX_PERCENT,
    MAX_SCHEMA_BYTES, MAX_STORED_BYTES, MAX_TELEMETRY_INTERVAL_MS, MAX_THREADS, MAX_TOKENS, MIN_CALIBRATION_LENGTH,
    PROTOCOL_VERSION, REPEAT_PENALTY_RANGE,
    REPEAT_WHOLE_ANSWER, REPEAT_WINDOW, DRY_MULTIPLIER_RANGE,
    CalibrationLength, DraftLength, DraftPaths, KnownPrefix, MemoryPercent, RequestDefaults,
    SamplingSpec, SchemaText, TokenCount, WHEN_FULL_CHOICES, WhenFull, sampling_problem,
)
from engine.protocol.constraint import constraint_from_schema_text, schema_problem  # noqa: F401
from engine.protocol.command_check import InvalidCommand  # noqa: F401
from engine.protocol.reports import DraftStats, Timings  # noqa: F401
from engine.protocol.reports import (CanaryReport, ContextReport, CpuBackendInfo, DeviceInfo, DevicePlan, KvType,  # noqa: F401
                            NpuGraphReport, PhaseDevice, RemoteReport, SnapshotReport)
from engine.protocol.tools import ToolCall, ToolChoice, ToolSpec, calls_of, tool_part  # noqa: F401
