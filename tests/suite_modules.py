"""A shipped suite's module as its hooks see it (harness/platform/suite_hooks.py imports a
suite's ``harness_suite.py`` with the suite's folder on ``sys.path``), for the tests of what
a suite offers harness."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def suite_module(suite: str, name: str) -> ModuleType:
    """``suites/<suite>/<name>.py``, imported once as ``name`` (the name its neighbours
    import it by)."""
    if name in sys.modules and name != "harness_suite":
        return sys.modules[name]
    folder = ROOT / "suites" / suite
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    unique = f"harness_suite_{suite}" if name == "harness_suite" else name
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    spec.loader.exec_module(module)
    return module
