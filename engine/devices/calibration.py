"""Calibration: measured prefill speed per device at a few input lengths, and the crossover.

The router sends a long input to the NPU only where this machine's own measurements say the NPU
reads faster than the CPU. The threshold is therefore data, never a constant: the
:func:`crossover` of a :class:`Calibration`. The numbers are kept as a plain JSON-able dict
(:meth:`Calibration.to_dict`) so the app can store them in its settings;
:meth:`Calibration.from_dict` checks everything it reads and says what is wrong.

Measuring needs a prefill path per device; :func:`calibrate` takes it as a ``measure(device,
length) -> tokens per second`` callable, so the NPU prefill can plug in when it exists.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

FORMAT = 1
DEVICES = ("cpu", "npu", "npu-emulator")
DEFAULT_LENGTHS = (128, 512, 1024, 2048, 4096)

Measure = Callable[[str, int], float | None]


class CalibrationError(ValueError):
    """Stored or measured calibration numbers are unusable; the message says which and why."""


@dataclass(frozen=True)
class RatePoint:
    length: int  # new input tokens
    tokens_per_s: float  # measured prefill speed at that length


@dataclass(frozen=True)
class Calibration:
    rates: Mapping[str, tuple[RatePoint, ...]]  # device -> points sorted by length
    measured_with: str = ""  # the model it was measured with, for the user's information

    def __post_init__(self) -> None:
        for device, points in self.rates.items():
            _check_points(f"rates[{device!r}]", device, points)

    def rate(self, device: str, length: int) -> float | None:
        return next((pt.tokens_per_s for pt in self.rates.get(device, ()) if pt.length == length), None)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "measured_with": self.measured_with,
                "rates": {d: [[pt.length, pt.tokens_per_s] for pt in pts] for d, pts in self.rates.items()}}

    @classmethod
    def from_dict(cls, data: object) -> Calibration:
        """Raises :class:`CalibrationError` naming the bad field."""
        if not isinstance(data, dict):
            raise CalibrationError(f"calibration must be a JSON object, not {type(data).__name__}; "
                                   "run calibration again")
        if data.get("format") != FORMAT:
            raise CalibrationError(f"calibration format {data.get('format')!r} is not {FORMAT}; run calibration again")
        rates = data.get("rates")
        if not isinstance(rates, dict):
            raise CalibrationError("calibration 'rates' must be an object of device -> [[length, tokens/s], ...]; "
                                   "run calibration again")
        parsed = {str(d): tuple(_parse_point(f"rates[{d!r}][{i}]", raw) for i, raw in enumerate(_as_list(d, pts)))
                  for d, pts in rates.items()}
        return cls(rates=parsed, measured_with=str(data.get("measured_with", "")))


def stored_calibration(data: dict | None) -> Calibration | None:
    """The calibration an app stored (``to_dict``), or None when there is none or it is unusable
    (the app checks it before storing; an unusable one means: calibrate again)."""
    if data is None:
        return None
    try:
        return Calibration.from_dict(data)
    except CalibrationError:
        return None


def crossover(calibration: Calibration, device: str = "npu") -> int | None:
    """The shortest length from which ``device`` out-reads the CPU at every measured length.

    Only lengths measured on both are compared. Requiring the win at all longer lengths too
    keeps one noisy point from setting a threshold below a length where the CPU still wins.
    ``None``: the device never wins (or nothing to compare).
    """
    threshold: int | None = None
    for length in reversed(compared_lengths(calibration, device)):
        if calibration.rate(device, length) <= calibration.rate("cpu", length):
            break
        threshold = length
    return threshold


def compared_lengths(calibration: Calibration, device: str = "npu") -> list[int]:
    """The lengths measured on both ``device`` and the CPU, shortest first."""
    return sorted({pt.length for pt in calibration.rates.get(device, ())}
                  & {pt.length for pt in calibration.rates.get("cpu", ())})


def calibrate(measure: Measure, devices: Iterable[str] = ("cpu", "npu"),
              lengths: Iterable[int] = DEFAULT_LENGTHS, measured_with: str = "") -> Calibration:
    """Measure prefill speed with ``measure(device, length)`` on every device at every length
    (``None`` from ``measure``: that device is not measured at that length)."""
    lengths = sorted(set(lengths))
    rates = {}
    for device in devices:
        points = []
        for length in lengths:
            tps = measure(device, length)
            if tps is None:
                continue
            if not _positive_number(tps):
                raise CalibrationError(f"measuring {device} at {length} tokens gave {tps!r}, "
                                       "not a positive number of tokens per second")
            points.append(RatePoint(length, float(tps)))
        rates[device] = tuple(points)
    return Calibration(rates=rates, measured_with=measured_with)


# -- validation -----------------------------------------------------------------------------------


def _positive_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _as_list(device: object, points: object) -> list:
    if not isinstance(points, list):
        raise CalibrationError(f"calibration rates[{device!r}] must be a list of [length, tokens/s] pairs; "
                               "run calibration again")
    return points


def _parse_point(where: str, raw: object) -> RatePoint:
    if not (isinstance(raw, (list, tuple)) and len(raw) == 2):
        raise CalibrationError(f"calibration {where} must be a [length, tokens/s] pair, got {raw!r}; "
                               "run calibration again")
    return RatePoint(raw[0], raw[1])


def _check_points(where: str, device: str, points: Iterable[RatePoint]) -> None:
    if device not in DEVICES:
        raise CalibrationError(f"calibration has numbers for an unknown device {device!r}; "
                               f"expected {', '.join(DEVICES)}")
    previous = 0
    for pt in points:
        if not (isinstance(pt.length, int) and not isinstance(pt.length, bool) and pt.length > 0):
            raise CalibrationError(f"calibration {where}: length must be a positive whole number of tokens, "
                                   f"got {pt.length!r}; run calibration again")
        if not _positive_number(pt.tokens_per_s):
            raise CalibrationError(f"calibration {where}: tokens/s must be a positive number, "
                                   f"got {pt.tokens_per_s!r}; run calibration again")
        if pt.length <= previous:
            raise CalibrationError(f"calibration {where}: lengths must be increasing without repeats "
                                   f"({pt.length} after {previous}); run calibration again")
        previous = pt.length
