"""The text layer of a PDF, page by page, read lazily from the open file.

pypdf keeps every object it has resolved (``PdfReader.resolved_objects``), stream data included,
for the reader's lifetime; a page's images are resolved while its text is extracted (to tell
images from forms), so reading every page would end up holding most of the file. After each page
the cache is emptied: what the next page shares with it (fonts, the page tree) is read again from
the file, which costs far less than holding every image of a large scan.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PyPdfError

from app.services.extract.common import PDF, DocumentError, ExtractedDocument, Job, damaged_error, empty_error
from app.services.extract.text import normalise_newlines

log = logging.getLogger(__name__)

# What pypdf raises on a malformed file: its own errors, and whatever its parser trips over.
_PDF_DAMAGE_ERRORS = (PyPdfError, ValueError, TypeError, KeyError, IndexError, AttributeError,
                      AssertionError, ArithmeticError, RecursionError, zlib.error)


# --- PDF ---------------------------------------------------------------------------------------


def extract_pdf(file: BinaryIO, job: Job) -> ExtractedDocument:
    with _repairs_noted(job.name):
        return _extract_pdf(file, job)


@contextmanager
def _repairs_noted(name: str) -> Iterator[None]:
    """Keep pypdf's own warnings ("invalid pdf header", "EOF marker not found": problems it worked
    around) out of the terminal and the log, and say once, in words, that the file needed repairs."""
    noted: list[logging.LogRecord] = []
    handler = _Collect(noted)
    pypdf_log = logging.getLogger("pypdf")
    pypdf_log.addHandler(handler)
    propagate, pypdf_log.propagate = pypdf_log.propagate, False
    try:
        yield
    finally:
        pypdf_log.removeHandler(handler)
        pypdf_log.propagate = propagate
    if noted:  # (a file that could not be read at all gets its own error instead)
        log.warning("%s is damaged (%d %s worked around while reading it): parts of its text may be missing",
                    name, len(noted), "problem was" if len(noted) == 1 else "problems were")


class _Collect(logging.Handler):
    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record)


def _extract_pdf(file: BinaryIO, job: Job) -> ExtractedDocument:
    reader = _open_pdf(file, job.name)
    page_count = _page_count(reader, job.name)
    if page_count == 0:
        raise empty_error(job.name)
    job.stop_if_cancelled()
    pages: list[str] = []
    chars = 0
    for index in range(page_count):
        page_text = normalise_newlines(_page_text(reader, index, job.name))
        chars += len(page_text) + (2 if index else 0)  # the "\n\n" between pages
        job.check_length(chars)
        pages.append(page_text)
        _forget_resolved_objects(reader)
        job.report(index + 1, page_count)
        job.stop_if_cancelled()
    text = "\n\n".join(pages)
    if not text.strip():
        raise DocumentError(f"{job.name} has no text layer (it looks scanned or image-only); "
                            "run it through OCR first, then load the result.")
    return ExtractedDocument(title=job.name, kind=PDF, text=text, pages=page_count, encoding=None,
                             source_bytes=job.size)


def _forget_resolved_objects(reader: PdfReader) -> None:
    """Drop the objects pypdf has read so far (see the module doc), so memory stays one page deep."""
    reader.resolved_objects.clear()


def _open_pdf(file: BinaryIO, name: str) -> PdfReader:
    """A reader over the open file, decrypted if it has no user password."""
    try:
        reader = PdfReader(file)
        locked = reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED
    except (FileNotDecryptedError, DependencyError) as error:
        raise _encryption_problem(name, error) from error
    except _PDF_DAMAGE_ERRORS as error:
        raise damaged_error(name, error) from error
    if locked:
        raise _password_protected(name)
    return reader


def _page_count(reader: PdfReader, name: str) -> int:
    try:
        return len(reader.pages)
    except (FileNotDecryptedError, DependencyError) as error:
        raise _encryption_problem(name, error) from error
    except _PDF_DAMAGE_ERRORS as error:
        raise damaged_error(name, error) from error


def _page_text(reader: PdfReader, index: int, name: str) -> str:
    try:
        return reader.pages[index].extract_text()
    except (FileNotDecryptedError, DependencyError) as error:
        raise _encryption_problem(name, error) from error
    except _PDF_DAMAGE_ERRORS as error:
        raise damaged_error(name, error, page=index + 1) from error


def _encryption_problem(name: str, error: FileNotDecryptedError | DependencyError) -> DocumentError:
    """pypdf's DependencyError means an encryption (AES) it needs the optional cryptography package for."""
    return _unsupported_encryption(name) if isinstance(error, DependencyError) else _password_protected(name)


def _password_protected(name: str) -> DocumentError:
    return DocumentError(f"{name} is protected by a password; save a copy without the password (for example "
                         "with your PDF viewer's Print to PDF) and load that.")


def _unsupported_encryption(name: str) -> DocumentError:
    return DocumentError(f"{name} is encrypted in a way Hearth cannot open; save an unencrypted copy "
                         "(for example with your PDF viewer's Print to PDF) and load that.")
