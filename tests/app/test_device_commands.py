"""``hearth devices`` and ``hearth devices calibrate`` with real engines: what this machine has,
measured prefill speeds stored in the settings, and the engine receiving them at load."""

import json

from app.surfaces.cli.main import main
from app.services.settings import current_settings
from engine.devices.calibration import Calibration


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_devices_lists_the_cpu_and_this_machines_npu_emulator(capsys):
    code, out, err = run(capsys, "devices", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [d["kind"] for d in report["devices"]] == ["cpu", "npu-emulator"]
    assert report["calibration"] is None and report["crossover"] is None


def test_calibrate_measures_cpu_and_the_emulator_and_stores_the_speeds(capsys, hybrid_tiny):
    code, out, err = run(capsys, "devices", "calibrate", "--model", str(hybrid_tiny), "--include-emulator",
                         "--lengths", "16,48,400", "--json")
    assert code == 0, err
    result = json.loads(out)
    rates = Calibration.from_dict(result["calibration"]).rates
    assert [pt.length for pt in rates["cpu"]] == [16, 48, 400]
    assert [pt.length for pt in rates["npu-emulator"]] == [16, 48]  # the emulator is capped: it is slow
    assert any("400" in note for note in result["notes"])
    assert result["crossover"] is None  # llama.cpp on this CPU out-reads the emulated HTP everywhere
    assert current_settings().device_calibration == result["calibration"]
    code, out, _ = run(capsys, "devices", "--json")
    assert json.loads(out)["calibration"] == result["calibration"]


def test_calibrating_a_model_without_an_npu_graph_measures_the_cpu_and_says_why(capsys):
    code, out, err = run(capsys, "devices", "calibrate", "--model", "default", "--include-emulator",
                         "--lengths", "16,32", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert list(result["calibration"]["rates"]) == ["cpu"]
    assert any("npu-emulator not measured" in note for note in result["notes"])


def test_without_a_real_npu_devices_does_not_suggest_calibrating(capsys):
    code, out, err = run(capsys, "devices")
    assert code == 0, err
    assert "devices calibrate" not in out and "Calibration matters only on a machine with a real NPU" in out


def test_lengths_that_are_not_numbers_are_refused_in_words(capsys):
    code, out, err = run(capsys, "devices", "calibrate", "--lengths", "a,b")
    assert code != 0 and "--lengths takes whole numbers" in err and "Traceback" not in err
