"""The onnxruntime-qnn adapter: the only module that imports ``onnxruntime`` / ``onnxruntime_qnn``.

Both are imported inside functions, never at module level, so importing this module costs
nothing and a worker that never touches the NPU never loads them (onnxruntime alone takes
a noticeable part of a second to import). The adapter does three things:

* registers onnxruntime-qnn's plugin execution provider (once per process) and builds the HTP
  provider options the NPU prefill path uses (``soc_model`` always set, CPU fallback off);
* the QNN half of the device probe (:func:`probe`): classify the HTP as a real NPU, the x86
  emulator or absent, proving "emulator" by compiling and running a one-node graph;
* sessions for exported graphs (:func:`htp_session`, :func:`cpu_session`, :func:`run`), optionally
  writing an EP-context model (the compiled graph) that a later :func:`htp_session` loads in
  milliseconds instead of compiling again (``qnn-htp.md`` §0.8).

QNN backend options stick for the whole process (``notes/qnn-htp.md`` §0.3): the first HTP session
fixes them, and :func:`htp_session` refuses a later one that asks for different options instead of
silently getting the first ones. A broken native library can crash the process that loads it, so
the worker never calls :func:`probe` itself: it runs ``python -m engine.backends.qnn`` (see
:mod:`engine.devices.probe`), which prints one result line tagged with :data:`RESULT_MARKER`. The
QNN libraries print their own lines on file descriptor 1 when the backend first loads, so session
creation points fd 1 at stderr meanwhile (the CLI's ``--json`` output is on stdout).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import os
import platform
import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

from engine.protocol.devices import EMULATED_LABEL, QnnInfo

EP_NAME = "QNNExecutionProvider"
QUALCOMM_VENDOR_ID = 0x5143  # ort.OrtDeviceVendorId.QUALCOMM
EMULATOR_SOC_MODEL = "60"  # SC8380XP (X Elite, HTP v73); the emulator fails real graphs without one
RESULT_MARKER = "HEARTH-QNN-PROBE "
ARM64_MACHINES = frozenset({"arm64", "aarch64", "armv8", "armv8l"})

_register_lock = threading.Lock()
_registered_path: str | None = None
_session_lock = threading.Lock()
_process_options: dict[str, str] | None = None  # the HTP options this process's first session used


class QnnUnavailable(Exception):
    """The QNN HTP cannot be used here; the message says why (it becomes the user's reason)."""


@dataclass(frozen=True)
class EpDeviceFacts:
    """What onnxruntime reports about one device an execution provider can run on."""

    ep_name: str
    type: str  # "CPU", "GPU", "NPU"
    vendor: str
    vendor_id: int

    def describe(self) -> str:
        return f"{self.type} {self.vendor} {self.vendor_id:#06x}"


def is_arm64(machine: str) -> bool:
    return machine.lower() in ARM64_MACHINES


def choose_device(machine: str, devices: list[EpDeviceFacts]) -> tuple[str, EpDeviceFacts]:
    """Pick the QNN device to check and the kind it would be: ("npu", dev) or ("npu-emulator", dev).

    A real NPU needs an ARM64 process and a Qualcomm NPU device; an x64 process (even under
    Prism on a Snapdragon laptop) only ever gets the emulator. Raises :class:`QnnUnavailable`.
    """
    qnn = [d for d in devices if d.ep_name == EP_NAME]
    if not qnn:
        raise QnnUnavailable("onnxruntime-qnn loaded but reported no device")
    if is_arm64(machine):
        npus = [d for d in qnn if d.type == "NPU" and d.vendor_id == QUALCOMM_VENDOR_ID]
        if npus:
            return "npu", npus[0]
        found = ", ".join(d.describe() for d in qnn)
        raise QnnUnavailable(f"no Qualcomm NPU on this machine (QNN reported only: {found})")
    return "npu-emulator", qnn[0]


def register_ep() -> str:
    """Register onnxruntime-qnn's plugin EP once per process; returns its library path."""
    global _registered_path
    with _register_lock:
        if _registered_path is not None:
            return _registered_path
        ort, oq = _import_runtime()
        path = oq.get_library_path()
        try:
            ort.register_execution_provider_library(EP_NAME, path)
        except Exception as exc:  # onnxruntime raises its own Fail/RuntimeException types
            raise QnnUnavailable(f"the QNN library failed to load ({path}): {exc}") from exc
        _registered_path = path
        return path


def htp_provider_options(soc_model: str) -> dict[str, str]:
    """The HTP options of every Hearth session in a process (they stick once one session used them).

    ``soc_model`` is required on the emulator (:data:`EMULATOR_SOC_MODEL`); "" on a real NPU lets
    QNN read the SoC from the device (not yet confirmed on Snapdragon hardware).
    """
    options = {"backend_type": "htp"}
    if soc_model:
        options["soc_model"] = soc_model
    return options


def probe() -> QnnInfo:
    """Classify QNN HTP in this process. Never raises: a failure is ``absent`` with its reason."""
    started = time.perf_counter()
    version = _package_version()
    try:
        kind, device, soc_model = _find_and_check()
    except QnnUnavailable as exc:
        return QnnInfo("absent", str(exc), version=version, probe_ms=_ms_since(started))
    except Exception as exc:  # an onnxruntime API that changed shape, ...: still an answer, not a crash
        return QnnInfo("absent", f"the NPU check failed unexpectedly: {exc!r}", version=version,
                       probe_ms=_ms_since(started))
    if kind == "npu":
        reason = f"Qualcomm NPU found ({device.describe()}) and a test graph ran on it"
    else:
        reason = (f"{platform.machine()} process: onnxruntime-qnn runs the HTP as an emulator on the CPU "
                  f"(device {device.describe()}); it is only used when forced ({EMULATED_LABEL})")
    return QnnInfo(kind, reason, version=version, device=device.describe(), soc_model=soc_model,
                   probe_ms=_ms_since(started))


def _find_and_check() -> tuple[str, EpDeviceFacts, str]:
    register_ep()
    ort, _ = _import_runtime()
    facts, handles = _ep_devices(ort)
    kind, device = choose_device(platform.machine(), facts)
    soc_model = "" if kind == "npu" else EMULATOR_SOC_MODEL
    _run_test_graph(ort, handles[facts.index(device)], htp_provider_options(soc_model))
    return kind, device, soc_model


def _import_runtime():
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise QnnUnavailable(f"onnxruntime is not installed or failed to import ({exc})") from exc
    if not hasattr(ort, "register_execution_provider_library"):
        raise QnnUnavailable(f"onnxruntime {ort.__version__} is too old for plugin execution providers; "
                             "install the version Hearth ships with")
    try:
        import onnxruntime_qnn as oq
    except ImportError as exc:
        raise QnnUnavailable(f"onnxruntime-qnn is not installed ({exc}); install Hearth's [npu] extra "
                             "to use a Qualcomm NPU") from exc
    except Exception as exc:  # a broken wheel can raise anything while loading its libraries
        raise QnnUnavailable(f"onnxruntime-qnn failed to import: {exc!r}") from exc
    return ort, oq


def _ep_devices(ort) -> tuple[list[EpDeviceFacts], list]:
    handles = list(ort.get_ep_devices())
    facts = [EpDeviceFacts(d.ep_name, d.device.type.name, d.device.vendor, int(d.device.vendor_id))
             for d in handles]
    return facts, handles


def _run_test_graph(ort, device, options: dict[str, str]) -> None:
    """Compile and run ``y = x + x`` on the HTP with CPU fallback off, so success proves the HTP ran it."""
    import numpy as np

    so = ort.SessionOptions()
    so.log_severity_level = 3  # errors only: the check's own failure message is what the user sees
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    so.add_provider_for_devices([device], options)
    try:
        session = ort.InferenceSession(_one_node_model(), sess_options=so)
        x = np.arange(4, dtype=np.float32).reshape(1, 4)
        (y,) = session.run(None, {"x": x})
    except Exception as exc:
        raise QnnUnavailable(f"the QNN HTP backend could not run a test graph: {exc}") from exc
    if not np.allclose(y, 2 * x, rtol=1e-2):
        raise QnnUnavailable(f"the QNN HTP backend computed x + x wrongly ({y.ravel().tolist()})")


# -- running exported graphs (the NPU prefill) -----------------------------------------------------


def cpu_session(model: bytes, *, n_threads: int = 0):
    """An onnxruntime session on the plain CPU execution provider (no QNN involved).

    This is how an exported prefill graph is checked against llama.cpp: the CPU EP computes in
    fp32, so any difference beyond rounding is a difference of model, not of device.
    """
    ort = _import_onnxruntime()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if n_threads:
        so.intra_op_num_threads = n_threads
    return ort.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"])


def htp_session(model: bytes | str, soc_model: str | None = None, *, context_file: str | None = None):
    """A session on the QNN HTP with CPU fallback disabled: creation fails unless every node runs there.

    ``model`` is a serialized graph, or the path of an EP-context model written earlier.
    ``context_file``: also write the compiled graph there as an EP-context model (the QNN binary
    beside it, ``embed_mode`` 0). ``soc_model`` None: "" on a real NPU (QNN reads the SoC),
    :data:`EMULATOR_SOC_MODEL` on the emulator. Raises :class:`QnnUnavailable` saying why.
    """
    register_ep()
    ort, _ = _import_runtime()
    facts, handles = _ep_devices(ort)
    kind, device = choose_device(platform.machine(), facts)
    if soc_model is None:
        soc_model = "" if kind == "npu" else EMULATOR_SOC_MODEL
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if context_file is not None:
        for key, value in (("ep.context_enable", "1"), ("ep.context_file_path", context_file),
                           ("ep.context_embed_mode", "0")):
            so.add_session_config_entry(key, value)
    options = htp_provider_options(soc_model)
    so.add_provider_for_devices([handles[facts.index(device)]], options)
    with _session_lock, _native_prints_to_stderr():
        _fix_options(options)
        try:
            return ort.InferenceSession(model, sess_options=so)
        except Exception as exc:  # onnxruntime's own exception types; the message names the node or QNN error
            raise QnnUnavailable(f"the QNN HTP could not prepare the graph: {exc}") from exc


def htp_soc_model() -> str:
    """The ``soc_model`` :func:`htp_session` uses by default here ("" on a real NPU)."""
    register_ep()
    ort, _ = _import_runtime()
    kind, _ = choose_device(platform.machine(), _ep_devices(ort)[0])
    return "" if kind == "npu" else EMULATOR_SOC_MODEL


def runtime_versions() -> dict[str, str]:
    """The onnxruntime and onnxruntime-qnn versions (a compiled graph is only valid for the same ones)."""
    versions = {}
    for package in ("onnxruntime", "onnxruntime-qnn"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = ""
    return versions


def _fix_options(options: dict[str, str]) -> None:
    global _process_options
    if _process_options is None:
        _process_options = dict(options)
    elif _process_options != options:
        raise QnnUnavailable(f"QNN options {options} differ from {_process_options}, which this process already "
                             "used; QNN keeps a process's first options, so use another process")


@contextmanager
def _native_prints_to_stderr():
    """Point file descriptor 1 at stderr while QNN's native code may print to it."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def run(session, feeds: dict) -> dict:
    """Run a session on ``{input name: numpy array}``; returns ``{output name: numpy array}``."""
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def _import_onnxruntime():
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise QnnUnavailable(f"onnxruntime is not installed or failed to import ({exc})") from exc
    return ort


def _one_node_model() -> bytes:
    """``y = Add(x, x)``, x and y float32 [1, 4]: the smallest graph that proves the HTP compiles."""
    from onnx import TensorProto, helper

    x, y = (helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 4]) for name in ("x", "y"))
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "hearth-probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="hearth")
    model.ir_version = 8
    return model.SerializeToString()


def _package_version() -> str:
    try:
        return importlib.metadata.version("onnxruntime-qnn")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _die_with_parent() -> None:
    """Linux: the probe child must not outlive (and hold the NPU for) a worker that was killed."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def main() -> None:
    """``python -m engine.backends.qnn``: probe, then print the result line for the parent."""
    _die_with_parent()
    print(RESULT_MARKER + json.dumps(probe().to_dict()), flush=True)


if __name__ == "__main__":
    main()
