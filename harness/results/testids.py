"""Normalised test ids: one spelling for a test whatever its device ordinal or dtype alias.

Known failures match on these, and the history keys test cases by them (``case_ids``
rebuilds one from another producer's JUnit attributes), so that
``test_x[cuda:0-torch.bfloat16]`` and ``test_x[cuda-bf16]`` are the same test. No pytest
import here: the CLI uses it at start-up.
"""

from __future__ import annotations

import functools
import re

_DEVICE_ORDINAL = re.compile(r"\b(cuda|xpu|hip|mps):\d+\b")
_TORCH_PREFIX = re.compile(r"\btorch\.")
_ALIASES = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float": "float32",
}
_ALIAS_RE = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(_ALIASES) + r")(?![A-Za-z0-9_])")


def normalise_test_id(nodeid: str) -> str:
    """Strip device ordinals, ``torch.`` prefixes and dtype aliases from a test id."""
    text = _DEVICE_ORDINAL.sub(r"\1", nodeid) if ":" in nodeid else nodeid
    text = _TORCH_PREFIX.sub("", text) if "torch." in text else text
    return _ALIAS_RE.sub(_alias, text)


def _alias(match: re.Match[str]) -> str:
    return _ALIASES[match.group(1)]


_DEVICES = r"(?:cpu|cuda|xpu|hip|rocm|mps|meta|npu|hpu|mtia)"
_DEVICE_TOKEN = re.compile(rf"{_DEVICES}(?::\d+)?|device\d*", re.IGNORECASE)
# PyTorch's instantiate_device_type_tests: test_add_cuda_float16 / TestOpsCUDA.
_DEVICE_SUFFIX = re.compile(rf"_{_DEVICES}(?=(?:_[a-z]*\d+[a-z0-9]*|_bool|_half)*$)")
_CLASS_DEVICE_SUFFIX = re.compile(r"(?<=[a-z])(?:CPU|CUDA|XPU|MPS|HIP)$")


def stable_ids(nodeid: str) -> tuple[str, str, str]:
    """The one rule from a test's id to the ids the history keeps.

    Returns (nodeid, key, params): ``nodeid`` unchanged (pytest's own, what repro
    runs); ``key`` normalised and without device tokens or device-type suffixes, so
    ``test_x[cuda:0-bf16]`` on ROCm and ``test_x[cpu-bfloat16]`` on the CPU are one
    row of the test x platform grid; ``params`` the normalised parameter id.
    """
    head, sep, last = nodeid.rpartition("::")
    base, bracket, rest = last.partition("[")
    raw_params = rest[:-1] if bracket and rest.endswith("]") else ""
    params = normalise_test_id(raw_params)
    kept = [token for token in params.split("-") if not _DEVICE_TOKEN.fullmatch(token)]
    key_base = _DEVICE_SUFFIX.sub("", base)
    key_head = "::".join(_CLASS_DEVICE_SUFFIX.sub("", part) for part in head.split("::"))
    key = f"{key_head}::{key_base}" if sep else key_base
    if kept and kept != [""]:
        key += "[" + "-".join(kept) + "]"
    return nodeid, normalise_test_id(key), "-".join(kept)


_PYTEST_MODULE = re.compile(r"test_\w*|\w+_test|tests?|conftest")


def _module_path(classname: str, file: str) -> tuple[str, list[str]]:
    """``suites.parity.test_x.TestA`` -> (``suites/parity/test_x.py``, [``TestA``]).

    Only pytest-looking names are turned into paths; a Java or gtest class name
    (``com.example.CalculatorTest``) stays as it is.
    """
    parts = classname.split(".")
    base = file.rpartition("/")[2]  # Path(file).stem, without building a Path
    stem = (base[:-3] if base != ".py" else base) if file.endswith(".py") else ""
    module_end = -1
    for index, part in enumerate(parts):
        if part == stem or (not stem and _PYTEST_MODULE.fullmatch(part)):
            module_end = index
    if module_end < 0:
        return (file.replace("\\", "/"), []) if stem else ("", [])
    path = file.replace("\\", "/") if stem else "/".join(parts[: module_end + 1]) + ".py"
    return path, parts[module_end + 1 :]


# Nightly runs repeat the same names; caching keeps ingest linear in distinct ids. The
# size bounds memory (each entry is a few hundred bytes) when every id is new.
_ID_CACHE = 1 << 16
recorded_ids = functools.lru_cache(maxsize=_ID_CACHE)(stable_ids)


@functools.lru_cache(maxsize=_ID_CACHE)
def case_ids(classname: str, name: str, file: str = "") -> tuple[str, str, str]:
    """Return (nodeid, key, params) for a JUnit case that carries no pytest node id
    (another producer's file): the id is rebuilt from ``classname``/``name``/``file``,
    normalised, then keyed by the same rule as a recorded node id (:func:`stable_ids`).
    """
    path, classes = _module_path(classname, file) if classname else ("", [])
    if path:
        head = "::".join([path, *classes])
    elif classname and classname != name.partition("[")[0]:
        head = classname
    else:
        head = ""
    return stable_ids(normalise_test_id(f"{head}::{name}" if head else name))
