"""What the device probe found, as plain typed values.

These dataclasses are the probe's output and the router's input. They hold facts and
human-readable reasons, never live handles (no onnxruntime objects), so they can be cached on
disk as JSON, sent across a process boundary and built by hand in tests. Only
:func:`device_infos` knows the wire form (:class:`engine.protocol.DeviceInfo`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from engine import protocol as p

QnnKind = Literal["npu", "npu-emulator", "absent"]
QNN_KINDS: tuple[str, ...] = ("npu", "npu-emulator", "absent")
NPU_NAME = "Qualcomm NPU (QNN HTP)"
EMULATED_LABEL = "emulated, slow"


@dataclass(frozen=True)
class CpuInfo:
    name: str  # "AMD EPYC", or the machine type when the OS does not say
    machine: str  # platform.machine() of this process: "x86_64", "AMD64", "arm64", "aarch64"
    cores: int  # cores this process may use
    features: tuple[str, ...] = ()  # ISA extensions that matter for inference: "avx2", "neon", ...

    def detail(self) -> str:
        features = ", ".join(self.features) if self.features else "no notable ISA extensions reported"
        return f"{self.cores} cores available to Hearth; {self.machine}; {features}"


@dataclass(frozen=True)
class QnnInfo:
    """The QNN HTP backend's status. ``reason`` says why, in words a user understands."""

    kind: QnnKind
    reason: str
    version: str = ""  # onnxruntime-qnn's version, "" when it is not installed
    device: str = ""  # the EP device QNN reported: "CPU AMD 0x1022", "NPU Qualcomm 0x5143"
    soc_model: str = ""  # the soc_model option the HTP check used ("" = let QNN detect it)
    probe_ms: float = 0.0  # how long the check took
    cached: bool = False  # read from the on-disk cache of an earlier check

    def __post_init__(self) -> None:
        if self.kind not in QNN_KINDS:
            raise ValueError(f"unknown QNN kind {self.kind!r}; expected one of {', '.join(QNN_KINDS)}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> QnnInfo:
        """Raises ``ValueError`` / ``TypeError`` when ``data`` is not a QnnInfo dict."""
        return cls(**data)


@dataclass(frozen=True)
class ProbedDevices:
    cpu: CpuInfo
    qnn: QnnInfo = field(default_factory=lambda: QnnInfo("absent", "the NPU was not checked"))


def cpu_device_info(cpu: CpuInfo) -> p.DeviceInfo:
    return p.DeviceInfo(kind="cpu", name=cpu.name, detail=cpu.detail(), features=list(cpu.features))


def qnn_device_info(qnn: QnnInfo | None) -> p.DeviceInfo:
    """The NPU's line in ``Ready.devices``; ``None`` means the check has not finished yet."""
    if qnn is None:
        return p.DeviceInfo(kind="npu", name=NPU_NAME, available=False,
                            detail="still being checked in the background; the model's device plan will use "
                                   "the result")
    if qnn.kind == "absent":
        return p.DeviceInfo(kind="npu", name=NPU_NAME, available=False, detail=qnn.reason)
    if qnn.kind == "npu-emulator":
        return p.DeviceInfo(kind="npu-emulator", name=f"{NPU_NAME}, {EMULATED_LABEL}", detail=qnn.reason)
    return p.DeviceInfo(kind="npu", name=NPU_NAME, detail=qnn.reason)


def device_infos(cpu: CpuInfo, qnn: QnnInfo | None) -> list[p.DeviceInfo]:
    """The CPU first, then the NPU (present, emulated, absent or still being checked)."""
    return [cpu_device_info(cpu), qnn_device_info(qnn)]
