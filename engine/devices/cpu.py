"""The CPU half of the device probe: name, usable cores and the ISA extensions that matter.

Reading ``/proc/cpuinfo`` takes about a millisecond, so this runs in the worker, synchronously.
Where there is no ``/proc`` (Windows, macOS) the name comes from :mod:`platform` and an ARM64
process reports ``neon`` (every ARMv8-A core has Advanced SIMD); x86 extensions are then unknown
and left out rather than guessed.
"""

from __future__ import annotations

import platform
from pathlib import Path

from engine.backends.base import default_threads
from engine.protocol.devices import CpuInfo

CPUINFO = Path("/proc/cpuinfo")
# x86 flags worth showing for llama.cpp's kernels, in display order.
X86_FEATURES = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
                "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")
# ARM /proc/cpuinfo "Features" names -> the names people use.
ARM_FEATURES = {"asimd": "neon", "asimdhp": "fp16", "asimddp": "dotprod", "i8mm": "i8mm", "bf16": "bf16",
                "sve": "sve", "sve2": "sve2"}


def probe_cpu(cpuinfo_text: str | None = None) -> CpuInfo:
    """What this process's CPU is; ``cpuinfo_text`` replaces ``/proc/cpuinfo`` (tests)."""
    text = _read_cpuinfo() if cpuinfo_text is None else cpuinfo_text
    fields = _first_processor_fields(text)
    machine = platform.machine() or "unknown"
    return CpuInfo(name=_name(fields, machine), machine=machine, cores=default_threads(),
                   features=_features(fields, machine))


def _read_cpuinfo() -> str:
    try:
        return CPUINFO.read_text(errors="replace")
    except OSError:
        return ""


def _first_processor_fields(text: str) -> dict[str, str]:
    """``key: value`` pairs of the first processor block (all cores of a desktop CPU match)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    return fields


def _name(fields: dict[str, str], machine: str) -> str:
    for key in ("model name", "hardware", "cpu model"):
        if fields.get(key):
            return fields[key]
    return platform.processor() or machine


def _features(fields: dict[str, str], machine: str) -> tuple[str, ...]:
    flags = set(fields.get("flags", "").split())
    if flags:
        return tuple(f for f in X86_FEATURES if f in flags)
    arm = set(fields.get("features", "").split())
    if arm:
        return tuple(name for flag, name in ARM_FEATURES.items() if flag in arm)
    if machine.lower() in ("arm64", "aarch64"):
        return ("neon",)
    return ()
