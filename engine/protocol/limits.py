"""The wire's limits and defaults: the range of every numeric field, the sampling rules and what a
request asks for when nobody says otherwise (:data:`DEFAULTS`), so the CLI's flags, the first
settings and the protocol's own fields cannot drift apart."""

from __future__ import annotations

import math
from typing import Annotated, Literal

import msgspec

from engine.protocol.command_check import shown

PROTOCOL_VERSION = 17  # 14: SamplingSpec.repeat_last_n; 15: SamplingSpec.dry_multiplier; 16: OutputConstraint; 17: tools

# ------------------------------------------------------------------- the ranges of numeric fields
# One limit per field, checked whenever a command is decoded: by the worker, and by the app before it
# sends (check_command). A value llama.cpp cannot take is refused in words, never passed on to abort
# the worker. Sampling settings are checked by sampling_problem.

MAX_TOKENS = 2**31 - 1  # llama.cpp's positions are int32: no context, answer or document is longer
# The CPU builds' exact-rows bound (installers/llama_build.py EXACT_ROWS): a batch of fewer rows gives
# each row exactly what decoding it alone gives.
EXACT_ROWS = 16
# A verify batch (draft + 1 token) must stay under EXACT_ROWS, so a longer draft is never used. The
# same number sizes a hybrid model's rollback planes (n_rs_seq), which llama.cpp needs below its
# micro-batch (n_ubatch > n_rs_seq + 1).
MAX_DRAFT = EXACT_ROWS - 2
# Paths a tree of drafts verifies at once. Each is a sequence with its own recurrent state (and rollback
# planes), and every path's rows share one verify batch, which must stay under the same 16-row bound.
MAX_DRAFT_PATHS = 4
MAX_THREADS = 512  # GGML_MAX_N_THREADS
MAX_TELEMETRY_INTERVAL_MS = 3_600_000  # an hour (0 switches telemetry off)
MAX_CALIBRATION_LENGTHS = 32
MIN_CALIBRATION_LENGTH = 2  # a prefill timing needs a token before the one it reads
MAX_STORED_BYTES = 2**63 - 1  # sizes kept in SQLite, whose integers are 64-bit signed
MAX_CLOCK = 253_402_300_799.0  # 9999-12-31T23:59:59Z: the last moment a template's date can show
# An answer's JSON schema or grammar, as text (engine.protocol.constraint): big enough for any schema a
# program hands an API, small enough that its grammar is built in milliseconds.
MAX_SCHEMA_BYTES = 64 * 1024
MAX_CONSTRAINT_NAME = 64  # a json_schema's name (OpenAI's limit), passed on to remote engines

TokenCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKENS)]  # 0 means "the default" where a field says so
DraftLength = Annotated[int, msgspec.Meta(ge=1, le=MAX_DRAFT)]
DraftPaths = Annotated[int, msgspec.Meta(ge=1, le=MAX_DRAFT_PATHS)]
CalibrationLength = Annotated[int, msgspec.Meta(ge=MIN_CALIBRATION_LENGTH, le=MAX_TOKENS)]
MAX_PERCENT = 100
# A share of the available memory, in percent; 0: the default budget (model_store.fit keeps the policy)
MemoryPercent = Annotated[int, msgspec.Meta(ge=0, le=MAX_PERCENT)]

# The digest of the leading messages of a branch that the worker was sent in an earlier request;
# the request's ``messages`` are then only the ones after them (see engine.protocol.pipe_transcripts). "": none.
KnownPrefix = Annotated[str, msgspec.Meta(max_length=64)]
# A schema's or grammar's text (msgspec counts characters, which are never more than the UTF-8 bytes
# engine.protocol.constraint counts).
SchemaText = Annotated[str, msgspec.Meta(max_length=MAX_SCHEMA_BYTES)]


class SamplingSpec(msgspec.Struct, forbid_unknown_fields=True):
    """How the next token is drawn; these defaults are Hearth's, the only ones (see :data:`DEFAULTS`).
    ``top_k=0``, ``top_p=1`` and ``min_p=0`` switch a transform off; ``temperature=0`` is greedy.
    ``repeat_penalty`` (llama.cpp's rule; 1 = off) makes tokens of the answer's last
    ``repeat_last_n`` tokens less likely (llama.cpp's ``penalty_last_n``: -1 = the whole answer,
    0 = no penalty; default :data:`REPEAT_WINDOW`; see :mod:`engine.decoding.sampling`). ``dry_multiplier``
    (llama.cpp's DRY; 0 = off) makes continuing a run of tokens the answer already wrote less likely
    (:mod:`engine.decoding.sequence_penalty`).

    A model's own recommended sampling (its GGUF's ``general.sampling.*`` keys, else its family's in
    the catalogue) comes before these: :mod:`app.services.sampling_defaults`. The repeat penalty's
    default is the one that kept the built-in SmolLM2 from looping, by measurement
    (``tests/bench/bench_loops.py``; the figures are in docs/performance.md)."""

    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    seed: int | None = None
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64  # the penalty's window (:data:`REPEAT_WINDOW`); protocol 14
    dry_multiplier: float = 0.8  # the sequence penalty's strength (llama.cpp's dry_multiplier); protocol 15


REPEAT_PENALTY_RANGE = (1.0, 2.0)  # 1 = off; above 2 a model can no longer repeat even a needed word
# The answer's last tokens the repeat penalty looks at unless a request says otherwise (llama.cpp's
# penalty_last_n); -1 looks at the whole answer (llama.cpp: the whole context), 0 switches the penalty off.
REPEAT_WINDOW = SamplingSpec().repeat_last_n
REPEAT_WHOLE_ANSWER = -1
DRY_MULTIPLIER_RANGE = (0.0, 5.0)  # 0 = off; llama.cpp's authors suggest 0.8; at 5 a run of three is all but forbidden


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
    if name == "repeat_last_n" and not (isinstance(value, int) and not isinstance(value, bool)
                                        and REPEAT_WHOLE_ANSWER <= value <= MAX_TOKENS):
        return (f"repeat-last-n must be -1 (the whole answer), 0 (off) or how many of the answer's last tokens "
                f"the repeat penalty looks at, up to {MAX_TOKENS}, got {shown(value)}")
    if name == "dry_multiplier" and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                         and DRY_MULTIPLIER_RANGE[0] <= value <= DRY_MULTIPLIER_RANGE[1]):
        low, high = DRY_MULTIPLIER_RANGE
        return f"phrase penalty must be between {low:g} (off) and {high:g}, got {shown(value)}"
    return None


# What a conversation's turn does when it would not fit the longest context the model can have:
# leave the oldest exchanges out of what the model reads, continue in a new conversation that starts
# with a summary, or stop with the reason (engine.protocol.context_cut; app.services.context_summary).
WhenFull = Literal["drop-oldest", "summary", "stop"]
WHEN_FULL_CHOICES: tuple[str, ...] = WhenFull.__args__


class RequestDefaults(msgspec.Struct, frozen=True):
    """What a request asks for when nobody says otherwise: the CLI's flags, the first settings and
    the protocol's own fields all start from :data:`DEFAULTS`, so they cannot drift apart."""

    sampling: SamplingSpec = msgspec.field(default_factory=SamplingSpec)
    max_tokens: int = 1024
    draft: Literal["auto", "off", "lookup", "mtp"] = "auto"  # drafting never changes the output
    draft_max: int = 4
    draft_paths: int = 1  # one chain of drafts a round; 2 and more: a tree (see engine.speculative.tree_source)
    when_full: WhenFull = "drop-oldest"  # a conversation longer than the model can read keeps going (engine.protocol.context_cut)


DEFAULTS = RequestDefaults()
