"""The Windows, macOS and release definitions, checked here although they only run on other machines:
the workflow's structure and the scripts it calls, the Inno Setup script (through a small model of
its preprocessor), the plists, the shell scripts' syntax, the signing secrets against their
documentation, and the platform-neutral smoke test against a fake bundle."""

from __future__ import annotations

import base64
import fnmatch
import importlib.util
import json
import os
import plistlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
INSTALLERS = ROOT / "installers"
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
ISS = INSTALLERS / "windows" / "hearth.iss"
PLATFORMS = {"linux-x86_64": "ubuntu-22.04", "windows-arm64": "windows-11-arm", "windows-x64": "windows-latest",
             "macos-arm64": "macos-14"}
SCRIPT_REF = re.compile(r"installers/[\w./-]+\.(?:py|sh)")


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


smoke = load(INSTALLERS / "smoke_bundle.py")
package_windows = load(INSTALLERS / "windows" / "package_windows.py")


# --- the release workflow ---------------------------------------------------------------------

def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def build_steps() -> list[dict]:
    return workflow()["jobs"]["build"]["steps"]


def runner_os(runner: str) -> str:
    return {"ubuntu": "Linux", "windows": "Windows", "macos": "macOS"}[runner.split("-")[0]]


def runs_on(step: dict, os_name: str) -> bool:
    """The step's ``if:``, for the only conditions the build job uses: runner.os == / != 'X'."""
    condition = step.get("if")
    if condition is None:
        return True
    match = re.fullmatch(r"runner\.os (==|!=) '(\w+)'", condition)
    assert match, f"unexpected condition {condition!r}"
    return (match.group(2) == os_name) == (match.group(1) == "==")


def test_release_runs_on_version_tags_and_by_hand():
    data = workflow()
    triggers = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers["push"]["tags"] == ["v*"]
    assert "workflow_dispatch" in triggers


def test_the_matrix_builds_the_four_platforms_on_their_runners():
    matrix = workflow()["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert {entry["platform"]: entry["runner"] for entry in matrix} == PLATFORMS


@pytest.mark.parametrize("platform_name, expected", [
    ("linux-x86_64", ["installers/setup_dev.sh", "-m pytest", "installers/build_linux.sh",
                      "installers/smoke_bundle.py dist/Hearth"]),
    ("windows-arm64", ["installers/llama_build.py", "-m pytest", "installers/build_bundle.py",
                       "installers/smoke_bundle.py dist/Hearth", "installers/windows/package_windows.py"]),
    ("windows-x64", ["installers/llama_build.py", "-m pytest", "installers/build_bundle.py",
                     "installers/smoke_bundle.py dist/Hearth", "installers/windows/package_windows.py"]),
    ("macos-arm64", ["installers/llama_build.py", "-m pytest", "installers/build_bundle.py",
                     "installers/smoke_bundle.py dist/Hearth", "installers/macos/package_macos.sh"]),
])
def test_each_platform_builds_tests_smoke_tests_and_packages_in_order(platform_name, expected):
    os_name = runner_os(PLATFORMS[platform_name])
    script = "\n".join(step["run"] for step in build_steps() if "run" in step and runs_on(step, os_name))
    positions = [script.find(fragment) for fragment in expected]
    assert -1 not in positions, dict(zip(expected, positions))
    assert positions == sorted(positions)
    assert "package_macos" not in script or os_name == "macOS"
    assert "package_windows" not in script or os_name == "Windows"


def test_every_script_the_workflow_runs_exists():
    named = {ref for job in workflow()["jobs"].values() for step in job["steps"]
             for ref in SCRIPT_REF.findall(step.get("run", ""))}
    assert len(named) >= 7, named
    assert sorted(ref for ref in named if not (ROOT / ref).is_file()) == []


def secret_steps() -> list[dict]:
    return [step for job in workflow()["jobs"].values() for step in job["steps"]
            if any("secrets." in str(value) for value in step.get("env", {}).values())]


def workflow_secrets() -> set[str]:
    return set(re.findall(r"secrets\.([A-Z0-9_]+)", WORKFLOW.read_text()))


def test_secrets_reach_only_the_step_that_reads_them_under_their_own_name():
    assert not any("secrets." in step.get("run", "") for job in workflow()["jobs"].values() for step in job["steps"])
    for step in secret_steps():
        refs = SCRIPT_REF.findall(step["run"])
        readers = step["run"] + "".join((ROOT / ref).read_text() for ref in refs)
        for name, value in step["env"].items():
            assert value == f"${{{{ secrets.{name} }}}}"
            assert name in readers, f"{name} is given to '{step['name']}' but nothing there reads it"
    assert {name for step in secret_steps() for name in step["env"]} == workflow_secrets()


def test_the_signing_guide_documents_exactly_the_secrets_the_workflow_uses():
    documented = set(re.findall(r"`(HEARTH_[A-Z0-9_]+)`", (INSTALLERS / "SIGNING.md").read_text()))
    assert len(workflow_secrets()) >= 8
    assert documented == workflow_secrets()


def test_uploaded_artifacts_cover_every_installer_name():
    upload = next(step for step in build_steps() if step.get("uses", "").startswith("actions/upload-artifact"))
    patterns = [line.strip().removeprefix("dist/") for line in upload["with"]["path"].splitlines() if line.strip()]
    names = ["Hearth-0.1.0-linux-x86_64.tar.gz", "hearth_0.1.0_amd64.deb", "Hearth-0.1.0-macos-arm64.dmg",
             package_windows.installer_name("0.1.0", "arm64"), package_windows.installer_name("0.1.0", "x64")]
    assert [name for name in names if not any(fnmatch.fnmatch(name, p) for p in patterns)] == []


def test_the_release_job_publishes_only_tags_after_every_build():
    release = workflow()["jobs"]["release"]
    assert release["needs"] == "build"
    assert "refs/tags/v" in release["if"]
    assert release["permissions"] == {"contents": "write"}
    assert any("gh release create" in step.get("run", "") for step in release["steps"])


# --- shell scripts and plists ---------------------------------------------------------------

def test_every_shell_script_under_installers_parses():
    scripts = sorted(INSTALLERS.rglob("*.sh"))
    assert INSTALLERS / "macos" / "package_macos.sh" in scripts
    assert "\nset -euo pipefail\n" in (INSTALLERS / "macos" / "package_macos.sh").read_text()
    for script in scripts:
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, f"{script}: {done.stderr}"


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


# --- smoke_bundle.py ------------------------------------------------------------------------

FAKE_CLI = """#!{python}
import json, os, pathlib, sys, time
here = pathlib.Path(__file__).parent
args = sys.argv[1:]
(here / f"seen-{{args[0].strip('-')}}.json").write_text(json.dumps({{"env": dict(os.environ), "cwd": os.getcwd()}}))
if (here / "hang").exists():
    time.sleep(60)
if args == ["--version"]:
    print("Hearth 9.9.9 (llama-cpp-python 0.3.36)")
elif args[0] == "generate":
    print(json.dumps({{"text": " Hello there!", "token_ids": [1, 2]}}))
elif args[:2] == ["--hearth-run-module", "app"]:
    question = os.environ["HEARTH_SELF_CHECK_QUESTION"]
    print(json.dumps({{"ok": os.environ["QT_QPA_PLATFORM"] == "offscreen", "question": question, "answer": "Paris."}}))
elif args[0] == "doctor":
    problems = json.loads((here / "problems.json").read_text()) if (here / "problems.json").exists() else []
    print(json.dumps({{"engine": {{}}, "problems": problems}}))
    sys.exit(1 if problems else 0)
"""


@pytest.fixture
def fake_bundle(tmp_path):
    bundle = tmp_path / "Hearth"
    bundle.mkdir()
    cli = smoke.cli_path(bundle)
    cli.write_text(FAKE_CLI.format(python=sys.executable))
    cli.chmod(0o755)
    return bundle


def test_clean_environment_has_a_fresh_home_and_nothing_of_the_development_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("PYTHONHOME", sys.prefix)
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{ROOT}:/usr/bin")
    env = smoke.clean_environment(tmp_path / "home")
    assert env["HOME"] == str(tmp_path / "home") and not any(p.is_file() for p in (tmp_path / "home").rglob("*"))
    assert not {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "HEARTH_HOME"} & set(env)
    for name in ("APPDATA", "LOCALAPPDATA", "WIN_PD_OVERRIDE_LOCAL_APPDATA", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
                 "XDG_CACHE_HOME", "TMPDIR"):
        assert Path(env[name]).is_dir() and tmp_path / "home" in Path(env[name]).parents
    assert [value for value in env.values() if str(ROOT) in value or sys.prefix in value] == []
    assert env["PATH"].split(os.pathsep) == ["/usr/bin", "/bin"]


@pytest.mark.parametrize("system, name", [("Linux", "hearth"), ("Windows", "hearth-cli.exe"), ("Darwin", "hearth-cli")])
def test_cli_path_per_platform(tmp_path, monkeypatch, system, name):
    monkeypatch.setattr(smoke.layout, "system", lambda: system)
    assert smoke.cli_path(tmp_path) == tmp_path / name
    if system == "Darwin":
        assert smoke.cli_path(tmp_path / "Hearth.app") == tmp_path / "Hearth.app" / "Contents" / "MacOS" / name


def test_each_check_needs_its_exit_status_and_its_output():
    healthy = smoke.Outcome(0, json.dumps({"problems": []}), "")
    assert smoke.judge_doctor(healthy, "1.0")[0]
    assert not smoke.judge_doctor(smoke.Outcome(1, healthy.stdout, "Traceback ..."), "1.0")[0]
    assert not smoke.judge_doctor(smoke.Outcome(0, "not json", ""), "1.0")[0]
    assert smoke.judge_generate(smoke.Outcome(0, json.dumps({"text": "Hi"}), ""), "1.0")[0]
    assert not smoke.judge_generate(smoke.Outcome(0, json.dumps({"text": "  "}), ""), "1.0")[0]
    assert not smoke.judge_generate(smoke.Outcome(1, json.dumps({"text": "Hi"}), ""), "1.0")[0]
    assert not smoke.judge_version(smoke.Outcome(0, "Hearth 1.0.1 (llama-cpp-python 0.3.36)", ""), "1.0.1x")[0]
    answered = json.dumps({"ok": True, "answer": "Paris."})
    assert smoke.judge_window(smoke.Outcome(0, f"Qt noise\n{answered}", ""), "1.0")[0]
    assert not smoke.judge_window(smoke.Outcome(1, json.dumps({"ok": False, "error": "no model"}), ""), "1.0")[0]
    assert not smoke.judge_window(smoke.Outcome(0, json.dumps({"ok": True, "answer": " "}), ""), "1.0")[0]


@pytest.mark.skipif(os.name != "posix", reason="the fake CLI is a script with a #! line")
def test_run_checks_passes_a_healthy_bundle_run_in_the_clean_environment(fake_bundle):
    results = smoke.run_checks(fake_bundle, version="9.9.9", timeout=60)
    assert [(check.name, check.ok) for check in results] == [("version", True), ("generate", True), ("doctor", True),
                                                             ("window", True)]
    seen = json.loads((fake_bundle / "seen-generate.json").read_text())
    assert ROOT not in Path(seen["cwd"]).parents and "VIRTUAL_ENV" not in seen["env"]
    assert seen["env"]["HOME"] != os.environ.get("HOME") and Path(seen["env"]["HOME"]).name == "home"


@pytest.mark.skipif(os.name != "posix", reason="the fake CLI is a script with a #! line")
def test_run_checks_stops_at_the_first_failure(fake_bundle):
    wrong_version = smoke.run_checks(fake_bundle, version="1.0.0", timeout=60)
    assert [(check.name, check.ok) for check in wrong_version] == [("version", False)]
    assert "Hearth 1.0.0" in wrong_version[0].detail
    (fake_bundle / "problems.json").write_text(json.dumps(["the model default does not answer"]))
    sick = smoke.run_checks(fake_bundle, version="9.9.9", timeout=60)
    assert [check.ok for check in sick] == [True, True, False]
    assert "does not answer" in sick[-1].detail
    (fake_bundle / "hang").touch()
    hung = smoke.run_checks(fake_bundle, version="9.9.9", timeout=1)
    assert [(check.ok, check.detail) for check in hung] == [(False, "no result within 1 s")]
    assert smoke.run_checks(fake_bundle / "missing")[0].ok is False


@pytest.mark.skipif(os.name != "posix", reason="the fake CLI is a script with a #! line")
def test_smoke_bundle_command_reports_one_line_per_check_and_its_status(fake_bundle):
    command = [sys.executable, str(INSTALLERS / "smoke_bundle.py"), str(fake_bundle), "--version", "9.9.9"]
    passed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert passed.returncode == 0, passed.stderr
    assert [line.split(":")[0] for line in passed.stdout.splitlines()[:4]] == ["ok   version", "ok   generate",
                                                                               "ok   doctor", "ok   window"]
    (fake_bundle / "problems.json").write_text(json.dumps(["the database is damaged"]))
    failed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1
    assert "FAIL doctor: exit 1, problems: the database is damaged" in failed.stdout
    assert "smoke test failed at 'doctor'" in failed.stderr
