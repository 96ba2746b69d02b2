"""The ``read_file`` tool: a file's text, or a folder's list, among the files and folders the user
picked in Settings → Tools, and nowhere else.

Where a path leads is decided on the real path: every symbolic link in it is followed first
(``Path.resolve``), and the result must be one of the picked files, or a picked folder or something
inside one (the picked places resolved the same way). So ``..`` cannot climb out, and neither can a
link inside a picked folder that points elsewhere. A path outside is refused before anything about it
is looked at, so the tool cannot even tell whether a file exists there. A relative path is looked up
in each picked folder in turn; an empty one lists the picked places.

Files are read by the document reader (app.services.extract: text, Markdown, HTML, PDF, source code),
within the toolbox's time limit. A long text is given a part at a time (``start``), each part short
enough to stay whole in a tool result, ending with where the next part starts.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from app.services.extract import DocumentError, extract_text
from app.services.tools.safe_text import MAX_RESULT_CHARS, one_line
from app.services.tools.tool_problem import ToolProblem, seconds

NAME = "read_file"
DESCRIPTION = ("Read a document (text, Markdown, HTML, PDF or source code) or list a folder, among the files and "
               "folders the user shared with Hearth. An empty path lists what was shared; a relative path is looked "
               "up in the shared folders. A long document comes a part at a time: pass 'start' to read on.")
PARAMETERS = ('{"type": "object", "properties": {'
              '"path": {"type": "string", "description": "The file or folder: absolute, relative to a shared folder, '
              'or empty to list what was shared."}, '
              '"start": {"type": "integer", "minimum": 0, "description": "Where to start reading, in characters '
              '(0: the beginning)."}}, "required": ["path"], "additionalProperties": false}')

MAX_FILE_CHARS = 5_000_000  # a document's text beyond this is refused (about 2,000 pages)
PART_CHARS = MAX_RESULT_CHARS - 1_000  # what one call gives of a long text, leaving room for the header
MAX_LISTED = 300  # entries shown of a folder
_MAX_SCANNED = 20_000  # entries of a folder looked at (sorted, then the first MAX_LISTED shown)


def read_file(arguments: dict, folders: list[str], timeout: float) -> str:
    """The tool: a document's text (or a part of it) with a line saying what it is, or a folder's list.

    Raises:
        ToolProblem: Nothing is shared, the path is outside the shared places or missing, or the
            file cannot be read as a document (in time).
    """
    places = shared_places(folders)
    if not places:
        raise ToolProblem(f"The tool '{NAME}' has no files or folders to read; pick some in Settings → Tools.")
    asked = str(arguments.get("path", "")).strip()
    if not asked:
        return "Shared with Hearth:\n" + "\n".join(f"{p}{os.sep if p.is_dir() else ''}" for p in places)
    target = _located(asked, places)
    if target.is_dir():
        return folder_listing(target, places)
    return _document(target, int(arguments.get("start", 0) or 0), time.monotonic() + timeout, timeout)


def shared_places(folders: list[str]) -> list[Path]:
    """The picked files and folders that exist, as real paths (links followed)."""
    places = []
    for folder in folders:
        try:
            places.append(Path(folder).expanduser().resolve(strict=True))
        except (OSError, RuntimeError, ValueError):
            continue
    return places


def inside(path: Path, places: list[Path]) -> bool:
    """Whether the real path ``path`` is a picked place or inside a picked folder."""
    return any(path == place or (place.is_dir() and path.is_relative_to(place)) for place in places)


def _located(asked: str, places: list[Path]) -> Path:
    """The real path ``asked`` leads to, if it is inside the shared places and exists."""
    given = Path(asked).expanduser()
    if given.is_absolute():
        candidates = [given]
    else:
        candidates = [place / given for place in places if place.is_dir()]
        candidates += [place for place in places if place.is_file() and place.name == asked]
    reals = [real for real in map(_real, candidates) if real is not None]
    for real in reals:
        if inside(real, places) and real.exists():
            return real
    if reals and not any(inside(real, places) for real in reals):
        raise ToolProblem(f"The tool '{NAME}' may only read the files and folders you shared in Settings → Tools, "
                          f"and '{one_line(asked, 120)}' leads outside them, so it was not read.")
    raise ToolProblem(f"The tool '{NAME}' found nothing at '{one_line(asked, 120)}' in the files and folders you "
                      "shared.")


def _real(path: Path) -> Path | None:
    """Where ``path`` really leads (every link followed); None for a loop of links or a NUL in the name."""
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError, ValueError):
        return None


def folder_listing(folder: Path, places: list[Path]) -> str:
    """A folder's entries, folders first, each with its kind or size; a link that leads outside the
    shared places says so and nothing about where it leads."""
    try:
        with os.scandir(folder) as scan:
            entries = list(itertools.islice(scan, _MAX_SCANNED))
    except OSError as error:
        raise ToolProblem(f"The tool '{NAME}' could not list {folder.name} ({error.strerror or error}).") from None
    entries.sort(key=lambda entry: (not _is_folder(entry), entry.name.lower()))
    lines = [_entry_line(entry, places) for entry in entries[:MAX_LISTED]]
    if len(entries) > MAX_LISTED:
        more = f"{len(entries) - MAX_LISTED:,}" + ("+" if len(entries) == _MAX_SCANNED else "")
        lines.append(f"… and {more} more")
    more = "+" if len(entries) == _MAX_SCANNED else ""
    count = f"{len(entries):,}{more} {'entry' if len(entries) == 1 else 'entries'}"
    header = f"Folder {folder} ({count})"
    return header + (":\n" + "\n".join(lines) if lines else ": empty")


def _is_folder(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _entry_line(entry: os.DirEntry, places: list[Path]) -> str:
    if entry.is_symlink() and not inside(_real(Path(entry.path)) or Path(), places):
        return f"{entry.name} (a link to a place outside what was shared; it cannot be read)"
    if _is_folder(entry):
        return f"{entry.name}{os.sep}"
    try:
        return f"{entry.name} ({_size(entry.stat().st_size)})"
    except OSError:
        return f"{entry.name} (unreadable)"


def _size(n_bytes: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n_bytes < 1000 or unit == "GB":
            return f"{n_bytes:,} {unit}" if unit == "bytes" else f"{n_bytes:,.1f} {unit}"
        n_bytes /= 1000  # type: ignore[assignment]
    return ""


def _document(path: Path, start: int, deadline: float, timeout: float) -> str:
    try:
        document = extract_text(path, max_chars=MAX_FILE_CHARS, cancelled=lambda: time.monotonic() > deadline)
    except DocumentError as error:
        if time.monotonic() > deadline:
            raise ToolProblem(f"The tool '{NAME}' did not finish reading {path.name} within {seconds(timeout)}, "
                              "so it stopped.") from None
        raise ToolProblem(f"The tool '{NAME}' could not read a file: {str(error).rstrip('.')}.") from None
    text = document.text
    pages = f", {document.pages} pages" if document.pages else ""
    part = text[start:start + PART_CHARS]
    header = f"File {path} ({document.kind}{pages}, {len(text):,} characters)"
    if start == 0 and len(text) <= PART_CHARS:
        return f"{header}:\n\n{text}"
    end = start + len(part)
    after = (f"\n\n[Characters {start:,}–{end:,} of {len(text):,}; call {NAME} again with start={end} to read on.]"
             if end < len(text) else f"\n\n[Characters {start:,}–{end:,} of {len(text):,}: the end.]")
    return f"{header}, from character {start:,}:\n\n{part}{after}"
