"""What the bundle carries besides the app: the third-party licences file, the icons, the Linux
desktop entry and the tarball's install script (installers/third_party_licenses.py, icons.py,
linux/hearth.desktop, linux/install_local.sh)."""

from __future__ import annotations

import configparser
import importlib.metadata
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage, QImageReader

ROOT = Path(__file__).resolve().parents[2]
INSTALLERS = ROOT / "installers"
LINUX_EXCLUDED = ("onnxruntime", "onnxruntime-qnn", "onnx")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAIN_CATEGORIES = {"AudioVideo", "Audio", "Video", "Development", "Education", "Game", "Graphics", "Network",
                   "Office", "Science", "Settings", "System", "Utility"}


def load_script(name: str):
    """An installers/ script as a module (installers/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, INSTALLERS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


licences = load_script("third_party_licenses")
icons = load_script("icons")


def run_script(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, **kwargs)


def sections(text: str) -> dict[str, str]:
    """The licences file's entries: first line ("name version") -> the entry's text."""
    parts = text.split("\n" + licences.RULE + "\n")[1:]
    return {part.splitlines()[0]: part for part in parts}


def names(dists) -> set[str]:
    return {licences.normalise(d.name) for d in dists}


# -- THIRD_PARTY_LICENSES --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def linux_licences(tmp_path_factory) -> tuple[str, str]:
    out = tmp_path_factory.mktemp("licences") / "THIRD_PARTY_LICENSES"
    done = run_script(str(INSTALLERS / "third_party_licenses.py"), "--out", str(out),
                      "--exclude", *LINUX_EXCLUDED)
    assert done.returncode == 0, done.stderr
    return out.read_text(encoding="utf-8"), done.stderr


def test_the_licences_file_gives_qt_the_lgpl_and_names_the_engine_and_python(linux_licences):
    text, _ = linux_licences
    entries = sections(text)
    pyside = entries[f"PySide6_Essentials {importlib.metadata.version('pyside6-essentials')}"]
    assert "GNU LESSER GENERAL PUBLIC LICENSE" in pyside and "Version 3, 29 June 2007" in pyside
    assert "GNU GENERAL PUBLIC LICENSE" in pyside, "the LGPL-3.0 comes with the GPL-3.0 it amends"
    llama = entries[f"llama_cpp_python {importlib.metadata.version('llama-cpp-python')}"]
    assert "Licence: MIT" in llama and "Andrei Betlen" in llama
    ggml = next(body for title, body in entries.items() if title.startswith("llama.cpp and ggml"))
    assert "MIT License" in ggml and "The ggml authors" in ggml
    python = next(body for title, body in entries.items() if title.startswith("Python 3."))
    assert "PSF" in python and "PYTHON SOFTWARE FOUNDATION LICENSE" in python.upper()


def test_the_linux_file_leaves_out_the_npu_libraries(linux_licences):
    text, _ = linux_licences
    listed = {licences.normalise(title.split()[0]) for title in sections(text)}
    assert not listed & {"onnxruntime", "onnxruntime-qnn", "onnx", "coloredlogs", "sympy"}
    assert "numpy" in listed, "what Hearth needs itself stays, though the excluded ones need it too"


def test_the_summary_counts_what_the_file_lists(linux_licences):
    text, stderr = linux_licences
    found = re.fullmatch(r"(\d+) distributions, (\d+) licence texts \((\d+) without a shipped text\)\n", stderr)
    assert found, stderr
    entries = sections(text)
    assert int(found[1]) == len(entries)
    assert int(found[2]) == sum(body.count("\n--- ") for body in entries.values())


def test_excluding_a_distribution_drops_it_and_what_only_it_needs():
    everything = names(licences.requirement_closure("hearth"))
    without_qnn = names(licences.requirement_closure("hearth", exclude=["onnxruntime_qnn"]))
    assert {"onnxruntime-qnn", "onnxruntime", "coloredlogs", "sympy"} <= everything
    assert not {"onnxruntime-qnn", "onnxruntime", "coloredlogs", "sympy"} & without_qnn
    assert {"onnx", "protobuf", "numpy"} <= without_qnn, "onnx stays, and what it needs"
    assert "hearth" not in everything


def test_every_distribution_has_its_text_or_says_it_ships_none():
    entries = licences.third_party_entries("hearth")
    without = [e for e in entries if not e.texts]
    assert without, "this environment has distributions shipping no licence file (flatbuffers, onnxruntime)"
    rendered = sections(licences.render(entries, "Test"))
    assert len(rendered) == len(entries)
    for title, body in rendered.items():
        says_none = "licence text not shipped by the distribution; see http" in body
        assert ("\n--- " in body) != says_none, title
    assert f"({len(without)} without a shipped text)" in licences.summary(entries)


def test_a_missing_requirement_is_an_error_not_a_gap(monkeypatch):
    real = importlib.metadata.distribution

    def without_numpy(name):
        if licences.normalise(name) == "numpy":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", without_numpy)
    with pytest.raises(licences.MissingDistribution, match="numpy"):
        licences.requirement_closure("hearth")


# -- icons -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def icon_folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("icons")
    done = run_script(str(INSTALLERS / "icons.py"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def assert_drawn(image: QImage, size: int) -> None:
    assert (image.width(), image.height()) == (size, size)
    step = max(1, size // 16)
    pixels = {image.pixel(x, y) for x in range(0, size, step) for y in range(0, size, step)}
    assert len(pixels) > 3, f"the {size}px icon is blank"
    assert image.pixelColor(size // 2, size // 2).alpha() == 255


@pytest.mark.parametrize("size", icons.PNG_SIZES)
def test_each_png_has_its_size_and_the_drawing(icon_folder, size, qapp):
    assert_drawn(QImage(str(icon_folder / f"hearth-{size}.png")), size)


def test_the_ico_holds_every_size_as_png(icon_folder, qapp):
    data = (icon_folder / "hearth.ico").read_bytes()
    reserved, kind, count = struct.unpack_from("<HHH", data)
    assert (reserved, kind, count) == (0, 1, len(icons.ICO_SIZES))
    sizes = []
    for i in range(count):
        width, height, _, _, planes, bits, length, offset = struct.unpack_from("<BBBBHHII", data, 6 + 16 * i)
        assert width == height and (planes, bits) == (1, 32)
        assert data[offset:offset + 8] == PNG_SIGNATURE and offset + length <= len(data)
        sizes.append(width or 256)
    assert sizes == list(icons.ICO_SIZES)
    reader = QImageReader(str(icon_folder / "hearth.ico"))
    read = []
    for i in range(reader.imageCount()):
        reader.jumpToImage(i)
        image = reader.read()
        assert_drawn(image, image.width())
        read.append(image.width())
    assert read == list(icons.ICO_SIZES), "Qt reads the file back, every image"


def test_the_iconset_has_every_name_iconutil_wants(icon_folder, qapp):
    expected = {f"icon_{n}x{n}{scale}.png" for n in (16, 32, 128, 256, 512) for scale in ("", "@2x")}
    iconset = icon_folder / "hearth.iconset"
    assert {p.name for p in iconset.iterdir()} == expected
    assert_drawn(QImage(str(iconset / "icon_16x16@2x.png")), 32)
    assert_drawn(QImage(str(iconset / "icon_512x512@2x.png")), 1024)


# -- the desktop entry -----------------------------------------------------------------------------

def desktop_entry(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read(path, encoding="utf-8")
    return dict(parser["Desktop Entry"])


def test_the_desktop_entry_has_what_menus_need():
    entry = desktop_entry(INSTALLERS / "linux" / "hearth.desktop")
    assert entry["Type"] == "Application" and entry["Name"] == "Hearth" and entry["Terminal"] == "false"
    assert entry["GenericName"] and entry["Comment"]
    assert entry["Exec"] == "@EXEC@ %F" and entry["Icon"] == "@ICON@"
    assert set(entry["Categories"].rstrip(";").split(";")) & MAIN_CATEGORIES
    assert entry["StartupWMClass"] == "Hearth", "X11's window class is the application name ui/app.py sets"


def test_the_filled_in_desktop_entry_validates(tmp_path):
    validate = shutil.which("desktop-file-validate")
    if validate is None:
        pytest.skip("desktop-file-validate is not installed (apt-get install desktop-file-utils)")
    filled = tmp_path / "hearth.desktop"
    template = (INSTALLERS / "linux" / "hearth.desktop").read_text(encoding="utf-8")
    filled.write_text(template.replace("@EXEC@", "/opt/hearth/Hearth").replace("@ICON@", "hearth"))
    done = subprocess.run([validate, str(filled)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr


# -- install_local.sh ------------------------------------------------------------------------------

def fake_bundle(folder: Path, icon_folder: Path) -> Path:
    """The unpacked tarball's layout, with shell scripts for executables."""
    folder.mkdir()
    for name, says in (("Hearth", "window"), ("hearth", "command line")):
        (folder / name).write_text(f'#!/bin/sh\necho "{says} $*"\n')
        (folder / name).chmod(0o755)
    (folder / "_internal").mkdir()
    (folder / "_internal" / "libpython.so").write_bytes(b"\0")
    shutil.copytree(icon_folder, folder / "icons", ignore=shutil.ignore_patterns("*.ico", "*.iconset"))
    shutil.copy(INSTALLERS / "linux" / "hearth.desktop", folder / "hearth.desktop")
    shutil.copy(INSTALLERS / "linux" / "install_local.sh", folder / "install.sh")
    return folder


def tree(root: Path) -> dict[str, bytes | str]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else "folder")
            for p in sorted(root.rglob("*"))}


def install(script: Path, *args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home)}
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, env=env, timeout=60)


def test_the_install_script_is_valid_bash():
    done = subprocess.run(["bash", "-n", str(INSTALLERS / "linux" / "install_local.sh")], capture_output=True)
    assert done.returncode == 0, done.stderr


def test_install_then_uninstall_leaves_exactly_what_was_there(tmp_path, icon_folder):
    bundle = fake_bundle(tmp_path / "Hearth-0.1.0", icon_folder)
    prefix = tmp_path / "local"
    (prefix / "share" / "Hearth").mkdir(parents=True)  # the user's data (platformdirs' folder)
    (prefix / "share" / "Hearth" / "hearth.db").write_bytes(b"conversations")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "other-tool").write_text("#!/bin/sh\n")
    before = tree(prefix)

    done = install(bundle / "install.sh", "--prefix", str(prefix), home=tmp_path)
    assert done.returncode == 0, done.stderr
    opt = prefix / "opt" / "hearth"
    assert (opt / "Hearth").is_file() and (opt / "_internal" / "libpython.so").is_file()
    link = prefix / "bin" / "hearth"
    assert link.is_symlink() and link.resolve() == opt / "hearth"
    ran = subprocess.run([str(link), "--version"], capture_output=True, text=True)
    assert ran.stdout == "command line --version\n"
    entry = desktop_entry(prefix / "share" / "applications" / "hearth.desktop")
    assert entry["Exec"] == f'"{opt / "Hearth"}" %F' and entry["TryExec"] == str(opt / "Hearth")
    assert entry["Icon"] == "hearth"
    for size in icons.PNG_SIZES:
        installed = prefix / "share" / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "hearth.png"
        assert installed.read_bytes() == (icon_folder / f"hearth-{size}.png").read_bytes()

    again = install(bundle / "install.sh", "--prefix", str(prefix), home=tmp_path)  # an upgrade
    assert again.returncode == 0 and "replacing" in again.stdout, again.stderr

    removed = install(opt / "install.sh", "--uninstall", "--prefix", str(prefix), home=tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert tree(prefix) == before, "the uninstall takes away what the install added, and only that"
    assert "conversations" in removed.stdout


def test_the_install_script_refuses_a_folder_that_is_not_a_bundle(tmp_path):
    lone = tmp_path / "download"
    lone.mkdir()
    shutil.copy(INSTALLERS / "linux" / "install_local.sh", lone / "install.sh")
    done = install(lone / "install.sh", "--prefix", str(tmp_path / "local"), home=tmp_path)
    assert done.returncode == 1 and "unpacked Hearth folder" in done.stderr
    assert not (tmp_path / "local").exists()
    nothing = install(lone / "install.sh", "--uninstall", "--prefix", str(tmp_path / "local"), home=tmp_path)
    assert nothing.returncode == 1 and "nothing removed" in nothing.stderr
