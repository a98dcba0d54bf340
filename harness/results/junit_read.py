"""Read JUnit XML from any producer into one normalised shape, streaming.

Producers disagree on almost everything: pytest (xunit1 with per-case properties,
xunit2 without), Jenkins-style classname + name, nested ``<testsuites>``, Maven
surefire's ``<flakyFailure>`` / ``<rerunFailure>``, pytest-rerunfailures (rerun
elements, or one ``<testcase>`` per attempt), gtest (``status`` / ``result``
attributes) and ctest (``status="fail"`` / ``"notrun"``). The history store needs one
shape, and must read a million cases quickly, so this is an ``iterparse`` loop that
drops each element once read. A truncated file keeps every case before the damage and
reports one line naming the file and the parser's line:column.
"""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.testids import normalise_test_id

STATUSES = ("passed", "failed", "error", "skipped", "xfail", "xpass")

# The properties the report reads get their own columns; the rest stay as text.
COLUMN_PROPERTIES = (
    "provider",
    "op",
    "dtype",
    "max_abs_err",
    "max_rel_err",
    "atol",
    "rtol",
    "headroom",
    "requires",
)
_RERUN_TAGS = frozenset({"rerunFailure", "rerunError", "flakyFailure", "flakyError", "rerun"})
_DEVICES = r"(?:cpu|cuda|xpu|hip|rocm|mps|meta|npu|hpu|mtia)"
_DEVICE_TOKEN = re.compile(rf"{_DEVICES}(?::\d+)?|device\d*", re.IGNORECASE)
# PyTorch's instantiate_device_type_tests: test_add_cuda_float16 / TestOpsCUDA.
_DEVICE_SUFFIX = re.compile(rf"_{_DEVICES}(?=(?:_[a-z]*\d+[a-z0-9]*|_bool|_half)*$)")
_CLASS_DEVICE_SUFFIX = re.compile(r"(?<=[a-z])(?:CPU|CUDA|XPU|MPS|HIP)$")
_MESSAGE_LIMIT = 2000

Warn = Callable[[str], None]


@dataclass(slots=True)
class Case:
    suite: str
    nodeid: str  # the plugin's normalised id (device kept, ordinals dropped)
    key: str  # nodeid without device parts: the same test on every platform
    params: str
    status: str
    duration: float
    message: str
    reruns: int  # failed attempts before the final one
    properties: dict[str, str]


@dataclass(slots=True)
class Suite:
    name: str
    tests: int = 0
    time: float = 0.0
    timestamp: str = ""
    hostname: str = ""
    properties: dict[str, str] = field(default_factory=dict)


_PYTEST_MODULE = re.compile(r"test_\w*|\w+_test|tests?|conftest")


def _module_path(classname: str, file: str) -> tuple[str, list[str]]:
    """``suites.parity.test_x.TestA`` -> (``suites/parity/test_x.py``, [``TestA``]).

    Only pytest-looking names are turned into paths; a Java or gtest class name
    (``com.example.CalculatorTest``) stays as it is.
    """
    parts = classname.split(".")
    stem = Path(file).stem if file.endswith(".py") else ""
    module_end = -1
    for index, part in enumerate(parts):
        if part == stem or (not stem and _PYTEST_MODULE.fullmatch(part)):
            module_end = index
    if module_end < 0:
        return (file.replace("\\", "/"), []) if stem else ("", [])
    path = file.replace("\\", "/") if stem else "/".join(parts[: module_end + 1]) + ".py"
    return path, parts[module_end + 1 :]


# Nightly runs repeat the same names; caching keeps ingest linear in distinct ids.
@functools.lru_cache(maxsize=1 << 17)
def case_ids(classname: str, name: str, file: str = "") -> tuple[str, str, str]:
    """Return (nodeid, key, params) for one JUnit test case.

    nodeid follows the plugin's normalisation (so known_failures patterns match it);
    key also drops device tokens from the parameter ids and device-type suffixes, so
    ``test_x[cuda:0-bfloat16]`` on ROCm and ``test_x[cpu-bfloat16]`` on CPU are one row.
    """
    base, bracket, rest = name.partition("[")
    raw_params = rest[:-1] if bracket and rest.endswith("]") else ""
    path, classes = _module_path(classname, file) if classname else ("", [])
    if path:
        head = "::".join([path, *classes])
    elif classname and classname != base:
        head = classname
    else:
        head = ""
    nodeid = normalise_test_id(f"{head}::{name}" if head else name)
    params = normalise_test_id(raw_params)
    kept = [token for token in params.split("-") if not _DEVICE_TOKEN.fullmatch(token)]
    key_params = "-".join(kept)
    key_base = _DEVICE_SUFFIX.sub("", base)
    key_head = "::".join(_CLASS_DEVICE_SUFFIX.sub("", part) for part in head.split("::"))
    key = f"{key_head}::{key_base}" if key_head else key_base
    if key_params:
        key += f"[{key_params}]"
    return nodeid, normalise_test_id(key), key_params


def _message(element: ET.Element) -> str:
    text = element.get("message") or (element.text or "").strip().split("\n", 1)[0]
    return text[:_MESSAGE_LIMIT]


def _case_status(case: ET.Element) -> tuple[str, str, int]:
    status, message, reruns = "passed", "", 0
    for child in case:
        tag = child.tag
        if tag == "failure":
            message = _message(child)
            status = "xpass" if message.startswith("[XPASS(strict)]") else "failed"
        elif tag == "error":
            if status != "failed":
                status, message = "error", _message(child)
        elif tag == "skipped":
            if status == "passed":
                message = _message(child)
                xfail = child.get("type") == "pytest.xfail" or message == "expected test failure"
                status = "xfail" if xfail else "skipped"
        elif tag in _RERUN_TAGS:
            reruns += 1
            if not message:
                message = _message(child)
    if status == "passed":
        # gtest marks skips with attributes only; ctest says "fail" / "notrun".
        run_status = case.get("status", "")
        result = case.get("result", "")
        if result in ("skipped", "suppressed") or run_status in ("notrun", "disabled"):
            status = "skipped"
        elif run_status == "fail":
            status = "failed"
    return status, message, reruns


def _properties(element: ET.Element | None) -> dict[str, str]:
    if element is None:
        return {}
    found: dict[str, str] = {}
    for prop in element.iter("property"):
        name = prop.get("name")
        if name:
            found[name] = prop.get("value", prop.text or "")
    return found


class JunitReader:
    """Stream the cases of one file; ``suites`` fills in as their elements close."""

    def __init__(self, path: Path, warn: Warn) -> None:
        self.path = path
        self.warn = warn
        self.suites: dict[str, Suite] = {}
        self.truncated = False

    def __iter__(self) -> Iterator[Case]:
        stack: list[ET.Element] = []
        suite_names: list[str] = []
        pending: dict[tuple[str, str], Case] = {}
        try:
            for event, element in ET.iterparse(self.path, events=("start", "end")):
                if event == "start":
                    stack.append(element)
                    if element.tag == "testsuite":
                        name = element.get("name") or self.path.stem
                        suite_names.append(name)
                        self.suites.setdefault(name, Suite(name=name))
                    continue
                stack.pop()
                tag = element.tag
                if tag == "testcase":
                    self._add(element, suite_names, pending)
                elif tag == "properties" and stack and stack[-1].tag == "testsuite":
                    self.suites[suite_names[-1]].properties.update(_properties(element))
                elif tag == "testsuite":
                    self._close_suite(element, suite_names.pop())
                    yield from pending.values()
                    pending.clear()
                else:
                    continue
                if stack:
                    # Drop what was read so memory stays flat on huge files.
                    stack[-1].remove(element)
        except ET.ParseError as error:
            line, column = error.position
            self.truncated = True
            self.warn(
                f"{self.path}:{line}:{column}: malformed or truncated JUnit "
                f"({str(error).split(':', 1)[0]}); kept the test cases before it"
            )
        except OSError as error:
            self.truncated = True
            self.warn(f"{self.path}: cannot read JUnit ({error.strerror or error})")
        yield from pending.values()

    def _add(
        self, element: ET.Element, suite_names: list[str], pending: dict[tuple[str, str], Case]
    ) -> None:
        classname = element.get("classname", "")
        name = element.get("name", "")
        status, message, reruns = _case_status(element)
        props = _properties(element.find("properties"))
        nodeid, key, params = case_ids(classname, name, element.get("file", ""))
        try:
            duration = float(element.get("time") or 0.0)
        except ValueError:
            duration = 0.0
        suite = suite_names[-1] if suite_names else self.path.stem
        if suite not in self.suites:
            self.suites[suite] = Suite(name=suite)
        raw = (classname, name)
        earlier = pending.pop(raw, None)
        if earlier is not None:
            # One <testcase> per attempt (pytest-rerunfailures >= 16.6.1): last one wins.
            reruns += earlier.reruns + (earlier.status in ("failed", "error"))
            duration += earlier.duration
            if not message and earlier.status in ("failed", "error"):
                message = earlier.message
        pending[raw] = Case(suite, nodeid, key, params, status, duration, message, reruns, props)

    def _close_suite(self, element: ET.Element, name: str) -> None:
        suite = self.suites[name]
        suite.timestamp = element.get("timestamp", suite.timestamp)
        suite.hostname = element.get("hostname", suite.hostname)
        try:
            suite.tests = int(element.get("tests") or 0)
            suite.time = float(element.get("time") or 0.0)
        except ValueError:
            pass


def read_junit(path: Path, warn: Warn) -> tuple[list[Case], dict[str, Suite]]:
    """Read one file completely (small files, tests and tools)."""
    reader = JunitReader(path, warn)
    cases = list(reader)
    return cases, reader.suites
