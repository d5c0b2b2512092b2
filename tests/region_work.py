"""Work functions for the tasks of tests/test_jobs_regions.py. They run in worker processes,
which import this module: it imports nothing heavy (no pytest, no hypothesis)."""

from __future__ import annotations

from nutchy.exceptions import CellDecodeError, StoreError


def keys(table, settings, start, stop):
    return [page.key for page in table.scan(("status",), start=start, stop=stop)]


def fail_after_c(table, settings, start, stop):
    if start >= b"com.c":
        raise StoreError(f"the store failed in the range from {start!r}")
    return []


def fail_undecodable(table, settings, start, stop):
    if start:
        raise CellDecodeError(start, b"f:st", "int", "3 bytes")
    return []
