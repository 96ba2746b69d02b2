"""The portable build (installers/llama_build.py, installers/llama_platforms.py) and what it installed.

The wheel's cache key must change with everything that changes the wheel (flags, patches, target
architecture, compiler, Python) and with nothing about the host CPU, and on Linux x86_64 it must stay
made of exactly the parts every cached wheel was keyed by; the exactness patches must apply exactly
once or stop the build; each system gets its own file names, libraries, registry, variants, flags and
compilers; and in the installed build, no library that can run before a canary passed holds an AMX
instruction.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import json
import shutil
import sys
import types
import zipfile
from pathlib import Path

import pytest

from engine.backends.cpu_variants import read_variant_set
from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("llama_build", ROOT / "installers" / "llama_build.py")
llama_build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(llama_build)
per_system = llama_build.per_system


def on(monkeypatch, system: str, arch: str) -> None:
    monkeypatch.setattr(llama_build.platform, "system", lambda: system)
    monkeypatch.setattr(per_system, "target_arch", lambda: arch)


def test_the_cache_key_follows_every_build_input_and_not_the_host_cpu(monkeypatch):
    on(monkeypatch, "Linux", "x86_64")
    monkeypatch.setattr(per_system, "compiler_version", lambda: "cc (Debian 12.2.0-14) 12.2.0")
    base = llama_build.build_key("0.3.36")
    assert llama_build.build_key("0.3.37") != base
    changes = [(llama_build, "COMMON_FLAGS", llama_build.COMMON_FLAGS + ("-DGGML_OPENMP=OFF",)),
               (llama_build, "PATCHES", llama_build.PATCHES[:1]),
               (per_system, "VARIANTS", {**per_system.VARIANTS, "x86_64": per_system.VARIANTS["x86_64"][1:],
                                         "aarch64": per_system.VARIANTS["aarch64"][1:]}),
               (per_system, "target_arch", lambda: "riscv64"),
               (per_system, "compiler_version", lambda: "gcc (Debian 13.1.0) 13.1.0"),
               (llama_build.platform, "system", lambda: "FreeBSD")]
    for module, name, value in changes:
        with monkeypatch.context() as m:
            m.setattr(module, name, value)
            assert llama_build.build_key("0.3.36") != base, name
    monkeypatch.setattr(llama_build.platform, "processor", lambda: "some other CPU")
    monkeypatch.setattr(Path, "read_text", lambda *a, **k: "flags: amx_tile amx_int8 avx512f")
    assert llama_build.build_key("0.3.36") == base


def test_each_patch_must_match_once_or_the_build_stops(tmp_path):
    for relative, text, _ in llama_build.PATCHES:  # two patches may change one file
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((path.read_text() if path.exists() else "") + f"before\n    {text} rest;\nafter\n")
    llama_build.apply_patches(tmp_path)
    for relative, text, replacement in llama_build.PATCHES:
        assert replacement in (tmp_path / relative).read_text()
    with pytest.raises(SystemExit, match="no longer holds"):
        llama_build.apply_patches(tmp_path)  # already patched: the original text is gone


def test_a_file_added_to_the_wheel_is_in_its_record_with_its_hash(tmp_path):
    wheel = tmp_path / "in" / "demo-1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("demo/__init__.py", "x = 1\n")
        archive.writestr("demo-1.0.dist-info/RECORD", "demo/__init__.py,sha256=abc,6\ndemo-1.0.dist-info/RECORD,,\n")
    out = tmp_path / "out"
    out.mkdir()
    added = llama_build.add_to_wheel(wheel, {"demo/lib/libx.so": b"\x7fELF-bytes"}, out)
    with zipfile.ZipFile(added) as archive:
        rows = {row[0]: row for row in csv.reader(io.StringIO(archive.read("demo-1.0.dist-info/RECORD").decode()))}
        assert archive.read("demo/lib/libx.so") == b"\x7fELF-bytes"
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"\x7fELF-bytes").digest()).rstrip(b"=").decode()
    assert rows["demo/lib/libx.so"] == ["demo/lib/libx.so", f"sha256={digest}", "10"]
    assert "demo/__init__.py" in rows


def test_the_registry_is_the_copy_of_libggml_named_by_its_soname(monkeypatch):
    on(monkeypatch, "Linux", "x86_64")
    assert llama_build.registry_library(["libggml.so", "libggml.so.0.25.3", "libggml.so.0", "libllama.so"]) \
        == "libggml.so.0"


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) is not installed")
def test_no_installed_library_outside_the_amx_build_holds_an_amx_instruction():
    variants = read_variant_set()
    if variants is None:
        pytest.skip("llama-cpp-python was not built by installers/llama_build.py")
    libraries = sorted(variants.registry.parent.glob("lib*.so*"))
    amx = {v.path.name for v in variants.variants if v.uses_amx}
    counts = {path.name: llama_build.amx_instructions(path) for path in libraries}
    assert all(counts[name] > 0 for name in amx), counts  # the check finds them where they are
    assert {name: n for name, n in counts.items() if name not in amx and n} == {}


# -- Linux x86_64 stays as every cached wheel was built --------------------------------------------

LINUX_COMMON = ["-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_LLAMAFILE=ON", "-DLLAVA_BUILD=OFF",
                "-DCMAKE_BUILD_TYPE=Release"]
LINUX_X86_VARIANTS = [
    ["sapphirerapids", ["avx512f", "avx512_vbmi", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8"], True],
    ["zen4", ["avx512f", "avx512_vbmi", "avx512_vnni", "avx512_bf16", "avx2", "fma", "f16c"], False],
    ["icelake", ["avx512f", "avx512_vbmi", "avx512_vnni", "avx2", "fma", "f16c"], False],
    ["alderlake", ["avx2", "fma", "f16c", "avx_vnni"], False],
    ["haswell", ["avx2", "fma", "f16c", "bmi2"], False],
    ["sse42", ["sse4.2"], False],
]
PATCH_SOURCES = Path(__file__).resolve().parents[2] / "installers" / "llama_patches"
Q8_0_DOT = ("void ggml_vec_dot_q8_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, "
            "size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc);\n")
COLUMNS_DOTS = (
    "void hearth_vec_dot_q8_0_q8_0_cols(int n, float * GGML_RESTRICT s, size_t bs, "
    "const void * GGML_RESTRICT vx, const void * GGML_RESTRICT vy, size_t by, int ncols);\n"
    "void hearth_vec_dot_q4_K_q8_K_cols(int n, float * GGML_RESTRICT s, size_t bs, "
    "const void * GGML_RESTRICT vx, const void * GGML_RESTRICT vy, size_t by, int ncols);\n"
    "void hearth_vec_dot_q5_K_q8_K_cols(int n, float * GGML_RESTRICT s, size_t bs, "
    "const void * GGML_RESTRICT vx, const void * GGML_RESTRICT vy, size_t by, int ncols);\n"
    "void hearth_vec_dot_q6_K_q8_K_cols(int n, float * GGML_RESTRICT s, size_t bs, "
    "const void * GGML_RESTRICT vx, const void * GGML_RESTRICT vy, size_t by, int ncols);\n"
)
Q4_K_GEMV = ("void ggml_gemv_q4_K_8x8_q8_K(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, "
             "const void * GGML_RESTRICT vy, int nr, int nc);\n")
Q4_K_COLUMNS_GEMV = ("void hearth_gemv_q4_K_8x8_q8_K_cols(int n, float * GGML_RESTRICT s, size_t bs, "
                     "const void * GGML_RESTRICT vx, const void * GGML_RESTRICT vy, size_t by, int nr, int nc);\n")
TRAITS_CLASS = ("template <typename BLOC_TYPE, int64_t INTER_SIZE, int64_t NB_COLS, ggml_type PARAM_TYPE> "
                "class tensor_traits : public tensor_traits_base {")
GEMM_CHOICE = "        // If there are more than three rows in src1, use gemm; otherwise, use gemv.\n"
LINUX_PATCHES = [
    ["ggml/src/ggml-cpu/ops.cpp", "const bool use_split_kv_path = !use_ref &&",
     "const bool use_split_kv_path = false && !use_ref &&"],
    ["ggml/src/ggml-cpu/tiled/tiled.cpp", "static bool ggml_tiled_min_batch(int64_t rows) {",
     "#if defined(_WIN32)\n"
     'extern "C" __declspec(dllexport) int hearth_exact_rows = 16;  // Hearth: engine.backends.row_kernels\n'
     "#else\n"
     'extern "C" __attribute__((visibility("default"))) int hearth_exact_rows = 16;  // Hearth\n'
     "#endif\n"
     "static bool ggml_tiled_min_batch(int64_t rows) {"],
    ["ggml/src/ggml-cpu/tiled/tiled.cpp", "return rows >= 8 || ggml_tiled_matmul_forced();",
     "return rows >= (hearth_exact_rows > 8 ? hearth_exact_rows : 8) || ggml_tiled_matmul_forced();"],
    ["ggml/src/ggml-cpu/llamafile/sgemm.cpp", "    // only enable sgemm for prompt processing\n",
     "    // only enable sgemm for prompt processing\n    if (n < hearth_exact_rows)  // Hearth: verify batches stay exact\n"
     "        return false;\n"],
    ["ggml/src/ggml-cpu/llamafile/sgemm.cpp",
     "bool llamafile_sgemm(const struct ggml_compute_params * params, int64_t m, int64_t n, int64_t k,\n",
     'extern "C" int hearth_exact_rows;  // tiled.cpp\n'
     "bool llamafile_sgemm(const struct ggml_compute_params * params, int64_t m, int64_t n, int64_t k,\n"],
    ["ggml/src/ggml-cpu/ops.cpp",
     "float * delta       = (float *)params->wdata + ith * per_thread + CACHE_LINE_SIZE_F32;",
     "float * delta       = (float *) GGML_PAD((uintptr_t) params->wdata, CACHE_LINE_SIZE) + ith * per_thread;"],
    ["ggml/src/ggml-cpu/quants.h", Q8_0_DOT, Q8_0_DOT + COLUMNS_DOTS],
    ["ggml/src/ggml-cpu/arch/x86/quants.c", "void ggml_vec_dot_tq1_0_q8_K(",
     (PATCH_SOURCES / "q8_0_columns.c").read_text() + "\nvoid ggml_vec_dot_tq1_0_q8_K("],
    ["ggml/src/ggml-cpu/arch/x86/quants.c", "void ggml_vec_dot_iq2_xxs_q8_K(",
     (PATCH_SOURCES / "k_quant_columns.c").read_text() + "\nvoid ggml_vec_dot_iq2_xxs_q8_K("],
    ["ggml/src/ggml-cpu/ggml-cpu.c", "    float tmp[32];\n\n",
     "    float tmp[32];\n\n" + (PATCH_SOURCES / "columns_call.c").read_text() + "\n"],
    ["ggml/src/ggml-cpu/repack.h", Q4_K_GEMV, Q4_K_GEMV + Q4_K_COLUMNS_GEMV],
    ["ggml/src/ggml-cpu/arch/x86/repack.cpp", "void ggml_gemv_iq4_nl_8x8_q8_0(",
     (PATCH_SOURCES / "q4_K_8x8_columns.c").read_text() + "\nvoid ggml_gemv_iq4_nl_8x8_q8_0("],
    ["ggml/src/ggml-cpu/repack.cpp", TRAITS_CLASS, (PATCH_SOURCES / "q4_K_8x8_columns_call.cpp").read_text() + TRAITS_CLASS],
    ["ggml/src/ggml-cpu/repack.cpp", "i11 < ne11 - ne11 % 4; i11 += nth * 4) {",
     "i11 < hearth_interleaved_rows<BLOC_TYPE, INTER_SIZE, NB_COLS>(ne11); i11 += nth * 4) {"],
    ["ggml/src/ggml-cpu/repack.cpp", "const int64_t i11_processed = ne11 - ne11 % 4;",
     "const int64_t i11_processed = hearth_interleaved_rows<BLOC_TYPE, INTER_SIZE, NB_COLS>(ne11);"],
    ["ggml/src/ggml-cpu/repack.cpp", GEMM_CHOICE, (PATCH_SOURCES / "q4_K_8x8_columns_chunk.cpp").read_text() + GEMM_CHOICE],
]


def test_the_linux_x86_64_key_is_made_of_the_parts_every_cached_wheel_was_keyed_by(monkeypatch):
    on(monkeypatch, "Linux", "x86_64")
    monkeypatch.setattr(per_system, "compiler_version", lambda: "cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0")
    parts = {"format": 2, "version": "0.3.36", "common": LINUX_COMMON, "wheel": ["-DGGML_CPU=OFF"],
             "patches": LINUX_PATCHES, "variants": LINUX_X86_VARIANTS, "arch": "x86_64", "system": "Linux",
             "compiler": "cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0",
             "python": f"{sys.version_info.major}.{sys.version_info.minor}"}
    expected = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
    assert llama_build.build_key("0.3.36") == expected
    assert " ".join(llama_build.common_flags() + llama_build.WHEEL_FLAGS) == " ".join(LINUX_COMMON + ["-DGGML_CPU=OFF"])


def test_the_linux_compiler_line_is_the_first_line_cc_prints(monkeypatch):
    on(monkeypatch, "Linux", "x86_64")
    monkeypatch.delenv("CC", raising=False)
    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        return types.SimpleNamespace(stdout="cc (Debian 12.2.0-14) 12.2.0\nCopyright\n", stderr="warning: x\n")

    monkeypatch.setattr(per_system.subprocess, "run", fake_run)
    assert per_system.compiler_version() == "cc (Debian 12.2.0-14) 12.2.0"
    assert calls == [["cc", "--version"]]
    monkeypatch.setattr(per_system.subprocess, "run", lambda *a, **k: types.SimpleNamespace(stdout="", stderr="x"))
    assert per_system.compiler_version() == "unknown"


def recorded_backend_build(monkeypatch, tmp_path: Path, names: list[str]) -> tuple[list[list[str]], list[Path]]:
    """The commands compile_backends runs (none of them really), with empty files for what they build."""
    commands = []

    def fake_run(command, log, **kwargs):
        commands.append(command)
        if command[1] == "--build":
            (tmp_path / "build" / "bin").mkdir(parents=True, exist_ok=True)
            for target in command[command.index("--target") + 1:]:
                (tmp_path / "build" / "bin" / per_system.module_file(target)).write_bytes(b"")

    monkeypatch.setattr(llama_build, "run", fake_run)
    monkeypatch.setattr(llama_build.shutil, "which", lambda tool: f"/usr/bin/{tool}" if tool == "ninja" else None)
    return commands, llama_build.compile_backends(Path("/src"), tmp_path / "build", names, 2, tmp_path / "log")


def test_the_linux_cpu_backends_are_configured_and_built_as_before(monkeypatch, tmp_path):
    on(monkeypatch, "Linux", "x86_64")
    names = [name for name, _, _ in per_system.variants()]
    commands, files = recorded_backend_build(monkeypatch, tmp_path, names)
    build = str(tmp_path / "build")
    assert commands == [
        ["cmake", "-S", str(Path("/src")), "-B", build, "-G", "Ninja", *LINUX_COMMON, "-DBUILD_SHARED_LIBS=ON",
         "-DGGML_CPU_ALL_VARIANTS=ON", "-DLLAMA_BUILD_COMMON=OFF", "-DLLAMA_BUILD_TESTS=OFF",
         "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_CURL=OFF",
         "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON"],
        ["cmake", "--build", build, "-j", "2", "--target", *[f"ggml-cpu-{v[0]}" for v in LINUX_X86_VARIANTS]]]
    assert [f.name for f in files] == [f"libggml-cpu-{v[0]}.so" for v in LINUX_X86_VARIANTS]
    assert per_system.key_parts() == {}


# -- per system --------------------------------------------------------------------------------------

def test_each_system_names_a_cpu_backend_as_ggml_loads_it(monkeypatch):
    expected = {"Linux": "libggml-cpu-haswell.so", "Darwin": "libggml-cpu-haswell.so",
                "Windows": "ggml-cpu-haswell.dll"}
    for system, name in expected.items():
        on(monkeypatch, system, "x86_64")
        assert per_system.variant_file("haswell") == name, system


def test_each_system_finds_the_wheels_libraries_by_its_own_suffixes(monkeypatch):
    wheel = ["libggml.so.0.25.3", "libllama.so", "ggml.dll", "ggml.lib", "libggml.0.dylib", "llama.py", "RECORD"]
    expected = {"Linux": ["libggml.so.0.25.3", "libllama.so"], "Windows": ["ggml.dll"],
                "Darwin": ["libggml.so.0.25.3", "libllama.so", "libggml.0.dylib"]}
    for system, libraries in expected.items():
        on(monkeypatch, system, "x86_64")
        assert [n for n in wheel if per_system.is_library(n)] == libraries, system


def test_each_system_finds_the_libggml_libllama_loads(monkeypatch):
    on(monkeypatch, "Darwin", "aarch64")
    assert llama_build.registry_library(
        ["libggml.dylib", "libggml.0.25.3.dylib", "libggml.0.dylib", "libggml-base.0.dylib", "libllama.0.dylib"]) \
        == "libggml.0.dylib"
    on(monkeypatch, "Windows", "x86_64")
    assert llama_build.registry_library(["ggml-base.dll", "ggml.dll", "llama.dll"]) == "ggml.dll"
    with pytest.raises(SystemExit, match="no libggml"):
        llama_build.registry_library(["libggml.so.0", "libggml-base.dll"])


def test_windows_x64_builds_what_msvc_can_and_macos_the_apple_variants(monkeypatch):
    on(monkeypatch, "Windows", "x86_64")
    assert [name for name, _, _ in per_system.variants()] == ["icelake", "alderlake", "haswell", "sse42"]
    on(monkeypatch, "Darwin", "aarch64")
    assert [name for name, _, _ in per_system.variants()] == ["apple_m4", "apple_m2_m3", "apple_m1"]
    on(monkeypatch, "Linux", "aarch64")
    assert [name for name, _, _ in per_system.variants()] == ["armv8.6_1", "armv8.2_2", "armv8.2_1", "armv8.0_1"]


def test_each_windows_arm64_variant_is_compiled_for_exactly_its_features_and_never_sve(monkeypatch):
    on(monkeypatch, "Windows", "aarch64")
    variants = per_system.variants()
    assert [name for name, _, _ in variants] == ["armv8.6_i8mm", "armv8.2_2"]
    for name, features, amx in variants:
        march = per_system.WINDOWS_ARM_ARCH[name]
        assert set(march.split("+")[1:]) == set(features), name
        assert "sve" not in march and not amx


def test_windows_arm64_builds_each_variant_alone_with_clang(monkeypatch, tmp_path):
    on(monkeypatch, "Windows", "aarch64")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    commands, files = recorded_backend_build(monkeypatch, tmp_path, ["armv8.6_i8mm"])
    configure, build = commands
    assert "-DGGML_CPU_ALL_VARIANTS=OFF" in configure and "-DGGML_CPU_ALL_VARIANTS=ON" not in configure
    assert "-DGGML_CPU_ARM_ARCH=armv8.6-a+dotprod+fp16+i8mm" in configure
    assert {"-DCMAKE_C_COMPILER=clang", "-DCMAKE_CXX_COMPILER=clang++", "-DGGML_OPENMP=OFF"} <= set(configure)
    assert build[-2:] == ["--target", "ggml-cpu"] and build[3:5] == ["--config", "Release"]
    assert [f.name for f in files] == ["ggml-cpu.dll"]
    assert per_system.variant_file("armv8.6_i8mm") == "ggml-cpu-armv8.6_i8mm.dll"  # its name in the wheel
    assert per_system.key_parts()["arm_arch"] == per_system.WINDOWS_ARM_ARCH
    with pytest.raises(SystemExit, match="clang"):
        llama_build.require_tools()


def test_macos_builds_the_cpu_backend_alone_and_finds_libggml_base_beside_it(monkeypatch, tmp_path):
    on(monkeypatch, "Darwin", "aarch64")
    assert {"-DGGML_METAL=OFF", "-DGGML_BLAS=OFF"} <= set(llama_build.common_flags())
    commands, files = recorded_backend_build(monkeypatch, tmp_path, ["apple_m1"])
    assert {"-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON", "-DCMAKE_INSTALL_RPATH=@loader_path",
            "-DGGML_CPU_ALL_VARIANTS=ON", "-DGGML_METAL=OFF"} <= set(commands[0])
    assert [f.name for f in files] == ["libggml-cpu-apple_m1.so"]
    for system in ("Linux", "Windows"):
        on(monkeypatch, system, "x86_64")
        assert not any("RPATH=@loader_path" in flag or "METAL" in flag for flag in llama_build.variant_configure(
            Path("/src"), tmp_path, ("-DGGML_CPU_ALL_VARIANTS=ON",))), system


def test_the_windows_compiler_line_is_each_compilers_version_line(monkeypatch):
    cl_banner = "Microsoft (R) C/C++ Optimizing Compiler Version 19.40.33811 for ARM64"
    banners = {"cl": types.SimpleNamespace(stdout="cl : Command line warning D9002 : ignoring unknown option\n",
                                          stderr=cl_banner + "\n"),
               "clang": types.SimpleNamespace(stdout="clang version 19.1.5\nTarget: aarch64-pc-windows-msvc\n",
                                             stderr="")}
    monkeypatch.setattr(per_system.subprocess, "run", lambda command, **kwargs: banners[command[0]])
    for variable in ("CC", "CXX", "CMAKE_C_COMPILER"):
        monkeypatch.delenv(variable, raising=False)
    on(monkeypatch, "Windows", "x86_64")
    assert per_system.compiler_version() == cl_banner
    on(monkeypatch, "Windows", "aarch64")
    assert per_system.compiler_version() == cl_banner + " + clang version 19.1.5"


def test_a_manifest_written_for_windows_is_read_back_as_its_files(monkeypatch, tmp_path):
    on(monkeypatch, "Windows", "x86_64")
    manifest = llama_build.manifest_for("0.3.36-x86_64-key", "ggml.dll")
    (tmp_path / llama_build.MANIFEST).write_text(json.dumps(manifest))
    variants = read_variant_set(tmp_path)
    assert variants.registry == tmp_path / "ggml.dll"
    assert [v.path.name for v in variants.variants] == [f"ggml-cpu-{n}.dll" for n in ("icelake", "alderlake",
                                                                                       "haswell", "sse42")]


def test_the_amx_check_runs_on_x86_only(monkeypatch, tmp_path):
    monkeypatch.setattr(llama_build, "amx_instructions", lambda path: 3)
    on(monkeypatch, "Darwin", "aarch64")
    llama_build.check_no_amx({"apple_m1": tmp_path / "libggml-cpu-apple_m1.so"}, set())
    on(monkeypatch, "Windows", "x86_64")
    with pytest.raises(SystemExit, match="3 AMX instructions"):
        llama_build.check_no_amx({"haswell": tmp_path / "ggml-cpu-haswell.dll"}, set())


def test_the_engine_knows_the_exact_rows_bound_the_build_patches_in():
    """The engine prunes and caps drafts by EXACT_ROWS; the build's patches set the kernels' bound."""
    from engine.protocol.limits import EXACT_ROWS, MAX_DRAFT

    assert EXACT_ROWS == llama_build.EXACT_ROWS
    assert MAX_DRAFT + 1 < EXACT_ROWS  # a verify batch (draft + 1 token) stays below it
