"""``hearth devices`` and ``hearth devices calibrate``: what can run the model here, and how fast.

Calibration reads a few input lengths on each device with the chosen model and stores the speeds in
the settings; the router then sends a new input to the NPU only from the length where this
machine's NPU measured faster than its CPU (the crossover). The NPU emulator is timed only with
``--include-emulator`` and is never used automatically.
"""

from __future__ import annotations

import argparse
import json

import msgspec

from app.surfaces.cli.commands import UserError, engine_for
from app.surfaces.cli.terminal_text import visible
from app.services.model_refs import model_display_name
from app.services.settings import SettingsError, app_data_dir, current_settings, save_settings
from app.services.paths import user_paths
from engine import protocol as p
from app.engine_clients.client import new_request_id
from engine.devices.calibration import crossover, stored_calibration
from engine.protocol.devices import device_infos
from engine.devices.probe import start_probe

PROBE_WAIT_S = 40.0


def run_devices(args: argparse.Namespace) -> int:
    probed = start_probe(app_data_dir()).wait(PROBE_WAIT_S)
    devices = device_infos(probed.cpu, probed.qnn)
    calibration = stored_calibration(current_settings().device_calibration)
    report = {"devices": [msgspec.to_builtins(d) for d in devices],
              "calibration": calibration.to_dict() if calibration else None,
              "crossover": crossover(calibration) if calibration else None}
    if args.json:
        print(json.dumps(report))
        return 0
    for device in devices:
        state = "" if device.available else " (not available)"
        print(f"{device.kind:<13} {visible(device.name)}{state}: {visible(device.detail)}")  # the system's words
    has_npu = any(device.kind == "npu" and device.available for device in devices)
    print(_calibration_text(report["calibration"], report["crossover"], has_npu=has_npu))
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    lengths = _lengths(args.lengths)
    ref = args.model or current_settings().model
    with engine_for(ref) as (client, loaded):
        command = p.Calibrate(request_id=new_request_id("cal"), lengths=lengths,
                              include_emulator=args.include_emulator)
        result = None
        for event in client.stream(command):
            if isinstance(event, p.Error):
                raise UserError(event.message)
            if isinstance(event, p.Calibrated):
                result = event
    if result is None:
        raise UserError("the engine ended calibration without an answer")
    settings = msgspec.structs.replace(current_settings(), device_calibration=result.calibration)
    try:
        save_settings(settings, user_paths().ensure().config, npu_available=True)
    except SettingsError as exc:
        raise UserError(f"measured, but could not store the calibration: {exc}") from exc
    if args.json:
        print(json.dumps({"calibration": result.calibration, "crossover": result.crossover, "notes": result.notes,
                          "model": model_display_name(ref, app_data_dir(), loaded.facts.name)}))
    else:
        print(_calibration_text(result.calibration, result.crossover))
        for note in result.notes:
            print(f"note: {visible(note)}")
    return 0


def _lengths(text: str) -> list[int]:
    """``--lengths 64,256,1024`` as numbers; anything else is refused in words."""
    try:
        return [int(n) for n in text.split(",")] if text.strip() else []
    except ValueError:
        raise UserError(f"--lengths takes whole numbers separated by commas, like 64,256,1024; got {text!r}") from None


def _calibration_text(calibration: dict | None, threshold: int | None, *, has_npu: bool = True) -> str:
    if calibration is None and not has_npu:
        return ("No NPU here: every input is read on the CPU. Calibration matters only on a machine with a real "
                "NPU; there is nothing to calibrate.")
    if calibration is None:
        return "Not calibrated: long inputs stay on the CPU until `hearth devices calibrate` measures the NPU."
    lines = [f"Prefill speed measured with {calibration['measured_with']} (tokens/s):"]
    for device, points in calibration["rates"].items():
        lines.append(f"  {device:<13} " + ", ".join(f"{length}: {rate:,.0f}" for length, rate in points))
    lines.append(f"The NPU reads new inputs of {threshold:,} tokens or more." if threshold
                 else "The CPU reads every measured length faster: prefill stays on the CPU.")
    return "\n".join(lines)
