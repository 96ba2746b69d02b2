"""What every document reader shares: the result, the error, the job (limits, progress, cancel)
and the messages a user sees."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SAMPLE_BYTES = 256 << 10  # what the encoding is decided from
READ_CHUNK_BYTES = 1 << 20  # how much is decoded at a time
DEFAULT_MAX_CHARS = 50_000_000

TEXT, MARKDOWN, HTML, PDF, CODE = "text", "markdown", "html", "pdf", "code"

_CODE_EXTENSIONS = (
    ".py .js .ts .tsx .jsx .c .h .cpp .hpp .cc .rs .go .java .kt .swift .rb .php .cs .sh .bash .zsh"
    " .toml .yaml .yml .json .xml .sql .r .lua .scala .m .mm .pl .ini .cfg"
).split()

KIND_BY_EXTENSION: dict[str, str] = {
    ".txt": TEXT, ".text": TEXT, ".log": TEXT, ".csv": TEXT, ".tsv": TEXT,
    ".md": MARKDOWN, ".markdown": MARKDOWN,
    ".html": HTML, ".htm": HTML, ".xhtml": HTML,
    ".pdf": PDF,
    **{extension: CODE for extension in _CODE_EXTENSIONS},
}


class DocumentError(ValueError):
    """A file that cannot be loaded; the message says what is wrong with it and what to do.

    ``str()`` is the window's wording: the file by its name, and what to do in a file dialog
    ("choose it again"). ``in_command`` is a command's, where the user typed a path: the path as
    given, and what to pass instead. They differ only for a file that is missing or no document
    (:func:`file_problem`); otherwise they are the same sentence."""

    def __init__(self, message: str, *, in_command: str | None = None) -> None:
        super().__init__(message)
        self.in_command = in_command or message


@dataclass(frozen=True)
class ExtractedDocument:
    """The text of a document file, ready for the model to read."""

    title: str  # the file name without its folder, e.g. "report.pdf"
    kind: str  # "text" | "markdown" | "html" | "pdf" | "code"
    text: str  # the text the model will read
    pages: int | None  # the page count of a PDF, else None
    encoding: str | None  # the detected encoding of a text-like file (a Python codec name), else None
    source_bytes: int  # the file's size


# --- the job: what every reader needs to know and report ---------------------------------------


@dataclass(frozen=True)
class Job:
    name: str
    size: int
    max_chars: int
    cancelled: Callable[[], bool]
    on_progress: Callable[[int, int], None] | None

    def stop_if_cancelled(self) -> None:
        if self.cancelled():
            raise DocumentError(f"Reading {self.name} was cancelled.")

    def report(self, done: int, total: int) -> None:
        if self.on_progress is not None:
            self.on_progress(done, max(done, total))

    def check_length(self, chars: int) -> None:
        if chars > self.max_chars:
            raise DocumentError(
                f"{self.name} is too large: it has more than {self.max_chars:,} characters of text (the file "
                f"is {human_size(self.size)}) and Hearth stops there to keep its memory bounded, so split it "
                "into smaller files and load them one at a time."
            )



# --- messages ----------------------------------------------------------------------------------


def empty_error(name: str) -> DocumentError:
    return DocumentError(f"{name} is empty; there is nothing to read.")


def file_problem(path: Path, problem: str, *, window: str, command: str) -> DocumentError:
    """``problem`` said of the file, with what to do: in the window, of the file by name and in a
    file dialog's words (``window``); in a command, of the path as typed (``command``)."""
    return DocumentError(f"{path.name or path} {problem}; {window}.", in_command=f"{path} {problem}; {command}.")


def missing_error(path: Path) -> DocumentError:
    return file_problem(path, "was not found",
                        window="check that it still exists (it may have been moved or deleted) and choose it again",
                        command="check the path (the file may have been moved or deleted), or pass another file")


def folder_error(path: Path) -> DocumentError:
    return file_problem(path, "is a folder, not a file", window="open the folder and choose a document inside it",
                        command="pass the path of a document inside it")


def not_a_file_error(path: Path) -> DocumentError:
    return file_problem(path, "is not an ordinary file (it may be a device or a pipe)",
                        window="choose a document file instead", command="pass the path of a document file instead")


def unreadable_error(path: Path, error: OSError) -> DocumentError:
    if isinstance(error, FileNotFoundError):
        return missing_error(path)
    if isinstance(error, IsADirectoryError):
        return folder_error(path)
    name = path.name or str(path)
    if isinstance(error, PermissionError):
        advice = "check the file's permissions (or copy it to a folder you own) and load it again."
        return DocumentError(f"Hearth is not allowed to read {name}; {advice}",
                             in_command=f"Hearth is not allowed to read {path}; {advice}")
    reason = error.strerror or str(error)
    advice = f"could not be read ({reason}); check that its drive is still connected and try again."
    return DocumentError(f"{name} {advice}", in_command=f"{path} {advice}")


def damaged_error(name: str, error: Exception, *, page: int | None = None) -> DocumentError:
    where = f"page {page} could not be read" if page is not None else "it could not be read as a PDF"
    detail = str(error) or type(error).__name__
    return DocumentError(f"{name} is damaged ({where}: {detail}); open it in a PDF viewer and save or print "
                         "a new copy, then load that.")


def human_size(size: int) -> str:
    if size < 1000:
        return f"{size:,} bytes"
    value = size / 1000
    for unit in ("KB", "MB", "GB"):
        if value < 1000:
            return f"{value:,.1f} {unit}"
        value /= 1000
    return f"{value:,.1f} TB"
