"""Make the Windows installer from the built bundle: ``dist/Hearth-<version>-windows-<arch>-setup.exe``.

    python installers/windows/package_windows.py [--dist dist] [--arch arm64|x64]

Run on Windows after ``python installers/build_bundle.py --dist dist``, on a machine of the
architecture the bundle was built for. Inno Setup 6.3 or later (``ISCC.exe`` on PATH or in its
default folder) compiles ``installers/windows/hearth.iss`` with the version from pyproject.toml and
this machine's architecture. Prints the installer's path on stdout; everything else goes to stderr.

Code signing is optional and configured only through the environment (installers/SIGNING.md):

* ``HEARTH_SIGN_CERT_PFX_BASE64``: the Authenticode certificate with its private key, a .pfx file,
  base64-encoded;
* ``HEARTH_SIGN_CERT_PASSWORD``: that file's password.

With both set, signtool signs the bundle's executables before packaging and Inno Setup signs the
setup and its uninstaller, all time-stamped. Without them the installer is made unsigned and one
line says so.
"""

from __future__ import annotations

import argparse
import base64
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bundle"))
import layout  # noqa: E402  (the bundle's names, shared with the spec and the other packagers)

ROOT = layout.ROOT
SCRIPT = ROOT / "installers" / "windows" / "hearth.iss"
ARCHES = {"arm64": "arm64", "aarch64": "arm64", "amd64": "x64", "x86_64": "x64", "x64": "x64"}
CERT_ENV = "HEARTH_SIGN_CERT_PFX_BASE64"
PASSWORD_ENV = "HEARTH_SIGN_CERT_PASSWORD"
TIMESTAMP_URL = "http://timestamp.digicert.com"  # RFC 3161: the signature outlives the certificate
SIGN_TOOL_NAME = "hearth"  # the SignTool= name in hearth.iss


@dataclass(frozen=True)
class Signing:
    signtool: Path
    pfx: Path
    password: str


def installer_arch(machine: str) -> str:
    """``arm64`` or ``x64`` from ``platform.machine()`` (``ARM64``, ``AMD64``)."""
    try:
        return ARCHES[machine.lower()]
    except KeyError:
        sys.exit(f"Hearth has no Windows installer for a {machine} machine (arm64 and x64 only)")


def _program_files() -> list[Path]:
    names = ("ProgramFiles(x86)", "ProgramFiles")
    return [Path(os.environ[name]) for name in names if os.environ.get(name)]


def find_iscc() -> Path:
    found = shutil.which("iscc")
    if found:
        return Path(found)
    for folder in _program_files():
        candidate = folder / "Inno Setup 6" / "ISCC.exe"
        if candidate.is_file():
            return candidate
    sys.exit("Inno Setup 6 was not found: install it (https://jrsoftware.org/isdl.php, or "
             "`choco install innosetup`) or put ISCC.exe on PATH")


def find_signtool(arch: str) -> Path:
    """signtool from PATH (a Visual Studio developer prompt), else the newest Windows SDK's."""
    found = shutil.which("signtool")
    if found:
        return Path(found)
    kits = [folder / "Windows Kits" / "10" / "bin" for folder in _program_files()]
    candidates = sorted(path for kit in kits for path in kit.glob(f"*/{arch}/signtool.exe"))
    if not candidates:
        sys.exit("signing is configured but signtool.exe was not found: install the Windows SDK")
    return candidates[-1]


@contextmanager
def signing_from_env(env: dict[str, str], arch: str) -> Iterator[Signing | None]:
    """The signing set-up the environment describes, with the certificate in a temporary file that
    is deleted afterwards; None when no certificate is configured."""
    if not env.get(CERT_ENV):
        yield None
        return
    if not env.get(PASSWORD_ENV):
        sys.exit(f"{CERT_ENV} is set but {PASSWORD_ENV} is not")
    with tempfile.TemporaryDirectory(prefix="hearth-sign-") as tmp:
        pfx = Path(tmp) / "certificate.pfx"
        pfx.write_bytes(base64.b64decode(env[CERT_ENV]))
        yield Signing(find_signtool(arch), pfx, env[PASSWORD_ENV])


def sign_command(signing: Signing, files: list[Path]) -> list[str]:
    return [str(signing.signtool), "sign", "/f", str(signing.pfx), "/p", signing.password, "/fd", "sha256",
            "/tr", TIMESTAMP_URL, "/td", "sha256", *map(str, files)]


def inno_sign_tool(signing: Signing) -> str:
    """The same command as Inno Setup's SignTool wants it: ``$q`` a quote, ``$f`` the file, ``$$`` a dollar."""
    def quoted(text: str) -> str:
        return "$q" + text.replace("$", "$$") + "$q"
    return (f"{quoted(str(signing.signtool))} sign /f {quoted(str(signing.pfx))} /p {quoted(signing.password)} "
            f"/fd sha256 /tr {TIMESTAMP_URL} /td sha256 $f")


def iscc_command(iscc: Path, version: str, arch: str, bundle: Path, out_dir: Path,
                 signing: Signing | None) -> list[str]:
    command = [str(iscc), "/Qp", f"/DAppVersion={version}", f"/DArch={arch}", f"/DBundleDir={bundle}", f"/O{out_dir}"]
    if signing:
        command += ["/DSign", f"/S{SIGN_TOOL_NAME}={inno_sign_tool(signing)}"]
    return [*command, str(SCRIPT)]


def installer_name(version: str, arch: str) -> str:
    return f"Hearth-{version}-windows-{arch}-setup.exe"  # hearth.iss's OutputBaseFilename


def run(command: list[str]) -> None:
    done = subprocess.run(command, stdout=sys.stderr)
    if done.returncode != 0:
        sys.exit(f"{Path(command[0]).name} failed with exit status {done.returncode}")


def package(dist: Path, arch: str) -> Path:
    bundle = (dist / layout.BUNDLE_NAME).resolve()
    if not (bundle / layout.executable(layout.BUNDLE_NAME)).is_file():
        sys.exit(f"no bundle in {bundle}: run python installers/build_bundle.py --dist {dist} first")
    version = layout.version()
    iscc = find_iscc()
    with signing_from_env(dict(os.environ), arch) as signing:
        if signing:
            run(sign_command(signing, sorted(bundle.glob("*.exe"))))
            print(f"signed with the certificate in {CERT_ENV}", file=sys.stderr)
        else:
            print(f"unsigned: {CERT_ENV} is not set", file=sys.stderr)
        run(iscc_command(iscc, version, arch, bundle, dist.resolve(), signing))
    installer = dist.resolve() / installer_name(version, arch)
    if not installer.is_file():
        sys.exit(f"Inno Setup finished but {installer} is missing")
    return installer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="the folder holding the Hearth bundle")
    parser.add_argument("--arch", choices=("arm64", "x64"), default=None, help="default: this machine's")
    args = parser.parse_args()
    print(package(args.dist, args.arch or installer_arch(platform.machine())))


if __name__ == "__main__":
    main()
