"""The fusion suite's fixtures beyond the harness plugin's."""

from harness.plugin.expectations import expectations  # noqa: F401  (fixture)
