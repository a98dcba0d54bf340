"""The strict JUnit readers the tests hold the harness's JUnit against.

``junit_xsd`` is the xunit2 schema pytest itself tests its JUnit with (junit-10.xsd, the
Jenkins xunit plugin's), read out of the sdist of the pytest installed here, which is
fetched from the package registry with pip once per machine (nothing of it is in this
repository). ``schema_errors`` validates a file with ``xmlschema``; ``count_problems``
checks every count attribute against the cases, as junitparser counts them.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

XSD_NAME = "junit-10.xsd"


def junit_xsd(cache: Path) -> Path:
    """junit-10.xsd from the sdist of the installed pytest, kept under ``cache``."""
    from filelock import FileLock

    folder = cache / "test-data" / f"pytest-{pytest.__version__}"
    xsd = folder / XSD_NAME
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".lock")):
        if xsd.is_file():
            return xsd
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", f"pytest=={pytest.__version__}",
             "--no-deps", "--no-binary", ":all:", "-d", str(folder)],
            capture_output=True, text=True, timeout=600, check=False)
        sdists = sorted(folder.glob("pytest-*.tar.gz"))
        if done.returncode != 0 or not sdists:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.fail(f"pip download of pytest {pytest.__version__}'s sdist failed: {tail}")
        with tarfile.open(sdists[0]) as sdist:
            member = next(m for m in sdist.getmembers() if m.name.endswith(f"/{XSD_NAME}"))
            handle = sdist.extractfile(member)
            assert handle is not None
            data = handle.read()
        tmp = xsd.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(xsd)
    return xsd


def schema_errors(xsd: Path, junit: Path) -> list[str]:
    """Every way ``junit`` breaks the schema, one line each (none: it is valid)."""
    import xmlschema

    schema = xmlschema.XMLSchema(str(xsd))
    errors = schema.iter_errors(str(junit))
    return [f"{junit.name}: {error.path}: {error.reason}" for error in errors]


def _first_result(case: ET.Element) -> str | None:
    return next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), None)


def count_problems(junit: Path) -> list[str]:
    """Count attributes (the root's, each testsuite's) that differ from the cases they
    hold, counted as junitparser does: a case by its first failure, error or skipped."""
    from junitparser import JUnitXml, TestSuite

    problems = []
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else [root, *root.iter("testsuite")]
    for element in suites:
        cases = list(element.iter("testcase"))
        firsts = [_first_result(case) for case in cases]
        held = {"tests": len(cases), "failures": firsts.count("failure"),
                "errors": firsts.count("error"), "skipped": firsts.count("skipped")}
        for key, value in held.items():
            said = element.get(key)
            if said is not None and int(said) != value:
                problems.append(f"{element.tag} {element.get('name')}: {key}={said}, holds {value}")
    # junitparser's own statistics, recomputed from the cases, against what the file says.
    xml = JUnitXml.fromfile(str(junit))
    suites = [xml] if isinstance(xml, TestSuite) else list(xml)
    for suite in suites:
        said = (suite.tests, suite.failures, suite.errors, suite.skipped)
        suite.update_statistics()
        if (suite.tests, suite.failures, suite.errors, suite.skipped) != said:
            problems.append(f"junitparser: suite {suite.name}: {said} recounted "
                            f"{(suite.tests, suite.failures, suite.errors, suite.skipped)}")
    if not isinstance(xml, TestSuite):
        said = (xml.tests, xml.failures, xml.errors)
        xml.update_statistics()
        if (xml.tests, xml.failures, xml.errors) != said:
            problems.append(f"junitparser: root {said} recounted "
                            f"{(xml.tests, xml.failures, xml.errors)}")
    return problems
