"""What the matrices declare: capabilities, suites, known failures, per platform.

The resolved matrix stored with each run (``matrix.json``) is what actually ran, so it
wins; the matrices in ``--matrices DIR`` (or the checkout) fill in platforms that have
no run in the window, which the report must show as gaps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.matrix import list_matrices, load_matrix
from harness.matrix.known_failures import Entry, entries_for
from harness.matrix.loader import matrix_from_json
from harness.matrix.model import Matrix
from harness.roots import project_root


@dataclass
class MatrixFacts:
    name: str
    device: str = ""
    catalog: dict[str, tuple[str | None, bool]] = field(default_factory=dict)  # parent, hw
    provides: set[str] = field(default_factory=set)
    suites: list[str] = field(default_factory=list)
    known_failures: list[Entry] = field(default_factory=list)
    matrix: Matrix | None = None

    def closure(self) -> set[str]:
        have: set[str] = set()
        for name in self.provides:
            while name and name not in have:
                have.add(name)
                name = self.catalog.get(name, (None, False))[0] or ""
        return have

    def ancestors(self, name: str) -> list[str]:
        chain: list[str] = []
        parent = self.catalog.get(name, (None, False))[0]
        while parent and parent not in chain:
            chain.append(parent)
            parent = self.catalog.get(parent, (None, False))[0]
        return chain


def facts_from_matrix(matrix: Matrix, *, emulate: bool = False) -> MatrixFacts:
    """What the report needs of one lane's matrix, read from the typed matrix."""
    catalog = {
        name: (entry.parent, entry.hardware) for name, entry in matrix.capabilities.catalog.items()
    }
    return MatrixFacts(
        name=matrix.name,
        device="cpu" if emulate else matrix.device,
        catalog=catalog,
        provides=set(matrix.capabilities.provides),
        suites=[name for name, suite in matrix.suites.items() if suite.enabled],
        # Runs of many hosts: every entry, host-conditioned ones marked (build.py reads them).
        known_failures=entries_for(matrix, emulate=emulate, host_flags=None),
        matrix=matrix,
    )


def facts_from_json(
    text: str, shown: str, warn: Callable[[str], None], *, emulate: bool = False
) -> MatrixFacts | None:
    """A run's recorded ``matrix.json``, loaded by the same loader as ``harness run``."""
    try:
        return facts_from_matrix(matrix_from_json(text, shown), emulate=emulate)
    except HarnessError as error:
        warn(f"{error}; the checkout's matrix of that name is used instead")
        return None


def load_declared(folder: Path | None, warn: Callable[[str], None]) -> dict[str, MatrixFacts]:
    """Every concrete matrix in ``folder`` (a ``matrices/`` directory or a repo root)."""
    if folder is None:
        root = project_root()
    else:
        root = (
            folder.parent
            if (folder / "base.yaml").exists() or folder.name == "matrices"
            else folder
        )
    facts: dict[str, MatrixFacts] = {}
    if not (root / "matrices").is_dir():
        if folder is not None:
            warn(f"{folder}: no matrices folder here; capabilities come from the runs only")
        return facts
    for name in list_matrices(root):
        try:
            matrix = load_matrix(name, root=root)
        except HarnessError as error:
            warn(f"matrix {name}: {error}")
            continue
        facts[name] = facts_from_matrix(matrix)
    return facts
