"""The release workflow (.github/workflows/release.yml), checked here although it only runs on GitHub:
its triggers and matrix, the order of each platform's steps, the scripts it calls, the signing
secrets against installers/SIGNING.md, the uploaded artifacts, the release job, and the syntax of
every shell script under installers/."""

from __future__ import annotations

import fnmatch
import re
import subprocess

import pytest
import yaml

from tests.installers.conftest import INSTALLERS, ROOT, package_windows

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
PLATFORMS = {"linux-x86_64": "ubuntu-22.04", "windows-arm64": "windows-11-arm", "windows-x64": "windows-latest",
             "macos-arm64": "macos-14"}
SCRIPT_REF = re.compile(r"installers/[\w./-]+\.(?:py|sh)")


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


# --- shell scripts -------------------------------------------------------------------------

def test_every_shell_script_under_installers_parses():
    scripts = sorted(INSTALLERS.rglob("*.sh"))
    assert INSTALLERS / "macos" / "package_macos.sh" in scripts
    assert "\nset -euo pipefail\n" in (INSTALLERS / "macos" / "package_macos.sh").read_text()
    for script in scripts:
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, f"{script}: {done.stderr}"


def test_the_linux_job_has_gio_so_the_bundle_test_checks_the_menu_entry_with_glib():
    """The bundle test skips its GLib check where gio is missing: CI installs it (Debian's libglib2.0-bin)."""
    linux = "\n".join(step["run"] for step in build_steps() if "run" in step and runs_on(step, "Linux"))
    assert linux.find("libglib2.0-bin") != -1 and linux.find("libglib2.0-bin") < linux.find("-m pytest")
