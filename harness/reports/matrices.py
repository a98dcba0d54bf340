"""What the matrices declare: capabilities, suites, known failures, per platform.

The resolved matrix stored with each run (``matrix.json``) is what actually ran, so it
wins; the matrices in ``--matrices DIR`` (or the checkout) fill in platforms that have
no run in the window, which the report must show as gaps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError


@dataclass
class MatrixFacts:
    name: str
    device: str = ""
    catalog: dict[str, tuple[str | None, bool]] = field(default_factory=dict)  # parent, hw
    provides: set[str] = field(default_factory=set)
    suites: list[str] = field(default_factory=list)
    known_failures: list[dict[str, Any]] = field(default_factory=list)

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


def facts_from_resolved(resolved: Mapping[str, Any]) -> MatrixFacts:
    catalog_raw = resolved.get("capability_catalog") or {}
    capabilities = resolved.get("capabilities") or {}
    catalog = {
        str(name): (
            (entry or {}).get("parent") if isinstance(entry, Mapping) else None,
            bool((entry or {}).get("hardware")) if isinstance(entry, Mapping) else False,
        )
        for name, entry in catalog_raw.items()
    }
    provides = capabilities.get("provides", []) if isinstance(capabilities, Mapping) else []
    suites_raw = resolved.get("suites") or {}
    suites = [
        str(name)
        for name, suite in suites_raw.items()
        if not isinstance(suite, Mapping) or suite.get("enabled", True)
    ]
    known = [dict(kf) for kf in resolved.get("known_failures") or [] if isinstance(kf, Mapping)]
    return MatrixFacts(
        name=str(resolved.get("name", "")),
        device=str(resolved.get("device", "")),
        catalog=catalog,
        provides={str(p) for p in provides},
        suites=suites,
        known_failures=known,
    )


def facts_from_json(text: str) -> MatrixFacts | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return facts_from_resolved(data) if isinstance(data, dict) else None


def load_declared(folder: Path | None, warn: Callable[[str], None]) -> dict[str, MatrixFacts]:
    """Every concrete matrix in ``folder`` (a ``matrices/`` directory or a repo root)."""
    from harness.matrix import list_matrices, load_matrix, repo_root

    if folder is None:
        root = repo_root()
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
        facts[name] = facts_from_resolved(matrix.resolved)
    return facts
