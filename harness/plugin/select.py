"""pytest plugin: keep only what a change selected (``--harness-select FILE``).

FILE is one lane's selection (``harness.select.rules.dump_lane``), written by
``harness run --changed-since``. It deselects after ``-k`` / ``-m`` and before the
shard plugin (which is ``trylast``), so the shards split the selected tests only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.select.rules import load_lane

_LINE = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness-select", "harness: change-based selection")
    group.addoption("--harness-select", metavar="FILE", default=None,
                    help="run only the tests this lane selection (JSON) names")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = config.getoption("--harness-select")
    if path is None:
        return
    try:
        lane = load_lane(Path(path))
    except HarnessError as error:
        raise pytest.UsageError(str(error)) from None
    keep = [item for item in items if lane.selects(item.nodeid)]
    dropped = [item for item in items if not lane.selects(item.nodeid)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep
    config.stash[_LINE] = (f"harness select: {len(keep)} of {len(keep) + len(dropped)} tests "
                           f"affected by the change ({lane.lane})")


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    line = config.stash.get(_LINE, None)
    return [line] if line else []
