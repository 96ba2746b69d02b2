"""The transcript: one :class:`MessageWidget` per row of the message model, newest at the bottom,
in a centred column of a limited width (a comfortable line length on a
wide window: :func:`ui.theme.column_width`), on the palette's text background. An empty conversation shows the welcome
(:class:`~ui.views.welcome.Welcome`) and example prompts (:mod:`ui.views.example_prompts`; one
clicked fills the composer: :attr:`ChatView.prompt_chosen`).

The view follows the model's signals (reset, rows inserted, data changed, text or reasoning
appended: a streaming answer's delta goes to its widget alone) and keeps a new message and its answer in
sight as they grow, unless the user has scrolled up to read (:mod:`ui.views.follow_newest`). A long transcript
is built a few messages at a time (:data:`BUILD_SLICE_MS` per turn of the event loop), so opening
it never freezes the window.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QEvent, QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QPalette
from PySide6.QtWidgets import QHBoxLayout, QScrollArea, QVBoxLayout, QWidget

from ui.item_models.messages import APPENDED_ROLES, MessageListModel
from ui.theme import SPACE_L, SPACE_XL, column_width
from ui.views.example_prompts import ExamplePrompts
from ui.views.follow_newest import FollowNewest
from ui.views.message_widget import MessageWidget
from ui.views.welcome import Welcome

BUILD_SLICE_MS = 15
MESSAGE_SPACING = SPACE_XL


class ChatView(QScrollArea):
    edit_requested = Signal(str)
    regenerate_requested = Signal(str)
    version_requested = Signal(str, int)
    new_chat_requested = Signal(str)
    file_dropped = Signal(str)
    models_requested = Signal()  # the welcome's "Browse models…"
    prompt_chosen = Signal(str)  # an example prompt clicked in an empty conversation

    def __init__(self, model: MessageListModel, parent: QWidget | None = None, *,
                 data_folder: Path | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.highlight_drafts = False
        self.widgets: list[MessageWidget] = []
        self.setWidgetResizable(True)
        self.setObjectName("chat_view")
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setAcceptDrops(True)
        self.setBackgroundRole(QPalette.ColorRole.Base)
        self.setFrameShape(QScrollArea.Shape.NoFrame)  # the chat is the window's middle, not a box in it
        self.follow = FollowNewest(self.verticalScrollBar())
        inner = QWidget()
        centre = QHBoxLayout(inner)
        centre.setContentsMargins(SPACE_XL, SPACE_L, SPACE_XL, SPACE_L)
        self.column = QWidget()
        self.column.setObjectName("chat_column")
        self.column.setMaximumWidth(column_width())
        centre.addStretch(0)
        centre.addWidget(self.column, 1)
        centre.addStretch(0)
        self._layout = QVBoxLayout(self.column)
        self._layout.setAlignment(Qt.AlignmentFlag.AlignTop)
        self._layout.setSpacing(MESSAGE_SPACING)
        self.welcome = Welcome(data_folder=data_folder)
        self.welcome.models_requested.connect(self.models_requested)
        self._layout.addWidget(self.welcome)
        self.examples = ExamplePrompts()
        self.examples.chosen.connect(self.prompt_chosen)
        self._layout.addWidget(self.examples)
        self._layout.addStretch(1)
        self.setWidget(inner)
        model.modelReset.connect(self._rebuild)
        model.rowsInserted.connect(self._inserted)
        model.dataChanged.connect(self._changed)
        model.textAppended.connect(self._appended)
        model.reasoningAppended.connect(self._reasoning_appended)
        self._rebuild()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        """A file dropped on the chat is loaded as a document."""
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.file_dropped.emit(url.toLocalFile())
                event.acceptProposedAction()
                return

    def set_highlight_drafts(self, on: bool) -> None:
        self.highlight_drafts = on
        for widget in self.widgets:
            widget.set_highlight_drafts(on)

    def _rebuild(self) -> None:
        for widget in self.widgets:
            widget.deleteLater()
        self.widgets = []
        self.follow.resume()  # another transcript: shown from its newest message
        self._build_more()

    def _inserted(self, parent: QModelIndex, first: int, last: int) -> None:
        self._build_more()

    def _changed(self, top: QModelIndex, bottom: QModelIndex, roles=()) -> None:
        if roles == APPENDED_ROLES:  # text appended: its widget has it already (_appended)
            return
        for row in range(top.row(), min(bottom.row() + 1, len(self.widgets))):
            self.widgets[row].set_row(self.model.row(row))

    def _appended(self, row: int, text: str, stats: dict | None) -> None:
        if row >= len(self.widgets):  # not built yet: it is built from the model's row, text and all
            return
        self.widgets[row].append_text(text, stats)

    def _reasoning_appended(self, row: int, text: str) -> None:
        if row >= len(self.widgets):
            return
        self.widgets[row].append_reasoning(text)

    def _build_more(self) -> None:
        """Add widgets for rows not shown yet, for at most one slice of time; then come back."""
        started = time.perf_counter()
        while len(self.widgets) < self.model.rowCount():
            self._add(len(self.widgets))
            if (time.perf_counter() - started) * 1000 > BUILD_SLICE_MS:
                QTimer.singleShot(0, self._build_more)
                break
        self._update_empty()

    @property
    def complete(self) -> bool:
        """Every row of the model has its widget."""
        return len(self.widgets) == self.model.rowCount()

    def _add(self, row: int) -> None:
        widget = MessageWidget(self.model.row(row), self.highlight_drafts)
        widget.edit_requested.connect(self.edit_requested)
        widget.regenerate_requested.connect(self.regenerate_requested)
        widget.version_requested.connect(self.version_requested)
        widget.new_chat_requested.connect(self.new_chat_requested)
        self._layout.insertWidget(self._layout.count() - 1, widget)
        self.widgets.append(widget)

    def _update_empty(self) -> None:
        empty = not self.widgets
        was_empty = self.welcome.isVisibleTo(self)
        self.welcome.setVisible(empty)
        self.examples.setVisible(empty)
        if empty:  # the welcome is read from its top (its logo and title), however tall the text makes it
            self.follow.hold_at_top()
        elif was_empty:
            self.follow.resume()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange and hasattr(self, "column"):  # the text size changed
            self.column.setMaximumWidth(column_width())
