"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

pytest_plugins = ("pytester",)
