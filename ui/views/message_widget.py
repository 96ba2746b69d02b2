"""One message in the chat view: who said it, the text, its versions and actions.

Questions and answers are laid out differently, so a transcript reads as a conversation: a
question sits on the right in a rounded bubble as wide as its text (at most
:data:`QUESTION_WIDTH` of the column); an answer runs on the left across the column, unframed,
under the name of the model that wrote it. A document the user added is a framed card under one
title line (its name, pages and tokens). Colours come from the palette when painted, so light and
dark themes both work (:class:`~ui.views.bubble.Bubble`). Under each message, its actions (Copy,
Edit, Regenerate…) show while it is under the mouse or holds the focus (:mod:`ui.views.message_actions`).

Laying out text costs GUI time in proportion to its length, so two rules keep the window
responsive (``tests/bench/bench_ui_latency.py`` measures it): while an answer streams it is
re-rendered at most every :data:`RENDER_INTERVAL_MS`, or less often when a render takes long
(the interval stays :data:`RENDER_BUDGET`× the last render's cost, counting the layout and paint
it causes, which for a long answer cost several times the Markdown); and a finished message
longer than :data:`COLLAPSE_CHARS` shows its beginning with a "Show all" button.

A streaming answer grows by :meth:`MessageWidget.append_text`, which only keeps the new text and
schedules that render: the cost of a delta does not grow with the answer. The text (and the hover
statistics) catch up at the render; the stored answer replaces it all at the end (:meth:`~MessageWidget.set_row`).

A reasoning model's thinking streams the same way (:meth:`MessageWidget.append_reasoning`) into the
:class:`~ui.views.thinking_section.ThinkingSection` above the answer's text, never into that text:
Copy copies the answer alone.
"""

from __future__ import annotations

import time
from dataclasses import replace

from PySide6.QtCore import QEvent, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QGuiApplication, QPalette, QTextDocument
from PySide6.QtWidgets import (
    QHBoxLayout, QLabel, QPushButton, QSizePolicy, QSpacerItem, QToolTip, QVBoxLayout, QWidget,
)

from app.services.tool_text import shown_text, tool_label
from app.services.context_cut import cut_notice
from app.services.context_summary import CONTINUES_STAT, continued_notice
from app.services.document_loading import document_message
from app.services.chat_rows import MessageRow
from engine.protocol.answer_record import CUT_OFF
from ui.formatting import NO_STATISTICS, message_stats_tooltip
from ui.markdown import markdown_to_html
from ui.remote_text import answered_by_line
from ui.theme import SPACE_L, SPACE_S
from ui.views.bubble import Bubble
from ui.views.message_actions import MessageActions
from ui.views.text_label import MessageText
from ui.views.thinking_section import ThinkingSection

RENDER_INTERVAL_MS = 60
RENDER_BUDGET = 8  # the GUI spends at most 1/8 of its time re-rendering a streaming answer
COLLAPSE_CHARS = 3000
DOCUMENT_PREVIEW_CHARS = 600
STATUS_TEXT = {"generating": "writing…", "stopped": "stopped", "interrupted": "interrupted", "error": "failed",
               "waiting": "waiting for the model to load…"}  # waiting: a question held (ui.held_question)
ANSWER_LABEL = "Assistant"  # an answer whose model was not recorded (written before, or by the command line)
QUESTION_WIDTH = 0.78  # of the row: a question's bubble never spans it, so questions and answers read apart
NO_LIMIT = 16_777_215  # Qt's QWIDGETSIZE_MAX


class MessageWidget(QWidget):
    edit_requested = Signal(str)  # message id
    regenerate_requested = Signal(str)
    version_requested = Signal(str, int)  # (message id, -1 or +1)
    new_chat_requested = Signal(str)  # a document message's id

    def __init__(self, row: MessageRow, highlight_drafts: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._shown_row = row
        self._tail: list[str] = []  # text appended since the row was last built (see the row property)
        self._tail_stats: dict | None = None
        self._reasoning_tail: list[str] = []  # reasoning appended since the row was last built
        self.highlight_drafts = highlight_drafts
        self.setObjectName("message")
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self._render_timer = QTimer(self, singleShot=True, interval=RENDER_INTERVAL_MS)
        self._render_timer.timeout.connect(self._render_text)
        self._render_started = 0.0
        self._settled = QTimer(self, singleShot=True, interval=0)  # after the layout and paint a render queued
        self._settled.timeout.connect(self._pace_renders)
        self._build()
        self.set_row(row)

    def _build(self) -> None:
        outer = QVBoxLayout(self)  # the bubble, and under it the actions shown on hover
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(2)
        # above an answer whose turn left the oldest messages out of what the model reads: says so
        self.context_notice = QLabel(objectName="context_notice", wordWrap=True)
        self.context_notice.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.context_notice.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.context_notice.hide()
        outer.addWidget(self.context_notice)
        row = QHBoxLayout()
        outer.addLayout(row)
        self.bubble = Bubble()
        row.addStretch(0)
        row.addWidget(self.bubble, 1)
        row.addStretch(0)
        self._row = row
        layout = QVBoxLayout(self.bubble)
        layout.setSpacing(4)
        header = QHBoxLayout()
        self.who = QLabel()
        self.who.setObjectName("message_role")
        self.who.setWordWrap(True)
        self.who.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        font = self.who.font()
        font.setWeight(QFont.Weight.DemiBold)
        self.who.setFont(font)
        self.state = QLabel()
        self.state.setObjectName("message_status")
        self.state.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.state.setWordWrap(True)
        header.addWidget(self.who, 1)
        header.addWidget(self.state)
        layout.addLayout(header)
        self.thinking = ThinkingSection()
        layout.addWidget(self.thinking)
        self.body = MessageText()
        self.body.setObjectName("message_body")
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                          | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.body.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        layout.addWidget(self.body)
        self.expanded = False
        self.show_all = QPushButton()
        self.show_all.setObjectName("show_all")
        self.show_all.setFlat(True)
        self.show_all.clicked.connect(self._expand)
        self.show_all.hide()
        layout.addWidget(self.show_all, 0, Qt.AlignmentFlag.AlignLeft)
        # Lets the bubble be as wide as its text: the header's layout, empty under a question, would cap it.
        layout.addItem(QSpacerItem(0, 0, QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed))
        self.outcome = QLabel()  # under an answer the context cut off: says so (outcome_text)
        self.outcome.setObjectName("message_outcome")
        self.outcome.setWordWrap(True)
        self.outcome.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.outcome.hide()
        layout.addWidget(self.outcome)
        outer.addWidget(self._actions())

    def _actions(self) -> MessageActions:
        """The row of actions under the text, shown on hover or focus (:mod:`ui.views.message_actions`)."""
        actions = MessageActions()
        self.previous, self.version, self.next = actions.previous, actions.version, actions.next
        self.copy, self.edit, self.regenerate, self.new_chat = (actions.copy, actions.edit, actions.regenerate,
                                                                actions.new_chat)
        self.previous.clicked.connect(lambda: self.version_requested.emit(self.row.message.id, -1))
        self.next.clicked.connect(lambda: self.version_requested.emit(self.row.message.id, 1))
        self.copy.clicked.connect(self.copy_text)
        self.edit.clicked.connect(lambda: self.edit_requested.emit(self.row.message.id))
        self.regenerate.clicked.connect(lambda: self.regenerate_requested.emit(self.row.message.id))
        self.new_chat.clicked.connect(lambda: self.new_chat_requested.emit(self.row.message.id))
        actions.watch_focus(self.body)
        self.actions = actions
        return actions

    def event(self, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        """The hover statistics show beside the message, never over the text they describe."""
        if event.type() == QEvent.Type.ToolTip and self.toolTip():
            QToolTip.showText(self.tooltip_place(), self.toolTip(), self)
            return True
        return super().event(event)

    def tooltip_place(self) -> QPoint:
        """Where the statistics show (global): right of the message's bubble, level with its top."""
        corner = self.bubble.mapTo(self, QPoint(self.bubble.width() + SPACE_S, 0))
        return self.mapToGlobal(corner)

    def enterEvent(self, event) -> None:
        super().enterEvent(event)
        self.actions.set_hovered(True)

    def leaveEvent(self, event) -> None:
        super().leaveEvent(event)
        self.actions.set_hovered(False)

    # -- content ---------------------------------------------------------------------------------

    @property
    def row(self) -> MessageRow:
        """The row shown, with the text appended to it so far (rendered or not yet)."""
        if self._tail or self._tail_stats is not None or self._reasoning_tail:
            message = self._shown_row.message
            stats = self._tail_stats if self._tail_stats is not None else message.stats
            self._shown_row = replace(self._shown_row, message=replace(
                message, content=message.content + "".join(self._tail), stats=stats,
                reasoning=message.reasoning + "".join(self._reasoning_tail)))
            self._tail.clear()
            self._tail_stats = None
            self._reasoning_tail.clear()
        return self._shown_row

    def set_row(self, row: MessageRow) -> None:
        if row.message.id != self._shown_row.message.id:
            self.thinking.reset()
        self._shown_row = row
        self._tail.clear()
        self._tail_stats = None
        self._reasoning_tail.clear()
        message = row.message
        is_user = message.role == "user"
        document = row.document
        self.who.setText(_document_chip(document) if document else "You" if is_user else
                         tool_label(message.stats) if message.role == "tool" else _answer_label(message))
        self._lay_out_as("document" if document else "question" if is_user else "answer")
        self.new_chat.setVisible(document is not None)
        self.state.setText(status_text(message))
        self.state.setVisible(message.status in STATUS_TEXT)
        self.outcome.setText(outcome_text(message))
        self.outcome.setVisible(bool(self.outcome.text()))
        self.context_notice.setText(context_notice_text(row))
        self.context_notice.setVisible(bool(self.context_notice.text()))
        self.version.setText(f"{row.version}/{row.versions}")
        for widget in (self.previous, self.version, self.next):
            widget.setVisible(row.versions > 1)
        self.previous.setEnabled(row.version > 1)
        self.next.setEnabled(row.version < row.versions)
        self.edit.setVisible(is_user and document is None)
        self.regenerate.setVisible(message.role == "assistant" and message.status != "generating")
        self._describe(message)
        if message.status == "generating":
            if not self._render_timer.isActive():
                self._render_timer.start()
        else:
            self._render_timer.stop()
            self._render_text()

    def append_text(self, text: str, stats: dict | None = None) -> None:
        """Add streamed text (and the answer's live ``stats``) to the message; shown at the next render."""
        self._tail.append(text)
        if stats is not None:
            self._tail_stats = stats
        if not self._render_timer.isActive():
            self._render_timer.start()

    def append_reasoning(self, text: str) -> None:
        """Add streamed reasoning to the message; shown at the next render."""
        self._reasoning_tail.append(text)
        if not self._render_timer.isActive():
            self._render_timer.start()

    def _describe(self, message) -> None:
        """The hover statistics and the name a screen reader says."""
        self.setToolTip("" if message.role == "user" else answer_tooltip(message))
        self.body.setAccessibleName(f"{self.who.text()}: {message.content[:200]}")

    @property
    def kind(self) -> str:
        """"question", "answer" or "document": how the message is laid out."""
        return self.bubble.kind

    def _lay_out_as(self, kind: str) -> None:
        """A question or a document on the right, as wide as its text; an answer across the row."""
        self.bubble.set_kind(kind)
        answer = kind == "answer"
        self._row.setStretch(0, 0 if answer else 1)
        self._row.setStretch(1, 1 if answer else 0)
        self.actions.align_right(not answer)  # a question's actions sit under its right edge
        self.who.setVisible(kind != "question")  # the side and the tint say who asked
        self.body.shrink_to_text = not answer
        margins = (0, 2, 0, 2) if answer else (SPACE_L, SPACE_S + 2, SPACE_L, SPACE_S + 2)
        self.bubble.layout().setContentsMargins(*margins)
        self._fit_width()

    def _fit_width(self) -> None:
        """A question's (or document's) bubble stays narrower than the row; an answer's takes all of it."""
        capped = self.kind != "answer" and self.width() > 0
        self.bubble.setMaximumWidth(int(self.width() * QUESTION_WIDTH) if capped else NO_LIMIT)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_width()

    def set_highlight_drafts(self, on: bool) -> None:
        self.highlight_drafts = on
        self._render_text()

    def _render_text(self) -> None:
        started = time.perf_counter()
        streamed = bool(self._tail) or self._tail_stats is not None or bool(self._reasoning_tail)
        message = self.row.message
        if streamed:
            self._describe(message)
        text, hidden = self._visible_text()
        spans = message.stats.get("draft_spans") if self.highlight_drafts else None
        if text:
            self.body.setText(markdown_to_html(text, self.palette(), spans))
        else:
            self.body.setText("<i>…</i>" if message.status == "generating" else "")
        self._show_thinking(message, bool(text))
        self.show_all.setText(f"Show all ({hidden:,} more characters)")
        self.show_all.setVisible(hidden > 0)
        if message.status == "generating":
            self._render_started = started
            self._settled.start()

    def _show_thinking(self, message, answered: bool) -> None:
        """The reasoning above the text: open while the model thinks, closed once the answer has begun
        (the body's "…" gives way to it meanwhile)."""
        thinking = message.status == "generating" and not answered
        seconds = message.stats.get("thinking_s") if isinstance(message.stats, dict) else None
        self.thinking.show_reasoning(message.reasoning if message.role == "assistant" else "", thinking=thinking,
                                     seconds=seconds)
        self.body.setVisible(answered or not (thinking and self.thinking.reasoning))

    def _pace_renders(self) -> None:
        """Space a streaming answer's renders by what the last one cost, with the layout and paint it
        queued (handled before this zero timer fires)."""
        cost_ms = (time.perf_counter() - self._render_started) * 1000
        self._render_timer.setInterval(max(RENDER_INTERVAL_MS, int(RENDER_BUDGET * cost_ms)))

    def _visible_text(self) -> tuple[str, int]:
        """The text to show and how many characters are left out (a long message starts collapsed)."""
        message = self.row.message
        content = shown_text(message.role, message.content, message.tool_part)
        document = self.row.document
        if document is not None:  # its title is on the card's title line: once is enough
            content = content.removeprefix(document_message(document.title, ""))
        limit = DOCUMENT_PREVIEW_CHARS if document else COLLAPSE_CHARS
        if self.expanded or self.row.message.status == "generating" or len(content) <= limit:
            return content, 0
        cut = content.rfind("\n", limit // 2, limit)
        cut = cut if cut > 0 else limit
        return content[:cut] + " …", len(content) - cut

    def _expand(self) -> None:
        self.expanded = True
        self._render_text()

    def changeEvent(self, event: QEvent) -> None:
        """Follow a light/dark switch (code backgrounds and highlights come from the palette) and a text
        size change (the rendered text carries its font size)."""
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.FontChange) and hasattr(self, "body"):
            self._render_text()

    def rendered_text(self) -> str:
        """The text the label shows, without markup (what a reader sees)."""
        doc = QTextDocument()
        doc.setHtml(self.body.text())
        return doc.toPlainText()

    def copy_text(self) -> None:
        QGuiApplication.clipboard().setText(self.row.message.content)


def answer_tooltip(message) -> str:
    """An answer's hover: which engine and model wrote it (once it is stored), then its statistics."""
    stats = message_stats_tooltip(message.stats)
    who = answered_by_line(message.stats) if message.status != "generating" else ""
    return "\n".join(line for line in (who, "" if who and stats == NO_STATISTICS else stats) if line)


def _answer_label(message) -> str:
    """The name of the model that wrote the answer, as recorded with it."""
    model = message.stats.get("model") if isinstance(message.stats, dict) else None
    return model if isinstance(model, str) and model else ANSWER_LABEL


def _document_chip(document) -> str:
    """"Document: report.pdf · 12 pages · 8,214 tokens" (and which part, when only a part was read)."""
    details = [f"{document.pages} pages"] if document.pages else []
    details.append(f"{document.tokens:,} tokens")
    if document.part != "all":
        details.append(f"{document.part} part only")
    return f"Document: {document.title} · " + " · ".join(details)


def status_text(message) -> str:
    """The word after an unfinished message's name: a stop the user asked for says "stopped"; an
    answer cut short otherwise says by what (the engine's crash, the app closing), as recorded."""
    text = STATUS_TEXT.get(message.status, "")
    reason = (message.stats or {}).get("interrupted_by") if message.status == "interrupted" else None
    if message.status == "error":
        reason = getattr(message, "error", "")  # kept with the answer, so it is there after a restart too
    return f"{text}: {reason}" if reason else text


def context_notice_text(row: MessageRow) -> str:
    """The notice above an answer whose turn left the oldest messages out (app.services.context_cut,
    counting all it leaves out), or above the summary a continued conversation starts with
    (app.services.context_summary)."""
    if row.message.role == "assistant":
        return cut_notice(row.left_out) if row.left_out else ""
    continues = (row.message.stats or {}).get(CONTINUES_STAT)
    return continued_notice(str(continues.get("title", ""))) if isinstance(continues, dict) else ""


def outcome_text(message) -> str:
    """The line under an answer the context cut off (its status says "done": it was not stopped)."""
    return CUT_OFF.capitalize() + "." if getattr(message, "cut_off", False) else ""
