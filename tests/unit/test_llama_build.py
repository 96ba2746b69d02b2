"""The portable build (installers/llama_build.py) and what it installed.

The wheel's cache key must change with everything that changes the wheel (flags, patches, target
architecture, compiler, Python) and with nothing about the host CPU; the exactness patches must
apply exactly once or stop the build; and in the installed build, no library that can run before a
canary passed holds an AMX instruction.
"""

from __future__ import annotations

import csv
import hashlib
import base64
import importlib.util
import io
import shutil
import zipfile
from pathlib import Path

import pytest

from engine.backends.cpu_variants import read_variant_set
from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("llama_build", ROOT / "installers" / "llama_build.py")
llama_build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(llama_build)


def test_the_cache_key_follows_every_build_input_and_not_the_host_cpu(monkeypatch):
    base = llama_build.build_key("0.3.36")
    assert llama_build.build_key("0.3.37") != base
    changes = [("COMMON_FLAGS", llama_build.COMMON_FLAGS + ("-DGGML_OPENMP=OFF",)),
               ("PATCHES", llama_build.PATCHES[:1]),
               ("VARIANTS", {**llama_build.VARIANTS, "x86_64": llama_build.VARIANTS["x86_64"][1:]}),
               ("target_arch", lambda: "aarch64"), ("compiler_version", lambda: "gcc (Debian 13.1.0) 13.1.0")]
    for name, value in changes:
        with monkeypatch.context() as m:
            m.setattr(llama_build, name, value)
            assert llama_build.build_key("0.3.36") != base, name
    monkeypatch.setattr(llama_build.platform, "processor", lambda: "some other CPU")
    monkeypatch.setattr(Path, "read_text", lambda *a, **k: "flags: amx_tile amx_int8 avx512f")
    assert llama_build.build_key("0.3.36") == base


def test_each_exactness_patch_must_match_once_or_the_build_stops(tmp_path):
    for relative, text, _ in llama_build.PATCHES:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"before\n    {text} rest;\nafter\n")
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


def test_the_registry_is_the_copy_of_libggml_named_by_its_soname():
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
