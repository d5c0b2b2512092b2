"""Fetch schedules: when a page is due again.

For now this module holds only what generate needs, :func:`should_fetch`. The schedule classes
(Nutch's ``DefaultFetchSchedule`` and ``AdaptiveFetchSchedule``, which compute the next fetch time
after a fetch) belong here too and will implement the same rule through it.

Times are milliseconds since the epoch and intervals seconds, as in the web table. Nothing here
reads the clock: the caller passes *now*.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Due", "should_fetch"]


class Due(NamedTuple):
    """The answer of :func:`should_fetch`.

    *due* tells whether the page may be fetched at *now*. *fetch_interval* is the interval the
    page should carry from now on; it differs from the stored one only when the page was
    scheduled implausibly far ahead with an interval longer than the maximum (see
    :func:`should_fetch`), and a caller that selects the page writes it back.
    """

    due: bool
    fetch_interval: int


def should_fetch(fetch_time: int, fetch_interval: int, now: int, max_interval: int) -> Due:
    """Tell whether a page with *fetch_time* (ms) and *fetch_interval* (s) is due at *now* (ms).

    A page is due when its fetch time is at or before *now*:

    >>> should_fetch(1_000, 2592000, now=1_000, max_interval=7776000)
    Due(due=True, fetch_interval=2592000)
    >>> should_fetch(1_001, 2592000, now=1_000, max_interval=7776000)
    Due(due=False, fetch_interval=2592000)

    A fetch time more than *max_interval* seconds (``db.fetch.interval.max``) in the future can
    only come from a broken schedule or clock, so the page is treated as due now, and an interval
    longer than the maximum is cut to ``round(0.9 * max_interval)``. This is
    ``AbstractFetchSchedule.shouldFetch`` as Nutch 1.x applies it. Nutch 2.x computes the same
    correction but then tests the *original* fetch time, so such a page is never selected.

    >>> day = 86_400_000
    >>> should_fetch(100 * day, 200 * 86400, now=0, max_interval=90 * 86400)
    Due(due=True, fetch_interval=6998400)
    >>> should_fetch(89 * day, 200 * 86400, now=0, max_interval=90 * 86400)
    Due(due=False, fetch_interval=17280000)
    """
    if fetch_time - now > max_interval * 1000:
        if fetch_interval > max_interval:
            fetch_interval = round(max_interval * 0.9)
        return Due(True, fetch_interval)
    return Due(fetch_time <= now, fetch_interval)
