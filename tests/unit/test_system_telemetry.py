"""SystemSampler: live readings on this machine, the /sys/class/thermal fallback, throttling."""

from __future__ import annotations

import math
from collections import namedtuple
from pathlib import Path

import psutil
import pytest

from engine.protocol import UNAVAILABLE
from engine.telemetry.system import THROTTLE_RATIO, SystemReadings, SystemSampler

Temp = namedtuple("Temp", "label current high critical")
Freq = namedtuple("Freq", "current min max")

CPU_GROUPS = {"coretemp", "k10temp", "zenpower", "cpu_thermal", "cpu-thermal", "soc_thermal", "acpitz"}


def _sane(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= 150


def _machine_has_cpu_temperature() -> bool:
    """An independent, simple look: any sane CPU reading from psutil or a CPU-like thermal zone."""
    try:
        groups = psutil.sensors_temperatures() if hasattr(psutil, "sensors_temperatures") else {}
    except Exception:
        groups = {}
    if any(_sane(e.current) for name, entries in (groups or {}).items() if name in CPU_GROUPS for e in entries):
        return True
    for zone in Path("/sys/class/thermal").glob("thermal_zone*"):
        try:
            kind = (zone / "type").read_text().strip().lower()
            value = int((zone / "temp").read_text().strip()) / 1000
        except (OSError, ValueError):
            continue
        if any(word in kind for word in ("x86_pkg_temp", "cpu", "soc", "acpitz")) and _sane(value):
            return True
    return False


def make_zone(root: Path, name: str, kind: str, temp: str) -> None:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "type").write_text(kind + "\n")
    (zone / "temp").write_text(temp + "\n")


@pytest.fixture
def no_sensors(monkeypatch):
    monkeypatch.setattr(psutil, "sensors_temperatures", lambda *a, **k: {}, raising=False)


def sampler_with(monkeypatch, tmp_path, *, freq=None, sensors=None) -> SystemSampler:
    monkeypatch.setattr(psutil, "cpu_freq", lambda *a, **k: freq)
    monkeypatch.setattr(psutil, "sensors_temperatures", lambda *a, **k: sensors or {}, raising=False)
    return SystemSampler(thermal_root=tmp_path / "no-thermal")


# ------------------------------------------------------------------------------ this machine


def test_this_machine_readings_are_real(capsys):
    readings = SystemSampler().read()
    assert isinstance(readings, SystemReadings)
    assert readings.rss_bytes > 10 * 1024 * 1024
    assert readings.available_bytes > 0
    if _machine_has_cpu_temperature():
        assert _sane(readings.cpu_temp_c)
    else:
        assert readings.cpu_temp_c == UNAVAILABLE
    freq = psutil.cpu_freq()
    if freq is None or not freq.max > 0:
        assert readings.cpu_freq_max_mhz == UNAVAILABLE
    else:
        assert readings.cpu_freq_max_mhz > 0
    assert (readings.cpu_freq_mhz == UNAVAILABLE) == (freq is None or not freq.current > 0)
    assert_throttled_as_this_machine_says(readings)
    assert capsys.readouterr() == ("", "")


def assert_throttled_as_this_machine_says(readings: SystemReadings) -> None:
    """The flag follows from the readings it was decided with and an independent look at the sensors:
    unavailable with neither a frequency ratio nor a temperature (a VM reports max=0 and has no
    sensor), the frequency's verdict when that is the only signal, and with a temperature a bool that
    is True whenever the frequency says so (the sensor's own "high" threshold is not in the readings)."""
    ratio_known = readings.cpu_freq_mhz != UNAVAILABLE and readings.cpu_freq_max_mhz != UNAVAILABLE
    by_frequency = ratio_known and readings.cpu_freq_mhz / readings.cpu_freq_max_mhz < THROTTLE_RATIO
    if _machine_has_cpu_temperature():
        assert isinstance(readings.throttled, bool) and (readings.throttled or not by_frequency)
    elif ratio_known:
        assert readings.throttled is by_frequency
    else:
        assert readings.throttled == UNAVAILABLE, "neither signal is known here: the flag must not be guessed"


def test_given_process_is_the_one_measured():
    process = psutil.Process()
    readings = SystemSampler(process=process).read()
    assert readings.rss_bytes == pytest.approx(process.memory_info().rss, rel=0.2)


# ------------------------------------------------------------------------ /sys/class/thermal


def test_thermal_zone_fallback_reads_millidegrees(tmp_path, no_sensors):
    make_zone(tmp_path, "thermal_zone0", "x86_pkg_temp", "54000")
    assert SystemSampler(thermal_root=tmp_path).read().cpu_temp_c == 54.0


def test_non_cpu_zone_is_ignored(tmp_path, no_sensors):
    make_zone(tmp_path, "thermal_zone0", "iwlwifi_1", "41000")
    assert SystemSampler(thermal_root=tmp_path).read().cpu_temp_c == UNAVAILABLE


def test_cpu_zone_is_chosen_over_wifi_and_acpitz(tmp_path, no_sensors):
    make_zone(tmp_path, "thermal_zone0", "wifi", "41000")
    make_zone(tmp_path, "thermal_zone1", "acpitz", "30000")
    make_zone(tmp_path, "thermal_zone2", "x86_pkg_temp", "61500")
    assert SystemSampler(thermal_root=tmp_path).read().cpu_temp_c == 61.5


@pytest.mark.parametrize("content", ["garbage", "", "-5000", "0", "999000"])
def test_garbage_zone_is_unavailable(tmp_path, no_sensors, content):
    make_zone(tmp_path, "thermal_zone0", "x86_pkg_temp", content)
    assert SystemSampler(thermal_root=tmp_path).read().cpu_temp_c == UNAVAILABLE


def test_zone_is_reread_on_every_call(tmp_path, no_sensors):
    make_zone(tmp_path, "thermal_zone0", "cpu-thermal", "50000")
    sampler = SystemSampler(thermal_root=tmp_path)
    assert sampler.read().cpu_temp_c == 50.0
    (tmp_path / "thermal_zone0" / "temp").write_text("70000\n")
    assert sampler.read().cpu_temp_c == 70.0


def test_missing_thermal_root_is_unavailable(tmp_path, no_sensors):
    assert SystemSampler(thermal_root=tmp_path / "absent").read().cpu_temp_c == UNAVAILABLE


# ---------------------------------------------------------------------------- psutil sensors


def test_package_reading_wins_over_cores(monkeypatch, tmp_path):
    sensors = {"coretemp": [Temp("Core 0", 80.0, 100.0, 110.0), Temp("Package id 0", 66.0, 100.0, 110.0)]}
    assert sampler_with(monkeypatch, tmp_path, sensors=sensors).read().cpu_temp_c == 66.0


def test_hottest_core_without_package_and_bad_readings_ignored(monkeypatch, tmp_path):
    cores = [Temp("Core 0", 48.0, None, None), Temp("Core 1", 57.0, None, None),
             Temp("Core 2", float("nan"), None, None), Temp("Core 3", 300.0, None, None),
             Temp("Core 4", None, None, None), Temp("Core 5", 0.0, None, None)]
    assert sampler_with(monkeypatch, tmp_path, sensors={"coretemp": cores}).read().cpu_temp_c == 57.0


def test_cpu_group_preferred_over_acpitz_and_other_groups_ignored(monkeypatch, tmp_path):
    sensors = {"acpitz": [Temp("", 30.0, None, None)], "nvme": [Temp("Composite", 45.0, None, None)],
               "k10temp": [Temp("Tctl", 72.0, None, None)]}
    assert sampler_with(monkeypatch, tmp_path, sensors=sensors).read().cpu_temp_c == 72.0
    only_other = {"nvme": [Temp("Composite", 45.0, None, None)]}
    assert sampler_with(monkeypatch, tmp_path, sensors=only_other).read().cpu_temp_c == UNAVAILABLE


def test_sensors_error_falls_back_to_thermal_zone(monkeypatch, tmp_path):
    def broken():
        raise OSError("no hwmon")

    monkeypatch.setattr(psutil, "sensors_temperatures", broken, raising=False)
    make_zone(tmp_path, "thermal_zone0", "soc_thermal", "45000")
    assert SystemSampler(thermal_root=tmp_path).read().cpu_temp_c == 45.0


def test_missing_sensors_function_is_handled(monkeypatch, tmp_path):
    monkeypatch.delattr(psutil, "sensors_temperatures", raising=False)
    assert SystemSampler(thermal_root=tmp_path).read().cpu_temp_c == UNAVAILABLE


# ------------------------------------------------------------------------------- throttling


def test_max_zero_is_unavailable_not_zero(monkeypatch, tmp_path):
    r = sampler_with(monkeypatch, tmp_path, freq=Freq(2400.0, 0.0, 0.0)).read()
    assert r.cpu_freq_mhz == 2400.0
    assert r.cpu_freq_max_mhz == UNAVAILABLE
    assert r.throttled == UNAVAILABLE  # no ratio and no temperature


def test_half_frequency_is_throttled(monkeypatch, tmp_path):
    r = sampler_with(monkeypatch, tmp_path, freq=Freq(1500.0, 800.0, 3000.0)).read()
    assert (r.cpu_freq_mhz, r.cpu_freq_max_mhz, r.throttled) == (1500.0, 3000.0, True)


def test_full_frequency_and_cool_is_not_throttled(monkeypatch, tmp_path):
    sensors = {"coretemp": [Temp("Package id 0", 50.0, 90.0, 100.0)]}
    r = sampler_with(monkeypatch, tmp_path, freq=Freq(3000.0, 800.0, 3000.0), sensors=sensors).read()
    assert r.cpu_temp_c == 50.0
    assert r.throttled is False


def test_no_frequency_and_no_temperature_is_unavailable(monkeypatch, tmp_path):
    r = sampler_with(monkeypatch, tmp_path, freq=None).read()
    assert (r.cpu_freq_mhz, r.cpu_freq_max_mhz, r.cpu_temp_c, r.throttled) == (UNAVAILABLE,) * 4


def test_cpu_freq_raising_is_unavailable(monkeypatch, tmp_path):
    sampler = sampler_with(monkeypatch, tmp_path)

    def broken():
        raise NotImplementedError

    monkeypatch.setattr(psutil, "cpu_freq", broken)
    r = sampler.read()
    assert (r.cpu_freq_mhz, r.cpu_freq_max_mhz) == (UNAVAILABLE, UNAVAILABLE)


def test_at_high_threshold_is_throttled_even_at_full_frequency(monkeypatch, tmp_path):
    sensors = {"coretemp": [Temp("Package id 0", 88.0, 88.0, 100.0)]}
    r = sampler_with(monkeypatch, tmp_path, freq=Freq(3000.0, 800.0, 3000.0), sensors=sensors).read()
    assert r.throttled is True


def test_temperature_alone_decides_with_default_threshold(monkeypatch, tmp_path):
    hot = {"cpu_thermal": [Temp("", 95.0, None, None)]}
    warm = {"cpu_thermal": [Temp("", 94.0, None, None)]}
    assert sampler_with(monkeypatch, tmp_path, sensors=hot).read().throttled is True
    assert sampler_with(monkeypatch, tmp_path, sensors=warm).read().throttled is False


def test_frequency_alone_decides_at_the_ratio_boundary(monkeypatch, tmp_path):
    at_ratio = sampler_with(monkeypatch, tmp_path, freq=Freq(750.0, 0.0, 1000.0)).read()
    below = sampler_with(monkeypatch, tmp_path, freq=Freq(749.0, 0.0, 1000.0)).read()
    assert (at_ratio.throttled, below.throttled) == (False, True)


def test_stopping_the_telemetry_thread_waits_for_a_sample_being_sent():
    """The worker closes its protocol stream right after stop(): no sample may be sent later."""
    import threading
    import time

    from engine.requests.core import LiveState
    from engine.telemetry.sampler import TelemetryThread

    sending, stopped = threading.Event(), threading.Event()
    late: list[bool] = []

    def slow_emit(event) -> None:
        sending.set()
        time.sleep(0.3)  # a sample on its way out when stop() is called
        late.append(stopped.is_set())

    telemetry = TelemetryThread(LiveState(), slow_emit, interval_ms=10)
    telemetry.start()
    assert sending.wait(5)
    telemetry.stop()
    stopped.set()
    time.sleep(0.4)
    assert late and not any(late)
