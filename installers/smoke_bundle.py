"""Smoke-test a built bundle folder as a user's machine would run it, on any platform.

    python installers/smoke_bundle.py dist/Hearth [--version X.Y.Z] [--timeout SECONDS]

The bundle's command line (``hearth`` on Linux, ``hearth-cli`` on Windows and macOS) runs in a clean
environment: a fresh, empty home (``HOME``, ``USERPROFILE``, ``APPDATA``, ``LOCALAPPDATA`` and the
``XDG_*`` folders all inside it), ``PATH`` cut down to the system's own folders, no ``PYTHONPATH``,
``PYTHONHOME``, ``VIRTUAL_ENV`` or ``HEARTH_*``, and a working directory outside the repository.
So a bundle that only works because the development ``.venv`` or the checkout is reachable fails.

Checks, in order, each within the timeout: ``--version`` names the project's version; ``generate``
answers on the embedded default model with non-empty text (``--json``); ``doctor --json`` exits 0
and lists no problems; the window (offscreen) answers one question through its worker
(``ui/self_check.py``). The window's code runs in the console executable
(``--hearth-run-module app``, as the GUI runs it), because a windowed Windows program has no output
to read. One line per check; the first failure stops the run with exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bundle"))
import layout  # noqa: E402  (the bundle's names, shared with the spec and the packagers)

TIMEOUT_S = 300.0
PROMPT = "Say hello"
QUESTION = "What is the capital of France?"
# What a process needs from the system itself (Windows does not start Python without SYSTEMROOT);
# everything else in the environment is left behind.
SYSTEM_VARIABLES = ("SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", "NUMBER_OF_PROCESSORS", "PROCESSOR_ARCHITECTURE",
                    "PROCESSOR_IDENTIFIER", "OS", "LANG", "TZ")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def system_path() -> str:
    system = layout.system()
    if system == "Windows":
        root = os.environ.get("SYSTEMROOT", r"C:\Windows")
        return ";".join((rf"{root}\System32", root, rf"{root}\System32\Wbem"))
    if system == "Darwin":
        return "/usr/bin:/bin:/usr/sbin:/sbin"
    return "/usr/bin:/bin"


def clean_environment(home: Path) -> dict[str, str]:
    """The environment of a user who has never run Hearth: every per-user folder inside ``home``
    (created, empty), the system's PATH, and nothing of this Python, its virtualenv or the checkout."""
    roaming, local = home / "AppData" / "Roaming", home / "AppData" / "Local"
    folders = {"HOME": home, "USERPROFILE": home, "APPDATA": roaming, "LOCALAPPDATA": local,
               # platformdirs asks Windows' shell for these folders, not the variables above, unless told
               "WIN_PD_OVERRIDE_APPDATA": roaming, "WIN_PD_OVERRIDE_LOCAL_APPDATA": local,
               "XDG_CONFIG_HOME": home / ".config", "XDG_DATA_HOME": home / ".local" / "share",
               "XDG_STATE_HOME": home / ".local" / "state", "XDG_CACHE_HOME": home / ".cache",
               "TMPDIR": home / "tmp", "TEMP": home / "tmp", "TMP": home / "tmp"}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    env = {name: os.environ[name] for name in SYSTEM_VARIABLES if name in os.environ}
    env.update({name: str(folder) for name, folder in folders.items()})
    env["PATH"] = system_path()
    return env


def cli_path(bundle: Path) -> Path:
    """The command-line executable in a bundle folder (or in a macOS ``.app``)."""
    if bundle.suffix == ".app":
        bundle = bundle / "Contents" / "MacOS"
    return bundle / layout.executable(layout.cli_name())


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _kill_tree(process: subprocess.Popen) -> None:
    """The CLI's worker is a child of the CLI: stop both."""
    if os.name == "posix":
        os.killpg(process.pid, signal.SIGKILL)
    else:
        subprocess.run(["taskkill", "/T", "/F", "/PID", str(process.pid)], capture_output=True)
    process.wait()


def run_cli(cli: Path, args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> Outcome:
    """Run the CLI with output going to files, not pipes, so a worker left behind cannot hold the
    run open; raises ``subprocess.TimeoutExpired`` after killing what it started."""
    out_path, err_path = cwd / "stdout.txt", cwd / "stderr.txt"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        process = subprocess.Popen([str(cli), *args], stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                   cwd=cwd, start_new_session=os.name == "posix")
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(process)
            raise
    return Outcome(code, _read(out_path), _read(err_path))


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def _json(outcome: Outcome) -> dict | None:
    try:
        data = json.loads(outcome.stdout)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def judge_version(outcome: Outcome, version: str) -> tuple[bool, str]:
    line = outcome.stdout.strip()
    if outcome.code == 0 and f"Hearth {version}" in line:
        return True, line
    return False, f"expected 'Hearth {version}', got {line!r} (exit {outcome.code})\n{_tail(outcome.stderr)}"


def judge_generate(outcome: Outcome, version: str) -> tuple[bool, str]:
    data = _json(outcome)
    text = data.get("text") if data else None
    if outcome.code == 0 and isinstance(text, str) and text.strip():
        return True, f"answered {text.strip()[:60]!r}"
    return False, (f"no answer (exit {outcome.code}); stdout: {_tail(outcome.stdout, 3)!r}\n"
                   f"{_tail(outcome.stderr)}")


def judge_window(outcome: Outcome, version: str) -> tuple[bool, str]:
    lines = outcome.stdout.strip().splitlines()
    report = _json(Outcome(outcome.code, lines[-1], "")) if lines else None
    if outcome.code == 0 and report and report.get("ok") and str(report.get("answer", "")).strip():
        return True, f"the window answered {report['answer'].strip()[:60]!r}"
    error = report.get("error") if report else "no report"
    return False, f"the window gave no answer (exit {outcome.code}): {error}\n{_tail(outcome.stderr)}"


def judge_doctor(outcome: Outcome, version: str) -> tuple[bool, str]:
    data = _json(outcome)
    if data is None:
        return False, f"no JSON report (exit {outcome.code})\n{_tail(outcome.stderr)}"
    problems = data.get("problems")
    if outcome.code == 0 and problems == []:
        return True, "healthy, no problems"
    listed = "; ".join(map(str, problems)) if isinstance(problems, list) else repr(problems)
    return False, f"exit {outcome.code}, problems: {listed}\n{_tail(outcome.stderr)}"


Judge = Callable[[Outcome, str], tuple[bool, str]]
WINDOW_ENV = {"QT_QPA_PLATFORM": "offscreen", "HEARTH_SELF_CHECK_QUESTION": QUESTION}
CHECKS: tuple[tuple[str, list[str], Judge, dict[str, str]], ...] = (
    ("version", ["--version"], judge_version, {}),
    ("generate", ["generate", "--max-tokens", "8", "--temperature", "0", "--json", PROMPT], judge_generate, {}),
    ("doctor", ["doctor", "--json"], judge_doctor, {}),
    ("window", ["--hearth-run-module", "app"], judge_window, WINDOW_ENV),
)


def run_checks(bundle: Path, version: str | None = None, timeout: float = TIMEOUT_S) -> list[Check]:
    """Every check in order, up to and including the first that fails. ``bundle`` may be relative
    to the current folder (the commands run elsewhere, in a folder of their own)."""
    version = version or layout.version()
    cli = cli_path(Path(bundle).absolute())
    if not cli.is_file():
        return [Check("executable", False, f"{cli} not found: is {bundle} a built bundle folder?")]
    results: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="hearth-smoke-", ignore_cleanup_errors=True) as tmp:
        env = clean_environment(Path(tmp) / "home")
        for name, args, judge, extra_env in CHECKS:
            try:
                ok, detail = judge(run_cli(cli, args, {**env, **extra_env}, Path(tmp), timeout), version)
            except subprocess.TimeoutExpired:
                ok, detail = False, f"no result within {timeout:.0f} s"
            results.append(Check(name, ok, detail))
            if not ok:
                break
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path, help="the bundle folder (dist/Hearth) or Hearth.app")
    parser.add_argument("--version", default=None, help="the version --version must name (default: pyproject.toml's)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per command")
    args = parser.parse_args()
    results = run_checks(args.bundle, args.version, args.timeout)
    for check in results:
        print(f"{'ok  ' if check.ok else 'FAIL'} {check.name}: {check.detail}", flush=True)
    failed = next((check for check in results if not check.ok), None)
    if failed:
        print(f"smoke test failed at '{failed.name}' for {args.bundle}", file=sys.stderr)
        return 1
    print(f"smoke test passed: {args.bundle}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
