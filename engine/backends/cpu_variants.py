"""The CPU builds of llama.cpp's backend that Hearth's set-up made, and loading one of them.

``installers/llama_build.py`` compiles ggml's CPU backend several times, once per level of
instructions (x86-64-v2, AVX2, AVX-VNNI, AVX-512, AMX; on ARM64 NEON, dotprod, i8mm), with
``GGML_BACKEND_DL``, so none of them is linked into llama.cpp: a process loads exactly one, by path,
before anything else touches llama.cpp. The build writes their list, fastest first, next to the
libraries (``MANIFEST``). Which one this machine may use is decided by the canary
(:mod:`engine.backends.cpu_check`); this module only finds and loads them.

Nothing here runs code compiled for a particular CPU: ``ggml_backend_score`` lives in a part of
each library that is compiled without the variant's flags, exactly so that asking is safe.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from engine.backends import row_kernels

MANIFEST = "hearth-cpu-variants.json"
MANIFEST_FORMAT = 2


class CpuBackendError(Exception):
    """No CPU backend could be loaded; the message says why and what to do."""


@dataclass(frozen=True)
class CpuVariant:
    name: str  # llama.cpp's tag: "icelake", "haswell", "sse42", "armv8.6_1", ...
    path: Path
    features: tuple[str, ...]  # what it was compiled for, in the build's words
    uses_amx: bool = False


@dataclass(frozen=True)
class VariantSet:
    variants: tuple[CpuVariant, ...]  # fastest first; the last is the safest
    build_key: str  # the build's cache key: every flag, the source version, the target architecture
    registry: Path  # the libggml file libllama itself loads (by its soname): one process, one registry
    exact_rows: int  # the build keeps batches shorter than this bit-exact per row (installers/llama_build.py)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)

    def named(self, name: str) -> CpuVariant | None:
        return next((v for v in self.variants if v.name == name), None)


def library_dir() -> Path | None:
    """llama-cpp-python's ``lib`` folder, found without importing the package."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "lib"


def read_variant_set(lib_dir: Path | None = None) -> VariantSet | None:
    """The set the build installed, or None for a llama-cpp-python built the ordinary way
    (one CPU backend linked in, nothing to choose)."""
    lib_dir = lib_dir or library_dir()
    if lib_dir is None:
        return None
    try:
        data = json.loads((lib_dir / MANIFEST).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CpuBackendError(f"the list of CPU builds ({lib_dir / MANIFEST}) is unreadable ({exc}); "
                              "run the set-up command again") from exc
    if data.get("format") != MANIFEST_FORMAT:
        raise CpuBackendError(f"{lib_dir / MANIFEST} has format {data.get('format')!r}, not {MANIFEST_FORMAT}; "
                              "run the set-up command again")
    variants = tuple(CpuVariant(v["name"], lib_dir / v["file"], tuple(v["features"]), bool(v.get("amx")))
                     for v in data["variants"])
    return VariantSet(variants, str(data["build_key"]), lib_dir / data["registry"], int(data["exact_rows"]))


def _ggml(registry: Path) -> ctypes.CDLL:
    """libggml, the backend registry: the very file libllama loads, so both see one registry."""
    lib = ctypes.CDLL(str(registry), mode=ctypes.RTLD_GLOBAL)
    lib.ggml_backend_load.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_load.restype = ctypes.c_void_p
    lib.ggml_backend_reg_count.argtypes = []
    lib.ggml_backend_reg_count.restype = ctypes.c_size_t
    return lib


def variant_score(variant: CpuVariant, registry: Path) -> int:
    """llama.cpp's own check of the CPU: 0 when this CPU lacks an instruction set the build needs."""
    _ggml(registry)  # the variant resolves libggml-base through it
    lib = ctypes.CDLL(str(variant.path))
    try:
        score = lib.ggml_backend_score
    except AttributeError:
        return 1  # a build without the check (not one of ours): the canary decides alone
    score.restype = ctypes.c_int
    return int(score())


def load_variant(variant: CpuVariant, registry: Path) -> None:
    """Register ``variant`` as this process's CPU backend. Call once, before llama.cpp's init."""
    if not variant.path.is_file():
        raise CpuBackendError(f"the CPU build {variant.name} is missing ({variant.path}); run the set-up command again")
    if not _ggml(registry).ggml_backend_load(str(variant.path).encode()):
        raise CpuBackendError(f"llama.cpp refused the CPU build {variant.name} ({variant.path}); "
                              "run `hearth doctor` and the set-up command again")
    row_kernels.bind(variant.path)


def load_library(path: Path) -> CpuVariant:
    """A CPU backend file loaded as it is (benchmarks: HEARTH_CPU_LIBRARY), with no canary."""
    variants = read_variant_set()
    if variants is None:
        raise CpuBackendError("HEARTH_CPU_LIBRARY needs Hearth's portable build of llama-cpp-python")
    variant = CpuVariant(f"custom:{path.name}", path, ())
    load_variant(variant, variants.registry)
    return variant

