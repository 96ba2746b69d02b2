"""Turn the Linux bundle folder into the two downloads: a tarball and a Debian package.

    python installers/linux/package_linux.py --bundle dist/Hearth [--dist dist]

* ``Hearth-<version>-linux-<arch>.tar.gz`` unpacks to ``Hearth-<version>-linux-<arch>/`` with
  ``Hearth`` (the window), ``hearth`` (the command line), ``hearth.desktop``, ``icons/``,
  ``THIRD_PARTY_LICENSES`` and ``install.sh`` (installs for this user under ``~/.local``).
* ``hearth_<version>_<debian arch>.deb`` (``dpkg-deb``) installs the folder as ``/opt/hearth``, with
  ``/usr/bin/hearth``, a menu entry and the icons; its maintainer scripts refresh the desktop's menu
  and icon caches where those tools exist, and ``apt remove`` lists the user files it keeps.

Prints the two paths, one per line.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bundle"))
import layout  # noqa: E402

HERE = Path(__file__).resolve().parent
DEB_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
OPT = "opt/hearth"
# What the bundled Qt needs from the system and PyInstaller does not carry (the xcb helpers a
# desktop has; Debian's PySide6 names the same ones).
DEB_DEPENDS = ("libc6 (>= 2.34)", "libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1", "libxkbcommon-x11-0",
               "libxcb-shape0", "libxcb-randr0", "libxcb-render-util0", "libxcb-image0", "libgl1", "libfontconfig1")
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
# $DPKG_ROOT: empty on a real install, the root folder for `dpkg --root --force-script-chrootless`.
CACHE_REFRESH = """if command -v update-desktop-database >/dev/null 2>&1; then
    update-desktop-database -q "$DPKG_ROOT/usr/share/applications" || true
fi
if command -v gtk-update-icon-cache >/dev/null 2>&1; then
    gtk-update-icon-cache -q -t "$DPKG_ROOT/usr/share/icons/hicolor" || true
fi
"""
# `apt remove` (postrm's "remove"; not an upgrade) says what each user still has and never deletes
# it; install.sh --uninstall says the same for one user, with sizes. The folders are those of
# app/services/paths.py (platformdirs) and huggingface_hub's cache.
KEPT_NOTICE = """if [ "$1" = remove ]; then
    cat <<'END'
Hearth is removed. Each user's own files are kept; delete them with rm -rf if no longer wanted:
  ~/.local/share/Hearth      conversations and documents (or the data folder chosen in Settings)
  ~/.config/Hearth           settings
  ~/.cache/Hearth            caches and logs
  ~/.cache/huggingface/hub   downloaded models, often GBs ($HF_HUB_CACHE, or $HF_HOME/hub, if set);
                             other programs share it: delete only the models--* folders you don't need
END
fi
"""
MAINTAINER_SCRIPTS = {
    "postinst": f"#!/bin/sh\nset -e\n{CACHE_REFRESH}exit 0\n",
    "postrm": f"#!/bin/sh\nset -e\n{CACHE_REFRESH}{KEPT_NOTICE}exit 0\n",
}
# What a quoted Exec argument would have to escape (and a menu entry's % codes): refused instead.
EXEC_UNSAFE = set('"`$\\%')


def say(message: str) -> None:
    print(f"[package] {message}", file=sys.stderr, flush=True)


def release_name() -> str:
    return f"{layout.BUNDLE_NAME}-{layout.version()}-{layout.platform_tag()}"


def desktop_entry(exec_path: str, icon: str) -> str:
    """The menu entry for the window at ``exec_path``. ``Exec`` is a command line, so the path is
    quoted there; ``TryExec`` is a plain path, which GLib looks up as written (quoted, it is never
    found, and GNOME and every GLib desktop hide the entry)."""
    if EXEC_UNSAFE & set(exec_path):
        raise ValueError(f"{exec_path} has a character a menu entry's Exec line cannot hold")
    lines = []
    for line in (HERE / "hearth.desktop").read_text().splitlines(keepends=True):
        key = line.partition("=")[0]
        lines.append(line.replace("@EXEC@", f'"{exec_path}"' if key == "Exec" else exec_path).replace("@ICON@", icon))
    return "".join(lines)


def stage_download_folder(bundle: Path, folder: Path) -> None:
    """The tarball's folder: the bundle, the desktop entry template and the per-user install script."""
    shutil.copytree(bundle, folder, symlinks=True)
    shutil.copy2(HERE / "hearth.desktop", folder / "hearth.desktop")
    shutil.copy2(HERE / "install_local.sh", folder / "install.sh")
    (folder / "install.sh").chmod(0o755)


def make_tarball(bundle: Path, dist: Path) -> Path:
    name = release_name()
    target = dist / f"{name}.tar.gz"
    with tempfile.TemporaryDirectory(dir=dist) as scratch:
        folder = Path(scratch) / name
        stage_download_folder(bundle, folder)
        with tarfile.open(target, "w:gz", compresslevel=6) as archive:
            archive.add(folder, arcname=name, filter=_owned_by_root)
    return target


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def control_file(installed_kib: int) -> str:
    fields = {
        "Package": "hearth", "Version": layout.version(), "Architecture": DEB_ARCH[layout.machine()],
        "Maintainer": "Hearth developers <hearth@localhost>", "Installed-Size": str(installed_kib),
        "Depends": ", ".join(DEB_DEPENDS), "Section": "utils", "Priority": "optional",
        "Homepage": "https://github.com/hearth-app/hearth",
        "Description": "private, offline desktop assistant running language models locally\n"
                       " Hearth chats with a language model that runs entirely on this computer: no account,\n"
                       " no network, no per-question bill. It ships with a small built-in model and\n"
                       " downloads bigger ones from its catalogue.",
    }
    return "".join(f"{key}: {value}\n" for key, value in fields.items())


def stage_deb_root(bundle: Path, root: Path) -> None:
    opt = root / OPT
    shutil.copytree(bundle, opt, symlinks=True)
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/hearth").symlink_to(f"/{OPT}/{layout.cli_name()}")
    applications = root / "usr/share/applications"
    applications.mkdir(parents=True)
    (applications / "hearth.desktop").write_text(desktop_entry(f"/{OPT}/{layout.BUNDLE_NAME}", "hearth"))
    for size in ICON_SIZES:
        icon = bundle / layout.ICONS_FOLDER / f"hearth-{size}.png"
        target = root / f"usr/share/icons/hicolor/{size}x{size}/apps/hearth.png"
        target.parent.mkdir(parents=True)
        shutil.copy2(icon, target)
    doc = root / "usr/share/doc/hearth"
    doc.mkdir(parents=True)
    shutil.copy2(bundle / layout.LICENCES_FILE, doc / "copyright")
    for path in [root, *root.rglob("*")]:  # dpkg installs the modes it is given: no group- or world-writable
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~0o022)


def write_control(root: Path) -> None:
    installed_kib = sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink()) // 1024
    debian = root / "DEBIAN"
    debian.mkdir(mode=0o755)
    (debian / "control").write_text(control_file(installed_kib))
    for script, text in MAINTAINER_SCRIPTS.items():
        (debian / script).write_text(text)
        (debian / script).chmod(0o755)


def make_deb(bundle: Path, dist: Path) -> Path:
    target = dist / f"hearth_{layout.version()}_{DEB_ARCH[layout.machine()]}.deb"
    with tempfile.TemporaryDirectory(dir=dist) as scratch:
        root = Path(scratch) / "root"
        root.mkdir(mode=0o755)
        stage_deb_root(bundle, root)
        write_control(root)
        done = subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(target)],
                              capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"[package] dpkg-deb failed: {done.stderr.strip()}")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description="Package the Linux bundle as a tarball and a .deb.")
    parser.add_argument("--bundle", type=Path, required=True, help="the folder build_bundle.py made")
    parser.add_argument("--dist", type=Path, default=layout.ROOT / "dist")
    args = parser.parse_args()
    if shutil.which("dpkg-deb") is None:
        sys.exit("[package] dpkg-deb is not installed: apt-get install dpkg-dev")
    args.dist.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=2) as pool:  # each compresses the whole bundle on one core
        tarball_job = pool.submit(make_tarball, args.bundle, args.dist)
        deb_job = pool.submit(make_deb, args.bundle, args.dist)
        tarball, deb = tarball_job.result(), deb_job.result()
    say(f"tarball: {tarball}")
    say(f"deb: {deb}")
    print(tarball)
    print(deb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
