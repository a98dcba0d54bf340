"""Merge a run's JUnit files into merged.xml with junitparser."""

from __future__ import annotations

from pathlib import Path

from harness.errors import InfraError


def merge_junit(files: list[Path], out: Path) -> None:
    from junitparser import JUnitXml

    merged = JUnitXml(name="harness")
    for path in sorted(files):
        try:
            merged += JUnitXml.fromfile(str(path))
        except Exception as error:  # junitparser raises lxml/etree errors of several kinds
            raise InfraError(f"{path}: unreadable JUnit: {error}") from None
    merged.update_statistics()  # type: ignore[no-untyped-call]
    merged.write(str(out), pretty=True)
