"""``-p harness.pytest_entry``: load the harness plugin where it is not installed.

Per-matrix venvs and containers run pytest from the checkout (PYTHONPATH), without the
``pytest11`` entry point. The plugin is registered here under the entry point's own
name, ``harness``, so that where the entry point *is* visible too (an installed or
legacy editable checkout on the path) pytest skips it instead of loading the plugin a
second time, which it refuses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.has_plugin("harness"):
        import harness.plugin

        pluginmanager.register(harness.plugin, "harness")
