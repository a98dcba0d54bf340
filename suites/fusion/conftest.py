"""The fusion suite's fixtures beyond the harness plugin's.

Every test runs with the platform's kernel registry installed (the selection the parity
suite asserts and ``harness kernels`` prints), so the ops inside compiled and eager graphs,
and the fused ops' component kernels, are the platform's providers, not ``native`` alone.
"""

from collections.abc import Iterator
from typing import Any

import pytest

from harness.plugin.expectations import expectations  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def platform_registry(platform: Any) -> Iterator[Any]:
    from refengine import registry

    with registry.using(registry.Registry.for_platform(platform)) as installed:
        yield installed
