"""Runners execute a plan's invocations: locally (subprocess) or in a container."""
