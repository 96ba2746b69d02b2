"""Message rendering: Markdown with code in a fixed-width font, model HTML shown as text, drafts marked in it."""

from PySide6.QtGui import QFont, QTextDocument, QTextFormat

from ui.markdown import markdown_to_html


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


def _marked_runs(doc: QTextDocument) -> list[str]:
    """The runs of text on a background of their own (the drafted highlight), block by block."""
    runs = []
    block = doc.begin()
    while block.isValid():
        it, run = block.begin(), ""
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().hasProperty(QTextFormat.Property.BackgroundBrush):
                run += fragment.text()
            elif run:
                runs.append(run)
                run = ""
            it += 1
        runs += [run] if run else []
        block = block.next()
    return runs


def _spans(text: str, *drafted: str) -> list[list]:
    """[characters, drafted] spans covering ``text``, with the given pieces drafted."""
    mask = [False] * len(text)
    for piece in drafted:
        start = text.index(piece)
        mask[start:start + len(piece)] = [True] * len(piece)
    spans: list[list] = []
    for flag in mask:
        if spans and spans[-1][1] == flag:
            spans[-1][0] += 1
        else:
            spans.append([1, flag])
    return spans


def test_drafted_spans_are_marked_and_the_text_is_kept_exactly(qapp):
    text = "hello <world> and more"
    doc = _document(markdown_to_html(text, qapp.palette(), _spans(text, "<world>")))
    assert doc.toPlainText() == text
    assert _marked_runs(doc) == ["<world>"]


def test_drafted_spans_are_marked_in_rendered_markdown(qapp):
    text = "# Steps\n\nSay **hello** to `pip` now.\n\n- first item\n- second item\n\n```\nprint(1)\n```\n\nDone here."
    plain = _document(markdown_to_html(text, qapp.palette())).toPlainText()
    doc = _document(markdown_to_html(text, qapp.palette(), _spans(text, "**hello** to", "second", "print(1)",
                                                                     "here")))
    assert doc.toPlainText() == plain, "highlighting changes no text"
    assert _marked_runs(doc) == ["hello to", "second", "print(1)", "here"]
    assert "print(1)" in _fixed_pitch_text(doc) and "Say" not in _fixed_pitch_text(doc), "still Markdown"
    heading = doc.begin()
    assert heading.text() == "Steps" and heading.blockFormat().headingLevel() == 1


def test_a_fence_language_tag_or_a_link_address_lends_no_character_to_the_text_after_it(qapp):
    text = "Run:\n\n```python\nprint(1)\n```\n\nSee [the docs](https://example.org/t) then stop."
    doc = _document(markdown_to_html(text, qapp.palette(), _spans(text, "```python\n", "(https://example.org/t)")))
    assert _marked_runs(doc) == [], "the tag's 'p' and the address's 't' are not the shown 'p' and 't'"
    doc = _document(markdown_to_html(text, qapp.palette(), _spans(text, "print(1)", "then")))
    assert _marked_runs(doc) == ["print(1)", "then"]


def test_spans_without_drafted_text_mark_nothing(qapp):
    text = "Say **hello** now."
    assert _marked_runs(_document(markdown_to_html(text, qapp.palette(), [[len(text), False]]))) == []


HAIKU = "An old silent pond\nA frog jumps into the pond\nsplash! Silence again."


def _blocks(doc: QTextDocument) -> list[str]:
    block, texts = doc.begin(), []
    while block.isValid():
        texts.append(block.text())
        block = block.next()
    return texts


def test_single_line_breaks_in_a_paragraph_are_kept_as_breaks_in_one_paragraph(qapp):
    doc = _document(markdown_to_html(HAIKU, qapp.palette()))
    assert doc.toPlainText().splitlines() == HAIKU.splitlines(), "each line of the haiku on its own line"
    assert doc.blockCount() == 1, "still one paragraph: the lines are not spaced apart like paragraphs"
    assert " A frog" not in doc.toRawText() and "pond A" not in doc.toPlainText()


def test_code_blocks_lists_quotes_tables_and_headings_stay_as_they_are(qapp):
    text = ("# Plan\nFirst line\nsecond line\n\n- one\n- two\n  continued\n1. alpha\n2. beta\n\n"
            "```\nkeep  \nas is\n```\n\n    indented\n    code\n\n> quoted\n> lines\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    doc = _document(markdown_to_html(text, qapp.palette()))
    blocks = _blocks(doc)
    assert blocks[:2] == ["Plan", "First line\u2028second line"]
    lists = [b for b in blocks if b.startswith(("one", "two", "alpha", "beta"))]
    assert lists == ["one", "two\u2028continued", "alpha", "beta"], "as many list items as written"
    assert "keep  " in blocks and "as is" in blocks and "indented" in blocks and "code" in blocks
    assert not any("\u2028" in b for b in blocks if b.startswith(("keep", "as is", "indented"))), "code untouched"
    assert "quoted\u2028lines" in blocks
    assert doc.toPlainText().count("\n") >= 10 and "1" in blocks and "b" in blocks, "the table is still a table"
    joined = (text.replace("\nsecond", " second").replace("\n  continued", " continued")
              .replace("quoted\n> lines", "quoted lines"))
    assert doc.blockCount() == _document(markdown_to_html(joined, qapp.palette())).blockCount(), \
        "no block is added or lost"


def test_kept_line_breaks_do_not_shift_the_drafted_highlight(qapp):
    doc = _document(markdown_to_html(HAIKU, qapp.palette(), _spans(HAIKU, "frog jumps", "Silence")))
    assert _marked_runs(doc) == ["frog jumps", "Silence"]
