"""The peak memory of a process, for tests and benchmarks that measure a child of their own.

A process's peak RSS is its ``VmHWM`` (``/proc/<pid>/status``): its peak since its exec. A
child's ``ru_maxrss`` is no such measure: Linux carries into it, across the exec, the peak of the
process it was forked from. A benchmark that runs the HBase test server in its own process, or a
test run after most of the suite, would then read its own peak as the child's (about 2 KB a row
of the test server's table was once taken for a leak of the HBase client's scan).

Linux counts RSS approximately (per-CPU counters, summed in batches), so two readings of a
process whose peak did not move may differ by a few hundred KiB, either way.

>>> peak_rss_kib() > 0
True
"""

from __future__ import annotations

__all__ = ["peak_rss_kib"]


def peak_rss_kib(pid: int | str = "self") -> int:
    """The peak RSS of process *pid* (this one by default) so far, in KiB; 0 if there is no such
    process (any more)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
