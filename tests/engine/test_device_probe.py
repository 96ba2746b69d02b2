"""The device probe on this machine (x86_64 with onnxruntime-qnn: the HTP emulator), its failure
modes, its cache, and the devices reported in the handshake and the model's device plan."""

import json
import subprocess
import sys
import textwrap
import threading

import pytest

from engine import protocol as p
from engine.backends.qnn import EpDeviceFacts, QnnUnavailable, choose_device
from app.engine_clients.client import new_request_id
from engine.devices.cpu import probe_cpu
from engine.protocol.devices import QnnInfo
from engine.devices.probe import (
    CACHE_FILE, DeviceProbe, cache_key, parse_child_output, probe_qnn_in_child, read_cached, write_cached,
)
from app.engine_clients.inproc_client import InprocClient
from engine.requests.command_inbox import make_ready

QNN_EP, CPU_EP = "QNNExecutionProvider", "CPUExecutionProvider"
QUALCOMM_NPU = EpDeviceFacts(QNN_EP, "NPU", "Qualcomm", 0x5143)
HOST_CPU = EpDeviceFacts(QNN_EP, "CPU", "AMD", 0x1022)


@pytest.fixture(scope="module")
def this_machine() -> QnnInfo:
    return probe_qnn_in_child()


def test_this_machine_is_classified_as_the_npu_emulator(this_machine):
    assert this_machine.kind == "npu-emulator", this_machine.reason
    assert this_machine.device.startswith("CPU ")  # the emulator's EP device is the host CPU
    assert this_machine.soc_model == "60"  # the options the NPU path will use
    assert this_machine.version == "2.7.0"
    assert "emulator" in this_machine.reason and "emulated, slow" in this_machine.reason
    print(f"QNN probe in the child: {this_machine.probe_ms:.0f} ms")


def run_python(code: str, env=None) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_unimportable_onnxruntime_qnn_is_absent_with_the_reason():
    out = run_python("""
        import json, sys
        sys.modules["onnxruntime_qnn"] = None  # import onnxruntime_qnn now raises ImportError
        from engine.backends import qnn
        from engine.devices.probe import probe_qnn_in_child
        print(json.dumps([qnn.probe().to_dict(), probe_qnn_in_child().to_dict()]))
    """)
    in_process, via_probe = (QnnInfo.from_dict(d) for d in json.loads(out))
    assert in_process.kind == via_probe.kind == "absent"
    assert in_process.reason.startswith("onnxruntime-qnn is not installed")
    assert via_probe.reason == "onnxruntime-qnn is not installed; install Hearth's [npu] extra to use a Qualcomm NPU"


def test_a_broken_onnxruntime_qnn_is_absent_with_its_message(tmp_path, monkeypatch):
    fake = tmp_path / "onnxruntime_qnn"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise OSError("libQnnHtp.so: cannot open shared object file")\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the probe's child imports this one
    qnn = probe_qnn_in_child()
    assert qnn.kind == "absent"
    assert qnn.reason == ("onnxruntime-qnn failed to import: "
                          "OSError('libQnnHtp.so: cannot open shared object file')")


@pytest.mark.parametrize("machine, devices, kind, device", [
    ("aarch64", [EpDeviceFacts(CPU_EP, "CPU", "Qualcomm", 0x5143), QUALCOMM_NPU], "npu", QUALCOMM_NPU),
    ("ARM64", [HOST_CPU, QUALCOMM_NPU], "npu", QUALCOMM_NPU),
    ("x86_64", [HOST_CPU], "npu-emulator", HOST_CPU),
    ("AMD64", [QUALCOMM_NPU], "npu-emulator", QUALCOMM_NPU),  # x64 Python under Prism: never the real NPU
])
def test_choose_device(machine, devices, kind, device):
    assert choose_device(machine, devices) == (kind, device)


@pytest.mark.parametrize("machine, devices, message", [
    ("x86_64", [EpDeviceFacts(CPU_EP, "CPU", "AMD", 0x1022)], "onnxruntime-qnn loaded but reported no device"),
    ("aarch64", [EpDeviceFacts(QNN_EP, "GPU", "Qualcomm", 0x5143)],
     r"no Qualcomm NPU on this machine \(QNN reported only: GPU Qualcomm 0x5143\)"),
    ("arm64", [EpDeviceFacts(QNN_EP, "NPU", "Other", 0x1234)], "no Qualcomm NPU"),
])
def test_choose_device_refuses(machine, devices, message):
    with pytest.raises(QnnUnavailable, match=message):
        choose_device(machine, devices)


def test_a_crashed_child_is_absent_with_its_last_words():
    qnn = parse_child_output("noise\n", "loading\nFatal Python error: Segmentation fault\n", -11)
    assert qnn.kind == "absent"
    assert qnn.reason == "the NPU check failed (exit status -11): Fatal Python error: Segmentation fault"
    noisy = parse_child_output(' # LIBNATIVE: ...\nHEARTH-QNN-PROBE {"kind": "npu", "reason": "ok"}\n', "", 0)
    assert noisy == QnnInfo("npu", "ok")


def test_cpu_features_from_cpuinfo():
    x86 = probe_cpu("processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f\n\n"
                    "processor\t: 1\nmodel name\t: Other\n")
    assert x86.name == "Test CPU" and x86.features == ("sse4_2", "avx", "avx2", "fma", "avx512f")
    arm = probe_cpu("processor\t: 0\nFeatures\t: fp asimd asimdhp asimddp i8mm sve\n")
    assert arm.features == ("neon", "fp16", "dotprod", "i8mm", "sve")
    here = probe_cpu()
    assert here.cores >= 1 and here.name
    assert "avx2" in here.features  # this machine's CPU (an AMD EPYC) has AVX2


# -- the cache and the background check ------------------------------------------------------------


def test_a_working_classification_is_cached_per_version(tmp_path, this_machine):
    path = tmp_path / CACHE_FILE
    write_cached(path, this_machine)
    assert read_cached(path) == QnnInfo(**{**this_machine.to_dict(), "cached": True})
    stored = json.loads(path.read_text())
    stored["key"]["onnxruntime-qnn"] = "0.0.1"  # another version: the cached result no longer counts
    path.write_text(json.dumps(stored))
    assert read_cached(path) is None
    path.write_text("{not json")
    assert read_cached(path) is None


def test_failures_are_not_cached(tmp_path):
    path = tmp_path / CACHE_FILE
    write_cached(path, QnnInfo("absent", "the NPU check did not finish within 30 s"))
    assert not path.exists()


def test_a_cached_result_is_reported_at_once_without_a_new_check(tmp_path):
    path = tmp_path / CACHE_FILE
    path.write_text(json.dumps({"key": cache_key(), "qnn": QnnInfo("npu-emulator", "cached reason").to_dict()}))

    def must_not_run():
        raise AssertionError("the cache should have answered")

    probe = DeviceProbe(path, check_qnn=must_not_run)
    assert probe.qnn_if_done() == QnnInfo("npu-emulator", "cached reason", cached=True)


def test_ready_does_not_wait_for_the_npu_check(tmp_path):
    release = threading.Event()

    def slow_check():
        release.wait(30)
        return QnnInfo("npu-emulator", "checked")

    probe = DeviceProbe(tmp_path / CACHE_FILE, check_qnn=slow_check)
    ready = make_ready(probe)
    cpu, npu = ready.devices
    assert cpu.kind == "cpu" and cpu.features and "cores available" in cpu.detail
    assert npu.kind == "npu" and not npu.available and "still being checked" in npu.detail
    assert probe.wait(0.05).qnn.reason == "the NPU check did not finish within 0.05 s"
    release.set()
    assert probe.wait().qnn == QnnInfo("npu-emulator", "checked")
    assert make_ready(probe).devices[1] == p.DeviceInfo(
        kind="npu-emulator", name="Qualcomm NPU (QNN HTP), emulated, slow", detail="checked")
    assert read_cached(tmp_path / CACHE_FILE).reason == "checked"  # cached for the next start


def test_a_crashing_check_is_absent_not_fatal():
    def crash():
        raise RuntimeError("boom")

    qnn = DeviceProbe(None, check_qnn=crash).wait().qnn
    assert qnn == QnnInfo("absent", "the NPU check failed: RuntimeError('boom')")


# -- through the worker ----------------------------------------------------------------------------


def test_the_handshake_and_the_model_plan_report_the_probe(tmp_path, hybrid_tiny):
    client = InprocClient(telemetry_interval_ms=0, data_dir=tmp_path)
    ready = client.start()
    try:
        assert [d.kind for d in ready.devices][0] == "cpu"
        plans = {policy: load(client, hybrid_tiny, policy).devices for policy in ("auto", "npu", "cpu")}
        npu = make_ready().devices[1]  # the probe has finished by now (the load waited for it)
    finally:
        client.close()
    assert npu.kind == "npu-emulator" and npu.available
    assert plans["auto"].prefill == p.PhaseDevice(
        "cpu", "CPU: only the NPU emulator is here (emulated, slow); it is used only when forced")
    assert plans["npu"].prefill == p.PhaseDevice("npu-emulator", "NPU emulator (forced; emulated, slow)")
    assert plans["cpu"].prefill.reason == plans["cpu"].decode.reason == "CPU: policy is CPU"
    assert all(plan.decode.device == plan.draft.device == "cpu" for plan in plans.values())


def load(client, model, policy) -> p.ModelLoaded:
    command = p.LoadModel(request_id=new_request_id("load"), model=str(model), device_policy=policy)
    events = list(client.stream(command, timeout=120))
    assert isinstance(events[-1], p.ModelLoaded), events
    return events[-1]


def test_an_unknown_device_policy_is_refused_as_a_bad_message():
    with pytest.raises(Exception, match="device_policy"):
        p.decode_command(p.encode(p.LoadModel(request_id="r", model="m", device_policy="gpu")))
