"""Build Hearth's bundle for this platform: one folder with the app, the command line, the engine,
llama.cpp's libraries (every CPU variant), the embedded model, icons and licences.

    .venv/bin/python installers/build_bundle.py [--dist dist] [--work build]

prints the bundle folder (``DIST/Hearth``; on macOS also ``DIST/Hearth.app``). The same script runs
on every platform of the release workflow; the packagers (``installers/linux/package_linux.py``,
``installers/windows/package_windows.py``, ``installers/macos/package_macos.sh``) turn its folder
into installers. Run it with the Python that has Hearth installed (``installers/setup_dev.sh``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bundle"))
import layout  # noqa: E402

INSTALLERS = layout.ROOT / "installers"


def say(message: str) -> None:
    print(f"[bundle] {message}", file=sys.stderr, flush=True)


def run(command: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    """Run a build step with its output in ``log``; on failure, stop with the log's last lines."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=layout.ROOT,
                              env={**os.environ, **(env or {})})
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        sys.exit(f"{tail}\n[bundle] failed: {' '.join(command[:4])} ... (full log: {log})")


def render_icons(work: Path, log: Path) -> Path:
    icons = work / "icons"
    run([sys.executable, str(INSTALLERS / "icons.py"), "--out", str(icons)], log)
    if layout.system() == "Darwin":
        run(["iconutil", "-c", "icns", str(icons / "hearth.iconset"), "-o", str(icons / "hearth.icns")], log)
    return icons


def freeze(dist: Path, work: Path, icons: Path, log: Path) -> Path:
    say(f"PyInstaller: {layout.platform_tag()}, NPU libraries {'in' if layout.with_npu() else 'left out'}")
    run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN", "--distpath", str(dist),
         "--workpath", str(work / "pyinstaller"), str(INSTALLERS / "hearth.spec")], log, env={"HEARTH_BUNDLE_ICONS": str(icons)})
    return dist / layout.BUNDLE_NAME


def add_icons(bundle: Path, icons: Path) -> None:
    target = bundle / layout.ICONS_FOLDER
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    for path in icons.iterdir():
        if path.is_file():
            shutil.copy2(path, target / path.name)


def add_licences(bundle: Path, log: Path) -> None:
    left_out = [*layout.LLM_TOOL_DISTRIBUTIONS, *([] if layout.with_npu() else layout.NPU_DISTRIBUTIONS)]
    excluded = [arg for dist in left_out for arg in ("--exclude", dist)]
    run([sys.executable, str(INSTALLERS / "third_party_licenses.py"), "--out", str(bundle / layout.LICENCES_FILE),
         *excluded], log)


def build(dist: Path, work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    log = work / "bundle.log"
    log.write_text("")
    icons = render_icons(work, log)  # before PyInstaller: the executables embed the .ico / .icns
    bundle = freeze(dist, work, icons, log)
    add_icons(bundle, icons)
    add_licences(bundle, log)
    return bundle


def main() -> int:
    parser = argparse.ArgumentParser(description="Build Hearth's bundle folder for this platform.")
    parser.add_argument("--dist", type=Path, default=layout.ROOT / "dist", help="where the bundle goes (default dist/)")
    parser.add_argument("--work", type=Path, default=layout.ROOT / "build", help="scratch folder (default build/)")
    args = parser.parse_args()
    bundle = build(args.dist.resolve(), args.work.resolve())
    say(f"done: {bundle}")
    print(bundle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
