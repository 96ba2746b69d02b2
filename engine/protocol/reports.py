"""The plain records that events carry (not messages themselves): devices and the CPU build, the
context a model got, what a turn did with snapshots or a remote engine, and a request's timings and
drafting counters. Part of the wire protocol (:mod:`engine.protocol` names them all); kept apart so
that module stays about messages."""

from __future__ import annotations

from typing import Literal

import msgspec

KvType = Literal["f16", "q8_0"]  # the attention cache's element type; q8_0 takes 17/32 of f16's bytes


class DeviceInfo(msgspec.Struct):
    kind: str  # "cpu", "npu", "npu-emulator"
    name: str
    detail: str = ""  # what was found, or why the device cannot be used
    available: bool = True  # False: listed so the user sees why it is missing (``detail``)
    features: list[str] = []  # CPU ISA extensions ("avx2", "neon", ...)


class CanaryReport(msgspec.Struct):
    """One CPU build's canary on this machine (engine.backends.canary)."""

    status: str  # "ok", "unsupported", "crashed", "failed"
    detail: str
    signal: str = ""  # "SIGILL", ... when crashed
    exact_kernels: dict[str, str] = {}  # weight type -> "repacked", "plain" or "none": which keep batches exact


class CpuBackendInfo(msgspec.Struct):
    """The CPU build of llama.cpp this worker runs, and why."""

    variant: str  # "icelake", "haswell", "sse42", ...; "built-in" when llama-cpp-python has only one
    reason: str
    features: list[str] = []  # what the build was compiled for
    canaries: dict[str, CanaryReport] = {}  # build name -> its canary, for the builds tried
    cached: bool = False  # the choice came from the cache (no canary ran now)


class PhaseDevice(msgspec.Struct):
    device: str  # "cpu", "npu", "npu-emulator"
    reason: str
    min_tokens: int = 0  # > 0: the device is used for new inputs this long or longer; the CPU for shorter


def _cpu_draft() -> PhaseDevice:
    return PhaseDevice("cpu", "CPU: drafts are made next to the decoder")


class DevicePlan(msgspec.Struct):
    prefill: PhaseDevice
    decode: PhaseDevice
    draft: PhaseDevice = msgspec.field(default_factory=_cpu_draft)


class NpuGraphReport(msgspec.Struct):
    """How the NPU prefill graph was prepared at model load."""

    cached: bool  # loaded from the EP-context cache instead of compiled
    prepare_ms: float  # export + compile, or loading the cached compiled graph
    chunk: int  # tokens per graph run
    max_ctx: int  # positions the graph's KV buffers hold
    cache_dir: str = ""  # the cache entry; "" when the worker has no data folder (nothing cached)


class ContextReport(msgspec.Struct):
    """The context a model was given and the memory it takes (``hearth info --json``'s ``context``)."""

    n_ctx: int
    n_ctx_train: int
    mode: Literal["auto", "fixed"]
    kv_type: KvType
    kv_bytes: int  # the attention cache, allocated in full when the context is created
    estimated_bytes: int  # what the worker takes with this context (engine.context.context_memory)
    available_bytes: int  # the memory available when it was chosen
    budget_bytes: int  # the share of it an automatic context may take
    max_n_ctx: int  # the longest context that budget holds (capped at n_ctx_train): how far it can grow


class SnapshotReport(msgspec.Struct):
    """How a conversation turn used and saved state snapshots."""

    restored: bool = False  # the turn started from a saved (or live) snapshot
    restored_tokens: int = 0  # tokens not read again thanks to it
    prefilled_tokens: int = 0  # tokens the model had to read for this turn
    saved_bytes: int = 0  # bytes this turn's snapshot added to the database
    snapshot_id: str | None = None
    notes: list[str] = []  # why a snapshot was refused, if one was


class RemoteReport(msgspec.Struct):
    """What a remote OpenAI-compatible engine did for a request (app.engine_clients.remote): the engine and the
    model that answered, and the prompt tokens it counted (None: it did not report usage, as
    llama-cpp-python's server does not in a stream). Local snapshots, drafting and devices do not
    apply there; ``cached_tokens`` is the server's own prefix reuse when it reports one (vLLM,
    another Hearth), else None. ``closed_by_hearth``: the limit the engine went past, so that Hearth
    closed its stream ("max_tokens", "max_bytes": app.engine_clients.remote.limits); "" when it kept within them."""

    engine: str
    model: str
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    closed_by_hearth: Literal["", "max_tokens", "max_bytes"] = ""


# -- per-request records (timings, drafting counters) --------------------------------------------


class Timings(msgspec.Struct):
    """Raw timings of one request, in tokens and milliseconds."""

    prompt_n: int = 0
    prompt_ms: float = 0.0
    gen_n: int = 0
    gen_ms: float = 0.0
    ttft_ms: float = 0.0


class DraftStats(msgspec.Struct):
    """Per-request drafting counters (sent in ``Finished``)."""

    kind: str = "off"
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    mean_accepted_len: float = 0.0  # accepted draft tokens per round
    rollbacks: int = 0  # rounds whose rejected tokens were rolled back out of the state
    tree_rounds: int = 0  # rounds that verified several draft paths at once
    side_wins: int = 0  # tree rounds whose accepted tokens came from a path other than the first
    auto_off: bool = False
    reason: str = ""
