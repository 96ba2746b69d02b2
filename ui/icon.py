"""Hearth's icon: a flame in a hearth, drawn as an SVG that ships inside the package
(``ui/resources/hearth.svg``, package data in pyproject.toml) and is read with importlib.resources,
so it is found the same way from a checkout, a wheel or a frozen app."""

from __future__ import annotations

import importlib.resources
from functools import cache

from PySide6.QtCore import QByteArray, Qt
from PySide6.QtGui import QIcon, QImage, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer

ICON_FILE = "resources/hearth.svg"
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256)


def icon_svg() -> bytes:
    return importlib.resources.files("ui").joinpath(ICON_FILE).read_bytes()


@cache
def app_icon() -> QIcon:
    """The icon at the sizes window managers and docks ask for (drawn once per process)."""
    renderer = QSvgRenderer(QByteArray(icon_svg()))
    icon = QIcon()
    for size in ICON_SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        renderer.render(painter)
        painter.end()
        icon.addPixmap(QPixmap.fromImage(image))
    return icon
