"""pytest plugin: keep only this shard's tests (``-p harness.plugin.shard``).

Options: ``--harness-shard i/N`` (1-based), ``--harness-durations FILE.json`` (see
``harness.shard.durations``), ``--harness-same-process GLOB`` (repeatable).

Every shard collects the whole suite, plans all N shards from the same durations
file and deselects the tests of the others, so the shards partition what ``-k`` and
``-m`` selected, exactly and with no coordination.

Tests that must share one process (state kept in a module-scoped fixture, an order
dependence being fixed) are kept on one shard: mark them ``@pytest.mark.same_process``
(grouped by module) or ``@pytest.mark.same_process("name")`` (grouped by name, across
modules), or match their node ids with ``--harness-same-process``. Under xdist, use
``--dist loadfile`` so a module's group also stays on one worker.
"""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.shard.durations import DurationSet, align, load
from harness.shard.estimate import module_of
from harness.shard.plan import make_plan, parse_shard

MARKER = "same_process"
_PLAN_KEY = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness-shard", "harness: sharding by duration")
    group.addoption("--harness-shard", metavar="i/N", default=None,
                    help="run only shard i of N (1-based), balanced by duration")
    group.addoption("--harness-durations", metavar="FILE", default=None,
                    help="JSON durations (this matrix and siblings) to balance with")
    group.addoption("--harness-same-process", metavar="GLOB", action="append", default=[],
                    help="node ids matching GLOB stay on one shard with their module")
    group.addoption("--harness-plan-out", metavar="FILE", default=None,
                    help="write this shard's plan (fingerprint, counts) here as JSON, so the "
                         "shards of a build can be checked to agree (`harness ci check-shards`)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(name=None): keep on one shard with its module (or its name)"
    )
    spec = config.getoption("--harness-shard")
    if spec is not None:
        try:
            parse_shard(spec)
        except HarnessError as error:
            raise pytest.UsageError(str(error)) from None


def _groups(items: list[pytest.Item], globs: list[str]) -> dict[str, str]:
    groups: dict[str, str] = {}
    for item in items:
        mark = item.get_closest_marker(MARKER)
        if mark is not None:
            name = mark.args[0] if mark.args else mark.kwargs.get("name")
            groups[item.nodeid] = f"name:{name}" if name else f"module:{module_of(item.nodeid)}"
        elif any(fnmatch.fnmatchcase(item.nodeid, g) for g in globs):
            groups[item.nodeid] = f"module:{module_of(item.nodeid)}"
    return groups


@pytest.hookimpl(trylast=True)  # after -k / -m, so the shards split what they selected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    spec = config.getoption("--harness-shard")
    if spec is None:
        return
    index, count = parse_shard(spec)
    path = config.getoption("--harness-durations")
    try:
        source = load(Path(path)) if path else DurationSet()
    except HarnessError as error:
        raise pytest.UsageError(str(error)) from None
    ids = [item.nodeid for item in items]
    durations, siblings = align(ids, source)
    plan = make_plan(ids, durations, siblings, count,
                     _groups(items, config.getoption("--harness-same-process")))
    keep = set(plan.shards[index - 1])
    selected = [item for item in items if item.nodeid in keep]
    deselected = [item for item in items if item.nodeid not in keep]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = selected
    out = config.getoption("--harness-plan-out")
    if out:  # xdist workers plan alike and write the same content: replace, never append
        _write_plan(Path(out), {"shard": spec, "fingerprint": plan.fingerprint,
                                "selected": len(selected), "collected": len(ids),
                                "durations": dict(sorted(plan.sources.items()))})
    sources = ", ".join(f"{k} {v}" for k, v in sorted(plan.sources.items()))
    config.stash[_PLAN_KEY] = (
        f"harness shard {index}/{count}: {len(selected)} of {len(ids)} tests, "
        f"~{plan.loads[index - 1]:.1f}s of {sum(plan.loads):.1f}s "
        f"(durations: {sources or 'none'}), plan {plan.fingerprint}"
    )


def _write_plan(path: Path, data: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    line = config.stash.get(_PLAN_KEY, None)
    return [line] if line else []
