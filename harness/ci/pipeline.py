"""CI pipelines from the matrices: a step per matrix x shard, the plan and report steps.

CI systems are the distributed engine; this only writes their configuration. The
shape of each step comes from a hand-editable template (``ci/templates/<provider>.yml``)
whose placeholders are filled per matrix and shard; the generator decides how many
steps there are and in what order (a provider's module, ``providers.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ConfigError

GITHUB_DEFAULT_RUNNER = "ubuntu-latest"
_PLACEHOLDER = re.compile(
    r"\{(matrix|matrices|index|count|queue|timeout|shards|shard_args|shard_label|shard_key"
    r"|needs|report_queue|report_queue_args|select_args|soft_fail|depends_on|setup"
    r"|image_load|cpu_setup|select_mode)\}"
)


class Kind(StrEnum):
    """What a pipeline is for."""

    FULL = "full"  # every lane, every test (a push to main)
    NIGHTLY = "nightly"  # the nightly lanes, then the report that keeps the history
    CHANGED = "changed"  # Buildkite: the lanes a change affects, selected now (uploaded)
    PULL_REQUEST = "pull-request"  # selects at run time (GitHub's select job, Buildkite's upload)


@dataclass(frozen=True, kw_only=True)
class CiTarget:
    """What the pipeline needs of one matrix (its ``ci:`` section)."""

    matrix: str
    queue: str | None
    shards: int
    timeout_minutes: int
    nightly: bool
    runs_on: tuple[str, ...] = (GITHUB_DEFAULT_RUNNER,)
    soft_fail: bool = False
    docker: bool = False  # runs in its image: one image build per build, before the shards
    qemu: bool = False  # its CPU is emulated (cpu: {emulated: ...}): qemu-user on the agent
    # A --changed-since pipeline: what each step adds to `harness run`
    # (" --changed-since <sha>", " --docker"), and why the lane is in it.
    select_args: str = ""
    why: str = ""

    @property
    def self_hosted(self) -> bool:
        return "self-hosted" in self.runs_on


class _TemplateLoader(yaml.SafeLoader):
    """YAML 1.2 booleans only: GitHub's ``on:`` key must stay the string "on"."""


_TemplateLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_TemplateLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_template(path: Path, parts: Sequence[str]) -> dict[str, Any]:
    """The template as YAML reads it: a mapping whose ``x-harness`` section holds ``parts``
    (the providers take each part by key, as hand-edited YAML of any shape)."""
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
    for key in parts:
        if key not in data["x-harness"]:
            raise ConfigError("missing (the generator fills it per step)",
                              file=str(path), key=f"x-harness.{key}")
    return data


def fill(node: object, values: Mapping[str, object]) -> object:
    """Substitute placeholders in every string; a lone placeholder keeps its value's type.

    A mapping entry whose value is a lone placeholder for None is dropped, and so is a
    mapping left empty by that (``agents: {queue: null}`` disappears). A list item that
    is a lone placeholder for a list is spliced in (``commands: ["{setup}", ...]``).
    """
    if isinstance(node, dict):
        out: dict[object, object] = {}
        for key, value in node.items():
            filled = fill(value, values)
            if filled is None and isinstance(value, str) and _PLACEHOLDER.fullmatch(value):
                continue
            if filled == {} and value:
                continue
            out[fill(key, values)] = filled
        return out
    if isinstance(node, list):
        items: list[object] = []
        for item in node:
            filled = fill(item, values)
            lone = isinstance(item, str) and _PLACEHOLDER.fullmatch(item)
            items.extend(filled if lone and isinstance(filled, list) else [filled])
        return items
    if isinstance(node, str):
        whole = _PLACEHOLDER.fullmatch(node)
        if whole:
            return values.get(whole.group(1))
        return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), node)
    return node


def render(doc: Mapping[str, object], provider: str, template: str,
           notes: Sequence[str] = ()) -> str:
    header = (f"# Generated by `harness ci pipeline --provider {provider}` from {template}.\n"
              "# Edit the template or the matrices' ci: sections, then generate again.\n")
    header += "".join(f"# {line}\n" for line in notes)
    body = yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False, width=1000)
    return header + body
