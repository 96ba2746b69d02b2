"""The worker's NPU prefill for the loaded model: prepared at load, chosen per request, reported as run.

**At load** (:func:`prepare_npu`) the device plan comes from the router as before, with one more
input: whether this very file can be exported (:func:`~engine.npu.gguf_weights.check_model`, a
cheap read of its metadata). When the plan can ever put the prefill on an NPU (a forced emulator,
a real NPU with a calibrated crossover), the graph is prepared at once, from the EP-context cache
when it was compiled before (:mod:`engine.npu.compiled`), so no request pays for compiling. If
preparing fails for any reason, the model is planned as CPU-only and the plan says why: an
optional accelerator never fails a model load.

**Per request** (:meth:`NpuPrefill.request`) the router decides again with the number of *new*
tokens (the auto policy's crossover depends on it). The returned :class:`RequestPrefill` is the
generation's prefill function, and remembers the device that actually read the input: the routed
one, or the CPU with the reason when the NPU failed mid-way (the sequence is untouched then, see
:mod:`engine.npu.runner`, and the CPU reads the input instead). That record is what ``Finished``,
the CLI's JSON and the telemetry report.

The QNN options are the adapter's (:func:`engine.backends.qnn.htp_session`), fixed once per
process; the chunk length is :data:`CHUNK`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine import protocol as p
from engine.devices.calibration import Calibration
from engine.protocol.devices import ProbedDevices, QnnInfo
from engine.devices.router import NPU_EXPORTABLE, ModelCaps, model_caps, plan_devices, route_prefill
from engine.decoding.generation import prefill as cpu_prefill
from engine.npu import compiled
from engine.npu.runner import NpuPrefiller, NpuPrefillFailed
from engine.npu.graph_shape import PrefillSpec
from engine.models.session import ModelSession
from engine.requests.worker_store import WorkerStore

# Tokens per graph run. On the emulator 16, 32 and 64 read at about the same speed (42–52 tok/s
# at 512 positions, tests/bench/bench_npu.py) and 32 keeps progress and cancel within a fraction of
# a second; a real HTP likely prefers longer chunks, which calibration on the device should decide.
CHUNK = 32
CACHE_DIR = "npu-cache"
OnRan = Callable[[p.PhaseDevice], None]


class RequestPrefill:
    """One request's prefill, callable like :func:`engine.decoding.generation.prefill`; ``ran`` says where it ran."""

    def __init__(self, routed: p.PhaseDevice, prefiller: NpuPrefiller | None, on_ran: OnRan) -> None:
        self.ran = routed
        self._prefiller = prefiller
        self._on_ran = on_ran

    def __call__(self, session: ModelSession, tokens: list[int], *, reset: bool, on_progress, cancelled,
                 on_chunk_start=None, logits_read: bool = True) -> list[int] | None:
        self._on_ran(self.ran)
        if self._prefiller is not None:
            try:
                return self._prefiller.prefill(session, tokens, reset=reset, on_progress=on_progress,
                                               cancelled=cancelled, on_chunk_start=on_chunk_start)
            except NpuPrefillFailed as exc:
                self.ran = p.PhaseDevice("cpu", f"CPU: the {self.ran.device} prefill failed ({exc}), "
                                                "so the input was read on the CPU")
                self._on_ran(self.ran)
        return cpu_prefill(session, tokens, reset=reset, on_progress=on_progress, cancelled=cancelled,
                           on_chunk_start=on_chunk_start, logits_read=logits_read)


@dataclass
class NpuPrefill:
    """The loaded model's NPU prefill: what the router needs per request, and the prepared graph."""

    caps: ModelCaps
    qnn: QnnInfo
    policy: str
    calibration: Calibration | None
    prefiller: NpuPrefiller | None = None  # None: the plan never uses the NPU, or preparing it failed
    report: p.NpuGraphReport | None = None

    def request(self, n_new: int, on_ran: OnRan) -> RequestPrefill:
        """The prefill of a request that reads ``n_new`` tokens; ``on_ran`` hears each device it uses."""
        routed = route_prefill(self.caps, self.qnn, self.policy, n_new, self.calibration)
        if routed.device == "cpu":
            return RequestPrefill(routed, None, on_ran)
        if self.prefiller is None:
            return RequestPrefill(p.PhaseDevice("cpu", "CPU: the NPU graph was not prepared at load"), None, on_ran)
        if n_new < 2:
            why = "CPU: a one-token input is read on the CPU, where decoding continues"
            return RequestPrefill(p.PhaseDevice("cpu", why), None, on_ran)
        return RequestPrefill(routed, self.prefiller, on_ran)


def prepare_npu(session: ModelSession, probed: ProbedDevices, policy: str, calibration: Calibration | None,
                store: WorkerStore) -> tuple[NpuPrefill, p.DevicePlan]:
    """The model's NPU prefill and its device plan. Raises ``ValueError`` on an unknown policy.
    The model file is read for the graph only when the NPU could be used at all: reading a GGUF's
    metadata with gguf-py walks its whole vocabulary (seconds for Qwen3.5's 248k tokens)."""
    could = route_prefill(model_caps(session.facts.arch), probed.qnn, policy, None, calibration).device != "cpu"
    caps, spec = _caps(session) if could else (model_caps(session.facts.arch), None)
    plan = plan_devices(caps, probed, policy, None, calibration)
    npu = NpuPrefill(caps, probed.qnn, policy, calibration)
    if plan.prefill.device == "cpu":
        return npu, plan
    try:
        npu.prefiller, npu.report = _build(session, spec, store)
    except Exception as exc:  # anything (QNN, onnx, disk, database): the model still loads, on the CPU
        print(f"hearth: the NPU prefill graph could not be prepared: {exc!r}", file=sys.stderr)
        npu.caps = ModelCaps(caps.architecture, False, f"the NPU graph could not be prepared ({exc})")
        plan = plan_devices(npu.caps, probed, policy, None, calibration)
    return npu, plan


def _caps(session: ModelSession) -> tuple[ModelCaps, PrefillSpec | None]:
    """The router's view of the model, and the graph's shape when it can be built."""
    facts = session.facts
    if facts.arch not in NPU_EXPORTABLE:
        return model_caps(facts.arch), None
    if not session.context.settings.flash_attn:
        return model_caps(facts.arch, refusal="the hand-off needs a flash-attention context"), None
    from engine.npu.gguf_weights import UnsupportedModel, check_model  # reads the GGUF's metadata (gguf-py)

    try:
        config = check_model(facts.path)
    except UnsupportedModel as exc:
        return model_caps(facts.arch, refusal=str(exc)), None
    return model_caps(facts.arch), PrefillSpec(config, CHUNK, session.n_ctx)


def _build(session: ModelSession, spec: PrefillSpec, store: WorkerStore) -> tuple[NpuPrefiller, p.NpuGraphReport]:
    path = Path(session.facts.path)
    data_dir = store.data_dir
    key = compiled.current_key(store.file_digest(path), spec.chunk, spec.max_ctx) if data_dir else None
    graph = compiled.prepare(key, data_dir / CACHE_DIR if data_dir else None, lambda: _export(path, spec))
    report = p.NpuGraphReport(cached=graph.cached, prepare_ms=round(graph.seconds * 1000, 1), chunk=spec.chunk,
                              max_ctx=spec.max_ctx, cache_dir=str(graph.folder or ""))
    return NpuPrefiller(spec, graph.run), report


def _export(path: Path, spec: PrefillSpec) -> bytes:
    from engine.npu.qwen35_graph import export_prefill  # imports onnx: only when a graph is compiled

    _, model = export_prefill(path, spec.chunk, spec.max_ctx)
    return model
