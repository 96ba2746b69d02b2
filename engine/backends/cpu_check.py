"""Choosing this machine's CPU build of llama.cpp: the fastest one whose canary passed here.

The builds are tried fastest first (:mod:`engine.backends.cpu_variants`). A build this CPU does not
support is skipped; one that it claims to support runs the canary (:mod:`engine.backends.canary`)
in a child process first. A child that dies (any signal) or fails marks that build unusable and
the next, safer one is tried. The outcome is cached in ``cpu-check.json`` (the data folder, or
``HEARTH_CPU_CHECK_FILE``) under a key made of this machine (its id, CPU name and every CPU flag),
the library build (its build key and files) and the set of builds, so it is re-checked when any of
them changes and a home folder shared between two machines keeps one entry for each. A timeout, a
kill from outside (SIGKILL, SIGTERM) or another failure that is not a native crash is not cached: it
is checked again next time.

``HEARTH_CPU_VARIANT`` (or the ``cpu_variant`` a client sends in ``Hello``) asks for ``auto`` (the
above), ``safe`` (the same, safest build first) or one build by name. The choice is made once per
process: ggml cannot swap its CPU backend under a loaded model.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from engine.protocol.child_command import CPU_CANARY, VARIANT_ENV, module_command
from engine.backends.faults import FAULT_ENV, only_stage
from engine.protocol.deaths import CRASH_WORDS, death_signal
from engine.backends.cpu_variants import CpuBackendError, CpuVariant, VariantSet, load_variant, read_variant_set
from model_store.private_files import make_private_folder, repair, write_private

CHECK_FILE = "cpu-check.json"
RESULT_MARKER = "HEARTH-CANARY "  # the canary child's result line (engine.backends.canary)
CHECK_FILE_ENV = "HEARTH_CPU_CHECK_FILE"
CACHE_FORMAT = 3  # also what the canary checks: 3 from its 15-row verify batch
CACHE_ENTRIES = 8  # machines sharing one home folder
CANARY_TIMEOUT_S = 120.0
CACHED_STATUSES = ("ok", "unsupported", "crashed")


@dataclass(frozen=True)
class CanaryResult:
    status: str  # "ok", "unsupported" (this CPU lacks what the build needs), "crashed", "failed"
    detail: str
    signal: str = ""  # "SIGILL", ... when crashed
    types: dict = field(default_factory=dict)  # weight type -> "repacked", "plain" or "none" (engine.backends.canary)


@dataclass(frozen=True)
class CpuChoice:
    variant: str  # the build in use, or "built-in" for a llama-cpp-python with one CPU backend linked in
    reason: str
    features: tuple[str, ...] = ()
    results: dict[str, CanaryResult] = field(default_factory=dict)
    requested: str = "auto"
    cached: bool = False
    exact_rows: int = 0  # batches shorter than this are bit-exact per row (the build's patches); 0: unknown

    def kernels_for(self, weight_type: str | None) -> tuple[bool, bool]:
        """(repack, exact): whether to load ``weight_type`` weights with ggml's repacked layouts, and
        whether a short batch then gives exactly the single-token logits, as this build's canary
        measured. A type the canary did not check gets the plain kernels, which compute each row
        alone below ``exact_rows``; a llama-cpp-python not built by Hearth is taken as it is."""
        result = self.results.get(self.variant)
        if result is None:
            return True, True
        mode = result.types.get(weight_type or "", "plain")
        return mode == "repacked", mode != "none"


_lock = threading.Lock()
_choice: CpuChoice | None = None


def active() -> CpuChoice | None:
    """The process's choice, once made."""
    return _choice


def adopt(variant: CpuVariant, reason: str) -> None:
    """Record a build loaded by other means (the canary child loads the one it tests)."""
    global _choice
    _choice = CpuChoice(variant.name, reason, variant.features)


def check_file(data_dir: Path | None) -> Path | None:
    override = os.environ.get(CHECK_FILE_ENV)
    if override:
        return Path(override)
    return data_dir / CHECK_FILE if data_dir is not None else None


def ensure_cpu_backend(data_dir: Path | None = None, requested: str = "") -> CpuChoice:
    """Choose and load this process's CPU build (once); raises :class:`CpuBackendError` if none runs."""
    global _choice
    with _lock:
        if _choice is not None:
            return _choice
        requested = requested_variant(requested)
        variants = read_variant_set()
        if variants is None:
            _choice = CpuChoice("built-in", "this llama-cpp-python has one CPU backend linked in (not Hearth's "
                                "portable build); run the set-up command to get it", requested=requested)
            return _choice
        choice = choose(variants, requested, check_file(data_dir))
        load_variant(variants.named(choice.variant), variants.registry)
        _choice = replace(choice, exact_rows=variants.exact_rows)
        return _choice


def requested_variant(requested: str) -> str:
    """What to load: the client's ``cpu_variant`` unless it is the default ``auto``, in which case
    ``HEARTH_CPU_VARIANT`` (the user's override, which every client's Hello would otherwise hide)."""
    if requested and requested != "auto":
        return requested
    return os.environ.get(VARIANT_ENV) or "auto"


def choose(variants: VariantSet, requested: str, cache_path: Path | None) -> CpuChoice:
    """Try the candidates in order, from the cache where it knows them, until one passes."""
    key = cache_key(variants)
    if cache_path is not None:
        repair([cache_path])  # an older Hearth wrote it 0644
    known = read_cache(cache_path, key)
    results: dict[str, CanaryResult] = {}
    cached = True
    for variant in candidates(variants, requested):
        result = known.get(variant.name)
        if result is None:
            cached = False
            result = run_canary(variant)
        results[variant.name] = result
        if result.status == "ok":
            if not cached:
                write_cache(cache_path, key, {**known, **results})
            return CpuChoice(variant.name, _reason(variant, variants, requested, results), variant.features,
                             results, requested, cached)
    write_cache(cache_path, key, {**known, **results})
    raise CpuBackendError(_nothing_runs(requested, results))


def _nothing_runs(requested: str, results: dict[str, CanaryResult]) -> str:
    tried = "; ".join(f"{name}: {describe(r)}" for name, r in results.items())
    if requested in ("auto", "safe"):
        return (f"none of the CPU builds of llama.cpp runs on this machine ({tried}); "
                "run `hearth doctor` and report its output")
    return (f"the CPU build {requested} (asked for by name) does not run on this machine ({tried}); "
            f"ask for auto instead ({VARIANT_ENV}=auto) to get one that does")


def candidates(variants: VariantSet, requested: str) -> list[CpuVariant]:
    if requested == "auto":
        return list(variants.variants)
    if requested == "safe":
        return list(reversed(variants.variants))
    variant = variants.named(requested)
    if variant is None:
        raise CpuBackendError(f"there is no CPU build named {requested!r}; the builds here are "
                              f"{', '.join(variants.names)} (or use auto or safe)")
    return [variant]


def describe(result: CanaryResult) -> str:
    if result.status == "crashed":
        return f"crashed ({result.signal}) in its canary"
    if result.status == "unsupported":
        return "not for this CPU"
    return result.detail if result.status == "failed" else "canary passed"


def _reason(chosen: CpuVariant, variants: VariantSet, requested: str, results: dict[str, CanaryResult]) -> str:
    skipped = [f"{name}: {describe(r)}" for name, r in results.items() if name != chosen.name]
    how = {"auto": "the fastest build whose canary passed on this machine",
           "safe": "the safest build (asked for)"}.get(requested, "asked for by name; its canary passed")
    return how + (f" (skipped {'; '.join(skipped)})" if skipped else "")


# -- the canary child -----------------------------------------------------------------------------


def run_canary(variant: CpuVariant, timeout_s: float = CANARY_TIMEOUT_S) -> CanaryResult:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the folder holding the engine package
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    env.pop(VARIANT_ENV, None)
    if FAULT_ENV in env:
        env[FAULT_ENV] = only_stage("canary", env[FAULT_ENV])
    try:
        done = subprocess.run([*module_command(CPU_CANARY), variant.name],
                              capture_output=True, text=True, errors="replace", env=env, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return CanaryResult("failed", f"the canary did not finish within {timeout_s:g} s")
    except OSError as exc:
        return CanaryResult("failed", f"the canary could not start: {exc}")
    return parse_canary_output(done.stdout, done.stderr, done.returncode)


def _killed_by(name: str) -> CanaryResult:
    """A native crash (SIGILL, SIGSEGV, ...) is the build's fault and is cached; any other signal
    (SIGKILL from the out-of-memory killer, SIGTERM at log-out) is not, and is checked again next time."""
    if name in CRASH_WORDS:
        return CanaryResult("crashed", "the canary died", signal=name)
    return CanaryResult("failed", f"the canary was stopped by {name}", signal=name)


def parse_canary_output(stdout: str, stderr: str, returncode: int) -> CanaryResult:
    if (name := death_signal(returncode)) is not None:
        return _killed_by(name)
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                data = json.loads(line[len(RESULT_MARKER):])
                return CanaryResult(data["status"], data["detail"], types=data.get("types", {}))
            except (ValueError, KeyError, TypeError) as exc:
                return CanaryResult("failed", f"the canary printed an unreadable result: {exc}")
    last = (stderr.strip().splitlines() or ["no message"])[-1]
    return CanaryResult("failed", f"the canary exited with status {returncode}: {last}")


# -- the cache ------------------------------------------------------------------------------------


def machine_id() -> dict[str, str]:
    """What identifies this machine's CPU as a program sees it."""
    ident = ""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            ident = Path(path).read_text().strip()
            break
        except OSError:
            continue
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        cpuinfo = ""
    fields = [line for line in cpuinfo.splitlines()
              if line.split(":", 1)[0].strip() in ("model name", "flags", "Features", "CPU implementer", "CPU part")]
    return {"id": ident or socket.gethostname(), "machine": platform.machine(), "processor": platform.processor(),
            "cpu": hashlib.sha256("\n".join(sorted(set(fields))).encode()).hexdigest()[:32]}


def cache_key(variants: VariantSet) -> dict:
    files = {v.name: v.path.stat().st_size if v.path.exists() else -1 for v in variants.variants}
    return {"format": CACHE_FORMAT, "machine": machine_id(), "build": variants.build_key, "variants": files}


def read_cache(path: Path | None, key: dict) -> dict[str, CanaryResult]:
    for entry in _entries(path):
        if entry.get("key") == key:
            try:
                return {name: CanaryResult(**r) for name, r in entry["results"].items()}
            except (TypeError, KeyError, AttributeError):
                return {}
    return {}


def _entries(path: Path | None) -> list[dict]:
    if path is None:
        return []
    try:
        data = json.loads(path.read_text())
        entries = data["entries"]
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    except (OSError, ValueError, KeyError, TypeError):
        return []


def write_cache(path: Path | None, key: dict, results: dict[str, CanaryResult]) -> None:
    """Keep what is worth keeping (not timeouts or other passing failures). Best effort."""
    if path is None:
        return
    kept = {name: asdict(r) for name, r in results.items() if r.status in CACHED_STATUSES}
    entries = [e for e in _entries(path) if e.get("key") != key][-(CACHE_ENTRIES - 1):]
    entries.append({"key": key, "results": kept})
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        make_private_folder(path.parent)
        write_private(tmp, json.dumps({"entries": entries}, indent=1))
        os.replace(tmp, path)
    except OSError as exc:
        print(f"hearth: could not save the CPU check in {path}: {exc}", file=sys.stderr)
