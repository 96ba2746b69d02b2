"""The device router: which device runs each phase (prefill, decode, draft), and why.

A pure function of its inputs — what the model can do (:class:`ModelCaps`), what the probe found
(:class:`~engine.protocol.devices.ProbedDevices`), the user's policy, the new input's length and the
calibration numbers — so it is tested with tables and never touches a device. Every choice comes
with a reason a user understands (shown in the GUI and the CLI's JSON).

Rules, in order, for prefill:

1. policy "cpu": the CPU.
2. no NPU at all: the CPU, saying why the NPU is missing.
3. only the x86 emulator: never chosen by "auto"; policy "npu" forces it, labelled "emulated, slow".
4. the model's NPU graph cannot be built (an architecture the exporter does not know): the CPU.
5. a real NPU with policy "npu": the NPU.
6. a real NPU with policy "auto": the NPU when the new input is at least the calibrated crossover
   (:func:`~engine.devices.calibration.crossover`), never a built-in constant; uncalibrated means CPU.

Decode and drafting always run on the CPU: it writes faster, the NPU path only reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine import protocol as p
from engine.devices.calibration import Calibration, compared_lengths, crossover
from engine.protocol.devices import EMULATED_LABEL, ProbedDevices, QnnInfo

Policy = Literal["auto", "cpu", "npu"]
POLICIES: tuple[str, ...] = ("auto", "cpu", "npu")
# Architectures the NPU exporter (engine.npu) can build a prefill graph for.
NPU_EXPORTABLE: frozenset[str] = frozenset({"qwen35"})

DECODE_REASON = "CPU: the CPU writes (decodes) fastest; the NPU path only reads the input"
DRAFT_REASON = "CPU: drafts are made next to the decoder"
POLICY_CPU_REASON = "CPU: policy is CPU"


@dataclass(frozen=True)
class ModelCaps:
    """What the loaded model allows. ``npu_graph_reason`` says why not when ``npu_graph`` is False."""

    architecture: str
    npu_graph: bool
    npu_graph_reason: str = ""


def model_caps(architecture: str, exportable: frozenset[str] = NPU_EXPORTABLE, refusal: str = "") -> ModelCaps:
    """``refusal``: why this file of an exportable architecture still cannot be built (the caller
    reads the file, e.g. :func:`engine.npu.gguf_weights.check_model`); "" when it can."""
    if architecture not in exportable:
        return ModelCaps(architecture, False, f"the NPU graph cannot be built for architecture {architecture} yet")
    if refusal:
        return ModelCaps(architecture, False, f"the NPU graph cannot be built for this {architecture} model: {refusal}")
    return ModelCaps(architecture, True)


def plan_devices(caps: ModelCaps, devices: ProbedDevices, policy: str, new_tokens: int | None,
                 calibration: Calibration | None) -> p.DevicePlan:
    """The device per phase. ``new_tokens`` None (at model load): the plan for any length, with
    ``prefill.min_tokens`` set when the choice depends on it. Raises ``ValueError`` on a bad policy."""
    if policy not in POLICIES:
        raise ValueError(f"unknown device policy {policy!r}; use one of {', '.join(POLICIES)}")
    if new_tokens is not None and new_tokens < 0:
        raise ValueError(f"the new input cannot have {new_tokens} tokens")
    prefill = route_prefill(caps, devices.qnn, policy, new_tokens, calibration)
    if policy == "cpu":
        return p.DevicePlan(prefill=prefill, decode=_cpu_said(POLICY_CPU_REASON), draft=_cpu_said(POLICY_CPU_REASON))
    return p.DevicePlan(prefill=prefill, decode=_cpu_said(DECODE_REASON), draft=_cpu_said(DRAFT_REASON))


def route_prefill(caps: ModelCaps, qnn: QnnInfo, policy: str, new_tokens: int | None,
                  calibration: Calibration | None) -> p.PhaseDevice:
    if policy == "cpu":
        return _cpu_said(POLICY_CPU_REASON)
    if qnn.kind == "absent":
        asked = "the NPU was asked for, but there is " if policy == "npu" else ""
        return _cpu(f"{asked}no NPU on this machine ({qnn.reason})")
    if qnn.kind == "npu-emulator" and policy == "auto":
        return _cpu(f"only the NPU emulator is here ({EMULATED_LABEL}); it is used only when forced")
    if not caps.npu_graph:
        return _cpu(caps.npu_graph_reason or f"the NPU graph cannot be built for architecture {caps.architecture}")
    if qnn.kind == "npu-emulator":
        return p.PhaseDevice("npu-emulator", f"NPU emulator (forced; {EMULATED_LABEL})")
    if policy == "npu":
        return p.PhaseDevice("npu", "NPU: policy is NPU")
    return _by_calibration(new_tokens, calibration)


def _by_calibration(new_tokens: int | None, calibration: Calibration | None) -> p.PhaseDevice:
    if calibration is None:
        return _cpu("not calibrated yet; run calibration")
    missing = [name for device, name in (("cpu", "CPU"), ("npu", "NPU")) if not calibration.rates.get(device)]
    if missing:
        return _cpu(f"not calibrated on the {' and '.join(missing)} yet; run calibration")
    compared = compared_lengths(calibration, "npu")
    if not compared:
        return _cpu("calibration measured the CPU and the NPU at different lengths; run calibration again")
    threshold = crossover(calibration, "npu")
    if threshold is None:
        longest = compared[-1]
        return _cpu(f"the NPU read no faster than the CPU at any calibrated length (up to {longest:,} tokens)")
    if new_tokens is None:
        return p.PhaseDevice("npu", f"NPU for new inputs of {threshold:,} tokens or more (calibrated crossover); "
                                    "CPU for shorter ones", min_tokens=threshold)
    if new_tokens >= threshold:
        return p.PhaseDevice("npu", f"NPU: {new_tokens:,} new tokens ≥ {threshold:,} (calibrated crossover)")
    return _cpu(f"{new_tokens:,} new tokens < {threshold:,} (calibrated NPU crossover)")


def _cpu(why: str) -> p.PhaseDevice:
    return p.PhaseDevice("cpu", f"CPU: {why}")


def _cpu_said(reason: str) -> p.PhaseDevice:
    return p.PhaseDevice("cpu", reason)
