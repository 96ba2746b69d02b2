"""Screenshots of the real app for the README, taken on a virtual X screen (Xvfb).

Starts Xvfb when no display is set (and openbox on it when installed, so windows have a window
manager's frames), runs the app on the embedded default model in a throw-away data folder, and for
the light theme and then the dark one (set through :func:`ui.theme.apply_appearance`, as the
Settings do) saves: the empty chat (the welcome and example prompts), the main window while an
answer is being written, the settings dialog and the Models page. In the light theme it also saves
the telemetry panel once the answer is done.

Files: ``empty-chat.png``, ``main-window.png``, ``settings.png``, ``models.png``,
``telemetry-panel.png`` and, for dark, ``empty-chat-dark.png``, ``main-window-dark.png``,
``settings-dark.png``, ``models-dark.png``.

Then, at 150 % text size on a 1280×720 window, light and dark: the same
conversation (``main-window-150.png``), Settings → Model (``settings-150.png``), the Models page
(``models-150.png``) and the dialog for a document too long for the model
(``document-too-long-150.png``); the dark ones end in ``-150-dark.png``.

Usage: ``.venv/bin/python installers/screenshots.py [--out docs/screenshots]``
(needs Debian's Xvfb and Qt's xcb libraries, which ``installers/setup_dev.sh`` installs when run as
root: ``apt-get install xvfb libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0``,
and optionally ``openbox``).
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


THEMES = (("light", ""), ("dark", "-dark"))  # (theme, file name suffix)
LARGE_TEXT, SMALL_SCREEN = 150, (1280, 720)  # the larger text size's shots, on a window this size
LONG_DOCUMENT_WORDS = 12_000  # more than the built-in model reads at once (8,192 tokens)


def start_xvfb() -> list[subprocess.Popen]:
    """A virtual screen on :97 (with openbox on it, when installed) unless a display is already set."""
    if os.environ.get("DISPLAY"):
        return []
    if shutil.which("Xvfb") is None:
        raise SystemExit("Xvfb is not installed; install it with: apt-get install xvfb libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0")
    started = [subprocess.Popen(["Xvfb", ":97", "-screen", "0", "1440x960x24", "-nolisten", "tcp"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    os.environ["DISPLAY"] = ":97"
    time.sleep(1.0)
    if shutil.which("openbox"):
        started.append(subprocess.Popen(["openbox"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)
    else:
        print("openbox is not installed: the windows are taken without a window manager's frames")
    return started


def wait(app, condition, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("the app did not get there in time")
        app.processEvents()
        time.sleep(0.01)


def settle(app, seconds: float = 0.3) -> None:
    from PySide6.QtCore import QEvent

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        app.sendPostedEvents(None, QEvent.Type.DeferredDelete.value)  # what exec() would do: widgets replaced go
        time.sleep(0.01)


def save(widget, path: Path) -> None:
    from PySide6.QtGui import QGuiApplication

    screen = QGuiApplication.primaryScreen()
    window = widget.window()
    handle = window.windowHandle()
    wait(QGuiApplication.instance(), lambda: handle is not None and handle.isExposed()  # mapped: not a 1×1 grab
         and window.frameGeometry().width() >= window.width() > 1, 30.0)
    settle(QGuiApplication.instance(), 0.2)
    top_left = widget.mapToGlobal(widget.rect().topLeft())
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
    started = start_xvfb()
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    os.environ["HEARTH_HOME"] = tempfile.mkdtemp(prefix="hearth-screenshots-")
    try:
        take_screenshots(args.out)
    finally:
        for process in reversed(started):
            process.terminate()


def take_screenshots(out: Path) -> None:
    import msgspec
    from PySide6.QtWidgets import QApplication

    from app.surfaces.gui import app_parts
    from app.services.paths import user_paths
    from app.services.settings import Settings, save_settings
    from ui.app import build_window
    from ui.theme import apply_appearance

    save_settings(msgspec.structs.replace(Settings(), temperature=0.2, seed=7, max_tokens=400),
                  user_paths().ensure().config)
    app = QApplication.instance() or QApplication([])
    apply_appearance(app, theme="light", text_size=100)
    window = build_window(app_parts())
    window.resize(1360, 860)
    window.show()
    wait(app, lambda: window.controller.loaded is not None)
    for theme, suffix in THEMES:
        apply_appearance(app, theme=theme, text_size=100)
        window.new_chat()
        settle(app, 0.6)
        take_theme(app, window, out, suffix)
        take_large_text(app, window, out, theme, suffix)
        apply_appearance(app, theme=theme, text_size=100)
        window.resize(1360, 860)
    window.close()


def take_theme(app, window, out: Path, suffix: str) -> None:
    """One theme's set: the empty chat, an answer being written, settings and the Models page."""
    save(window, out / f"empty-chat{suffix}.png")
    window.composer.set_text(QUESTION)
    window.composer._submit()
    answers = len(window.controller.messages.rows())
    wait(app, lambda: len(window.controller.messages.rows()) == answers + 2
         and len(window.controller.messages.row(answers + 1).message.content) > 160)
    settle(app, 0.6)
    save(window, out / f"main-window{suffix}.png")
    wait(app, lambda: not window.controller.generating)
    if not suffix:
        save_telemetry(app, window, out / "telemetry-panel.png")
    window.open_settings()
    settle(app)
    save(window.settings_dialog, out / f"settings{suffix}.png")
    if not suffix:
        window.settings_dialog.show_field("tools")
        settle(app)
        save(window.settings_dialog, out / "settings-tools.png")
    window.settings_dialog.reject()
    window.open_models()
    wait(app, lambda: bool(window.models_dialog.cards))
    settle(app)
    save(window.models_dialog, out / f"models{suffix}.png")
    window.models_dialog.close()
    settle(app)


def take_large_text(app, window, out: Path, theme: str, suffix: str) -> None:
    """At 150 % on a 1280×720 window: the conversation just answered, Settings → Model, the Models
    page and the too-long document's dialog."""
    from ui.theme import apply_appearance

    apply_appearance(app, theme=theme, text_size=LARGE_TEXT)
    window.resize(*SMALL_SCREEN)
    settle(app, 0.6)
    name = f"-{LARGE_TEXT}{suffix}.png"
    save(window, out / f"main-window{name}")
    window.open_settings()
    tabs = window.settings_dialog.tabs
    tabs.setCurrentIndex(next(i for i in range(tabs.count()) if tabs.tabText(i) == "Model"))
    settle(app)
    save(window.settings_dialog, out / f"settings{name}")
    window.settings_dialog.reject()
    window.open_models()
    settle(app)
    save(window.models_dialog, out / f"models{name}")
    window.models_dialog.close()
    save_too_long(app, window, out / f"document-too-long{name}")


def save_too_long(app, window, path: Path) -> None:
    """The dialog for a document the built-in model cannot read at once (a plain-text one, written here)."""
    document = Path(os.environ["HEARTH_HOME"]) / "long-notes.txt"
    words = "river stone light house garden winter market letter window music paper forest bridge candle".split()
    lines = (" ".join(words[(i + j) % len(words)] for j in range(10)) + "." for i in range(LONG_DOCUMENT_WORDS // 10))
    document.write_text("\n".join(lines), encoding="utf-8")
    documents = window.documents
    if not documents.attach(document):
        raise SystemExit("the window did not take the document")
    wait(app, lambda: documents.part_choice is not None and documents.part_choice.isVisible())
    settle(app, 0.6)
    save(documents.part_choice, path)
    documents.part_choice.reject()
    settle(app)


def save_telemetry(app, window, path: Path) -> None:
    """The telemetry panel with the whole answer's speeds on its sparklines (shown for this, if closed)."""
    dock = window.telemetry_dock
    was_visible = dock.isVisible()
    dock.show()
    settle(app, 0.6)
    save(dock, path)
    dock.setVisible(was_visible)


if __name__ == "__main__":
    main()
