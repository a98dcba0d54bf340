"""The pytest controller's own view of the CPU, handed to each xdist worker (its
workerinput), so a test can check the process that started the workers too."""

from __future__ import annotations

import json
from typing import Any

from cpu_seen import seen


def pytest_configure_node(node: Any) -> None:  # xdist's hook, in the controller
    node.workerinput["controller_cpu"] = json.dumps(seen())
