"""Screenshots of the real app for the README, taken on a virtual X screen (Xvfb).

Starts Xvfb when no display is set, runs the app on the embedded default model in a throw-away
data folder, saves the empty chat (the welcome), asks it a question and, while the answer is being
written, saves the main window and the telemetry panel; then the settings dialog and the Models page;
then the main window after the system palette switches to dark.

Usage: ``.venv/bin/python installers/screenshots.py [--out docs/screenshots]``
(needs Debian's Xvfb and Qt's xcb libraries: ``apt-get install xvfb libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
QUESTION = "Write a short Python function that checks whether a word is a palindrome, and explain it."


def start_xvfb() -> subprocess.Popen | None:
    """A virtual screen on :97 unless a display is already set."""
    if os.environ.get("DISPLAY"):
        return None
    if shutil.which("Xvfb") is None:
        raise SystemExit("Xvfb is not installed; install it with: apt-get install xvfb libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0")
    server = subprocess.Popen(["Xvfb", ":97", "-screen", "0", "1400x900x24", "-nolisten", "tcp"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.environ["DISPLAY"] = ":97"
    time.sleep(1.0)
    return server


def wait(app, condition, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("the app did not get there in time")
        app.processEvents()
        time.sleep(0.01)


def settle(app, seconds: float = 0.3) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


def save(widget, path: Path) -> None:
    from PySide6.QtGui import QGuiApplication

    screen = QGuiApplication.primaryScreen()
    top_left = widget.mapToGlobal(widget.rect().topLeft())
    window = widget.window()
    frame = window.frameGeometry() if widget is window else None
    pixmap = screen.grabWindow(0, *(frame.getRect() if frame else (top_left.x(), top_left.y(), widget.width(),
                                                                    widget.height())))
    if pixmap.isNull() or not pixmap.save(str(path)):
        raise SystemExit(f"could not save {path}")
    print(f"saved {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    server = start_xvfb()
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    os.environ["HEARTH_HOME"] = tempfile.mkdtemp(prefix="hearth-screenshots-")
    try:
        take_screenshots(args.out)
    finally:
        if server is not None:
            server.terminate()


def dark_palette():
    from PySide6.QtGui import QColor, QPalette

    palette = QPalette()
    colours = {"Window": "#2b2b2b", "WindowText": "#e6e6e6", "Base": "#1e1e1e", "AlternateBase": "#333333",
               "Text": "#e6e6e6", "Button": "#353535", "ButtonText": "#e6e6e6", "Highlight": "#3d7ab8",
               "HighlightedText": "#ffffff", "PlaceholderText": "#9a9a9a", "ToolTipBase": "#333333",
               "ToolTipText": "#e6e6e6", "Mid": "#555555"}
    for role, colour in colours.items():
        palette.setColor(getattr(QPalette.ColorRole, role), QColor(colour))
    return palette


def take_screenshots(out: Path) -> None:
    import msgspec
    from PySide6.QtWidgets import QApplication

    from app.gui import app_parts
    from app.services.paths import user_paths
    from app.services.settings import Settings, save_settings
    from ui.app import build_window

    save_settings(msgspec.structs.replace(Settings(), temperature=0.2, seed=7, max_tokens=400),
                  user_paths().ensure().config)
    app = QApplication.instance() or QApplication([])
    window = build_window(app_parts())
    window.resize(1360, 860)
    window.show()
    wait(app, lambda: window.controller.loaded is not None)
    settle(app, 0.6)
    save(window, out / "empty-chat.png")
    window.composer.edit.setPlainText(QUESTION)
    window.composer._submit()
    wait(app, lambda: len(window.controller.messages.rows()) == 2
         and len(window.controller.messages.row(1).message.content) > 160)
    settle(app, 0.6)
    save(window, out / "main-window.png")
    wait(app, lambda: not window.controller.generating)
    save(window.telemetry_dock, out / "telemetry-panel.png")  # the whole answer's speeds on its sparklines
    window.open_settings()
    settle(app)
    save(window.settings_dialog, out / "settings.png")
    window.settings_dialog.reject()
    window.open_models()
    wait(app, lambda: window.models_dialog.catalogue.topLevelItemCount() > 0)
    settle(app)
    save(window.models_dialog, out / "models.png")
    window.models_dialog.close()
    app.setPalette(dark_palette())  # what the platform theme does when the system switches to dark
    settle(app, 0.6)
    save(window, out / "main-window-dark.png")
    window.close()


if __name__ == "__main__":
    main()
