"""Capability matrices: one YAML file per platform, merged, validated and frozen.

Entry points: ``load_matrix``, ``list_matrices``, ``repo_root``; the dataclasses are in
``harness.matrix.model``.
"""

from __future__ import annotations

from harness.matrix.loader import list_matrices, load_matrix, repo_root
from harness.matrix.model import (
    Caches,
    Capabilities,
    CapabilityDef,
    Ci,
    Download,
    Emulation,
    Fp8,
    Image,
    KnownFailure,
    Matrix,
    Probe,
    PythonEnv,
    Runtime,
    Suite,
    Tol,
    Tolerances,
)

__all__ = [
    "Caches",
    "Capabilities",
    "CapabilityDef",
    "Ci",
    "Download",
    "Emulation",
    "Fp8",
    "Image",
    "KnownFailure",
    "Matrix",
    "Probe",
    "PythonEnv",
    "Runtime",
    "Suite",
    "Tol",
    "Tolerances",
    "list_matrices",
    "load_matrix",
    "repo_root",
]
