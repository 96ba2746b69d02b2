"""What the portable llama.cpp build (``installers/llama_build.py``) does differently per system.

Linux is where the build began: its flags, variants and file names are the ones every cached Linux
wheel's build key was made with, and they stay as they are. Elsewhere, as llama.cpp decides it:

* File names. A CMake module is ``ggml-cpu-<variant>.dll`` on Windows and ``libggml-cpu-<variant>.so``
  everywhere else, macOS included, which is also what ggml's loader looks for
  (``backend_filename_prefix``/``_extension`` in ``ggml/src/ggml-backend-reg.cpp``). The other
  libraries are ``.dll`` on Windows and ``.dylib`` on macOS.
* The registry. libllama loads libggml by its soname on Linux (``libggml.so.0``), by its install
  name on macOS (``libggml.0.dylib``) and by its plain name on Windows (``ggml.dll``).
* Windows x64. ``GGML_CPU_ALL_VARIANTS`` (``ggml/src/CMakeLists.txt``) leaves out zen4 (BF16
  intrinsics) and sapphirerapids (AMX) whenever CMake's ``MSVC`` is set, which clang-cl sets too;
  the build uses MSVC there, so those two are not built (only clang's GNU driver could build them).
* macOS. Apple silicon has its own variants (apple_m1, apple_m2_m3, apple_m4). Only the CPU backend
  is built: no Metal, and no BLAS, which multiplies a batch with other kernels than a single token
  (as llamafile does). Each CPU backend finds libggml-base beside it through ``@loader_path``.
* Windows ARM64. ggml refuses MSVC for ARM ("use clang", ``ggml/src/ggml-cpu/CMakeLists.txt``) and
  ``GGML_CPU_ALL_VARIANTS`` stops there ("Unsupported ARM target OS"), so each variant is its own
  clang build of the plain CPU backend for one ``GGML_CPU_ARM_ARCH`` (as llama.cpp's own Windows
  ARM64 release is, at armv8.7-a), renamed after the variant. Such a build has no
  ``ggml_backend_score`` (ggml compiles that feature check only with ``GGML_CPU_ALL_VARIANTS``): the
  canary alone tells whether this CPU runs it. Two are built, neither with SVE, which no Windows
  ARM64 machine has: i8mm (Snapdragon X) and dot product with FP16 arithmetic (every Windows 11
  ARM64 machine).
* OpenMP is off on Windows and macOS: its runtime (vcomp140.dll, libomp) would be a library from
  outside the wheel. ggml's own thread pool runs instead.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess

# name (llama.cpp's variant tag), what it needs, whether it uses AMX; fastest first per architecture.
VARIANTS = {  # Linux's, and the default for a system without its own set
    "x86_64": (
        ("sapphirerapids", ("avx512f", "avx512_vbmi", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8"), True),
        ("zen4", ("avx512f", "avx512_vbmi", "avx512_vnni", "avx512_bf16", "avx2", "fma", "f16c"), False),
        ("icelake", ("avx512f", "avx512_vbmi", "avx512_vnni", "avx2", "fma", "f16c"), False),
        ("alderlake", ("avx2", "fma", "f16c", "avx_vnni"), False),
        ("haswell", ("avx2", "fma", "f16c", "bmi2"), False),
        ("sse42", ("sse4.2",), False),
    ),
    "aarch64": (
        ("armv8.6_1", ("dotprod", "fp16", "sve", "i8mm"), False),
        ("armv8.2_2", ("dotprod", "fp16"), False),
        ("armv8.2_1", ("dotprod",), False),
        ("armv8.0_1", ("neon",), False),
    ),
}
NOT_UNDER_MSVC = ("sapphirerapids", "zen4")
WINDOWS_ARM_ARCH = {  # variant -> GGML_CPU_ARM_ARCH, as GGML_CPU_ALL_VARIANTS would derive it
    "armv8.6_i8mm": "armv8.6-a+dotprod+fp16+i8mm",
    "armv8.2_2": "armv8.2-a+dotprod+fp16",
}
SYSTEM_VARIANTS = {
    ("Windows", "x86_64"): tuple(v for v in VARIANTS["x86_64"] if v[0] not in NOT_UNDER_MSVC),
    ("Windows", "aarch64"): (
        ("armv8.6_i8mm", ("dotprod", "fp16", "i8mm"), False),
        ("armv8.2_2", ("dotprod", "fp16"), False),
    ),
    ("Darwin", "aarch64"): (
        ("apple_m4", ("dotprod", "i8mm", "sme"), False),
        ("apple_m2_m3", ("dotprod", "i8mm"), False),
        ("apple_m1", ("dotprod",), False),
    ),
}
SYSTEM_FLAGS = {  # the library's and the CPU backends' configure
    "Windows": ("-DGGML_OPENMP=OFF",),
    "Darwin": ("-DGGML_METAL=OFF", "-DGGML_BLAS=OFF", "-DGGML_OPENMP=OFF", "-DCMAKE_OSX_DEPLOYMENT_TARGET=12.0"),
}
BACKEND_FLAGS = {  # the CPU backends' configure only
    "Darwin": ("-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON", "-DCMAKE_INSTALL_RPATH=@loader_path"),
}
LIBRARY_MARKS = {"Windows": (".dll",), "Darwin": (".dylib", ".so")}
REGISTRY = {"Windows": r"ggml\.dll", "Darwin": r"libggml\.[^.]+\.dylib"}
LINUX_REGISTRY = r"libggml\.so\.[^.]+"
CLANG_TARGET = "arm64-pc-windows-msvc"  # cmake/arm64-windows-llvm.cmake


def target_arch() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def variants() -> tuple:
    """This system's CPU variants, fastest first: (name, features, uses AMX)."""
    arch = target_arch()
    return SYSTEM_VARIANTS.get((platform.system(), arch), VARIANTS.get(arch, ()))


def one_build_per_variant() -> bool:
    """Windows ARM64, where GGML_CPU_ALL_VARIANTS stops the configure."""
    return (platform.system(), target_arch()) == ("Windows", "aarch64")


def module_file(target: str) -> str:
    """The file CMake makes of the module ``target`` (a ggml backend)."""
    return f"{target}.dll" if platform.system() == "Windows" else f"lib{target}.so"


def variant_file(name: str) -> str:
    """The CPU backend ``name`` as it lies in the wheel, named as ggml's loader looks for it."""
    return module_file(f"ggml-cpu-{name}")


def backend_target(name: str) -> str:
    return "ggml-cpu" if one_build_per_variant() else f"ggml-cpu-{name}"


def is_library(name: str) -> bool:
    return any(mark in name for mark in LIBRARY_MARKS.get(platform.system(), (".so",)))


def registry_candidates(names: list[str]) -> list[str]:
    """Which of ``names`` is libggml as libllama loads it: the Linux and macOS wheels hold
    byte-identical copies under three names, and loading another copy would give the process a
    second, empty registry."""
    pattern = REGISTRY.get(platform.system(), LINUX_REGISTRY)
    return sorted(n for n in names if re.fullmatch(pattern, n))


def system_flags() -> tuple[str, ...]:
    return SYSTEM_FLAGS.get(platform.system(), ())


def backend_compilers() -> tuple[str, str]:
    """Windows ARM64's CPU backend compilers (clang unless CC/CXX say otherwise)."""
    return os.environ.get("CC", "clang"), os.environ.get("CXX", "clang++")


def backend_flags() -> tuple[str, ...]:
    """What the CPU backends' configure adds to the library's flags here."""
    if not one_build_per_variant():
        return BACKEND_FLAGS.get(platform.system(), ())
    cc, cxx = backend_compilers()
    return (f"-DCMAKE_C_COMPILER={cc}", f"-DCMAKE_CXX_COMPILER={cxx}",
            f"-DCMAKE_C_COMPILER_TARGET={CLANG_TARGET}", f"-DCMAKE_CXX_COMPILER_TARGET={CLANG_TARGET}")


def variant_selection(names: list[str]) -> tuple[str, ...]:
    """The flags choosing the CPU backends a configure defines: llama.cpp's whole set, of which the
    build compiles ``names``; on Windows ARM64 the one variant ``names`` holds."""
    if one_build_per_variant():
        (name,) = names
        return "-DGGML_CPU_ALL_VARIANTS=OFF", f"-DGGML_CPU_ARM_ARCH={WINDOWS_ARM_ARCH[name]}"
    return ("-DGGML_CPU_ALL_VARIANTS=ON",)


def build_options() -> tuple[str, ...]:
    """``cmake --build`` options: Visual Studio's generator builds Debug unless told otherwise."""
    return ("--config", "Release") if platform.system() == "Windows" else ()


def missing_tools() -> list[str]:
    """What the CPU backends' build needs here and cannot find (Windows ARM64: clang through Ninja,
    since Visual Studio's generator ignores a named compiler)."""
    needed = ("ninja", *backend_compilers()) if one_build_per_variant() else ()
    return [tool for tool in needed if shutil.which(tool) is None]


def key_parts() -> dict:
    """What else the wheel depends on here, for its cache key; nothing on Linux, whose keys predate it."""
    parts = {"backend": backend_flags(), "arm_arch": WINDOWS_ARM_ARCH if one_build_per_variant() else {}}
    return {name: value for name, value in parts.items() if value}


def compiler_version() -> str:
    """The compilers' version, for the cache key: on Windows each compiler the build uses."""
    if platform.system() == "Windows":
        return " + ".join(version_line(cc) for cc in windows_compilers())
    cc = os.environ.get("CC", "cc")
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "unknown"


def windows_compilers() -> list[str]:
    library = os.environ.get("CC") or os.environ.get("CMAKE_C_COMPILER") or "cl"
    backends = backend_compilers()[0] if one_build_per_variant() else library
    return list(dict.fromkeys((library, backends)))


def version_line(cc: str) -> str:
    """The line of ``cc --version`` that names its version: cl prints its banner to stderr."""
    try:
        done = subprocess.run([cc, "--version"], capture_output=True, text=True)
    except OSError:
        return f"{cc} unknown"
    lines = (done.stdout + "\n" + done.stderr).splitlines()
    return next((line.strip() for line in lines if "version" in line.lower()), f"{cc} unknown")
