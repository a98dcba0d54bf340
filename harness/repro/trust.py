"""What ``harness repro`` takes from a run folder, which may be a CI artifact anyone could
have edited: it trusts this checkout, not the folder.

- the recorded ``matrix.json`` must match the hash its manifest records;
- node ids must name files inside this checkout;
- only an allowlist of the recorded environment comes back (seed, threads, the plugin's
  own variables);
- container options (capabilities, devices, security options, network, IPC, extra host
  variables, the cache root mounted into the container) may not reach beyond what the
  current matrix of that name allows, and the requirements must be plain pins.

Each refusal is one line; ``--trust-run-folder`` accepts the folder as it is.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.matrix.requirements import plain_pin
from harness.run.threads import THREAD_VARS

if TYPE_CHECKING:
    from harness.matrix.model import Matrix

TRUST_FLAG = "--trust-run-folder"
# The variables a run's environment may give back: the reproducibility knobs.
RESTORABLE_ENV = frozenset(
    {*THREAD_VARS, "HARNESS_TORCH_THREADS", "HARNESS_SEED", "HARNESS_TIER",
     "HARNESS_THREAD_BUDGET", "PYTHONHASHSEED"}
)
# Container options that widen what a test can reach on the host.
_LIST_OPTIONS = (("runtime", "cap_add"), ("runtime", "devices"), ("runtime", "security_opt"),
                 ("runtime", "group_add"), ("runtime", "env_allowlist"))
_VALUE_OPTIONS = (("runtime", "network"), ("runtime", "ipc"), ("runtime", "gpus"),
                  ("runtime", "platform"), ("caches", "root"))
_MAP_OPTIONS = (("runtime", "env"), ("caches", "env"))
# Without a current matrix of that name, the most a run folder may ask for: shaped as a
# matrix's `resolved` (Matrix.resolved), which matrix_problems reads alike by key.
_BASELINE: dict[str, dict[str, Any]] = {
    "runtime": {"network": "none", "ipc": None, "gpus": None, "platform": None, "env": {},
                "cap_add": [], "devices": [], "security_opt": [], "group_add": [],
                "env_allowlist": ["HF_TOKEN", "CI", "BUILDKITE", "GITHUB_ACTIONS"]},
    "caches": {"root": "~/.cache/harness", "env": {}},
}


def untrusted(what: str) -> str:
    return f"{what}; refused ({TRUST_FLAG} to accept the run folder as it is)"


def matrix_problems(recorded: Matrix, manifest_hash: str, current: Matrix | None) -> list[str]:
    """One line per way the recorded matrix goes beyond what this checkout allows."""
    problems = []
    if manifest_hash and recorded.hash != manifest_hash:
        problems.append(untrusted(
            f"matrix.json hashes to {recorded.hash[:12]}, the manifest records "
            f"{manifest_hash[:12]}: the run folder was changed after the run"))
    for req in recorded.python.requirements:
        if not plain_pin(str(req)):
            problems.append(untrusted(f"python.requirements {req!r} is not a plain pin "
                                      "(name or name==version)"))
    mine = recorded.resolved
    allowed = current.resolved if current is not None else _BASELINE
    against = f"the current {current.name} matrix" if current is not None else "the defaults"
    for section, key in _LIST_OPTIONS:
        extra = [v for v in mine.get(section, {}).get(key) or []
                 if v not in (allowed.get(section, {}).get(key) or [])]
        if extra:
            problems.append(untrusted(f"{section}.{key} {extra} is beyond {against}"))
    for section, key in _VALUE_OPTIONS:
        value, ok = mine.get(section, {}).get(key), allowed.get(section, {}).get(key)
        if value != ok:
            problems.append(untrusted(f"{section}.{key} {value!r} differs from {against} "
                                      f"({ok!r})"))
    for section, key in _MAP_OPTIONS:
        theirs = allowed.get(section, {}).get(key) or {}
        extra_keys = sorted(k for k, v in (mine.get(section, {}).get(key) or {}).items()
                            if theirs.get(k) != v)
        if extra_keys:
            problems.append(untrusted(f"{section}.{key} sets {', '.join(extra_keys)} "
                                      f"beyond {against}"))
    return problems


def matrix_diff(current: Matrix, recorded: Matrix, *, limit: int = 40) -> list[str]:
    """The recorded matrix as a unified diff against the current one of that name."""
    def lines(m: Matrix) -> list[str]:
        return json.dumps(m.resolved, indent=1, sort_keys=True, default=str).splitlines()

    diff = list(difflib.unified_diff(lines(current), lines(recorded), "current", "recorded",
                                     n=0, lineterm=""))
    if len(diff) > limit:
        diff = [*diff[:limit], f"... {len(diff) - limit} more line(s)"]
    return diff


def node_id_problems(tests: Mapping[str, tuple[str, ...]], root: Path,
                     rootdirs: Mapping[str, Path] | None = None) -> list[str]:
    """Each node id's file must lie under its suite's rootdir (the checkout by default)."""
    problems = []
    for suite, ids in tests.items():
        base = Path((rootdirs or {}).get(suite, root)).resolve()
        for nid in ids:
            target = (base / nid.split("::", 1)[0]).resolve()
            if not target.is_relative_to(base):
                where = "this checkout" if base == root.resolve() else str(base)
                problems.append(f"{nid}: its file lies outside {where}; refused")
            elif not target.is_file():
                problems.append(f"{nid}: its file is not under {base}")
    return problems


def split_env(
    env: Mapping[str, str], recomputed: AbstractSet[str]
) -> tuple[dict[str, str], list[str]]:
    """(what is restored, the names left out that this run would not set anyway)."""
    kept = {k: v for k, v in env.items() if k in RESTORABLE_ENV}
    dropped = sorted(k for k in env if k not in RESTORABLE_ENV and k not in recomputed)
    return kept, dropped
