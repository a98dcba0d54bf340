"""What a change selects: per lane, whole suites / test modules / kernel cases, and why.

A ``Rule`` matches pytest node ids (``path/to/test_x.py::test[params]``):

- ``module``: every test in a file, or under a folder (a suite, a conftest's folder);
- ``tests``: the tests named (``ids``): those that called ``ops`` in the lane's recorded
  runs (an engine source change, by_ops.py);
- ``kernel``: the tests that run ``provider`` (for ``ops``, or every op). Only tests in
  a *dispatching* module (one that picks providers by name) can match. A test whose
  parameter id names the provider as a ``-``-separated token matches, unless it also
  names an op outside ``ops``; a test that names no provider (or ``platform``) runs the
  lane's own kernel table, so it matches when the lane's matrix lists the provider
  (for one of ``ops``).

Every rule carries the changed file that selected it and the reason, for ``--explain``.
The whole selection is plain data (JSON) so that ``harness run`` can hand it to each
pytest process, and every shard of a job applies the same one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.results.jsonfile import read_json

SCHEMA = 1
PLATFORM_TOKEN = "platform"


@dataclass(frozen=True, kw_only=True)
class Rule:
    kind: str  # "module" | "kernel" | "tests"
    source: str  # the changed file
    why: str
    path: str = ""  # module: a test file or a folder
    provider: str = ""  # kernel
    ops: tuple[str, ...] = ()  # kernel: () = every op; tests: the ops they called
    ids: tuple[str, ...] = ()  # tests: node ids


@dataclass(frozen=True, kw_only=True)
class LaneSelection:
    lane: str
    full: bool = False  # every suite of the lane
    docker: bool = False  # run it in the lane's container (an image recipe changed)
    reasons: tuple[tuple[str, str], ...] = ()  # (changed file, why) for a full lane
    rules: tuple[Rule, ...] = ()
    # What the kernel rules need to know of the lane and the suites.
    listed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # op -> providers
    dispatching: tuple[str, ...] = ()  # test files that pick providers by name
    providers: tuple[str, ...] = ()  # every provider name
    ops: tuple[str, ...] = ()  # every op name

    @property
    def affected(self) -> bool:
        return self.full or bool(self.rules)

    def why(self, nodeid: str) -> list[Rule]:
        """The rules that select this test (empty: not selected)."""
        if self.full:
            return [Rule(kind="lane", source=s, why=w) for s, w in self.reasons]
        return [rule for rule in self.rules if self._matches(rule, nodeid)]

    def selects(self, nodeid: str) -> bool:
        return self.full or any(self._matches(rule, nodeid) for rule in self.rules)

    def _matches(self, rule: Rule, nodeid: str) -> bool:
        file = nodeid.split("::", 1)[0]
        if rule.kind == "module":
            return file == rule.path or file.startswith(rule.path.rstrip("/") + "/")
        if rule.kind == "tests":
            return nodeid in rule.ids
        if rule.kind != "kernel" or file not in self.dispatching:
            return False
        _, bracket, params = nodeid.partition("[")
        tokens = params.rstrip("]").split("-") if bracket else []
        named_ops = [t for t in tokens if t in self.ops]
        if rule.ops and named_ops and not set(named_ops) & set(rule.ops):
            return False
        named = [t for t in tokens if t in self.providers]
        if named and PLATFORM_TOKEN not in tokens:
            return rule.provider in named
        wanted = rule.ops or tuple(self.listed)
        return any(rule.provider in self.listed.get(op, ()) for op in wanted)

    def suites(self, suite_paths: Mapping[str, str]) -> list[str]:
        """The lane's suites that any rule can reach (all of them for a full lane)."""
        if self.full:
            return list(suite_paths)
        out = []
        for name, path in suite_paths.items():
            prefix = path.rstrip("/") + "/"
            for rule in self.rules:
                target = rule.path if rule.kind == "module" else ""
                if rule.kind == "tests" and any(i.startswith(prefix) for i in rule.ids):
                    out.append(name)
                    break
                if rule.kind == "kernel" and any(f.startswith(prefix)
                                                 for f in self.dispatching):
                    out.append(name)
                    break
                if target and (target.startswith(prefix) or prefix.startswith(
                        target.rstrip("/") + "/")):
                    out.append(name)
                    break
        return out


@dataclass(frozen=True, kw_only=True)
class Selection:
    ref: str
    changed: tuple[str, ...]
    lanes: Mapping[str, LaneSelection]
    everything: tuple[tuple[str, str], ...] = ()  # (file, why): unknown files, all runs
    self_tests: tuple[Rule, ...] = ()  # the harness's own tests (tests/)
    notes: tuple[tuple[str, str], ...] = ()  # (file, why) for files that select nothing
    # An engine source change (by_ops.py): what it was, and each changed file's ops.
    engine: str = ""
    engine_changed: tuple[str, ...] = ()
    engine_ops: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"schema": SCHEMA, "ref": self.ref, "changed": list(self.changed),
                "engine": self.engine, "engine_changed": list(self.engine_changed),
                "engine_ops": {path: list(ops) for path, ops in self.engine_ops},
                "everything": [list(e) for e in self.everything],
                "self_tests": [asdict(r) for r in self.self_tests],
                "notes": [list(n) for n in self.notes],
                "lanes": {name: _lane_json(lane) for name, lane in self.lanes.items()}}


def _lane_json(lane: LaneSelection) -> dict[str, object]:
    data = asdict(lane)
    data["listed"] = {op: list(p) for op, p in lane.listed.items()}
    return data


def _rule(raw: Mapping[str, Any]) -> Rule:
    return Rule(kind=str(raw["kind"]), source=str(raw["source"]), why=str(raw["why"]),
                path=str(raw.get("path", "")), provider=str(raw.get("provider", "")),
                ops=tuple(raw.get("ops", ())), ids=tuple(raw.get("ids", ())))


def _pairs(raw: Iterable[Sequence[str]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(a), str(b)) for a, b in raw)


def lane_from_json(raw: Mapping[str, Any]) -> LaneSelection:
    """A lane selection as ``dump_lane`` wrote it. Its values are not narrowed one by one:
    ``str``, ``tuple`` and the like judge them, and ``load_lane`` names what they refuse
    (a malformed file), as it always has."""
    return LaneSelection(
        lane=str(raw["lane"]), full=bool(raw["full"]), docker=bool(raw.get("docker", False)),
        reasons=_pairs(raw.get("reasons", ())), rules=tuple(_rule(r) for r in raw["rules"]),
        listed={op: tuple(p) for op, p in raw.get("listed", {}).items()},
        dispatching=tuple(raw.get("dispatching", ())), providers=tuple(raw.get("providers", ())),
        ops=tuple(raw.get("ops", ())))


def dump_lane(lane: LaneSelection, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema": SCHEMA, **_lane_json(lane)}, indent=1) + "\n",
                    encoding="utf-8")


def load_lane(path: Path) -> LaneSelection:
    raw = read_json(path, "selection")
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        raise ConfigError(f"expected a lane selection (schema {SCHEMA})", file=str(path),
                          key="schema")
    try:
        return lane_from_json(raw)
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(f"malformed lane selection ({error})", file=str(path)) from None
