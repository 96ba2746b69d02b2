"""Decoding text-like files chunk by chunk into plain text, or into the visible text of HTML."""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

from app.services.extract.common import (
    HTML, READ_CHUNK_BYTES, SAMPLE_BYTES, DocumentError, ExtractedDocument, Job, empty_error,
)
from app.services.extract.encoding import Encoding, detect_encoding

class _TextSink(Protocol):
    def write(self, text: str) -> None: ...

    def text(self) -> str: ...


def _decode_into(file: BinaryIO, encoding: Encoding, sink: _TextSink, job: Job) -> None:
    """Decode the whole file chunk by chunk into ``sink``, with "\\n" newlines."""
    file.seek(encoding.bom_length)
    decoder = codecs.getincrementaldecoder(encoding.codec)(errors="replace")
    newlines = _NewlineNormaliser()
    while chunk := file.read(READ_CHUNK_BYTES):
        job.stop_if_cancelled()
        sink.write(newlines.feed(decoder.decode(chunk)))
        job.report(file.tell(), job.size)
    sink.write(newlines.feed(decoder.decode(b"", final=True)) + newlines.flush())


class _NewlineNormaliser:
    """Turns "\\r\\n" and lone "\\r" into "\\n", also when a chunk ends between "\\r" and "\\n"."""

    def __init__(self) -> None:
        self._held_back = ""

    def feed(self, text: str) -> str:
        text = self._held_back + text
        self._held_back = "\r" if text.endswith("\r") else ""
        return normalise_newlines(text[: len(text) - len(self._held_back)])

    def flush(self) -> str:
        text, self._held_back = normalise_newlines(self._held_back), ""
        return text


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


@dataclass
class _PlainTextSink:
    """Keeps the text as it is, refusing it once it passes the job's limit."""

    job: Job
    _pieces: list[str] = field(default_factory=list)
    _chars: int = 0

    def write(self, text: str) -> None:
        self._chars += len(text)
        self.job.check_length(self._chars)
        self._pieces.append(text)

    def text(self) -> str:
        return "".join(self._pieces)


class _VisibleHtmlSink:
    """Keeps only the text a browser would show, refusing it once it passes the job's limit."""

    def __init__(self, job: Job) -> None:
        self._job = job
        self._parser = _VisibleTextParser()

    def write(self, text: str) -> None:
        self._parser.feed(text)
        self._job.check_length(self._parser.chars)

    def text(self) -> str:
        self._parser.close()
        return self._parser.visible_text()



# --- HTML ---------------------------------------------------------------------------------------

_HIDDEN_ELEMENTS = frozenset({"script", "style", "noscript", "template", "svg"})
_VOID_ELEMENTS = frozenset({  # never have content or an end tag, so they cannot hide anything
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr",
})
_ENDED_BY_A_SIBLING = frozenset({"p", "li", "dt", "dd", "tr", "td", "th", "option"})  # <li>a<li>b: two items
_DISPLAY_NONE = re.compile(r"(?:^|;)\s*display\s*:\s*none\s*(?:!important\s*)?(?:;|$)", re.IGNORECASE)
_BLOCK_ELEMENTS = frozenset({
    "p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "section", "article", "pre", "blockquote",
    "table", "ul", "ol", "dl", "dt", "dd", "header", "footer", "nav", "main", "aside", "figure", "figcaption",
    "hr", "address", "details", "summary", "caption", "form", "fieldset", "body",
})
_CELL_ELEMENTS = frozenset({"td", "th"})
_WHITESPACE_RUN = re.compile(r"\s+")


def _hides(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    """Whether a browser would show nothing of this element: scripts, styles, templates, SVG
    drawings, ``hidden`` elements and ``style="display: none"``."""
    if tag in _VOID_ELEMENTS:
        return False
    if tag in _HIDDEN_ELEMENTS:
        return True
    return any(name == "hidden" or (name == "style" and value and _DISPLAY_NONE.search(value))
               for name, value in attrs)


class _HiddenRegion:
    """The element hiding the text now, if any, and the elements opened inside it.

    HTML leaves many end tags out, so the region also ends when an element that encloses it ends
    (``<ul><li hidden>a</ul>``), or when a sibling ends it (``<p hidden>a<p>b``).
    """

    def __init__(self) -> None:
        self._open: list[str] = []  # the hiding element first, then what was opened inside it

    @property
    def active(self) -> bool:
        return bool(self._open)

    def start(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._open and tag in _ENDED_BY_A_SIBLING and self._open[-1] == tag:
            self._open.pop()
        if self._open and tag not in _VOID_ELEMENTS:
            self._open.append(tag)
        elif not self._open and _hides(tag, attrs):
            self._open.append(tag)

    def end(self, tag: str) -> bool:
        """Close ``tag``; False when it is an element around the region (which then ends too)."""
        if tag in self._open:
            del self._open[len(self._open) - 1 - self._open[::-1].index(tag):]
            return True
        if tag in _VOID_ELEMENTS:  # "</br>", "<img></img>": nothing to close
            return True
        self._open.clear()
        return False


class _LineBuilder:
    """Visible text built line by line: runs of whitespace collapse to one space, except in <pre>."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.chars = 0
        self._at_line_start = True
        self._space_pending = False

    def add_flowing(self, text: str) -> None:
        collapsed = _WHITESPACE_RUN.sub(" ", text)
        words = collapsed.strip(" ")
        if not words:
            self._space_pending = self._space_pending or bool(collapsed)
            return
        if (self._space_pending or collapsed.startswith(" ")) and not self._at_line_start:
            self._append(" ")
        self._append(words)
        self._at_line_start = False
        self._space_pending = collapsed.endswith(" ")

    def add_preformatted(self, text: str) -> None:
        if text:
            self._append(text)
            self._at_line_start = text.endswith("\n")
            self._space_pending = False

    def end_line(self) -> None:
        """Start a new line unless already at the start of one."""
        if not self._at_line_start:
            self.line_break()

    def line_break(self) -> None:
        self._append("\n")
        self._at_line_start = True
        self._space_pending = False

    def cell_gap(self) -> None:
        if not self._at_line_start:
            self._append("\t")
            self._space_pending = False

    def _append(self, text: str) -> None:
        self.pieces.append(text)
        self.chars += len(text)


class _VisibleTextParser(HTMLParser):
    """Collects the <title> and the visible body text; hidden elements (see :func:`_hides`) are dropped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._title: list[str] = []
        self._body = _LineBuilder()
        self._hidden = _HiddenRegion()
        self._pre_depth = 0
        self._in_title = False

    @property
    def chars(self) -> int:
        return self._body.chars + sum(map(len, self._title))

    def visible_text(self) -> str:
        title = _WHITESPACE_RUN.sub(" ", "".join(self._title)).strip()
        body = "".join(self._body.pieces).strip()
        return f"{title}\n{body}" if title and body else title or body

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._hidden.start(tag, attrs)
        if self._hidden.active:
            return
        if tag == "title":
            self._in_title = True
        elif tag == "br":
            self._body.line_break()
        elif tag in _CELL_ELEMENTS:
            self._body.cell_gap()
        elif tag in _BLOCK_ELEMENTS:
            self._body.end_line()
            if tag == "pre":
                self._pre_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if self._hidden.active and self._hidden.end(tag):
            return
        if tag == "title":
            self._in_title = False
        elif tag in _BLOCK_ELEMENTS:
            self._body.end_line()
            if tag == "pre":
                self._pre_depth = max(0, self._pre_depth - 1)

    def handle_data(self, data: str) -> None:
        if self._hidden.active:
            return
        if self._in_title:
            self._title.append(data)
        elif self._pre_depth:
            self._body.add_preformatted(data)
        else:
            self._body.add_flowing(data)




def extract_text_like(file: BinaryIO, kind: str, job: Job) -> ExtractedDocument:
    sample = file.read(SAMPLE_BYTES)
    encoding = detect_encoding(sample, truncated=job.size > len(sample))
    if encoding is None:
        raise DocumentError(f"{job.name} looks like a binary file, not text; Hearth reads plain text, "
                            "Markdown, HTML, PDF and source code.")
    sink: _TextSink = _VisibleHtmlSink(job) if kind == HTML else _PlainTextSink(job)
    _decode_into(file, encoding, sink, job)
    text = sink.text()
    if not text.strip():
        raise empty_error(job.name)
    return ExtractedDocument(title=job.name, kind=kind, text=text, pages=None, encoding=encoding.name,
                             source_bytes=job.size)
