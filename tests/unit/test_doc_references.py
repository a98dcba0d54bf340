"""The docs point only at files in the repository: every relative Markdown link of a tracked
``.md`` file resolves, and every document named in capitals anywhere in the tracked text
(a design or platform notes file, the kind a reader goes looking for) is a tracked file."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from harness.roots import project_root

ROOT = project_root()
LINK = re.compile(r"\]\(([^)\s]+)\)")
CAPITALS = re.compile(r"\b[A-Z][A-Z0-9_-]*\.md\b")
TEXT = (".md", ".py", ".yml", ".yaml", ".sh", ".j2", ".toml", ".txt")


def _tracked() -> list[str]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True,
                         check=True).stdout
    return [p for p in out.splitlines() if (ROOT / p).is_file()]


def test_relative_markdown_links_resolve() -> None:
    broken = []
    for rel in (p for p in _tracked() if p.endswith(".md")):
        for target in LINK.findall((ROOT / rel).read_text(encoding="utf-8")):
            path = target.split("#", 1)[0]
            if not path or re.match(r"^[a-z]+:", path):
                continue  # an anchor on the same page, or a URL
            if not ((ROOT / rel).parent / path).exists():
                broken.append(f"{rel}: {target}")
    assert broken == []


def test_documents_named_in_capitals_are_in_the_repository() -> None:
    tracked = _tracked()
    names = {Path(p).name for p in tracked}
    missing = []
    for rel in (p for p in tracked if p.endswith(TEXT) and not p.startswith("tests/data/")):
        text = (ROOT / rel).read_text(encoding="utf-8", errors="replace")
        missing += [f"{rel}: {name}" for name in set(CAPITALS.findall(text)) - names]
    assert missing == []
