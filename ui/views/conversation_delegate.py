"""How a row of the conversation list is drawn: its title on a rounded patch when selected or under
the mouse (quiet fills from the palette, not the accent), and above the first row of each date group
its heading (Today, Yesterday, Previous 7 days…, :data:`~ui.item_models.conversation_list.GROUP_ROLE`)
in small secondary text. The heading belongs to the row's height, so rows stay conversations."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from ui.item_models.conversation_list import GROUP_ROLE, STARTS_GROUP_ROLE
from ui.theme import RADIUS_S, SPACE_M, SPACE_S, SPACE_XS, TYPE_SCALE

Index = QModelIndex | QPersistentModelIndex
ROW_PADDING = 7  # above and below a title
GROUP_GAP = 14  # between the last row of a group and the next heading


class ConversationDelegate(QStyledItemDelegate):
    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        height = option.fontMetrics.height() + 2 * ROW_PADDING
        if index.data(STARTS_GROUP_ROLE):
            height += self.heading_height(option.font, first=index.row() == 0)
        return QSize(option.rect.width() or 200, height)

    def heading_height(self, font: QFont, *, first: bool) -> int:
        return QFontMetrics(heading_font(font)).height() + SPACE_S + (SPACE_XS if first else GROUP_GAP)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        item = self.title_rect(option, index)
        if index.data(STARTS_GROUP_ROLE):
            self._paint_heading(painter, option, index, item)
        self._paint_title(painter, option, index, item)
        painter.restore()

    def title_rect(self, option: QStyleOptionViewItem, index: Index) -> QRect:
        """The part of the row under its heading: the title and its selection patch."""
        rect = QRect(option.rect)
        if index.data(STARTS_GROUP_ROLE):
            rect.setTop(rect.top() + self.heading_height(option.font, first=index.row() == 0))
        return rect.adjusted(SPACE_XS, 0, -SPACE_XS, 0)

    def _paint_heading(self, painter: QPainter, option: QStyleOptionViewItem, index: Index, item: QRect) -> None:
        font = heading_font(option.font)
        painter.setFont(font)
        painter.setPen(option.palette.color(QPalette.ColorRole.PlaceholderText))
        area = QRect(option.rect.left() + SPACE_M, option.rect.top(), option.rect.width() - 2 * SPACE_M,
                     item.top() - option.rect.top() - SPACE_XS)
        painter.drawText(area, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom, str(index.data(GROUP_ROLE)))

    def _paint_title(self, painter: QPainter, option: QStyleOptionViewItem, index: Index, item: QRect) -> None:
        palette = option.palette
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        hovered = bool(option.state & QStyle.StateFlag.State_MouseOver)
        if selected or hovered:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(palette.color(QPalette.ColorRole.Midlight if selected else QPalette.ColorRole.AlternateBase))
            painter.drawRoundedRect(item, RADIUS_S, RADIUS_S)
        if option.state & QStyle.StateFlag.State_HasFocus and option.widget is not None and option.widget.hasFocus():
            painter.setPen(palette.color(QPalette.ColorRole.Highlight))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(item.adjusted(0, 0, -1, -1), RADIUS_S, RADIUS_S)
        painter.setFont(option.font)
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        text_rect = item.adjusted(SPACE_S, 0, -SPACE_S, 0)
        title = option.fontMetrics.elidedText(str(index.data(Qt.ItemDataRole.DisplayRole) or ""),
                                              Qt.TextElideMode.ElideRight, text_rect.width())
        painter.drawText(text_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, title)

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index: Index) -> None:
        """Rename in place over the title, not over the heading."""
        editor.setGeometry(self.title_rect(option, index))


def heading_font(font: QFont) -> QFont:
    heading = QFont(font)
    if font.pointSizeF() > 0:
        heading.setPointSizeF(font.pointSizeF() * TYPE_SCALE["caption"])
    heading.setWeight(QFont.Weight.DemiBold)
    return heading
