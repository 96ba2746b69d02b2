"""Render Hearth's one icon source, ``ui/resources/hearth.svg``, into what each platform wants.

    python installers/icons.py --out DIR

writes into DIR:

* ``hearth-<size>.png`` for :data:`PNG_SIZES` (the Linux hicolor theme and the desktop entry);
* ``hearth.ico`` holding :data:`ICO_SIZES` (Windows: the executables and the installer). Qt's ICO
  writer puts one image in a file, so the container is written here: a 6-byte header, a 16-byte
  entry per image, then each image as PNG (which Windows reads in an ICO since Vista);
* ``hearth.iconset/`` with the names ``iconutil -c icns`` wants on macOS (icon_16x16.png,
  icon_16x16@2x.png, … icon_512x512@2x.png).

Qt draws the SVG offscreen (``QT_QPA_PLATFORM=offscreen`` unless the caller chose a platform).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication, QImage, QPainter  # noqa: E402
from PySide6.QtSvg import QSvgRenderer  # noqa: E402

SOURCE = Path(__file__).resolve().parents[1] / "ui" / "resources" / "hearth.svg"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
ICONSET_POINTS = (16, 32, 128, 256, 512)  # each at 1x and 2x
ICO_HEADER = struct.Struct("<HHH")  # reserved (0), type (1: icon), number of images
ICO_ENTRY = struct.Struct("<BBBBHHII")  # width, height (0 means 256), colours, reserved, planes, bits, size, offset


def render(renderer: QSvgRenderer, size: int) -> QImage:
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    return image


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise RuntimeError("Qt could not encode a PNG")
    buffer.close()
    return bytes(data)


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """An ICO file holding each (size, PNG) image, smallest first."""
    sizes = sorted(pngs)
    offset = ICO_HEADER.size + ICO_ENTRY.size * len(sizes)
    entries = []
    for size in sizes:
        side = 0 if size == 256 else size
        entries.append(ICO_ENTRY.pack(side, side, 0, 0, 1, 32, len(pngs[size]), offset))
        offset += len(pngs[size])
    return ICO_HEADER.pack(0, 1, len(sizes)) + b"".join(entries) + b"".join(pngs[size] for size in sizes)


def iconset_names() -> dict[str, int]:
    """macOS iconset file name -> pixel size."""
    names = {}
    for points in ICONSET_POINTS:
        names[f"icon_{points}x{points}.png"] = points
        names[f"icon_{points}x{points}@2x.png"] = points * 2
    return names


def write_icons(out: Path, source: Path = SOURCE) -> list[Path]:
    """Write every icon file into ``out``; return their paths."""
    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841 (QPainter needs it alive)
    renderer = QSvgRenderer(str(source))
    if not renderer.isValid():
        raise RuntimeError(f"{source} is not an SVG Qt can draw")
    needed = {*PNG_SIZES, *ICO_SIZES, *iconset_names().values()}
    pngs = {size: png_bytes(render(renderer, size)) for size in sorted(needed)}
    iconset = out / "hearth.iconset"
    iconset.mkdir(parents=True, exist_ok=True)
    files = {out / f"hearth-{size}.png": pngs[size] for size in PNG_SIZES}
    files[out / "hearth.ico"] = ico_bytes({size: pngs[size] for size in ICO_SIZES})
    files.update({iconset / name: pngs[size] for name, size in iconset_names().items()})
    for path, data in files.items():
        path.write_bytes(data)
    return list(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the folder to write the icons into")
    parser.add_argument("--source", type=Path, default=SOURCE, help="the SVG (default: %(default)s)")
    args = parser.parse_args(argv)
    written = write_icons(args.out, args.source)
    print(f"{len(written)} icon files in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
