"""Capability matrices: one YAML file per platform, merged, validated and frozen.

Entry points: ``load_matrix``, ``list_matrices`` (the project root they default to is
``harness.roots.project_root``); the dataclasses are in ``harness.matrix.model``
(``Matrix`` is re-exported here).
"""

from __future__ import annotations

from harness.matrix.loader import list_matrices, load_matrix
from harness.matrix.model import Matrix

__all__ = ["Matrix", "list_matrices", "load_matrix"]
