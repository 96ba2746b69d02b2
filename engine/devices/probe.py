"""The device probe: once per process, without delaying the worker's ``Ready``.

The CPU part is read synchronously (a millisecond). The QNN part costs most of a second
(importing onnxruntime, then compiling and running a one-node graph on the HTP), so:

* it runs in a **child process** (``python -m engine.backends.qnn``). QNN backend options stick for
  the process that first creates a session, a broken native library can crash its process, and
  the worker should not carry onnxruntime's libraries until the NPU is really used;
* that child is started from a **background thread** at the handshake, so ``Ready`` goes out at
  once; ``Ready`` lists the NPU as "still being checked" unless the result is already known;
* a successful classification is **cached on disk** (``device-probe.json`` in the data folder),
  keyed by the onnxruntime and onnxruntime-qnn versions and the process architecture, so every
  later start reports it in ``Ready`` immediately. Failures are not cached: they are re-checked.

``LoadModel`` waits for the result (:meth:`DeviceProbe.wait`): loading a model takes longer than
the check, so the device plan always uses the real classification.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import engine
from engine.backends.qnn import RESULT_MARKER
from engine.protocol.child_command import NPU_CHECK, is_bundled, module_command
from engine.devices.cpu import probe_cpu
from engine.protocol.devices import CpuInfo, ProbedDevices, QnnInfo
from model_store.private_files import make_private_folder, repair, write_private

PROBE_TIMEOUT_S = 30.0
CACHE_FILE = "device-probe.json"
CACHE_FORMAT = 1


def probe_qnn_in_child(timeout_s: float = PROBE_TIMEOUT_S) -> QnnInfo:
    """Classify QNN HTP in a short child process. Never raises: failures are ``absent``."""
    missing = _missing_package()
    if missing:
        return QnnInfo("absent", missing)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_package_root(), env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(module_command(NPU_CHECK), capture_output=True, text=True,
                              errors="replace", env=env, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return QnnInfo("absent", f"the NPU check did not finish within {timeout_s:g} s",
                       version=_version("onnxruntime-qnn"))
    except OSError as exc:
        return QnnInfo("absent", f"the NPU check could not start: {exc}", version=_version("onnxruntime-qnn"))
    return parse_child_output(done.stdout, done.stderr, done.returncode)


def parse_child_output(stdout: str, stderr: str, returncode: int) -> QnnInfo:
    """The child's result line, or ``absent`` saying how the child failed."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                return QnnInfo.from_dict(json.loads(line[len(RESULT_MARKER):]))
            except (ValueError, TypeError) as exc:
                return QnnInfo("absent", f"the NPU check printed an unreadable result: {exc}")
    last = (stderr.strip().splitlines() or ["no message"])[-1]
    return QnnInfo("absent", f"the NPU check failed (exit status {returncode}): {last}",
                   version=_version("onnxruntime-qnn"))


def _missing_package() -> str:
    for module, package in (("onnxruntime", "onnxruntime"), ("onnxruntime_qnn", "onnxruntime-qnn")):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found and is_bundled():
            return "this build of Hearth has no NPU support; the Windows on Arm build has it"
        if not found:
            return f"{package} is not installed; install Hearth's [npu] extra to use a Qualcomm NPU"
    return ""


def _package_root() -> str:
    """The folder holding the ``engine`` package, so the child imports the same code."""
    return str(Path(engine.__file__).resolve().parent.parent)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


# -- the on-disk cache ----------------------------------------------------------------------------


def cache_key() -> dict[str, str]:
    """What a cached classification depends on: the runtime versions and the process architecture."""
    return {"format": str(CACHE_FORMAT), "onnxruntime": _version("onnxruntime"),
            "onnxruntime-qnn": _version("onnxruntime-qnn"), "system": platform.system(),
            "machine": platform.machine()}


def read_cached(path: Path) -> QnnInfo | None:
    """The cached classification if it was made with this key; ``None`` when absent, stale or unreadable."""
    try:
        data = json.loads(path.read_text())
        if data.get("key") != cache_key():
            return None
        qnn = QnnInfo.from_dict(data["qnn"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return replace(qnn, cached=True)


def write_cached(path: Path, qnn: QnnInfo) -> None:
    """Remember a classification that worked; failures are re-checked next time. Best effort."""
    if qnn.kind == "absent":
        return
    tmp = path.with_name(path.name + ".tmp")
    try:
        make_private_folder(path.parent)
        write_private(tmp, json.dumps({"key": cache_key(), "qnn": qnn.to_dict()}, indent=1))
        os.replace(tmp, path)
    except OSError as exc:
        print(f"hearth: could not cache the NPU check in {path}: {exc}", file=sys.stderr)


# -- the process's one probe ----------------------------------------------------------------------


class DeviceProbe:
    """The CPU now; QNN from the cache or from a child process on a background thread."""

    def __init__(self, cache_path: Path | None = None,
                 check_qnn: Callable[[], QnnInfo] = probe_qnn_in_child) -> None:
        self.cpu: CpuInfo = probe_cpu()
        self._cache_path = cache_path
        self._check_qnn = check_qnn
        self._qnn: QnnInfo | None = read_cached(cache_path) if cache_path is not None else None
        self._done = threading.Event()
        if self._qnn is not None:
            self._done.set()
        else:
            threading.Thread(target=self._run, name="qnn-probe", daemon=True).start()

    def _run(self) -> None:
        try:
            qnn = self._check_qnn()
        except Exception as exc:  # the check must never take the worker down
            qnn = QnnInfo("absent", f"the NPU check failed: {exc!r}")
        if self._cache_path is not None:
            write_cached(self._cache_path, qnn)
        self._qnn = qnn
        self._done.set()

    def qnn_if_done(self) -> QnnInfo | None:
        return self._qnn if self._done.is_set() else None

    def wait(self, timeout_s: float = PROBE_TIMEOUT_S + 5) -> ProbedDevices:
        """Everything probed; if QNN is still being checked after ``timeout_s``, it counts as absent."""
        if not self._done.wait(timeout_s):
            return ProbedDevices(self.cpu, QnnInfo("absent", f"the NPU check did not finish within {timeout_s:g} s"))
        return ProbedDevices(self.cpu, self._qnn)


_lock = threading.Lock()
_probe: DeviceProbe | None = None


def start_probe(data_dir: Path | None = None) -> DeviceProbe:
    """The process's probe, started on first call (later calls return it; ``data_dir`` then has no effect)."""
    global _probe
    with _lock:
        if _probe is None:
            _probe = DeviceProbe(data_dir / CACHE_FILE if data_dir is not None else None)
            if data_dir is not None:
                repair([data_dir / CACHE_FILE])  # an older Hearth wrote it 0644
        return _probe


def probed_devices() -> ProbedDevices:
    """Wait for the process's probe (starting it without a disk cache if nothing started it)."""
    return start_probe().wait()
