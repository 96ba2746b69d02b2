"""Write ``THIRD_PARTY_LICENSES`` for the bundle: every distribution Hearth needs, with its licence.

    python installers/third_party_licenses.py --out PATH [--exclude DIST ...]

The list is the closure of the ``hearth`` distribution's requirements (no extras; environment
markers evaluated for the machine running the script, which is the machine building the bundle),
read from the installed metadata. A distribution named with ``--exclude`` is left out together with
everything only it needs (the Linux bundle leaves out onnxruntime, onnxruntime-qnn and onnx).

For each distribution the file gives its name, version, declared licence, home page and the full
text of every licence file its ``.dist-info`` ships. Some parts ship no text of their own, so
Hearth supplies it (``installers/licenses/``), saying so where it does:

* Python itself (the PSF licence, from the interpreter's ``LICENSE.txt`` when it is there);
* llama.cpp and ggml, compiled into llama-cpp-python's libraries, whose wheel carries only
  llama-cpp-python's own MIT licence;
* Qt, through PySide6, used under the LGPL-3.0: the PySide6 wheels ship no licence file, and the
  LGPL-3.0 comes with the GPL-3.0 it adds its permissions to.

A distribution with no text anywhere is still listed, with a line saying where its licence is.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import Distribution
from pathlib import Path, PurePosixPath

from packaging.requirements import Requirement

ROOT = "hearth"
SUPPLIED = Path(__file__).resolve().parent / "licenses"
LICENCE_FILE_PREFIXES = ("LICENSE", "LICENCE", "COPYING", "NOTICE")
QT_LICENCE_FILES = ("LGPL-3.0.txt", "GPL-3.0.txt")
QT_DISTRIBUTIONS = {"pyside6", "pyside6-essentials", "pyside6-addons", "shiboken6"}
QT_NOTE = ("The PySide6 wheels ship no licence file. Hearth uses Qt for Python under the LGPL-3.0; "
           "its text, and that of the GPL-3.0 it adds its permissions to, follow.")
LLAMA_CPP_DISTRIBUTION = "llama-cpp-python"
PYTHON_LICENCE_URL = "https://docs.python.org/3/license.html"
NOT_SHIPPED = "licence text not shipped by the distribution; see {where}"
RULE = "-" * 78


@dataclass
class Entry:
    """One part of the bundle, as the file lists it."""

    name: str
    version: str
    licence: str
    home_page: str
    texts: list[tuple[str, str]] = field(default_factory=list)  # (where the text comes from, text)
    note: str = ""


class MissingDistribution(Exception):
    pass


def normalise(name: str) -> str:
    """A distribution name as package indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def needed_requirements(dist: Distribution, extras: Iterable[str]) -> list[Requirement]:
    """The requirements that apply here, for the distribution alone ("") or with these extras."""
    needed = []
    for line in dist.requires or []:
        requirement = Requirement(line)
        if requirement.marker is None or any(requirement.marker.evaluate({"extra": e}) for e in extras):
            needed.append(requirement)
    return needed


def requirement_closure(root: str, exclude: Iterable[str] = ()) -> list[Distribution]:
    """Every installed distribution ``root`` needs, directly or not, except ``exclude`` and what only
    they need; ``root`` itself is not in the list. Sorted by name."""
    excluded = {normalise(name) for name in exclude}
    found: dict[str, Distribution] = {}
    extras_done: dict[str, set[str]] = {}
    pending: list[tuple[str, frozenset[str], str]] = [(root, frozenset({""}), "")]
    while pending:
        name, extras, needed_by = pending.pop()
        key = normalise(name)
        new_extras = set(extras) - extras_done.setdefault(key, set())
        if key in excluded or not new_extras:
            continue
        extras_done[key] |= new_extras
        if key not in found:
            try:
                found[key] = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                by = f" (needed by {needed_by})" if needed_by else ""
                raise MissingDistribution(f"{name}{by} is not installed") from None
        for requirement in needed_requirements(found[key], new_extras):
            pending.append((requirement.name, frozenset({"", *requirement.extras}), found[key].name))
    found.pop(normalise(root))
    return sorted(found.values(), key=lambda dist: normalise(dist.name))


def licence_summary(dist: Distribution) -> str:
    """The licence as the metadata declares it: expression, ``License`` field and classifiers."""
    meta = dist.metadata
    declared = [meta.get("License-Expression") or ""]
    first_line, *more = (meta.get("License") or "").strip().splitlines() or [""]
    declared.append(first_line + (" …" if more else ""))
    declared += [c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    unique = list(dict.fromkeys(text for text in declared if text))
    return "; ".join(unique) or "not stated in the metadata"


def home_page(dist: Distribution) -> str:
    meta = dist.metadata
    if meta.get("Home-page"):
        return meta["Home-page"]
    urls = [url.split(",", 1) for url in meta.get_all("Project-URL") or [] if "," in url]
    for label, url in urls:
        if label.strip().lower() in ("homepage", "home", "source", "repository", "source code"):
            return url.strip()
    return urls[0][1].strip() if urls else f"https://pypi.org/project/{dist.name}/"


def licence_paths(dist: Distribution) -> list[str]:
    """Licence files in the ``.dist-info``: the ``License-File`` entries (in ``licenses/`` since
    PEP 639, at the top before it), anything else under ``licenses/``, and LICENSE*/COPYING*/NOTICE*."""
    declared = dist.metadata.get_all("License-File") or []
    paths = [path for entry in declared for path in (f"licenses/{entry}", entry)]
    for file in dist.files or []:
        if file.parts[0].endswith(".dist-info") and len(file.parts) > 1:
            inside = PurePosixPath(*file.parts[1:])
            if inside.parts[0] == "licenses" or inside.name.upper().startswith(LICENCE_FILE_PREFIXES):
                paths.append(str(inside))
    return list(dict.fromkeys(paths))


def licence_texts(dist: Distribution) -> list[tuple[str, str]]:
    """(file, text) for every licence file the distribution ships; failing those, a ``License``
    field that holds a whole text."""
    texts = [(path, text) for path in licence_paths(dist) if (text := dist.read_text(path))]
    declared = (dist.metadata.get("License") or "").strip()
    if not texts and declared.count("\n") >= 2:
        texts.append(("License field of the metadata", declared))
    return texts


def supplied_texts(*names: str) -> list[tuple[str, str]]:
    return [(f"supplied by Hearth: {name}", (SUPPLIED / name).read_text(encoding="utf-8")) for name in names]


def distribution_entry(dist: Distribution) -> Entry:
    entry = Entry(dist.name, dist.version, licence_summary(dist), home_page(dist), licence_texts(dist))
    if not entry.texts and normalise(dist.name) in QT_DISTRIBUTIONS:
        entry.texts, entry.note = supplied_texts(*QT_LICENCE_FILES), QT_NOTE
    return entry


def python_entry() -> Entry:
    """The interpreter the bundle carries, with the PSF licence from its installation if present."""
    base = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    entry = Entry("Python", platform.python_version(), "PSF-2.0 (Python Software Foundation License)",
                  "https://www.python.org/")
    for candidate in (base / "lib" / version / "LICENSE.txt", base / "Lib" / "LICENSE.txt", base / "LICENSE.txt"):
        if candidate.is_file():
            entry.texts = [(candidate.name, candidate.read_text(encoding="utf-8", errors="replace"))]
            break
    else:
        entry.note = f"The interpreter's LICENSE.txt was not found: the licence is at {PYTHON_LICENCE_URL}"
    return entry


def llama_cpp_entry(llama_cpp_python: Distribution) -> Entry:
    """llama.cpp and ggml, compiled into llama-cpp-python's libraries: their licence from the wheel
    if it carries it, else llama.cpp's MIT text supplied here."""
    entry = Entry("llama.cpp and ggml", f"as built into llama-cpp-python {llama_cpp_python.version}", "MIT",
                  "https://github.com/ggml-org/llama.cpp")
    entry.texts = [(path, text) for path, text in licence_texts(llama_cpp_python) if "ggml" in text.lower()]
    if not entry.texts:
        entry.texts = supplied_texts("llama.cpp-MIT.txt")
        entry.note = ("llama-cpp-python's wheel ships only its own licence; llama.cpp's MIT licence, "
                      "from its repository, follows.")
    return entry


def third_party_entries(root: str = ROOT, exclude: Iterable[str] = ()) -> list[Entry]:
    dists = requirement_closure(root, exclude)
    entries = [python_entry()]
    entries += [llama_cpp_entry(d) for d in dists if normalise(d.name) == LLAMA_CPP_DISTRIBUTION]
    return entries + [distribution_entry(d) for d in dists]


def render(entries: list[Entry], title: str) -> str:
    """The file: a table of contents, then each entry with its texts. A text already given for an
    earlier entry is named, not repeated."""
    lines = [title, "=" * len(title), "",
             "Hearth is MIT licensed. It carries the software listed below, each under its own licence.", ""]
    lines += [f"  {e.name} {e.version}: {e.licence}" for e in entries]
    given: dict[str, str] = {}
    for e in entries:
        lines += ["", RULE, f"{e.name} {e.version}", f"Licence: {e.licence}", f"Home page: {e.home_page}"]
        lines += [e.note] if e.note else []
        if not e.texts:
            lines.append(NOT_SHIPPED.format(where=e.home_page))
        for source, text in e.texts:
            key = text.strip()
            if key in given:
                lines += ["", f"--- {source}: the same text as under {given[key]} above"]
                continue
            given[key] = e.name
            lines += ["", f"--- {source} ---", text.rstrip()]
    return "\n".join(lines) + "\n"


def summary(entries: list[Entry]) -> str:
    missing = sum(1 for e in entries if not e.texts)
    texts = sum(len(e.texts) for e in entries)
    return f"{len(entries)} distributions, {texts} licence texts ({missing} without a shipped text)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--exclude", nargs="+", action="extend", default=[], metavar="DIST",
                        help="leave out these distributions and what only they need")
    args = parser.parse_args(argv)
    try:
        entries = third_party_entries(ROOT, args.exclude)
    except (MissingDistribution, importlib.metadata.PackageNotFoundError) as exc:
        print(f"third_party_licenses: {exc}", file=sys.stderr)
        return 1
    title = f"Third-party licences for Hearth {importlib.metadata.version(ROOT)}"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(entries, title), encoding="utf-8")
    print(summary(entries), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
