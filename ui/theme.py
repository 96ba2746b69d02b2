"""The app's look in one place: light and dark palettes, the type scale, spacing, and the text size.

:func:`apply_appearance` is the only entry point; it is called at start-up and again whenever the
user changes the theme or the text size in Settings. ``theme`` is ``"system"`` (follow the OS
colour scheme: Qt 6's ``QStyleHints.colorScheme()``, re-applied on ``colorSchemeChanged``),
``"light"`` or ``"dark"``. Every theme uses the Fusion style, so the palette below is what is
painted on every platform (native styles on macOS and Windows ignore much of a palette).

Views never name a colour: they paint with palette roles (``Base`` for the conversation,
``Window`` for the sidebar, ``AlternateBase`` for the user's bubble, ``PlaceholderText`` for
secondary text, ``Highlight`` for the accent) and, for the few colours a palette has no role for
(a warning's strong background), :func:`colour`. The type scale is applied through the app style
sheet to widgets that carry a ``type`` property (:func:`set_type`), so a text-size change reaches
them too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtGui import QColor, QFont, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory, QWidget

from app.services.settings import TEXT_SIZE_RANGE, THEMES, Settings

TEXT_SIZES = (85, 100, 115, 130, 150)  # percent of the platform's default font; Settings offers these
DEFAULT_THEME, DEFAULT_TEXT_SIZE = Settings().theme, Settings().text_size  # the settings' rules are theirs

# Spacing (px) and shapes, used by the views' layouts.
SPACE_XS, SPACE_S, SPACE_M, SPACE_L, SPACE_XL = 4, 8, 12, 16, 24
RADIUS = 12  # the composer, bubbles
RADIUS_S = 6  # buttons, code blocks
COLUMN_MAX_WIDTH = 740  # the conversation's readable column, centred in wider windows

# Type scale: a multiple of the app's (text-size scaled) font, by a widget's ``type`` property.
TYPE_SCALE = {"display": 1.6, "title": 1.25, "body": 1.0, "caption": 0.88}

_ROLE = QPalette.ColorRole
_PALETTES: dict[str, dict[QPalette.ColorRole, str]] = {
    "light": {
        _ROLE.Window: "#f7f7f8", _ROLE.WindowText: "#1f1f1f", _ROLE.Base: "#ffffff",
        _ROLE.AlternateBase: "#f0f0f2", _ROLE.Text: "#1f1f1f", _ROLE.PlaceholderText: "#6e6e78",
        _ROLE.Button: "#ffffff", _ROLE.ButtonText: "#1f1f1f", _ROLE.BrightText: "#ffffff",
        _ROLE.Light: "#ffffff", _ROLE.Midlight: "#ececee", _ROLE.Mid: "#d4d4d8", _ROLE.Dark: "#a1a1aa",
        _ROLE.Shadow: "#71717a", _ROLE.Highlight: "#c2410c", _ROLE.HighlightedText: "#ffffff",
        _ROLE.Link: "#b4470f", _ROLE.LinkVisited: "#8f3a10", _ROLE.ToolTipBase: "#1f1f1f",
        _ROLE.ToolTipText: "#ffffff", _ROLE.Accent: "#c2410c",
    },
    "dark": {
        _ROLE.Window: "#171717", _ROLE.WindowText: "#ececec", _ROLE.Base: "#212121",
        _ROLE.AlternateBase: "#2f2f2f", _ROLE.Text: "#ececec", _ROLE.PlaceholderText: "#a0a0a8",
        _ROLE.Button: "#2f2f2f", _ROLE.ButtonText: "#ececec", _ROLE.BrightText: "#ffffff",
        _ROLE.Light: "#4a4a4a", _ROLE.Midlight: "#3a3a3a", _ROLE.Mid: "#424242", _ROLE.Dark: "#0f0f0f",
        _ROLE.Shadow: "#000000", _ROLE.Highlight: "#f97316", _ROLE.HighlightedText: "#1a1a1a",
        _ROLE.Link: "#fb923c", _ROLE.LinkVisited: "#fdba74", _ROLE.ToolTipBase: "#ececec",
        _ROLE.ToolTipText: "#1a1a1a", _ROLE.Accent: "#f97316",
    },
}
_DISABLED_TEXT = {"light": "#a1a1aa", "dark": "#6b6b6b"}

# Colours a palette has no role for: a notice's strong background (warning, error) and the text on it
# (on_notice); text that says a thing went well, may go wrong, or went wrong (good, caution, bad: tones).
_EXTRA: dict[str, dict[str, str]] = {
    "light": {"warning": "#8a5300", "error": "#a4262c", "on_notice": "#ffffff",
              "good": "#1e7a34", "caution": "#8a5300", "bad": "#b3261e"},
    "dark": {"warning": "#8a5300", "error": "#a4262c", "on_notice": "#ffffff",
             "good": "#4ade80", "caution": "#fbbf24", "bad": "#f87171"},
}
TONES = ("good", "caution", "bad")


@dataclass
class _State:
    """What the app was last given, and what it started with (the text size scales this font)."""

    base_font: QFont
    theme: str = DEFAULT_THEME
    text_size: int = DEFAULT_TEXT_SIZE
    scheme: str = "light"  # the palette in use: light or dark
    follower: QObject | None = field(default=None)


_state: _State | None = None


def apply_appearance(app: QApplication, *, theme: str, text_size: int) -> None:
    """Set the app's palette, style sheet and font for ``theme`` and ``text_size`` (a percent)."""
    global _state
    if theme not in THEMES:
        theme = DEFAULT_THEME
    if _state is None:
        _state = _State(base_font=QFont(app.font()))
        app.setStyle(QStyleFactory.create("Fusion"))
    _state.theme, _state.text_size = theme, max(TEXT_SIZE_RANGE[0], min(int(text_size), TEXT_SIZE_RANGE[1]))
    _follow_system(app, theme == "system")
    _apply(app)


def current_scheme() -> str:
    """The palette in use, ``"light"`` or ``"dark"`` (light until :func:`apply_appearance` runs)."""
    return _state.scheme if _state is not None else "light"


def text_scale() -> float:
    """The text size as a factor (1.0 until :func:`apply_appearance` runs)."""
    return _state.text_size / 100 if _state is not None else 1.0


def column_width() -> int:
    """The conversation column's widest, and the composer's: it grows with the text size, so lines keep their length."""
    return round(COLUMN_MAX_WIDTH * text_scale())


def colour(name: str) -> QColor:
    """One of the colours a palette has no role for (see :data:`_EXTRA`), in the current theme."""
    return QColor(_EXTRA[current_scheme()][name])


def set_tone(widget: QWidget, tone: str) -> None:
    """Colour ``widget``'s text as ``good``, ``caution`` or ``bad`` ("" for the ordinary text colour),
    through the app style sheet, so it follows a theme switch."""
    widget.setProperty("tone", tone)
    widget.style().unpolish(widget)
    widget.style().polish(widget)


def set_type(widget: QWidget, kind: str) -> None:
    """Give ``widget`` a step of the type scale (``display``, ``title``, ``body``, ``caption``)."""
    widget.setProperty("type", kind)
    widget.style().unpolish(widget)
    widget.style().polish(widget)


def palette_for(scheme: str) -> QPalette:
    palette = QPalette()
    for role, value in _PALETTES[scheme].items():
        palette.setColor(role, QColor(value))
    disabled = QColor(_DISABLED_TEXT[scheme])
    for role in (_ROLE.WindowText, _ROLE.Text, _ROLE.ButtonText, _ROLE.PlaceholderText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, disabled)
    return palette


def system_scheme(app: QGuiApplication) -> str:
    return "dark" if app.styleHints().colorScheme() == Qt.ColorScheme.Dark else "light"


def _apply(app: QApplication, system: str | None = None) -> None:
    """``system``: the scheme the OS just reported (else asked of the style hints)."""
    assert _state is not None
    if _state.theme == "system":
        _state.scheme = system or system_scheme(app)
    else:
        _state.scheme = _state.theme
    font = QFont(_state.base_font)
    _scale_font(font, _state.text_size / 100)
    app.setFont(font)
    app.setPalette(palette_for(_state.scheme))
    app.setStyleSheet(_style_sheet(font, _state.scheme))


def _scale_font(font: QFont, factor: float) -> None:
    if font.pointSizeF() > 0:
        font.setPointSizeF(round(font.pointSizeF() * factor, 2))
    elif font.pixelSize() > 0:
        font.setPixelSize(max(1, round(font.pixelSize() * factor)))


def _style_sheet(font: QFont, scheme: str) -> str:
    """The type scale (by ``type`` property) for the current font size, the tones (by ``tone``
    property) of ``scheme``, and the shapes of a few widgets, coloured by palette references."""
    size = font.pointSizeF() if font.pointSizeF() > 0 else font.pixelSize() * 0.75
    rules = [f'*[type="{kind}"] {{ font-size: {size * scale:.1f}pt; }}' for kind, scale in TYPE_SCALE.items()]
    rules.append('*[type="display"], *[type="title"] { font-weight: 600; }')
    rules += [f'*[tone="{tone}"] {{ color: {_EXTRA[scheme][tone]}; }}' for tone in TONES]
    rules.append(_SHAPES)
    return "\n".join(rules)


_SHAPES = f"""
QPushButton#send_button {{
    background: palette(highlight); color: palette(highlighted-text); border: none;
    border-radius: {RADIUS_S + 4}px; padding: {SPACE_XS + 2}px {SPACE_L}px; font-weight: 600;
}}
QPushButton#send_button:disabled {{ background: palette(mid); }}
QPushButton#attach_button, QPushButton#new_chat {{
    border: 1px solid palette(mid); border-radius: {RADIUS_S + 4}px; padding: {SPACE_XS + 2}px {SPACE_M}px;
    background: palette(base); color: palette(button-text);
}}
QPushButton#attach_button:hover, QPushButton#new_chat:hover {{ background: palette(alternate-base); }}
QPushButton#attach_button:focus, QPushButton#new_chat:focus {{ border-color: palette(highlight); }}
QLineEdit#search {{
    border: 1px solid palette(mid); border-radius: {RADIUS_S}px; padding: {SPACE_XS + 1}px {SPACE_S}px;
    background: palette(base);
}}
QLineEdit#search:focus {{ border-color: palette(highlight); }}
#message_actions QToolButton {{
    border: none; border-radius: {RADIUS_S}px; padding: 2px {SPACE_S}px; color: palette(placeholder-text);
}}
#message_actions QToolButton:hover, #message_actions QToolButton:focus {{
    background: palette(alternate-base); color: palette(text);
}}
#message_actions QToolButton:disabled {{ color: palette(mid); }}
QSplitter::handle {{ background: palette(mid); }}
QSplitter::handle:horizontal {{ width: 1px; }}
"""


def _follow_system(app: QApplication, follow: bool) -> None:
    """Re-apply the palette when the OS switches light/dark, while the theme is ``system``."""
    assert _state is not None
    if follow and _state.follower is None:
        follower = _SystemFollower(app)
        app.styleHints().colorSchemeChanged.connect(follower.changed)
        _state.follower = follower
    elif not follow and _state.follower is not None:
        _state.follower.deleteLater()  # deleting the receiver disconnects it
        _state.follower = None


class _SystemFollower(QObject):
    """Receives the OS's colour-scheme changes; deleting it disconnects them."""

    @Slot(Qt.ColorScheme)
    def changed(self, scheme: Qt.ColorScheme) -> None:
        app = QApplication.instance()
        if _state is not None and _state.theme == "system" and isinstance(app, QApplication):
            _apply(app, "dark" if scheme == Qt.ColorScheme.Dark else "light")
