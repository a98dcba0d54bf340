"""What a suite offers harness beyond its tests: a ``harness_suite.py`` in its folder.

As pytest-xdist declares the hooks a plugin may implement, a suite may define, in that one
module, functions harness calls by name outside pytest (docs/byo-suite.md):

- ``kernel_calls(profile)``: the kernel calls its tests make, which ``harness kernels``
  explains with the suite's own shapes (platform/kernel_table.py).
- ``standalone(test_id, request)``: a standalone repro script of one of its cases, which
  ``harness repro --standalone OUT.py`` runs, judges by its ``SIGNATURE`` line and writes
  (repro/standalone_hook.py: ``request`` a ``StandaloneRequest``, the answer a
  ``StandaloneAnswer``). None for a test id that is not its own; ValueError or LookupError
  for one of its own without a script.

harness knows no suite's other modules: the hook module imports what it needs, with the
suite's folder and the project root first on ``sys.path`` (as pytest's rootdir-relative
imports of a suite's conftest.py see them). Imported in the matrix's environment only.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from harness.errors import ConfigError
from harness.matrix.model import Matrix
from harness.matrix.suite_paths import suite_folder

HOOKS_FILE = "harness_suite.py"


@dataclass(frozen=True)
class SuiteHooks:
    suite: str
    folder: Path
    module: ModuleType

    def offers(self, hook: str) -> bool:
        return callable(getattr(self.module, hook, None))


def hooks_of(matrix: Matrix, root: Path, hook: str) -> list[SuiteHooks]:
    """The suites of ``matrix`` that run here (enabled, applicable) and offer ``hook``."""
    found = []
    for name, suite in matrix.suites.items():
        if not suite.enabled or suite.not_applicable:
            continue
        folder = suite_folder(suite.path, root)
        if not (folder / HOOKS_FILE).is_file():
            continue
        hooks = SuiteHooks(name, folder, load_hooks(name, folder, root))
        if hooks.offers(hook):
            found.append(hooks)
    return found


def load_hooks(suite: str, folder: Path, root: Path) -> ModuleType:
    """The hook module of ``suite`` (its folder ``folder``), imported as harness imports it."""
    for path in (str(root), str(folder)):
        if path not in sys.path:
            sys.path.insert(0, path)
    name = f"harness_suite_{suite}"
    spec = importlib.util.spec_from_file_location(name, folder / HOOKS_FILE)
    if spec is None or spec.loader is None:
        raise ConfigError("cannot be imported", file=str(folder / HOOKS_FILE))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ImportError as error:
        raise ConfigError(f"cannot be imported: {error}", file=str(folder / HOOKS_FILE)) from None
    return module
