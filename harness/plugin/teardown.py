"""A plugin that adds to each test's teardown report: what it measured over the test (its
memory, plugin/memory.py; the ops it called, plugin/ops.py; the ops knocked out and their
raisers' calls, plugin/knockout.py), as properties the sidecar keeps or attributes the xdist
controller reads."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pluggy import Result


class OnTeardown:
    """Calls :meth:`teardown` with each test's teardown report once pytest made it."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]
                                  ) -> Generator[None, Result[pytest.TestReport], None]:
        outcome = yield
        if call.when == "teardown":
            self.teardown(item, outcome.get_result())

    def teardown(self, item: pytest.Item, report: pytest.TestReport) -> None:
        raise NotImplementedError
