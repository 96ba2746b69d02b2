"""Turn a document file (plain text, Markdown, HTML, PDF, source code) into the text a model reads.

:func:`extract_text` is the one entry point. It decides what kind of document a file is, reads it
with bounded memory, and either returns an :class:`ExtractedDocument` or raises
:class:`DocumentError`, whose message is meant for the user as is: it says what is wrong with the
file and what to do about it, in one sentence.

Kind. The file name's extension decides (:data:`KIND_BY_EXTENSION`). A file with no extension or an
unknown one is sniffed: a PDF header makes it a PDF, anything that decodes as text is plain text,
and anything else is refused as binary.

Text-like files (text, Markdown, code, HTML). The encoding is decided from a sample of the first
:data:`SAMPLE_BYTES`: a byte-order mark wins; otherwise NUL bytes mean binary, unless they fall in
every other byte as in UTF-16 without a byte-order mark and the sample reads as text; otherwise strict
UTF-8; otherwise the encoding the file declares (an HTML ``<meta charset>``, an XML declaration, a
Python coding cookie) if the sample decodes in it; otherwise charset-normalizer's guess, corrected
by two priors. Alone, charset-normalizer often calls Western European text Central European or
Baltic (``cp1250``, ``cp1257``, ``mac_latin2``; its issues #371 and #477): those code pages share
most accented letters with Windows-1252 and only a prior can tell them apart, so Windows-1252 -- by
far the most common legacy encoding -- wins whenever it reads the sample with little chaos and fits
a language nearly as well. And it sometimes picks a Mac or DOS code page (``mac_cyrillic`` for
Russian Windows-1251 text) where a Windows one reads the sample as well; the Windows one wins.

The whole file is then decoded incrementally, :data:`READ_CHUNK_BYTES` at a time, so the bytes are
never all in memory, only the text; bytes that do not decode (a stray byte in a long log, say)
become U+FFFD rather than failing the whole file, since the encoding was decided on a sample.
Newlines become ``"\\n"``. HTML is fed chunk by chunk to a :class:`html.parser.HTMLParser` that
keeps only the visible text (the ``<title>`` first), one block element per line.

PDF. pypdf reads the file lazily from an open file object (given a path it would read the whole
file into memory first); text is extracted page by page, pages joined by a blank line, with
progress and cancellation between pages. Password-protected, damaged and image-only (scanned) PDFs
are refused with a message saying so.

Limits. More than ``max_chars`` characters of text is refused as soon as it is reached, so a huge
file costs at most ``max_chars`` characters of memory.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from app.services.extract.common import (
    DEFAULT_MAX_CHARS, KIND_BY_EXTENSION, PDF, READ_CHUNK_BYTES, SAMPLE_BYTES, TEXT, DocumentError, ExtractedDocument, Job,
    empty_error, folder_error, not_a_file_error, unreadable_error,
)
from app.services.extract.pdf import extract_pdf
from app.services.extract.text import extract_text_like

__all__ = ["DocumentError", "ExtractedDocument", "extract_text", "KIND_BY_EXTENSION", "SAMPLE_BYTES", "READ_CHUNK_BYTES"]

def extract_text(path: Path, *, max_chars: int = DEFAULT_MAX_CHARS, cancelled: Callable[[], bool] = lambda: False,
                 on_progress: Callable[[int, int], None] | None = None) -> ExtractedDocument:
    """Read the text of a document file.

    Args:
        path: The file.
        max_chars: The most characters of text accepted; more raises :class:`DocumentError`.
        cancelled: Polled between chunks (text) or pages (PDF); once it returns True, reading
            stops with :class:`DocumentError`.
        on_progress: Called with ``(done, total)`` after each chunk (bytes) or page (pages).

    Returns:
        The document's text and what is known about it.

    Raises:
        DocumentError: If the file is missing, unreadable, empty, binary, damaged, password
            protected, image-only, too large, or reading it was cancelled.
    """
    path = Path(path)
    job = Job(path.name or str(path), _file_size(path), max_chars, cancelled, on_progress)
    if job.size == 0:
        raise empty_error(job.name)
    try:
        with path.open("rb") as file:
            kind = KIND_BY_EXTENSION.get(path.suffix.lower()) or _sniff_kind(file)
            if kind == PDF:
                return extract_pdf(file, job)
            return extract_text_like(file, kind, job)
    except OSError as error:
        raise unreadable_error(path, error) from error



def _file_size(path: Path) -> int:
    """The size of a regular file; anything else (missing, a folder, unreadable) is a DocumentError."""
    try:
        status = path.stat()
    except OSError as error:
        raise unreadable_error(path, error) from error
    if stat.S_ISDIR(status.st_mode):
        raise folder_error(path)
    if not stat.S_ISREG(status.st_mode):
        raise not_a_file_error(path)
    return status.st_size


def _sniff_kind(file: BinaryIO) -> str:
    """The kind of a file whose extension says nothing: a PDF by its header, else text."""
    header = file.read(8)
    file.seek(0)
    return PDF if header.startswith(b"%PDF-") else TEXT


