#!/usr/bin/env bash
# Linux downloads in one command, after installers/setup_dev.sh:
#   bash installers/build_linux.sh [DIST]     (default dist/)
# makes DIST/Hearth-<version>-linux-<arch>.tar.gz and DIST/hearth_<version>_<arch>.deb from the bundle
# folder DIST/Hearth (installers/build_bundle.py, the same build the other platforms run), and prints
# the two paths. Needs dpkg-deb (Debian's dpkg).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
dist="${1:-dist}"
mkdir -p "$dist"
bundle=$("$python" installers/build_bundle.py --dist "$dist" --work "${HEARTH_BUILD_DIR:-build}")
"$python" installers/linux/package_linux.py --bundle "$bundle" --dist "$dist"
