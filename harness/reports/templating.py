"""The Jinja2 environments: HTML with autoescaping, Markdown with an escaping finalizer.

In both, a value printed by a template is escaped unless it is ``Markup`` (an SVG chart
built with escaping, a Markdown code span from :mod:`harness.reports.mdescape`).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import jinja2
from markupsafe import Markup

from harness.reports import mdescape


def asset(name: str) -> str:
    return resources.files("harness.reports").joinpath("templates", name).read_text("utf-8")


def _loader() -> jinja2.BaseLoader:
    return jinja2.FunctionLoader(lambda name: asset(name))


@cache
def html_env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=_loader(), autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=False
    )


def _md_finalize(value: object) -> object:
    if isinstance(value, Markup | int | float):
        return value
    return mdescape.text(value, limit=10_000)


@cache
def markdown_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=_loader(),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        finalize=_md_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["code"] = mdescape.code
    env.filters["text"] = mdescape.text
    return env
