"""The README is what a new user reads first, and every link in it and in docs/ leads somewhere.

The README stays short (install, first use, the window, settings, the CLI and the API in short, data,
privacy, troubleshooting, the developer set-up); measurements, design notes and references live in
docs/. `.ci/run` runs the README's first ```bash block, so that block must stay the set-up.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)|src=\"([^\"]+)\"")


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors, in_code = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            anchors.add(_slug(line.lstrip("#")))
    return anchors


def test_the_readme_is_short():
    assert len(README.read_text().splitlines()) < 250


def test_the_readme_holds_no_dated_measurement_runs():
    dated = [line for line in README.read_text().splitlines() if re.search(r"\b20\d\d-\d\d-\d\d\b", line)]
    assert dated == []


def _linked_pages(page: Path) -> set[Path]:
    targets = (a or b for a, b in LINK.findall(page.read_text()))
    paths = {(page.parent / t.partition("#")[0]).resolve() for t in targets if not t.startswith(("http", "#"))}
    return {path for path in paths if path.suffix == ".md" and path.exists()}


def test_the_readme_has_a_settings_section():
    assert "\n## Settings\n" in README.read_text()


def test_every_doc_is_reachable_from_the_readme():
    seen, todo = set(), [README.resolve()]
    while todo:
        page = todo.pop()
        if page not in seen:
            seen.add(page)
            todo.extend(_linked_pages(page))
    assert {doc.name for doc in DOCS} - {page.name for page in seen} == set()


def test_ci_runs_the_readmes_set_up_and_test_commands():
    """The commands .ci/run extracts (the first ```bash block, lines 1 and 3) are the developer set-up."""
    (extract,) = re.findall(r"^commands=\$\((.*)\)$", (ROOT / ".ci" / "run").read_text(), re.MULTILINE)
    commands = subprocess.run(["bash", "-c", extract], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.splitlines()
    assert commands[0] == "bash installers/setup_dev.sh"
    assert commands[2] == ".venv/bin/python -m pytest -n 2 --dist loadfile"


def test_every_relative_link_in_the_readme_and_docs_resolves():
    broken = []
    for page in [README, *DOCS]:
        for target in (a or b for a, b in LINK.findall(page.read_text())):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []
