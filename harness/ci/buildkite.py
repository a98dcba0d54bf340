"""A Buildkite pipeline from the template's parts (``ci/templates/buildkite.yml``).

Order: the durations step (one file per lane, read by every shard), one image build per
docker lane, the shard steps (each waits for those it needs), then, after a ``wait`` that
lets failed tests through, the nightly report or the shard-plan check. A pull-request
pipeline is one step that selects at run time and uploads the rest (Kind.CHANGED). A
pipeline is never ``steps: []``: a change no lane is affected by gets one step saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from harness.ci.pipeline import CiTarget, Kind, fill
from harness.errors import ConfigError

DURATIONS_KEY = "durations"
TEMPLATE_PARTS = ("setup", "durations_step", "image_step", "image_load", "cpu_setup",
                  "shard_step",
                  "report_step", "check_step", "select_step", "empty_step")
UPLOADS_AT_RUN_TIME = True  # `buildkite-agent pipeline upload`
WHY_NO_UPLOAD = ""


def _shard_values(target: CiTarget, index: int, parts: Mapping[str, Any]) -> dict[str, object]:
    many = target.shards > 1
    needs = [DURATIONS_KEY] + ([f"image-{target.matrix}"] if target.docker else [])
    values = {"matrix": target.matrix, "index": index, "count": target.shards,
              "queue": target.queue, "timeout": target.timeout_minutes,
              "shard_args": f" --shard {index}/{target.shards}" if many else "",
              "shard_label": f" {index}/{target.shards}" if many else "",
              "shard_key": f"-{index}" if many else "",
              "select_args": target.select_args,
              "soft_fail": True if target.soft_fail else None,
              "depends_on": needs, "setup": parts["setup"]}
    values["image_load"] = fill(parts["image_load"], values) if target.docker else []
    values["cpu_setup"] = list(parts["cpu_setup"]) if target.qemu else []
    return values


def _check_selectable(parts: Mapping[str, object]) -> None:
    if "{select_args}" not in yaml.safe_dump(parts["shard_step"]):
        raise ConfigError("has no {select_args} placeholder: a --changed-since pipeline "
                          "would run every test", key="x-harness.shard_step")


def build(targets: Sequence[CiTarget], template: Mapping[str, Any], *, kind: Kind,
          report_queue: str | None = None, matrices: Sequence[str] = ()) -> dict[str, object]:
    """``matrices`` (asked for by name) are already the targets: the steps are static."""
    del matrices
    parts = template["x-harness"]
    common = {"report_queue": report_queue, "setup": parts["setup"],
              "report_queue_args": f" --report-queue {report_queue}" if report_queue else ""}
    steps: list[object] = []
    if kind is Kind.PULL_REQUEST:
        steps.append(fill(parts["select_step"], common))
    elif not targets:
        steps.append(fill(parts["empty_step"], common))
    else:
        if kind is Kind.CHANGED:
            _check_selectable(parts)
        matrices = ",".join(t.matrix for t in targets)
        steps.append(fill(parts["durations_step"], {**common, "matrices": matrices}))
        for target in targets:
            if target.docker:
                steps.append(fill(parts["image_step"], {
                    **common, "matrix": target.matrix, "queue": target.queue}))
        for target in targets:
            for index in range(1, target.shards + 1):
                steps.append(fill(parts["shard_step"], _shard_values(target, index, parts)))
        closing = ("report_step" if kind is Kind.NIGHTLY
                   else "check_step" if any(t.shards > 1 for t in targets) else None)
        if closing:
            # After failed tests too: that is when the report and the plans matter most.
            steps.append({"wait": None, "continue_on_failure": True})
            steps.append(fill(parts[closing], common))
    doc = {k: v for k, v in template.items() if k not in ("x-harness", "steps")}
    doc["steps"] = steps
    return doc
