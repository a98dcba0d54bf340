"""The platform profile a suite runs under: a matrix, plus whether it is emulated."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.matrix import load_matrix

if TYPE_CHECKING:
    from harness.matrix.model import Matrix


@dataclass(frozen=True, kw_only=True)
class Profile:
    matrix: Matrix
    emulate: bool = False

    def __repr__(self) -> str:
        how = ", emulated" if self.emulate else ""
        return f"<Profile {self.matrix.name}{how}>"

    @property
    def name(self) -> str:
        return self.matrix.name

    @property
    def family(self) -> str:
        return self.matrix.family

    @property
    def device(self) -> str:
        """The torch device string the suites use: the CPU when emulated."""
        return "cpu" if self.emulate else self.matrix.device

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(self.matrix.dtypes)

    def has(self, capability: str) -> bool:
        return bool(self.matrix.capabilities.has(capability, emulate=self.emulate))

    def why_missing(self, capability: str) -> str | None:
        reason = self.matrix.capabilities.why_missing(capability, emulate=self.emulate)
        return None if reason is None else str(reason)

    def known(self, capability: str) -> bool:
        return bool(self.matrix.capabilities.known(capability))


def load_profile(spec: str, *, emulate: bool) -> Profile:
    """Load a profile from a matrix name, a matrix YAML path, or a resolved matrix JSON."""
    root_env = os.environ.get("HARNESS_ROOT")
    root = Path(root_env) if root_env else None
    return Profile(matrix=load_matrix(spec, root=root), emulate=emulate)
