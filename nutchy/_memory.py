"""Handing memory back to the system between the phases of a crawl.

A long-lived process of a crawl (``nutchy crawl`` itself, its fetch process, its parse process)
has phases that allocate much and then free it all: a generate, an updatedb, the fetch of a
batch. CPython gives what it frees to the C library's ``malloc``, and glibc's ``malloc`` keeps
freed memory in the process (in the middle of its heap, or in the arenas of threads) rather
than return it to the system, so the process's resident size stays at the peak of its largest
phase, and the peaks of the crawl's processes add up even when they come at different times.
:func:`release_memory` asks glibc to return every free page (``malloc_trim(0)``); elsewhere
(another C library) it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

__all__ = ["release_memory"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        # the symbols of the interpreter's process, the C library's among them
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc
    return trim


def release_memory() -> None:
    """Return the memory ``malloc`` holds free to the system (glibc), or do nothing. It walks
    the heap: a few milliseconds for a heap of some 100 MB, so call it after a phase, not per
    item."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
