#!/usr/bin/env bash
# The README's screenshots are taken from the real window on a virtual X screen (installers/screenshots.py).
# Where Xvfb is missing and this runs as root with apt-get, install it with Qt's X libraries and a small
# window manager (openbox). Best effort, in one line: it never fails (installers/setup_dev.sh goes on),
# and the app and the tests need none of it (they run Qt offscreen).
x_packages="xvfb libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-shape0 \
libxcb-xkb1 libxkbcommon-x11-0 openbox"
if command -v Xvfb >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "Xvfb is missing; only installers/screenshots.py needs it (as root: apt-get install $x_packages)."
  exit 0
fi
# shellcheck disable=SC2086  # the package list is meant to split
if { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
     $x_packages; } >/dev/null 2>&1; then
  echo "Installed Xvfb and openbox, for installers/screenshots.py."
else
  echo "Could not install Xvfb (only installers/screenshots.py needs it); the set-up goes on without it."
fi
exit 0
