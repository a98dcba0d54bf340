"""A GitHub Actions workflow from the template's parts (``ci/templates/github.yml``).

A workflow is committed once and GitHub cannot upload jobs at run time, so the lanes are
chosen at run time: a select job (``harness ci select``) writes the lanes and shards as a
JSON matrix, which the image and test jobs expand with ``fromJSON``; against the merge
base with the pull request's target, every lane on a push or dispatch, the nightly lanes
on the schedule. The workflow itself holds no matrix: it does not go stale when a
matrix's ``ci:`` section changes. The nightly (``--nightly``) replaces the top-level keys
named in ``x-harness.nightly`` (name, triggers, concurrency) and ends with the report job,
the others with the shard-plan check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.ci.pipeline import GITHUB_DEFAULT_RUNNER, CiTarget, Kind, fill

TEMPLATE_PARTS = ("setup", "nightly", "select_job", "image_job", "test_job", "report_job",
                  "check_job")
UPLOADS_AT_RUN_TIME = False
WHY_NO_UPLOAD = ("a workflow is committed once and cannot be uploaded at run time; generate it "
                 "without --changed-since (its select job diffs against the pull request's "
                 "target when it runs)")


def build(targets: Sequence[CiTarget], template: Mapping[str, Any], *, kind: Kind,
          report_queue: str | None = None, matrices: Sequence[str] = ()) -> dict[str, object]:
    parts = template["x-harness"]
    mode = " --nightly" if kind is Kind.NIGHTLY else ""
    if matrices:
        mode += f" --matrices {','.join(matrices)}"
    values = {"report_queue": report_queue or GITHUB_DEFAULT_RUNNER, "select_mode": mode,
              "setup": parts["setup"]}
    jobs = {
        "select": fill(parts["select_job"], values),
        "images": fill(parts["image_job"], values),
        "test": fill(parts["test_job"], values),
    }
    if kind is Kind.NIGHTLY:
        jobs["report"] = fill(parts["report_job"], values)
    else:
        jobs["check"] = fill(parts["check_job"], values)
    doc: dict[str, object] = {}
    overrides = parts["nightly"] if kind is Kind.NIGHTLY else {}
    for key, value in template.items():
        if key not in ("x-harness", "jobs"):
            doc[key] = overrides.get(key, value)
    for key, value in overrides.items():
        doc.setdefault(key, value)
    doc["jobs"] = jobs
    return doc
