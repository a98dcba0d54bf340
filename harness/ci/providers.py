"""The CI providers a pipeline is generated for: a protocol, and one dict of modules.

A provider is a module beside this one (``buildkite.py``, ``github.py``) with what
`CiProvider` names, and a template ``ci/templates/<name>.yml``; adding one is that module
and its entry in `CI_PROVIDERS`. Nothing else names a provider: the command line, the
template check and the generator ask the module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol

from harness.ci import buildkite, github
from harness.ci.pipeline import CiTarget, Kind, load_template, render
from harness.errors import UsageError


class CiProvider(Protocol):
    """What a provider's module has (as for any protocol a module meets, ``self`` is it).

    The constants are read-only properties here, so that a module's narrower literal
    (a tuple of nine strings) still meets them."""

    @property
    def TEMPLATE_PARTS(self) -> tuple[str, ...]:
        """The ``x-harness`` parts of its template that `build` fills."""

    @property
    def UPLOADS_AT_RUN_TIME(self) -> bool:
        """Whether a running step can upload the rest of the pipeline: a pull request's
        pipeline then selects its lanes when the build runs, and ``--changed-since``
        selects them now. Without it the pipeline's own job selects at run time."""

    @property
    def WHY_NO_UPLOAD(self) -> str:
        """Why ``--changed-since`` is refused where it cannot upload ("" where it can)."""

    def build(self, targets: Sequence[CiTarget], template: Mapping[str, Any], *, kind: Kind,
              report_queue: str | None, matrices: Sequence[str]) -> dict[str, object]:
        """The pipeline document (before rendering) from the template's parts."""


CI_PROVIDERS: Final[dict[str, CiProvider]] = {
    "buildkite": buildkite,
    "github": github,
}


def ci_provider(name: str) -> CiProvider:
    try:
        return CI_PROVIDERS[name]
    except KeyError:
        raise UsageError(f"--provider {name}: expected one of "
                         f"{', '.join(CI_PROVIDERS)}") from None


def generate(targets: Sequence[CiTarget], provider: str, template_path: Path, *,
             kind: Kind, report_queue: str | None = None, wanted: Sequence[str] = (),
             shown_template: str | None = None, notes: Sequence[str] = ()) -> str:
    """The pipeline text. A CHANGED pipeline may hold no test step at all (a change no
    lane is affected by). ``wanted``: the matrices asked for by name (GitHub's select job
    keeps to them)."""
    module = ci_provider(provider)
    if not targets and kind is not Kind.CHANGED:
        raise UsageError("no matrices to put in the pipeline")
    template = load_template(template_path, module.TEMPLATE_PARTS)
    doc = module.build(targets, template, kind=kind, report_queue=report_queue,
                       matrices=wanted)
    return render(doc, provider, shown_template or str(template_path), notes)
