"""The macOS and Windows packaging, checked here although it only runs on those systems: the
Info.plist and entitlements, package_macos.sh with stand-ins for the macOS tools, the Inno Setup
script (through a small model of its preprocessor) and package_windows.py with a stand-in ISCC."""

from __future__ import annotations

import base64
import plistlib
import re
import subprocess
from pathlib import Path

import pytest

from tests.installers.conftest import INSTALLERS, ROOT, package_windows

ISS = INSTALLERS / "windows" / "hearth.iss"


# --- the macOS app --------------------------------------------------------------------------

def test_info_plist_describes_the_app_with_a_version_placeholder():
    info = plistlib.loads((INSTALLERS / "macos" / "Info.plist").read_bytes())
    assert info["CFBundleExecutable"] == "Hearth"  # the GUI executable the spec builds
    assert info["CFBundleIconFile"] == "hearth.icns"
    assert info["CFBundleShortVersionString"] == info["CFBundleVersion"] == "0.0.0"
    assert info["LSMinimumSystemVersion"] == "12.0"
    assert info["NSHighResolutionCapable"] is True
    for key in ("CFBundleIdentifier", "CFBundleName", "CFBundleDisplayName", "LSApplicationCategoryType",
                "NSHumanReadableCopyright"):
        assert info[key], key


def test_entitlements_ask_for_no_more_than_a_ctypes_app_needs():
    path = INSTALLERS / "macos" / "entitlements.plist"
    entitlements = plistlib.loads(path.read_bytes())
    assert entitlements == {"com.apple.security.cs.allow-unsigned-executable-memory": True}
    assert str(path.relative_to(ROOT)) in (INSTALLERS / "macos" / "package_macos.sh").read_text()


def test_package_macos_makes_an_unsigned_dmg_without_secrets(tmp_path):
    """The script end to end with stand-ins for the macOS tools: plutil, ditto and hdiutil."""
    tools, dist = tmp_path / "bin", tmp_path / "dist"
    (dist / "Hearth.app" / "Contents" / "MacOS").mkdir(parents=True)
    tools.mkdir()
    fakes = {"plutil": 'echo 1.2.3',
             "ditto": 'cp -R "$1" "$2"',
             "hdiutil": 'while [ $# -gt 1 ]; do case "$1" in -srcfolder) ls "$2" > "$LOG";; esac; shift; done\n'
                        'echo "$*" >> "$LOG"; touch "$1"'}
    for name, body in fakes.items():
        (tools / name).write_text(f"#!/bin/bash\n{body}\n")
        (tools / name).chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(tmp_path), "LOG": str(tmp_path / "hdiutil.log")}
    done = subprocess.run(["bash", str(INSTALLERS / "macos" / "package_macos.sh"), str(dist)], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    dmg = Path(lines[-1])
    assert lines[0].startswith("unsigned")
    assert dmg.parent == dist and re.fullmatch(r"Hearth-1\.2\.3-macos-\w+\.dmg", dmg.name) and dmg.is_file()
    assert (tmp_path / "hdiutil.log").read_text().split() == ["Applications", "Hearth.app", str(dmg)]


# --- the Inno Setup script ------------------------------------------------------------------

def preprocess(text: str, defines: dict[str, str]) -> str:
    """The part of Inno Setup's preprocessor hearth.iss uses: #define, #ifdef, #ifndef,
    #if NAME == "value", #elif, #else, #endif, #error and {#NAME}."""
    defines, kept, stack = dict(defines), [], []  # stack: [a branch was taken, this branch is active]

    def holds(condition: str) -> bool:
        match = re.fullmatch(r'(\w+)\s*==\s*"([^"]*)"', condition.strip())
        assert match, condition
        return defines.get(match.group(1)) == match.group(2)

    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        active = all(branch for _, branch in stack)
        if word in ("#ifdef", "#ifndef", "#if"):
            taken = holds(rest) if word == "#if" else (rest.strip() in defines) == (word == "#ifdef")
            stack.append([taken, taken])
        elif word in ("#elif", "#else"):
            taken = not stack[-1][0] and (word == "#else" or holds(rest))
            stack[-1] = [stack[-1][0] or taken, taken]
        elif word == "#endif":
            stack.pop()
        elif word == "#define" and active:
            name, _, value = rest.strip().partition(" ")
            defines[name] = value.strip().strip('"')
        elif word == "#error" and active:
            raise ValueError(rest)
        elif active and not word.startswith("#"):
            kept.append(re.sub(r"\{#(\w+)\}", lambda m: defines[m.group(1)], line))
    return "\n".join(kept)


def sections(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current = None
    for line in map(str.strip, text.splitlines()):
        header = re.fullmatch(r"\[(\w+)\]", line)
        if header:
            current = found.setdefault(header.group(1), [])
        elif current is not None and line and not line.startswith(";"):
            current.append(line)
    return found


def setup_keys(rendered: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in sections(rendered)["Setup"])


def entries(rendered: str, section: str) -> list[dict[str, str]]:
    """``Name: "x"; Filename: "y"`` lines as dictionaries."""
    rows = []
    for line in sections(rendered)[section]:
        pairs = (part.split(":", 1) for part in line.split("; "))
        rows.append({key.strip(): value.strip().strip('"') for key, value in pairs})
    return rows


def render(**defines: str) -> str:
    return preprocess(ISS.read_text(), defines)


@pytest.mark.parametrize("arch, allowed", [("arm64", "arm64"), ("x64", "x64compatible")])
def test_inno_setup_installs_per_user_for_each_architecture(arch, allowed):
    setup = setup_keys(render(AppVersion="1.2.3", Arch=arch, BundleDir=r"C:\b\Hearth"))
    assert setup["PrivilegesRequired"] == "lowest"
    assert "PrivilegesRequiredOverridesAllowed" not in setup
    assert setup["DefaultDirName"] == r"{localappdata}\Programs\Hearth"
    assert setup["ArchitecturesAllowed"] == setup["ArchitecturesInstallIn64BitMode"] == allowed
    assert setup["AppVersion"] == "1.2.3"
    assert setup["OutputBaseFilename"] + ".exe" == package_windows.installer_name("1.2.3", arch)
    assert setup["SetupIconFile"] == r"C:\b\Hearth\icons\hearth.ico"
    assert "SignTool" not in setup and "LicenseFile" not in setup


def test_inno_setup_defaults_signing_licence_and_unknown_architectures():
    assert setup_keys(render())["OutputBaseFilename"] == "Hearth-0.0.0-windows-x64-setup"
    signed = setup_keys(render(Sign="", LicenseFile="LICENSE"))
    assert signed["SignTool"] == package_windows.SIGN_TOOL_NAME and signed["SignedUninstaller"] == "yes"
    assert signed["LicenseFile"] == "LICENSE"
    with pytest.raises(ValueError, match="arm64 or x64"):
        render(Arch="x86")


def test_inno_setup_installs_the_bundle_with_a_start_menu_entry_and_an_optional_desktop_icon():
    rendered = render(BundleDir=r"C:\b\Hearth")
    assert entries(rendered, "Files")[0]["Source"] == "C:\\b\\Hearth\\*"
    assert "recursesubdirs" in entries(rendered, "Files")[0]["Flags"]
    icons = {row["Name"]: row for row in entries(rendered, "Icons")}
    assert icons[r"{autoprograms}\Hearth"]["Filename"] == r"{app}\Hearth.exe"
    assert "Tasks" not in icons[r"{autoprograms}\Hearth"]
    assert icons[r"{autodesktop}\Hearth"]["Tasks"] == "desktopicon"
    tasks = {row["Name"]: row for row in entries(rendered, "Tasks")}
    assert tasks["desktopicon"]["Flags"] == "unchecked"


def test_uninstaller_deletes_data_only_when_the_user_answers_yes():
    code = "\n".join(sections(render())["Code"])
    handler = code[code.index("procedure CurUninstallStepChanged"):]
    assert "(not UninstallSilent)" in handler  # a silent uninstall never asks, so keeps everything
    assert re.search(r"MB_YESNO or MB_DEFBUTTON2\)\s*=\s*IDYES then\s+DelTree\(UserDataDir", handler)
    assert code.count("DelTree") == 1


def test_uninstaller_offers_to_delete_the_folders_hearth_uses_on_windows(monkeypatch):
    """app/services/paths.py's folders, as platformdirs makes them on Windows, all lie in the
    folder the uninstaller offers to delete, and the program folder does not."""
    import platformdirs
    import platformdirs.windows

    from app.services.paths import user_paths
    local = "C:/Users/u/AppData/Local"
    monkeypatch.setattr(platformdirs, "PlatformDirs", platformdirs.windows.Windows)
    monkeypatch.setattr(platformdirs.windows, "get_win_folder", lambda csidl: local)
    monkeypatch.delenv("HEARTH_HOME", raising=False)
    rendered = render()
    offered = re.search(r"ExpandConstant\('([^']*)'\)", "\n".join(sections(rendered)["Code"])).group(1)

    def as_path(text: str) -> Path:
        return Path(text.replace("{localappdata}", local).replace("\\", "/"))

    paths = user_paths()
    for folder in (paths.data, paths.config, paths.cache):
        assert folder == as_path(offered) or as_path(offered) in folder.parents
    assert as_path(offered) not in as_path(setup_keys(rendered)["DefaultDirName"]).parents


# --- package_windows.py ---------------------------------------------------------------------

def test_package_windows_names_the_architecture_of_the_machine():
    assert package_windows.installer_arch("ARM64") == "arm64"
    assert package_windows.installer_arch("AMD64") == "x64"
    with pytest.raises(SystemExit):
        package_windows.installer_arch("x86")


def fake_inno_setup(calls: list[list[str]]):
    """Stands in for run(): records commands, and for ISCC renders hearth.iss with the /D defines
    and writes the installer where the script says."""
    def run(command: list[str]) -> None:
        calls.append(command)
        if Path(command[0]).name == "iscc":
            defines = dict(arg[2:].partition("=")[::2] for arg in command if arg.startswith("/D"))
            out = Path(next(arg[2:] for arg in command if arg.startswith("/O")))
            (out / (setup_keys(preprocess(ISS.read_text(), defines))["OutputBaseFilename"] + ".exe")).touch()
        else:
            pfx = Path(command[command.index("/f") + 1])
            assert pfx.read_bytes() == b"not a real certificate"
    return run


@pytest.fixture
def windows_bundle(tmp_path, monkeypatch):
    (tmp_path / "Hearth").mkdir()
    for exe in ("Hearth.exe", "hearth-cli.exe"):
        (tmp_path / "Hearth" / exe).touch()
    monkeypatch.setattr(package_windows.layout, "system", lambda: "Windows")
    monkeypatch.setattr(package_windows, "find_iscc", lambda: Path("/opt/inno/iscc"))
    monkeypatch.setattr(package_windows, "find_signtool", lambda arch: Path("/opt/sdk/signtool"))
    monkeypatch.delenv(package_windows.CERT_ENV, raising=False)
    return tmp_path


def test_package_windows_builds_an_unsigned_installer_without_a_certificate(windows_bundle, monkeypatch, capsys):
    calls: list[list[str]] = []
    monkeypatch.setattr(package_windows, "run", fake_inno_setup(calls))
    installer = package_windows.package(windows_bundle, "arm64")
    version = package_windows.layout.version()
    assert installer == windows_bundle / f"Hearth-{version}-windows-arm64-setup.exe" and installer.is_file()
    assert len(calls) == 1 and not any(arg.startswith(("/DSign", "/S")) for arg in calls[0])
    assert capsys.readouterr().err.splitlines() == [f"unsigned: {package_windows.CERT_ENV} is not set"]


def test_package_windows_signs_the_executables_setup_and_uninstaller_with_a_certificate(windows_bundle, monkeypatch):
    calls: list[list[str]] = []
    monkeypatch.setattr(package_windows, "run", fake_inno_setup(calls))
    monkeypatch.setenv(package_windows.CERT_ENV, base64.b64encode(b"not a real certificate").decode())
    monkeypatch.setenv(package_windows.PASSWORD_ENV, "pa$$word")
    package_windows.package(windows_bundle, "x64")
    sign, iscc = calls
    assert [Path(arg).name for arg in sign[-2:]] == ["Hearth.exe", "hearth-cli.exe"]
    assert [sign[sign.index(flag) + 1] for flag in ("/fd", "/td")] == ["sha256", "sha256"]
    assert sign[sign.index("/tr") + 1].startswith("http")  # time-stamped: valid after the certificate expires
    tool = next(arg for arg in iscc if arg.startswith("/Shearth="))
    assert "/DSign" in iscc and "$qpa$$$$word$q" in tool and tool.endswith("$f")
    assert "/fd sha256" in tool and "/td sha256" in tool
    assert not Path(sign[sign.index("/f") + 1]).exists()  # the certificate's temporary copy is gone
