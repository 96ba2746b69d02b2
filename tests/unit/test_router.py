"""The device router and its calibration numbers: pure functions, tested with tables."""

import json
import math

import pytest

from engine import protocol as p
from engine.devices.calibration import Calibration, CalibrationError, RatePoint, calibrate, crossover
from engine.protocol.devices import CpuInfo, ProbedDevices, QnnInfo
from engine.devices.router import NPU_EXPORTABLE, ModelCaps, model_caps, plan_devices

CPU = CpuInfo(name="Test CPU", machine="x86_64", cores=8, features=("avx2",))
QNN = {
    "npu": QnnInfo("npu", "Qualcomm NPU found (NPU Qualcomm 0x5143) and a test graph ran on it"),
    "emulator": QnnInfo("npu-emulator", "x86_64 process: the HTP runs as an emulator"),
    "absent": QnnInfo("absent", "onnxruntime-qnn is not installed"),
}
# NPU slower at 256, faster from 1,024 on: the calibrated crossover is 1,024.
CALIBRATION = Calibration(rates={
    "cpu": (RatePoint(256, 500.0), RatePoint(1024, 450.0), RatePoint(4096, 300.0)),
    "npu": (RatePoint(256, 200.0), RatePoint(1024, 900.0), RatePoint(4096, 1500.0)),
})
LENGTHS = {"short": 300, "long": 3000}
CAPS = {"graph": ModelCaps("qwen35", npu_graph=True), "nograph": model_caps("lfm2")}

# qnn      input  policy cal    graph    -> prefill device | words in the reason
TABLE = """
npu      long   auto   cal    graph    -> npu          | NPU: 3,000 new tokens ≥ 1,024 (calibrated crossover)
npu      short  auto   cal    graph    -> cpu          | CPU: 300 new tokens < 1,024 (calibrated NPU crossover)
npu      long   auto   nocal  graph    -> cpu          | CPU: not calibrated yet; run calibration
npu      short  auto   nocal  graph    -> cpu          | CPU: not calibrated yet; run calibration
npu      long   auto   cal    nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
npu      short  auto   cal    nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
npu      long   auto   nocal  nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
npu      short  auto   nocal  nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
npu      long   npu    cal    graph    -> npu          | NPU: policy is NPU
npu      short  npu    cal    graph    -> npu          | NPU: policy is NPU
npu      long   npu    nocal  graph    -> npu          | NPU: policy is NPU
npu      short  npu    nocal  graph    -> npu          | NPU: policy is NPU
npu      long   npu    cal    nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
npu      short  npu    cal    nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
npu      long   npu    nocal  nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
npu      short  npu    nocal  nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
npu      long   cpu    cal    graph    -> cpu          | CPU: policy is CPU
npu      short  cpu    cal    graph    -> cpu          | CPU: policy is CPU
npu      long   cpu    nocal  graph    -> cpu          | CPU: policy is CPU
npu      short  cpu    nocal  graph    -> cpu          | CPU: policy is CPU
npu      long   cpu    cal    nograph  -> cpu          | CPU: policy is CPU
npu      short  cpu    cal    nograph  -> cpu          | CPU: policy is CPU
npu      long   cpu    nocal  nograph  -> cpu          | CPU: policy is CPU
npu      short  cpu    nocal  nograph  -> cpu          | CPU: policy is CPU
emulator long   auto   cal    graph    -> cpu          | CPU: only the NPU emulator is here (emulated, slow); it is used only when forced
emulator short  auto   cal    graph    -> cpu          | CPU: only the NPU emulator is here (emulated, slow)
emulator long   auto   nocal  graph    -> cpu          | CPU: only the NPU emulator is here (emulated, slow)
emulator short  auto   nocal  graph    -> cpu          | CPU: only the NPU emulator is here (emulated, slow)
emulator long   auto   cal    nograph  -> cpu          | CPU: only the NPU emulator is here (emulated, slow)
emulator short  auto   cal    nograph  -> cpu          | CPU: only the NPU emulator is here (emulated, slow)
emulator long   auto   nocal  nograph  -> cpu          | CPU: only the NPU emulator is here (emulated, slow)
emulator short  auto   nocal  nograph  -> cpu          | CPU: only the NPU emulator is here (emulated, slow)
emulator long   npu    cal    graph    -> npu-emulator | NPU emulator (forced; emulated, slow)
emulator short  npu    cal    graph    -> npu-emulator | NPU emulator (forced; emulated, slow)
emulator long   npu    nocal  graph    -> npu-emulator | NPU emulator (forced; emulated, slow)
emulator short  npu    nocal  graph    -> npu-emulator | NPU emulator (forced; emulated, slow)
emulator long   npu    cal    nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
emulator short  npu    cal    nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
emulator long   npu    nocal  nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
emulator short  npu    nocal  nograph  -> cpu          | CPU: the NPU graph cannot be built for architecture lfm2 yet
emulator long   cpu    cal    graph    -> cpu          | CPU: policy is CPU
emulator short  cpu    cal    graph    -> cpu          | CPU: policy is CPU
emulator long   cpu    nocal  graph    -> cpu          | CPU: policy is CPU
emulator short  cpu    nocal  graph    -> cpu          | CPU: policy is CPU
emulator long   cpu    cal    nograph  -> cpu          | CPU: policy is CPU
emulator short  cpu    cal    nograph  -> cpu          | CPU: policy is CPU
emulator long   cpu    nocal  nograph  -> cpu          | CPU: policy is CPU
emulator short  cpu    nocal  nograph  -> cpu          | CPU: policy is CPU
absent   long   auto   cal    graph    -> cpu          | CPU: no NPU on this machine (onnxruntime-qnn is not installed)
absent   short  auto   cal    graph    -> cpu          | CPU: no NPU on this machine
absent   long   auto   nocal  graph    -> cpu          | CPU: no NPU on this machine
absent   short  auto   nocal  graph    -> cpu          | CPU: no NPU on this machine
absent   long   auto   cal    nograph  -> cpu          | CPU: no NPU on this machine
absent   short  auto   cal    nograph  -> cpu          | CPU: no NPU on this machine
absent   long   auto   nocal  nograph  -> cpu          | CPU: no NPU on this machine
absent   short  auto   nocal  nograph  -> cpu          | CPU: no NPU on this machine
absent   long   npu    cal    graph    -> cpu          | CPU: the NPU was asked for, but there is no NPU on this machine (onnxruntime-qnn is not installed)
absent   short  npu    cal    graph    -> cpu          | CPU: the NPU was asked for, but there is no NPU on this machine
absent   long   npu    nocal  graph    -> cpu          | CPU: the NPU was asked for, but there is no NPU on this machine
absent   short  npu    nocal  graph    -> cpu          | CPU: the NPU was asked for, but there is no NPU on this machine
absent   long   npu    cal    nograph  -> cpu          | CPU: the NPU was asked for, but there is no NPU on this machine
absent   short  npu    cal    nograph  -> cpu          | CPU: the NPU was asked for, but there is no NPU on this machine
absent   long   npu    nocal  nograph  -> cpu          | CPU: the NPU was asked for, but there is no NPU on this machine
absent   short  npu    nocal  nograph  -> cpu          | CPU: the NPU was asked for, but there is no NPU on this machine
absent   long   cpu    cal    graph    -> cpu          | CPU: policy is CPU
absent   short  cpu    cal    graph    -> cpu          | CPU: policy is CPU
absent   long   cpu    nocal  graph    -> cpu          | CPU: policy is CPU
absent   short  cpu    nocal  graph    -> cpu          | CPU: policy is CPU
absent   long   cpu    cal    nograph  -> cpu          | CPU: policy is CPU
absent   short  cpu    cal    nograph  -> cpu          | CPU: policy is CPU
absent   long   cpu    nocal  nograph  -> cpu          | CPU: policy is CPU
absent   short  cpu    nocal  nograph  -> cpu          | CPU: policy is CPU
"""


def table_rows():
    for line in TABLE.strip().splitlines():
        inputs, _, expected = line.partition("->")
        device, _, reason = expected.partition("|")
        yield pytest.param(*inputs.split(), device.strip(), reason.strip(), id="-".join(inputs.split()))


def route(qnn="npu", length="long", policy="auto", cal="cal", graph="graph") -> p.DevicePlan:
    tokens = LENGTHS[length] if isinstance(length, str) else length
    calibration = CALIBRATION if cal == "cal" else (None if cal == "nocal" else cal)
    return plan_devices(CAPS[graph], ProbedDevices(CPU, QNN[qnn]), policy, tokens, calibration)


def test_the_table_covers_every_combination():
    combos = {tuple(row.values[:5]) for row in table_rows()}
    assert len(combos) == 3 * 2 * 3 * 2 * 2 == len(TABLE.strip().splitlines())


@pytest.mark.parametrize("qnn, length, policy, cal, graph, device, reason", list(table_rows()))
def test_prefill_device_and_reason(qnn, length, policy, cal, graph, device, reason):
    plan = route(qnn, length, policy, cal, graph)
    assert plan.prefill.device == device
    assert plan.prefill.reason.startswith(reason), plan.prefill.reason
    assert plan.decode.device == plan.draft.device == "cpu"


@pytest.mark.parametrize("qnn", list(QNN))
def test_decode_and_draft_stay_on_the_cpu_with_a_reason(qnn):
    plan = route(qnn, "long", "npu")
    assert "writes (decodes) fastest" in plan.decode.reason
    assert "drafts" in plan.draft.reason
    forced_cpu = route(qnn, "long", "cpu")
    assert forced_cpu.decode.reason == forced_cpu.draft.reason == "CPU: policy is CPU"


def test_the_threshold_is_the_calibrated_crossover_not_a_constant():
    late = Calibration(rates={"cpu": (RatePoint(1024, 900.0), RatePoint(4096, 700.0)),
                              "npu": (RatePoint(1024, 500.0), RatePoint(4096, 1400.0))})
    assert route(length=2000, cal=CALIBRATION).prefill.device == "npu"
    assert route(length=2000, cal=late).prefill.device == "cpu"
    assert route(length=4096, cal=late).prefill.reason == "NPU: 4,096 new tokens ≥ 4,096 (calibrated crossover)"
    assert route(length=1024, cal=CALIBRATION).prefill.device == "npu"  # at the threshold: the NPU
    assert route(length=1023, cal=CALIBRATION).prefill.device == "cpu"


def test_plan_at_model_load_states_the_threshold():
    plan = route(length=None)
    assert plan.prefill == p.PhaseDevice(
        "npu", "NPU for new inputs of 1,024 tokens or more (calibrated crossover); CPU for shorter ones",
        min_tokens=1024)
    assert route("emulator", None, "npu").prefill.min_tokens == 0


def test_a_calibration_where_the_npu_never_wins_keeps_the_cpu():
    slow_npu = Calibration(rates={"cpu": (RatePoint(512, 400.0), RatePoint(2048, 380.0)),
                                  "npu": (RatePoint(512, 100.0), RatePoint(2048, 300.0))})
    assert route(cal=slow_npu).prefill.reason == (
        "CPU: the NPU read no faster than the CPU at any calibrated length (up to 2,048 tokens)")


@pytest.mark.parametrize("rates, reason", [
    ({"cpu": (RatePoint(512, 400.0),)}, "CPU: not calibrated on the NPU yet; run calibration"),
    ({"npu-emulator": (RatePoint(512, 4.0),)}, "CPU: not calibrated on the CPU and NPU yet; run calibration"),
    ({"cpu": (RatePoint(512, 400.0),), "npu": (RatePoint(1024, 900.0),)},
     "CPU: calibration measured the CPU and the NPU at different lengths; run calibration again"),
])
def test_incomplete_calibration_says_what_is_missing(rates, reason):
    assert route(cal=Calibration(rates=rates)).prefill.reason == reason


def test_bad_policy_and_length_are_refused():
    with pytest.raises(ValueError, match="unknown device policy 'gpu'; use one of auto, cpu, npu"):
        route(policy="gpu")
    with pytest.raises(ValueError, match="-1 tokens"):
        route(length=-1)


def test_qwen35_is_the_exportable_architecture():
    assert NPU_EXPORTABLE == frozenset({"qwen35"})
    assert model_caps("qwen35") == ModelCaps("qwen35", True)
    assert model_caps("lfm2") == ModelCaps("lfm2", False, "the NPU graph cannot be built for architecture lfm2 yet")
    assert not model_caps("qwen35", exportable=frozenset()).npu_graph


def test_a_file_the_exporter_refuses_is_cpu_only_with_the_exporters_reason():
    caps = model_caps("qwen35", refusal="RoPE scaling is not implemented in the NPU graph")
    assert caps == ModelCaps("qwen35", False, "the NPU graph cannot be built for this qwen35 model: "
                                              "RoPE scaling is not implemented in the NPU graph")
    plan = plan_devices(caps, ProbedDevices(CPU, QNN["npu"]), "npu", 3000, CALIBRATION)
    assert plan.prefill.device == "cpu"
    assert plan.prefill.reason == ("CPU: the NPU graph cannot be built for this qwen35 model: "
                                   "RoPE scaling is not implemented in the NPU graph")
    assert model_caps("lfm2", refusal="ignored").npu_graph_reason.endswith("architecture lfm2 yet")


# -- calibration -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cpu, npu, expected", [
    ([500, 450, 300], [200, 900, 1500], 1024),
    ([500, 450, 300], [600, 900, 1500], 256),
    ([500, 450, 300], [200, 300, 301], 4096),
    ([500, 450, 300], [200, 300, 299], None),
    ([500, 450, 300], [200, 900, 250], None),  # the NPU loses at the longest length: no crossover
    ([500, 450, 300], [600, 400, 1500], 4096),  # a win at 256 alone does not set the threshold
    ([500, 450, 300], [200, 450, 1500], 4096),  # a tie is not a win
])
def test_crossover(cpu, npu, expected):
    lengths = (256, 1024, 4096)
    cal = Calibration(rates={"cpu": tuple(map(RatePoint, lengths, cpu)), "npu": tuple(map(RatePoint, lengths, npu))})
    assert crossover(cal) == expected


def test_calibration_round_trips_through_json():
    text = json.dumps(CALIBRATION.to_dict())
    again = Calibration.from_dict(json.loads(text))
    assert again == CALIBRATION
    assert json.loads(text) == {"format": 1, "measured_with": "", "rates": {
        "cpu": [[256, 500.0], [1024, 450.0], [4096, 300.0]], "npu": [[256, 200.0], [1024, 900.0], [4096, 1500.0]]}}


GOOD = {"format": 1, "rates": {"cpu": [[256, 500.0]], "npu": [[256, 700.0]]}}


@pytest.mark.parametrize("data, message", [
    ([1, 2], "must be a JSON object, not list"),
    ({**GOOD, "format": 2}, "format 2 is not 1"),
    ({"format": 1}, "'rates' must be an object"),
    ({"format": 1, "rates": {"gpu": [[256, 1.0]]}}, "unknown device 'gpu'"),
    ({"format": 1, "rates": {"cpu": {"256": 1.0}}}, r"rates\['cpu'\] must be a list"),
    ({"format": 1, "rates": {"cpu": [[256]]}}, r"rates\['cpu'\]\[0\] must be a \[length, tokens/s\] pair"),
    ({"format": 1, "rates": {"cpu": [[256, -3]]}}, "tokens/s must be a positive number, got -3"),
    ({"format": 1, "rates": {"cpu": [[256, math.nan]]}}, "tokens/s must be a positive number, got nan"),
    ({"format": 1, "rates": {"cpu": [[256, "fast"]]}}, "tokens/s must be a positive number, got 'fast'"),
    ({"format": 1, "rates": {"cpu": [[0, 10.0]]}}, "length must be a positive whole number of tokens, got 0"),
    ({"format": 1, "rates": {"cpu": [[12.5, 10.0]]}}, "length must be a positive whole number"),
    ({"format": 1, "rates": {"cpu": [[True, 10.0]]}}, "length must be a positive whole number of tokens, got True"),
    ({"format": 1, "rates": {"cpu": [[512, 10.0], [256, 9.0]]}}, "lengths must be increasing without repeats"),
    ({"format": 1, "rates": {"cpu": [[512, 10.0], [512, 9.0]]}}, r"\(512 after 512\)"),
])
def test_malformed_calibration_is_refused_with_a_clear_error(data, message):
    with pytest.raises(CalibrationError, match=message) as caught:
        Calibration.from_dict(data)
    assert "calibration" in str(caught.value)


def test_calibrate_measures_every_device_at_every_length():
    calls = []
    speeds = {"cpu": lambda n: 400.0 - n / 20, "npu": lambda n: n / 2}  # the NPU wins from 1,024 on

    def measure(device, length):
        calls.append((device, length))
        return speeds[device](length)

    cal = calibrate(measure, lengths=(2048, 256, 1024, 256), measured_with="hybrid-tiny")
    assert calls == [("cpu", 256), ("cpu", 1024), ("cpu", 2048), ("npu", 256), ("npu", 1024), ("npu", 2048)]
    assert cal.rate("npu", 1024) == 512.0 and cal.measured_with == "hybrid-tiny"
    assert crossover(cal) == 1024
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf])
def test_calibrate_refuses_an_impossible_measurement(bad):
    with pytest.raises(CalibrationError, match=f"measuring npu at 512 tokens gave {bad!r}"):
        calibrate(lambda device, length: 100.0 if device == "cpu" else bad, lengths=(512,))


def test_calibrate_leaves_out_a_length_a_device_was_not_measured_at():
    cal = calibrate(lambda device, length: None if (device, length) == ("npu", 2048) else 100.0 + length,
                    lengths=(512, 2048))
    assert [pt.length for pt in cal.rates["cpu"]] == [512, 2048]
    assert [pt.length for pt in cal.rates["npu"]] == [512]
