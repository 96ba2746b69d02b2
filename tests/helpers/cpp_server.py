"""llama.cpp's own C++ ``llama-server`` and ``llama-bench``, built from the very source Hearth vendors:
the anchors of the serving and reading benchmarks (issues 35, 51), on 127.0.0.1 only.

It is built once and cached (``~/.cache/hearth/llama-server/<key>``, the key made of everything the
binary depends on: the llama-cpp-python version, the CPU variant, the flags, the compiler, this
file's :data:`FORMAT`), stock, with no exactness patch: as a user who builds llama.cpp gets it.
Its CPU backend is the variant Hearth's canary chose on this machine, compiled from llama.cpp's
own ``GGML_CPU_ALL_VARIANTS`` definitions with llamafile's sgemm on, so both servers run the same
instruction set (``-DGGML_BACKEND_DL=ON``: the server loads the one backend built beside it).
Building it takes several minutes on two cores; the benchmark says so on stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "installers"))
import llama_build  # noqa: E402
import llama_platforms as per_system  # noqa: E402

from tests.helpers.llama_server import free_port  # noqa: E402
from tests.helpers.serve import stop_process  # noqa: E402

FORMAT = 2  # 2: llama-bench built beside the server
TOOLS = ("llama-server", "llama-bench")
CACHE = Path.home() / ".cache" / "hearth" / "llama-server"
FLAGS = ("-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON", "-DGGML_LLAMAFILE=ON",
         "-DBUILD_SHARED_LIBS=ON", "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON",
         "-DLLAMA_BUILD_COMMON=ON", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TESTS=OFF",
         "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_UI=OFF",
         "-DLLAMA_USE_PREBUILT_UI=OFF")  # no web page: nothing fetched from a hub, nothing built with npm
START_TIMEOUT_S = 300


def llama_cpp_version() -> str:
    from importlib.metadata import version

    return version("llama_cpp_python")


def build_key(version: str, variant: str) -> str:
    parts = {"format": FORMAT, "version": version, "variant": variant, "flags": FLAGS,
             "compiler": per_system.compiler_version(), "arch": per_system.target_arch()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def built_server(variant: str, *, jobs: int | None = None, cache: Path = CACHE) -> Path:
    """The ``llama-server`` binary for ``variant`` (a name in ``llama_platforms.VARIANTS``), built if
    it is not cached yet."""
    return built_tool(variant, "llama-server", jobs=jobs, cache=cache)


def built_tool(variant: str, tool: str, *, jobs: int | None = None, cache: Path = CACHE) -> Path:
    """llama.cpp's ``tool`` (one of :data:`TOOLS`) for ``variant``, built (with the others) if it is not
    cached yet."""
    version = llama_cpp_version()
    folder = cache / build_key(version, variant)
    binary = folder / tool
    if binary.exists():
        return binary
    sdist = llama_build.cached_sdist(Path.home() / ".cache" / "hearth" / "wheels", version)
    if not sdist.exists():
        raise SystemExit(f"no llama-cpp-python sdist at {sdist}: run the set-up (installers/setup_dev.sh) first")
    print(f"[bench] building llama.cpp's {' and '.join(TOOLS)} {version} ({variant}) once; this takes minutes",
          file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="hearth-llama-server-build-") as tmp:
        work = Path(tmp)
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")
        source = next(work.glob("llama_cpp_python-*/vendor/llama.cpp"))
        build, log = work / "build", work / "build.log"
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        llama_build.run(["cmake", "-S", str(source), "-B", str(build), *generator, *FLAGS], log)
        llama_build.run(["cmake", "--build", str(build), "-j", str(jobs or os.cpu_count() or 2), "--target",
                         *TOOLS, per_system.backend_target(variant)], log)
        partial = folder.with_name(f".{folder.name}.{os.getpid()}.part")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        backend = per_system.variant_file(variant)
        for path in (build / "bin").iterdir():  # the one CPU backend, so the server can load no other
            if path.is_file() and (path.name == backend or not path.name.startswith(backend.split("-cpu-")[0] + "-cpu-")):
                shutil.copy2(path, partial / path.name)
        os.replace(partial, folder)
    return binary


def start_cpp_server(binary: Path, model: Path, *, context: int, threads: int, log: Path,
                     preexec_fn: Callable[[], None] | None = None) -> tuple[subprocess.Popen, str]:
    """Run ``llama-server`` on a free loopback port with one slot (the whole context for one
    conversation, as Hearth has it) and flash attention on; returns (process, base URL ending in /v1)
    once ``/health`` answers."""
    port = free_port()
    command = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", str(context),
               "-np", "1", "-t", str(threads), "-tb", str(threads), "-fa", "on", "-b", "512", "-ub", "512",
               "--jinja", "--no-webui"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   preexec_fn=preexec_fn)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as reply:
                if reply.status == 200:
                    return process, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.3)
    stop_process(process)
    raise SystemExit(f"llama-server did not start:\n{log.read_text(errors='replace')[-3000:]}")
