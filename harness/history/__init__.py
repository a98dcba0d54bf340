"""The history store: an SQLite database of every run ingested, for reports and sharding."""

from __future__ import annotations

from harness.history.ingest import IngestResult, ingest_paths
from harness.history.schema import SCHEMA_VERSION, connect, default_db_path

__all__ = ["SCHEMA_VERSION", "IngestResult", "connect", "default_db_path", "ingest_paths"]
