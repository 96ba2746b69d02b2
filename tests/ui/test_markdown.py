"""Message rendering: Markdown with code in a fixed-width font, model HTML shown as text, drafts marked."""

from PySide6.QtGui import QFont, QTextDocument, QTextFormat

from ui.markdown import drafted_to_html, markdown_to_html


def _document(html: str) -> QTextDocument:
    doc = QTextDocument()
    doc.setHtml(html)
    return doc


def _fixed_pitch_text(doc: QTextDocument) -> str:
    fixed = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            font = fragment.charFormat().font()
            if fragment.charFormat().fontFixedPitch() or QFont(font).fixedPitch() or "monospace" in \
                    fragment.charFormat().fontFamilies():
                fixed.append(fragment.text())
            it += 1
        block = block.next()
    return " ".join(fixed)


def test_code_blocks_and_inline_code_are_monospaced_and_prose_is_not(qapp):
    text = "Use `pip install` like this:\n\n```bash\npip install hearth\n```\n\nThen **run** it."
    doc = _document(markdown_to_html(text, qapp.palette()))
    assert doc.toPlainText().splitlines() == ["Use pip install like this:", "pip install hearth", "Then run it."]
    fixed = _fixed_pitch_text(doc)
    assert "pip install hearth" in fixed and "pip install" in fixed
    assert "Then" not in fixed and "like this" not in fixed


def test_html_in_an_answer_is_shown_as_text_not_interpreted(qapp):
    text = "a<b and <script>alert(1)</script> <i>not italic</i>"
    assert _document(markdown_to_html(text, qapp.palette())).toPlainText() == text


def test_drafted_spans_are_marked_and_the_text_is_kept_exactly(qapp):
    html = drafted_to_html("hello <world> and more", [[6, False], [7, True]], qapp.palette())
    doc = _document(html)
    assert doc.toPlainText() == "hello <world> and more"
    marked = []
    block = doc.begin()
    it = block.begin()
    while not it.atEnd():
        fragment = it.fragment()
        if fragment.charFormat().hasProperty(QTextFormat.Property.BackgroundBrush):
            marked.append(fragment.text())
        it += 1
    assert marked == ["<world>"]
