"""Live machine readings for the telemetry panel: raw numbers, never invented ones.

Every value is either a reading taken from this machine right now or :data:`UNAVAILABLE`.
Formatting (MB, GHz, colours) is the GUI's job.

Rules:

* Memory: this process's resident set size and the system's available memory, from psutil.
* CPU temperature (°C): first ``psutil.sensors_temperatures()`` where psutil has it, looking
  only at CPU sensor groups in the order of :data:`CPU_SENSOR_GROUPS` (``acpitz``, a board
  zone, last). In a group the package reading wins (``Package id …``, else ``Tdie``, else
  ``Tctl``), otherwise the hottest core reading. Readings that are missing, NaN, ``<= 0`` or
  above :data:`MAX_PLAUSIBLE_C` are ignored. Fallback (Linux):
  ``<thermal_root>/thermal_zone*/temp`` (millidegrees) of a zone whose ``type`` names the CPU
  (see :func:`_zone_rank`); the zones are found once, then only their ``temp`` files are read.
* CPU frequency (MHz): ``psutil.cpu_freq()``. A current or maximum of ``0`` (VMs report
  ``max=0``) is unavailable, not zero.
* Throttled: the frequency says yes when ``current / max < THROTTLE_RATIO`` (both known);
  the temperature says yes when it is at or above the sensor's ``high`` threshold from psutil,
  or :data:`DEFAULT_HOT_C` when no threshold is known. Throttled is True if either known signal
  says yes, False if the known signals say no, and unavailable when neither is known. An idle
  CPU that clocks itself down also reads as throttled by frequency: the flag means something
  while the CPU is busy (i.e. while generating).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import psutil

from engine.protocol import UNAVAILABLE

CPU_SENSOR_GROUPS = (
    "coretemp", "k10temp", "zenpower", "cpu_thermal", "cpu-thermal", "soc_thermal", "acpitz",
)
PACKAGE_LABELS = ("package id", "tdie", "tctl")  # best first: Tctl may carry an AMD offset
MAX_PLAUSIBLE_C = 150.0
DEFAULT_HOT_C = 95.0
THROTTLE_RATIO = 0.75


@dataclass(frozen=True)
class SystemReadings:
    rss_bytes: int
    available_bytes: int
    cpu_temp_c: float | str
    cpu_freq_mhz: float | str
    cpu_freq_max_mhz: float | str
    throttled: bool | str


def _plausible_c(value: object) -> float | None:
    """``value`` as a float if it is a believable CPU temperature, else None."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    value = float(value)
    return value if math.isfinite(value) and 0.0 < value <= MAX_PLAUSIBLE_C else None


def _group_reading(entries) -> tuple[float, float | None] | None:
    """(temperature, high threshold) of one psutil sensor group: package reading, else hottest."""
    valid = [(t, e) for e in entries if (t := _plausible_c(getattr(e, "current", None))) is not None]
    if not valid:
        return None
    for prefix in PACKAGE_LABELS:
        for temp, entry in valid:
            if str(getattr(entry, "label", "") or "").lower().startswith(prefix):
                return temp, _plausible_c(getattr(entry, "high", None))
    temp, entry = max(valid, key=lambda pair: pair[0])
    return temp, _plausible_c(getattr(entry, "high", None))


def _psutil_temperature() -> tuple[float, float | None] | None:
    sensors_temperatures = getattr(psutil, "sensors_temperatures", None)
    if sensors_temperatures is None:
        return None
    try:
        groups = sensors_temperatures() or {}
    except Exception:  # psutil raises platform-specific errors here; no reading is the answer
        return None
    for name in CPU_SENSOR_GROUPS:
        reading = _group_reading(groups.get(name, ()))
        if reading is not None:
            return reading
    return None


def _zone_rank(zone_type: str) -> int | None:
    """Preference of a thermal zone by its ``type`` (lower is better); None if not the CPU."""
    zone_type = zone_type.strip().lower()
    if zone_type == "x86_pkg_temp":
        return 0
    if "cpu" in zone_type:
        return 1
    if "soc" in zone_type:
        return 2
    if zone_type.startswith("acpitz"):
        return 3
    return None


def _cpu_zones(thermal_root: Path) -> list[Path]:
    """The CPU-like thermal zones under ``thermal_root``, best first."""
    ranked = []
    for zone in sorted(thermal_root.glob("thermal_zone*")):
        try:
            rank = _zone_rank((zone / "type").read_text(errors="replace"))
        except OSError:
            continue
        if rank is not None:
            ranked.append((rank, zone))
    return [zone for _, zone in sorted(ranked, key=lambda pair: pair[0])]


def _zone_temperature(zone: Path) -> float | None:
    try:
        return _plausible_c(int((zone / "temp").read_text().strip()) / 1000.0)
    except (OSError, ValueError):
        return None


def _frequency() -> tuple[float | str, float | str]:
    """(current MHz, max MHz), each a positive number or unavailable."""
    try:
        freq = psutil.cpu_freq()
    except Exception:  # NotImplementedError / OSError on platforms without the reading
        freq = None
    values = []
    for name in ("current", "max"):
        value = getattr(freq, name, None)
        ok = isinstance(value, (int, float)) and math.isfinite(value) and value > 0
        values.append(float(value) if ok else UNAVAILABLE)
    return values[0], values[1]


def _throttled(
    current: float | str, maximum: float | str, temp: float | str, high: float | None
) -> bool | str:
    signals = []
    if current != UNAVAILABLE and maximum != UNAVAILABLE:
        signals.append(current / maximum < THROTTLE_RATIO)
    if temp != UNAVAILABLE:
        signals.append(temp >= (high if high is not None else DEFAULT_HOT_C))
    return any(signals) if signals else UNAVAILABLE


class SystemSampler:
    """Reads :class:`SystemReadings`; cheap enough to call once a second."""

    def __init__(
        self, thermal_root: Path = Path("/sys/class/thermal"), process: psutil.Process | None = None
    ) -> None:
        self._thermal_root = Path(thermal_root)
        self._process = process if process is not None else psutil.Process()
        self._zones: list[Path] | None = None  # found on first use of the fallback

    def _temperature(self) -> tuple[float | str, float | None]:
        reading = _psutil_temperature()
        if reading is not None:
            return reading
        if self._zones is None:
            self._zones = _cpu_zones(self._thermal_root)
        for zone in self._zones:
            temp = _zone_temperature(zone)
            if temp is not None:
                return temp, None
        return UNAVAILABLE, None

    def read(self) -> SystemReadings:
        temp, high = self._temperature()
        current, maximum = _frequency()
        return SystemReadings(
            rss_bytes=self._process.memory_info().rss,
            available_bytes=psutil.virtual_memory().available,
            cpu_temp_c=temp,
            cpu_freq_mhz=current,
            cpu_freq_max_mhz=maximum,
            throttled=_throttled(current, maximum, temp, high),
        )
