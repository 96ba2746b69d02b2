#!/usr/bin/env bash
# Linux downloads in one command, after installers/setup_dev.sh:
#   bash installers/build_linux.sh [DIST]     (default dist/)
# makes DIST/Hearth-<version>-linux-<arch>.tar.gz and DIST/hearth_<version>_<arch>.deb from the bundle
# folder DIST/Hearth (installers/build_bundle.py, the same build the other platforms run), and prints
# the two paths. Needs dpkg-deb (Debian's dpkg). A relative DIST (and HEARTH_BUILD_DIR, default
# build/) is in the checkout, wherever the command is run from.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
mkdir -p "${1:-dist}" "${HEARTH_BUILD_DIR:-build}"
dist=$(cd "${1:-dist}" && pwd)  # absolute: the build steps run in other folders
work=$(cd "${HEARTH_BUILD_DIR:-build}" && pwd)
bundle=$("$python" installers/build_bundle.py --dist "$dist" --work "$work")
"$python" installers/linux/package_linux.py --bundle "$bundle" --dist "$dist"
