"""The lanes of one build, chosen when it runs: ``harness ci select`` and the durations
files every shard of the build reads.

GitHub's select job prints ``matrix=``, ``images=``, ``any=`` and ``has_images=`` lines
for ``$GITHUB_OUTPUT``: one entry per lane x shard (its runner labels, timeout, soft
fail, the arguments its ``harness run`` adds), one per docker lane for its image job.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path

from harness.ci.pipeline import CiTarget
from harness.ci.pull_request import history_durations, pr_targets
from harness.ci.targets import targets_from_matrices
from harness.results.layout import Lane
from harness.shard.durations import DurationSet, dump, durations_for


def choose(root: Path, *, db: Path, nightly: bool = False, wanted: Sequence[str] = (),
           changed_since: str | None = None, engine: tuple[str, str] | None = None,
           self_hosted: bool = True) -> tuple[list[CiTarget], list[str]]:
    """The build's targets and one note per lane left out or narrowed (and why)."""
    from harness.select import select_changes

    targets = targets_from_matrices(root, wanted, nightly=nightly)
    notes: list[str] = []
    if changed_since or engine:
        from harness.select.engine_change import read_change

        change = read_change(*engine) if engine else None
        selection = select_changes(root, changed_since, matrices=[t.matrix for t in targets],
                                   engine_change=change, db=db)
        args = (f" --engine-source {shlex.quote(engine[0])} --engine-change "
                f"{shlex.quote(engine[1])}" if engine else "")
        targets, notes = pr_targets(targets, selection, history_durations(db), args)
    if not self_hosted:
        gated = [t.matrix for t in targets if t.self_hosted]
        if gated:
            notes.append(f"not run: {', '.join(gated)} (self-hosted runners; a pull request "
                         "from a fork runs there only with the maintainers' label)")
        targets = [t for t in targets if not t.self_hosted]
    return targets, notes


def write_durations(lanes: Sequence[str], db: Path, out_dir: Path,
                    last_runs: int = 10) -> list[str]:
    """``<out_dir>/<lane>.json`` for each lane from the history (an empty set without one:
    the shards still plan alike, every test counting the same). One line per file."""
    lines = []
    for lane in lanes:
        found = (durations_for(Lane.parse(lane), db, last_runs=last_runs) if db.is_file()
                 else DurationSet(matrix=lane))
        path = out_dir / f"{lane}.json"
        dump(found, path)
        source = f"{db}" if db.is_file() else "no history yet"
        lines.append(f"wrote {path}: {len(found.durations)} tests timed on {lane}, "
                     f"{len(found.siblings)} sibling lanes ({source})")
    return lines


def github_entry(target: CiTarget, index: int) -> dict[str, object]:
    many = target.shards > 1
    return {
        "lane": target.matrix, "shard": index, "count": target.shards,
        "label": f" {index}/{target.shards}" if many else "",
        "args": (target.select_args + (f" --shard {index}/{target.shards}" if many else "")
                 ).strip(),
        "runs_on": list(target.runs_on), "timeout": target.timeout_minutes,
        "soft_fail": target.soft_fail, "docker": target.docker, "qemu": target.qemu,
        # git diff needs the history back to the merge base; a full run does not
        "fetch_depth": 0 if target.select_args else 1,
    }


def github_outputs(targets: Sequence[CiTarget]) -> list[str]:
    entries = [github_entry(t, i) for t in targets for i in range(1, t.shards + 1)]
    images = [{"lane": t.matrix, "runs_on": list(t.runs_on)} for t in targets if t.docker]
    return [f"matrix={_line({'include': entries})}", f"images={_line({'include': images})}",
            f"any={'true' if entries else 'false'}",
            f"has_images={'true' if images else 'false'}"]


def _line(data: object) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True)
