"""Build llama-cpp-python portably: one wheel that runs on any CPU of its architecture.

    python installers/llama_build.py --version 0.3.36 --pip .venv/bin/pip [--cache DIR] [--jobs N]

prints the path of the wheel to install. Nothing is compiled for the machine doing the build
(``GGML_NATIVE=OFF``): the library is built with ``GGML_BACKEND_DL=ON`` and *without* a CPU
backend, and ggml's CPU backend is built separately once per instruction level
(``llama_platforms.VARIANTS``), each as ``libggml-cpu-<name>.so`` (``ggml-cpu-<name>.dll`` on
Windows) beside the library, with a manifest (fastest first) that ``engine.backends.cpu_variants``
reads. The app then loads the fastest build whose canary passed on the machine it runs on
(``engine.backends.cpu_check``).

* ``GGML_LLAMAFILE=ON``, patched: llamafile's sgemm multiplies a batch with other kernels than a
  single token (much faster prompt reading on F16, Q8_0, Q4_0), so it would make a speculative
  verify batch differ from plain decoding; ``PATCHES`` let it take a batch of fewer than
  ``EXACT_ROWS`` rows only when the engine says the batch is a prompt read (the exported
  ``hearth_exact_rows``, lowered around a read by ``engine.backends.row_kernels``), never a verify batch.
* The variants are llama.cpp's own (``GGML_CPU_ALL_VARIANTS`` defines them, with their feature
  checks), but only the few listed are compiled: all of them would triple the build time. What
  differs on Windows and macOS (file names, variants, flags, compilers) is in ``llama_platforms``.
* The finished wheel is cached under a key made of everything that determines its content: the
  llama-cpp-python version, every CMake flag, the variant set, the target architecture, the
  compiler and Python versions, and this script's format. Never the build machine's CPU.
* On x86, every library except the AMX build is checked to hold no AMX instruction (``objdump``,
  when installed).
* ``PATCHES`` keep a batch of fewer than ``EXACT_ROWS`` tokens bit-identical, row by row, to the
  same tokens decoded one at a time, which speculative drafting's exactness rests on: ggml's CPU
  backend otherwise switches kernels by batch size in two places that llama.cpp does not let a
  program turn off (single-token flash attention splits a long KV cache between threads and merges
  partial softmaxes; K-quant matrices take a tiled GEMM from 8 rows; llamafile's sgemm from 2 rows).
  Prefill batches keep every fast path, short ones too (the switch above). Repacked weight layouts are the third such place; the app decides those per weight
  type from the canary (``engine.backends.canary``), since a model load can turn them off.
* ``SPEED_PATCHES`` change no number, only speed: the gated delta-net op's scratch starts on a cache line,
  and a short Q8_0, Q4_K, Q5_K or Q6_K batch reads each weight row once for several columns
  (``llama_patches/``).
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_platforms as per_system  # noqa: E402

FORMAT = 2
MANIFEST_FORMAT = 2  # engine.backends.cpu_variants.MANIFEST_FORMAT
MANIFEST = "hearth-cpu-variants.json"  # engine.backends.cpu_variants.MANIFEST
COMMON_FLAGS = ("-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_LLAMAFILE=ON", "-DLLAVA_BUILD=OFF",
                "-DCMAKE_BUILD_TYPE=Release")
WHEEL_FLAGS = ("-DGGML_CPU=OFF",)  # the CPU backends come from the variant build
EXACT_ROWS = 16
# The bound is a variable each CPU backend library exports (tiled.cpp is built into every one, sgemm.cpp
# only with llamafile): EXACT_ROWS unless the engine lowers it to 0 around a prompt read, which then
# takes the fast kernels at any size (engine.backends.row_kernels). Verify batches run at EXACT_ROWS.
ROW_SWITCH = "hearth_exact_rows"
ROW_SWITCH_DEFINITION = (
    "#if defined(_WIN32)\n"
    f'extern "C" __declspec(dllexport) int {ROW_SWITCH} = {EXACT_ROWS};  // Hearth: engine.backends.row_kernels\n'
    "#else\n"
    f'extern "C" __attribute__((visibility("default"))) int {ROW_SWITCH} = {EXACT_ROWS};  // Hearth\n'
    "#endif")
# (file under vendor/llama.cpp, text, replacement): each must match once, or the build stops.
EXACTNESS_PATCHES = (
    ("ggml/src/ggml-cpu/ops.cpp", "const bool use_split_kv_path = !use_ref &&",
     "const bool use_split_kv_path = false && !use_ref &&"),
    ("ggml/src/ggml-cpu/tiled/tiled.cpp", "static bool ggml_tiled_min_batch(int64_t rows) {",
     f"{ROW_SWITCH_DEFINITION}\nstatic bool ggml_tiled_min_batch(int64_t rows) {{"),
    ("ggml/src/ggml-cpu/tiled/tiled.cpp", "return rows >= 8 || ggml_tiled_matmul_forced();",
     f"return rows >= ({ROW_SWITCH} > 8 ? {ROW_SWITCH} : 8) || ggml_tiled_matmul_forced();"),
    ("ggml/src/ggml-cpu/llamafile/sgemm.cpp", "    // only enable sgemm for prompt processing\n",
     f"    // only enable sgemm for prompt processing\n    if (n < {ROW_SWITCH})  // Hearth: verify batches stay exact\n"
     "        return false;\n"),
    ("ggml/src/ggml-cpu/llamafile/sgemm.cpp",
     "bool llamafile_sgemm(const struct ggml_compute_params * params, int64_t m, int64_t n, int64_t k,\n",
     f'extern "C" int {ROW_SWITCH};  // tiled.cpp\n'
     "bool llamafile_sgemm(const struct ggml_compute_params * params, int64_t m, int64_t n, int64_t k,\n"),
)
# With rollback planes (n_rs_seq > 0, as every drafting context of a hybrid has), the gated
# delta-net op runs each head's 64 KiB state in a per-thread scratch at the start of the work buffer,
# which ``new uint8_t[]`` aligns to 16 bytes only: every 64-byte vector access then spans two cache
# lines. Starting the scratch on a cache line changes no number (the same arithmetic, aligned loads);
# on the Qwen3.5-0.8B shape it cut the op's share of a prompt read (docs/performance.md).
#
# A verify batch of Q8_0 weights (the built-in model's layout) runs ggml's single-row dot product once
# per weight row and column, where stock llama.cpp takes sgemm; a kernel that loads each weight row
# once for up to four columns, each column summed as the single-row kernel sums it, takes the
# difference away and leaves every number as it was (measured: docs/drafting.md, "The verify batch per op").
# The K-quant kernels do the same for Q4_K, Q5_K and Q6_K (the Q4_K_M and Q5_K_M files), where stock
# takes its tiled GEMM from 8 rows and Hearth, below 16, the single-row kernel; they also unpack each
# block's quants and scales once for all its columns (tests/engine/test_column_kernels.py).
PATCH_SOURCES = Path(__file__).resolve().parent / "llama_patches"
Q8_0_DOT = ("void ggml_vec_dot_q8_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, "
            "size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc);\n")
COLUMNS_DOTS = "".join(
    f"void hearth_vec_dot_{kind}_cols(int n, float * GGML_RESTRICT s, size_t bs, "
    "const void * GGML_RESTRICT vx, const void * GGML_RESTRICT vy, size_t by, int ncols);\n"
    for kind in ("q8_0_q8_0", "q4_K_q8_K", "q5_K_q8_K", "q6_K_q8_K"))
SPEED_PATCHES = (
    ("ggml/src/ggml-cpu/ops.cpp",
     "float * delta       = (float *)params->wdata + ith * per_thread + CACHE_LINE_SIZE_F32;",
     "float * delta       = (float *) GGML_PAD((uintptr_t) params->wdata, CACHE_LINE_SIZE) + ith * per_thread;"),
    ("ggml/src/ggml-cpu/quants.h", Q8_0_DOT, Q8_0_DOT + COLUMNS_DOTS),
    ("ggml/src/ggml-cpu/arch/x86/quants.c", "void ggml_vec_dot_tq1_0_q8_K(",
     (PATCH_SOURCES / "q8_0_columns.c").read_text() + "\nvoid ggml_vec_dot_tq1_0_q8_K("),
    ("ggml/src/ggml-cpu/arch/x86/quants.c", "void ggml_vec_dot_iq2_xxs_q8_K(",
     (PATCH_SOURCES / "k_quant_columns.c").read_text() + "\nvoid ggml_vec_dot_iq2_xxs_q8_K("),
    ("ggml/src/ggml-cpu/ggml-cpu.c", "    float tmp[32];\n\n",
     "    float tmp[32];\n\n" + (PATCH_SOURCES / "columns_call.c").read_text() + "\n"),
)
# Repacked Q4_K weights (the Q4_K_M files' main type) decode a single token with a gemv that
# stock llama.cpp's gemm does not match from four rows on, so Hearth used to load them unrepacked,
# paying about a third more per token than stock. Below hearth_exact_rows these patches multiply each
# column of a batch as the gemv does, its weights unpacked once for four columns; the canary then
# finds the repacked kernels exact and the app loads Q4_K repacked (docs/drafting.md).
Q4_K_GEMV = ("void ggml_gemv_q4_K_8x8_q8_K(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, "
             "const void * GGML_RESTRICT vy, int nr, int nc);\n")
Q4_K_COLUMNS_GEMV = ("void hearth_gemv_q4_K_8x8_q8_K_cols(int n, float * GGML_RESTRICT s, size_t bs, "
                     "const void * GGML_RESTRICT vx, const void * GGML_RESTRICT vy, size_t by, int nr, int nc);\n")
TRAITS_CLASS = ("template <typename BLOC_TYPE, int64_t INTER_SIZE, int64_t NB_COLS, ggml_type PARAM_TYPE> "
                "class tensor_traits : public tensor_traits_base {")
GEMM_CHOICE = "        // If there are more than three rows in src1, use gemm; otherwise, use gemv.\n"
REPACK_PATCHES = (
    ("ggml/src/ggml-cpu/repack.h", Q4_K_GEMV, Q4_K_GEMV + Q4_K_COLUMNS_GEMV),
    ("ggml/src/ggml-cpu/arch/x86/repack.cpp", "void ggml_gemv_iq4_nl_8x8_q8_0(",
     (PATCH_SOURCES / "q4_K_8x8_columns.c").read_text() + "\nvoid ggml_gemv_iq4_nl_8x8_q8_0("),
    ("ggml/src/ggml-cpu/repack.cpp", TRAITS_CLASS, (PATCH_SOURCES / "q4_K_8x8_columns_call.cpp").read_text() + TRAITS_CLASS),
    ("ggml/src/ggml-cpu/repack.cpp", "i11 < ne11 - ne11 % 4; i11 += nth * 4) {",
     "i11 < hearth_interleaved_rows<BLOC_TYPE, INTER_SIZE, NB_COLS>(ne11); i11 += nth * 4) {"),
    ("ggml/src/ggml-cpu/repack.cpp", "const int64_t i11_processed = ne11 - ne11 % 4;",
     "const int64_t i11_processed = hearth_interleaved_rows<BLOC_TYPE, INTER_SIZE, NB_COLS>(ne11);"),
    ("ggml/src/ggml-cpu/repack.cpp", GEMM_CHOICE,
     (PATCH_SOURCES / "q4_K_8x8_columns_chunk.cpp").read_text() + GEMM_CHOICE),
)
PATCHES = EXACTNESS_PATCHES + SPEED_PATCHES + REPACK_PATCHES
AMX_MNEMONICS = ("tilezero", "tileloadd", "tilestored", "tilerelease", "ldtilecfg", "sttilecfg", "tdpb", "tdpf")


def common_flags() -> tuple[str, ...]:
    return COMMON_FLAGS + per_system.system_flags()


def build_key(version: str) -> str:
    """Everything the wheel's content depends on, hashed; the host CPU is deliberately not in it."""
    arch = per_system.target_arch()
    parts = {"format": FORMAT, "version": version, "common": common_flags(), "wheel": WHEEL_FLAGS, "patches": PATCHES,
             "variants": per_system.variants(), "arch": arch, "system": platform.system(),
             "compiler": per_system.compiler_version(), "python": f"{sys.version_info.major}.{sys.version_info.minor}",
             **per_system.key_parts()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def say(message: str) -> None:
    print(f"[llama build] {message}", file=sys.stderr, flush=True)


def run(command: list[str], log: Path, **kwargs) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, **kwargs)
    if done.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-25:]
        sys.exit("\n".join(tail) + f"\n[llama build] failed: {' '.join(command[:3])} ... (full log: {log})")


def cached_sdist(cache: Path, version: str) -> Path:
    """Where the set-up keeps the sdist it downloaded (the test fixtures read llama.cpp's chat templates
    and vocabularies from it: tests/fixtures/llama_sdist.py)."""
    return cache / "sdist" / f"llama_cpp_python-{version}.tar.gz"


def fetch_sdist(pip: str, version: str, work: Path, log: Path, cache: Path | None = None) -> Path:
    """The llama-cpp-python sdist: the copy in ``cache`` if there is one, else downloaded (and a copy kept there)."""
    kept = cached_sdist(cache, version) if cache is not None else None
    if kept is not None and kept.is_file():
        say(f"sdist: {kept}")
        return kept
    run([pip, "download", "--no-deps", "--no-binary", ":all:", "-d", str(work), f"llama-cpp-python=={version}"], log)
    sdist = next(work.glob("llama_cpp_python-*.tar.gz"))
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_name(f".{kept.name}.{os.getpid()}.part")
        shutil.copy2(sdist, partial)
        os.replace(partial, kept)
    return sdist


def build_base_wheel(pip: str, sdist: Path, out: Path, jobs: int, log: Path) -> Path:
    env = {**os.environ, "CMAKE_ARGS": " ".join(common_flags() + WHEEL_FLAGS), "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs)}
    say(f"library: CMAKE_ARGS={env['CMAKE_ARGS']}")
    run([pip, "wheel", "--no-deps", "--no-cache-dir", "-w", str(out), str(sdist)], log, env=env)
    return next(out.glob("llama_cpp_python-*.whl"))


def variant_configure(source: Path, build: Path, selection: tuple[str, ...]) -> list[str]:
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    return ["cmake", "-S", str(source), "-B", str(build), *generator, *common_flags(), "-DBUILD_SHARED_LIBS=ON",
            *selection, "-DLLAMA_BUILD_COMMON=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_CURL=OFF",
            "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON", *per_system.backend_flags()]


def compile_backends(source: Path, build: Path, names: list[str], jobs: int, log: Path) -> list[Path]:
    """One configure and build making the CPU backends ``names`` (on Windows ARM64, one at a time)."""
    run(variant_configure(source, build, per_system.variant_selection(names)), log)
    targets = [per_system.backend_target(n) for n in names]
    run(["cmake", "--build", str(build), *per_system.build_options(), "-j", str(jobs), "--target", *targets], log)
    return [next(build.rglob(per_system.module_file(target))) for target in targets]


def require_tools() -> None:
    missing = per_system.missing_tools()
    if missing:
        sys.exit(f"[llama build] the CPU backends are built with clang through Ninja here (ggml refuses MSVC "
                 f"for ARM), and {', '.join(missing)} is not on PATH; install LLVM and Ninja, or set CC and CXX")


def build_variants(sdist: Path, work: Path, jobs: int, log: Path) -> list[Path]:
    with tarfile.open(sdist) as archive:
        archive.extractall(work, filter="data")
    source = next(work.glob("llama_cpp_python-*/vendor/llama.cpp"))
    apply_patches(source)
    names = [name for name, _, _ in per_system.variants()]
    if per_system.one_build_per_variant():
        say(f"CPU backends: {', '.join(names)}, one clang build each (GGML_CPU_ARM_ARCH, GGML_NATIVE=OFF)")
        return [compile_backends(source, work / f"cpu-{n}", [n], jobs, log)[0] for n in names]
    say(f"CPU backends: {', '.join(names)} (GGML_CPU_ALL_VARIANTS definitions, GGML_NATIVE=OFF)")
    return compile_backends(source, work / "cpu-variants", names, jobs, log)


def apply_patches(source: Path) -> None:
    for relative, text, replacement in PATCHES:
        path = source / relative
        content = path.read_text()
        if content.count(text) != 1:
            sys.exit(f"[llama build] {relative} no longer holds {text!r} exactly once: this llama.cpp differs "
                     "from the one the exactness patches were written for; review PATCHES")
        path.write_text(content.replace(text, replacement))
    say(f"CPU backends patched for batch-exact kernels below {EXACT_ROWS} rows: "
        + "; ".join(f"{Path(r).name}: {t} -> {n}" for r, t, n in EXACTNESS_PATCHES)
        + "; the delta-net scratch aligned to a cache line; Q8_0 and K-quant short batches summed per column;"
        " repacked Q4_K batches multiplied per column as single tokens are")


def build_native_backend(pip: str, version: str, out: Path, jobs: int) -> Path:
    """For benchmarks only, never installed: the CPU backend as the old set-up built it, for this
    machine's CPU (``-march=native``, no exactness patches), loadable with HEARTH_CPU_LIBRARY."""
    with tempfile.TemporaryDirectory(prefix="hearth-native-build-") as tmp:
        work = Path(tmp)
        log = work / "build.log"
        sdist = fetch_sdist(pip, version, work / "sdist", log)
        with tarfile.open(sdist) as archive:
            archive.extractall(work / "src", filter="data")
        source = next((work / "src").glob("llama_cpp_python-*/vendor/llama.cpp"))
        features = [f"-DGGML_{f}=OFF" for f in ("SSE42", "AVX", "AVX2", "BMI2", "FMA", "F16C", "AVX512")]
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        say("native CPU backend (benchmarks only): -march=native, unpatched")
        run(["cmake", "-S", str(source), "-B", str(work / "native"), *generator, *common_flags(), *features,
             "-DBUILD_SHARED_LIBS=ON", "-DCMAKE_C_FLAGS=-march=native", "-DCMAKE_CXX_FLAGS=-march=native",
             "-DLLAMA_BUILD_COMMON=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
             "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_CURL=OFF"], log)
        run(["cmake", "--build", str(work / "native"), "-j", str(jobs), "--target", "ggml-cpu"], log)
        out.mkdir(parents=True, exist_ok=True)
        target = out / per_system.variant_file("native")
        shutil.copy2(next((work / "native").rglob(per_system.module_file("ggml-cpu"))), target)
    say(f"built {target}")
    return target


def amx_instructions(library: Path) -> int:
    """How many AMX instructions the library's code holds (-1 when objdump is missing)."""
    if not shutil.which("objdump"):
        return -1
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True,
                             text=True).stdout
    count = 0
    for line in listing.splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[1].strip().startswith(AMX_MNEMONICS):
            count += 1
    return count


def registry_library(names: list[str]) -> str:
    """The file of libggml (the backend registry) that libllama loads (``llama_platforms``)."""
    found = per_system.registry_candidates(names)
    if not found:
        sys.exit(f"[llama build] the wheel holds no libggml that libllama loads by name ({', '.join(names)})")
    return found[0]


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def add_to_wheel(wheel: Path, files: dict[str, bytes], out: Path) -> Path:
    """A copy of ``wheel`` with ``files`` (archive name -> bytes) added and its RECORD updated."""
    target = out / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dest:
        record_name = next(n for n in source.namelist() if n.endswith(".dist-info/RECORD"))
        rows = [row for row in csv.reader(io.StringIO(source.read(record_name).decode())) if row]
        for item in source.infolist():
            if item.filename != record_name:
                dest.writestr(item, source.read(item.filename))
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            dest.writestr(info, data)
            rows = [row for row in rows if row[0] != name] + [_record_line(name, data)]
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(rows + [[record_name, "", ""]])
        dest.writestr(record_name, text.getvalue())
    return target


def check_no_amx(libraries: dict[str, Path], amx_names: set[str]) -> None:
    if per_system.target_arch() != "x86_64":
        say("not an x86 build: there is no AMX to check for")
        return
    for name, path in libraries.items():
        count = amx_instructions(path)
        if count < 0:
            say("objdump not found: the AMX check is skipped")
            return
        if name in amx_names:
            say(f"{path.name}: {count} AMX instructions (used only after its canary passes)")
        elif count:
            sys.exit(f"[llama build] {path.name} holds {count} AMX instructions; it must hold none")
    say(f"no AMX instruction outside {', '.join(sorted(amx_names)) or 'any library'}")


def manifest_for(label: str, registry: str) -> dict:
    return {"format": MANIFEST_FORMAT, "build_key": label, "registry": registry, "exact_rows": EXACT_ROWS,
            "variants": [{"name": name, "file": per_system.variant_file(name), "features": list(features), "amx": amx}
                         for name, features, amx in per_system.variants()]}


def build(version: str, pip: str, cache: Path, jobs: int) -> Path:
    arch = per_system.target_arch()
    if not per_system.variants():
        sys.exit(f"[llama build] no CPU variants are defined for {platform.system()} on {arch}")
    key = build_key(version)
    folder = cache / f"llama-cpp-python-{version}-{arch}-{key}"
    found = sorted(folder.glob("llama_cpp_python-*.whl"))
    if found:
        say(f"cached: {found[0]} (build key {key})")
        return found[0]
    require_tools()
    with tempfile.TemporaryDirectory(prefix="hearth-llama-build-") as tmp:
        work = Path(tmp)
        log = work / "build.log"
        say(f"building llama-cpp-python {version} for {arch} (build key {key}); log: {log}")
        sdist = fetch_sdist(pip, version, work / "sdist", log, cache)
        wheel = build_base_wheel(pip, sdist, work / "wheel", jobs, log)
        variant_files = build_variants(sdist, work / "src", jobs, log)
        names = [name for name, _, _ in per_system.variants()]
        with zipfile.ZipFile(wheel) as archive:
            base_libs = [n for n in archive.namelist() if n.startswith("llama_cpp/lib/") and per_system.is_library(n)]
            for name in base_libs:
                archive.extract(name, work / "base")
        check_no_amx({**{Path(n).name: work / "base" / n for n in base_libs}, **dict(zip(names, variant_files))},
                     {name for name, _, amx in per_system.variants() if amx})
        manifest = manifest_for(f"{version}-{arch}-{key}", registry_library([Path(n).name for n in base_libs]))
        files = {f"llama_cpp/lib/{per_system.variant_file(name)}": path.read_bytes()
                 for name, path in zip(names, variant_files)}
        files[f"llama_cpp/lib/{MANIFEST}"] = json.dumps(manifest, indent=1).encode()
        folder.mkdir(parents=True, exist_ok=True)
        staged = add_to_wheel(wheel, files, work)
        final = folder / staged.name
        shutil.copy2(staged, folder / (staged.name + ".part"))
        os.replace(folder / (staged.name + ".part"), final)
    say(f"built {final}")
    return final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True)
    parser.add_argument("--pip", required=True, help="the pip of the environment that builds")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "hearth" / "wheels")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--native-backend", type=Path, metavar="DIR",
                        help="instead: build a -march=native CPU backend into DIR, for benchmarks only")
    args = parser.parse_args()
    if args.native_backend:
        print(build_native_backend(args.pip, args.version, args.native_backend, args.jobs))
    else:
        print(build(args.version, args.pip, args.cache, args.jobs))


if __name__ == "__main__":
    main()
