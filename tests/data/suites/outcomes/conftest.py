"""``OUTCOMES_MODE=cut``: the suite's process is killed while pytest writes its JUnit, the
file on disk cut inside its closing tag (what a kill or a full disk leaves)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest


@pytest.hookimpl(trylast=True)  # after pytest's junitxml wrote the file
def pytest_sessionfinish(session: pytest.Session) -> None:
    xmlpath = session.config.option.xmlpath
    if os.environ.get("OUTCOMES_MODE") != "cut" or not xmlpath:
        return
    path = Path(xmlpath)
    path.write_bytes(path.read_bytes().rstrip()[:-len("</testsuites>") + 4])
    os.kill(os.getpid(), signal.SIGKILL)
