"""Measuring the loaded model's prefill speed per device, for the router's calibrated crossover.

Each measurement reads ``length`` fresh tokens into an empty sequence on one device and times it,
after one warm-up read (first-touch page faults and graph set-up are not prefill speed). The
sequence the user was in is saved first and put back afterwards, so calibrating between two
questions changes nothing. The NPU emulator is timed only when asked: its numbers describe a
CPU simulation, never an NPU, and the router never uses it automatically; the lengths are capped
for it because it reads about fifty tokens a second.
"""

from __future__ import annotations

import time

import numpy as np

from engine.devices.calibration import DEFAULT_LENGTHS, Calibration, calibrate
from engine.protocol.devices import ProbedDevices
from engine.decoding.generation import prefill as cpu_prefill
from engine.npu.service import prepare_npu
from engine.models.session import ModelSession
from engine.requests.worker_store import WorkerStore

EMULATOR_MAX_LENGTH = 256
WARM_UP_TOKENS = 32


def calibration_lengths(requested: list[int], n_ctx: int) -> list[int]:
    """The lengths to measure: those asked for (or the defaults) that fit the context."""
    wanted = requested or list(DEFAULT_LENGTHS)
    return sorted({n for n in wanted if 2 <= n <= n_ctx - 8})


def run_calibration(session: ModelSession, probed: ProbedDevices, store: WorkerStore, lengths: list[int],
                    include_emulator: bool) -> tuple[Calibration, list[str]]:
    """Measure CPU and NPU prefill speed; returns the calibration and notes on devices left out."""
    notes: list[str] = []
    prefillers = {"cpu": _cpu_read}
    kind = probed.qnn.kind
    if kind == "npu" or (kind == "npu-emulator" and include_emulator):
        npu, plan = prepare_npu(session, probed, "npu", None, store)
        if npu.prefiller is not None:
            prefillers[kind] = npu.prefiller.prefill
        else:
            notes.append(f"{kind} not measured: {plan.prefill.reason}")
    elif kind == "npu-emulator":
        notes.append("npu-emulator not measured: it is a slow simulation (ask for it to include it)")
    else:
        notes.append(f"no NPU: {probed.qnn.reason}")
    saved = session.context.state_get(0), list(session.tokens)

    def measure(device: str, length: int) -> float | None:
        if device == "npu-emulator" and length > EMULATOR_MAX_LENGTH:
            notes.append(f"{device} not measured at {length} tokens (longer than {EMULATOR_MAX_LENGTH})")
            return None
        return _timed_read(session, prefillers[device], length)

    try:
        calibration = calibrate(measure, prefillers, lengths, measured_with=session.name)
    finally:
        session.reset()
        if saved[1]:
            session.context.state_set(saved[0])
            session.tokens = saved[1]
    return calibration, notes


def _cpu_read(session: ModelSession, tokens: list[int], **kwargs) -> list[int] | None:
    return cpu_prefill(session, tokens, **kwargs)


def _timed_read(session: ModelSession, read, length: int) -> float:
    rng = np.random.default_rng(length)
    for n in (WARM_UP_TOKENS, length):
        tokens = rng.integers(10, min(session.model.n_vocab, 30_000), n).tolist()
        session.reset()
        started = time.perf_counter()
        read(session, tokens, reset=True, on_progress=lambda *_: None, cancelled=lambda: False)
        elapsed = time.perf_counter() - started
    return length / elapsed
