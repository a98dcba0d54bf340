"""On the agent's own CPU, a suite inherits the agent's host-tuned CPU settings as set."""

from __future__ import annotations

import os


def test_the_agents_settings_are_inherited() -> None:
    assert os.environ.get("OPENBLAS_CORETYPE") == "Haswell"
    assert os.environ.get("OPENBLAS_L2_SIZE") == "1048576"
