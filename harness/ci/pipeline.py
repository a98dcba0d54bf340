"""CI pipelines from the matrices: one step per matrix x shard, and the nightly report.

CI systems are the distributed engine; this only writes their configuration. The
shape of each step comes from a hand-editable template (``ci/templates/<provider>.yml``)
whose placeholders are filled per matrix and shard; the generator decides how many
steps there are and in what order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ConfigError, UsageError

PROVIDERS = ("buildkite", "github")
GITHUB_DEFAULT_RUNNER = "ubuntu-latest"
_PLACEHOLDER = re.compile(
    r"\{(matrix|index|count|queue|timeout|shards|shard_args|shard_label|needs|report_queue"
    r"|select_args|fetch_depth)\}"
)
_REQUIRED = {
    "buildkite": ("shard_step", "report_step"),
    "github": ("test_job", "report_job", "nightly_on"),
}


@dataclass(frozen=True, kw_only=True)
class CiTarget:
    """What the pipeline needs of one matrix (its ``ci:`` section)."""

    matrix: str
    queue: str | None
    shards: int
    timeout_minutes: int
    nightly: bool
    # A pull-request pipeline (--changed-since): what each step adds to `harness run`
    # (" --changed-since <sha>", " --docker"), and why the lane is in it.
    select_args: str = ""
    why: str = ""


class _TemplateLoader(yaml.SafeLoader):
    """YAML 1.2 booleans only: GitHub's ``on:`` key must stay the string "on"."""


_TemplateLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_TemplateLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_template(path: Path, provider: str) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_TemplateLoader)
    except OSError as error:
        raise ConfigError(f"cannot read CI template ({error.strerror or error})",
                          file=str(path)) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(f"not valid YAML ({getattr(error, 'problem', error)})",
                          file=str(path), line=line) from None
    if not isinstance(data, dict) or not isinstance(data.get("x-harness"), dict):
        raise ConfigError("expected a mapping with an x-harness section", file=str(path))
    for key in _REQUIRED[provider]:
        if key not in data["x-harness"]:
            raise ConfigError("missing (the generator fills it per step)",
                              file=str(path), key=f"x-harness.{key}")
    return data


def fill(node: Any, values: Mapping[str, Any]) -> Any:
    """Substitute placeholders in every string; a lone placeholder keeps its value's type.

    A mapping entry whose value is a lone placeholder for None is dropped, and so is a
    mapping left empty by that (``agents: {queue: null}`` disappears).
    """
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            filled = fill(value, values)
            if filled is None and isinstance(value, str) and _PLACEHOLDER.fullmatch(value):
                continue
            if filled == {} and value:
                continue
            out[fill(key, values)] = filled
        return out
    if isinstance(node, list):
        return [fill(item, values) for item in node]
    if isinstance(node, str):
        whole = _PLACEHOLDER.fullmatch(node)
        if whole:
            return values.get(whole.group(1))
        return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), node)
    return node


def _shard_values(target: CiTarget, index: str) -> dict[str, Any]:
    many = target.shards > 1
    return {
        "matrix": target.matrix,
        "index": index,
        "count": target.shards,
        "timeout": target.timeout_minutes,
        "shard_args": f" --shard {index}/{target.shards}" if many else "",
        "shard_label": f" {index}/{target.shards}" if many else "",
        "select_args": target.select_args,
        # git diff needs the history back to the base commit; a full run does not
        "fetch_depth": 0 if target.select_args else 1,
    }


def buildkite(targets: Sequence[CiTarget], template: Mapping[str, Any], *, nightly: bool,
              report_queue: str | None = None) -> dict[str, Any]:
    parts = template["x-harness"]
    steps: list[Any] = []
    for target in targets:
        for index in range(1, target.shards + 1):
            values = {**_shard_values(target, str(index)), "queue": target.queue}
            steps.append(fill(parts["shard_step"], values))
    if nightly:
        # The report must run after failed tests too: that is when it matters most.
        steps.append({"wait": None, "continue_on_failure": True})
        steps.append(fill(parts["report_step"], {"report_queue": report_queue}))
    doc = {k: v for k, v in template.items() if k not in ("x-harness", "steps")}
    doc["steps"] = steps
    return doc


def github_job_id(matrix: str) -> str:
    return "test-" + re.sub(r"[^A-Za-z0-9_-]", "-", matrix)


def github(targets: Sequence[CiTarget], template: Mapping[str, Any], *, nightly: bool,
           report_queue: str | None = None) -> dict[str, Any]:
    parts = template["x-harness"]
    jobs: dict[str, Any] = {}
    for target in targets:
        values = {
            **_shard_values(target, "${{ matrix.shard }}"),
            "queue": target.queue or GITHUB_DEFAULT_RUNNER,
            "shards": list(range(1, target.shards + 1)),
        }
        jobs[github_job_id(target.matrix)] = fill(parts["test_job"], values)
    if nightly:
        jobs["nightly-report"] = fill(parts["report_job"], {
            "needs": list(jobs), "report_queue": report_queue or GITHUB_DEFAULT_RUNNER,
        })
    doc: dict[str, Any] = {}
    for key, value in template.items():
        if key == "x-harness" or key == "jobs":
            continue
        doc[key] = parts["nightly_on"] if key == "on" and nightly else value
    if nightly and "on" not in doc:
        doc["on"] = parts["nightly_on"]
    doc["jobs"] = jobs
    return doc


def render(doc: Mapping[str, Any], provider: str, template: str,
           notes: Sequence[str] = ()) -> str:
    header = (f"# Generated by `harness ci pipeline --provider {provider}` from {template}.\n"
              "# Edit the template or the matrices' ci: sections, then generate again.\n")
    header += "".join(f"# {line}\n" for line in notes)
    body = yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False, width=1000)
    return header + body


def _check_selectable(template: Mapping[str, Any], provider: str, path: Path) -> None:
    key = "shard_step" if provider == "buildkite" else "test_job"
    if "{select_args}" not in yaml.safe_dump(template["x-harness"][key]):
        raise ConfigError("has no {select_args} placeholder: a --changed-since pipeline "
                          "would run every test", file=str(path), key=f"x-harness.{key}")


def generate(targets: Sequence[CiTarget], provider: str, template_path: Path, *,
             nightly: bool, report_queue: str | None = None,
             shown_template: str | None = None, changed: bool = False,
             notes: Sequence[str] = ()) -> str:
    """The pipeline text. ``changed``: a pull-request pipeline, which may hold no test
    step at all (a change no lane is affected by)."""
    if provider not in PROVIDERS:
        raise UsageError(f"--provider {provider}: expected one of {', '.join(PROVIDERS)}")
    if not targets and not changed:
        raise UsageError("no matrices to put in the pipeline")
    template = load_template(template_path, provider)
    if changed:
        _check_selectable(template, provider, template_path)
    build = buildkite if provider == "buildkite" else github
    doc = build(targets, template, nightly=nightly, report_queue=report_queue)
    if provider == "github" and not doc["jobs"]:
        doc["jobs"] = {"no-tests": {"runs-on": GITHUB_DEFAULT_RUNNER, "steps": [
            {"run": "echo 'harness: the change affects no lane'"}]}}
    return render(doc, provider, shown_template or str(template_path), notes)
