"""Fetch schedules: when a page is due again.

:func:`should_fetch` is what generate asks; the schedule classes, Nutch's ``DefaultFetchSchedule``
and ``AdaptiveFetchSchedule``, compute the next fetch time after a fetch for updatedb, and the
retry and gone schedules of failed fetches.

Times are milliseconds since the epoch and intervals seconds, as in the web table. Nothing here
reads the clock: the caller passes *now*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Final, NamedTuple

from nutchy.core.java import f32, java_div, java_round

__all__ = [
    "AdaptiveFetchSchedule",
    "ChangeState",
    "DefaultFetchSchedule",
    "Due",
    "FetchSchedule",
    "Schedule",
    "should_fetch",
]


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
    longer than the maximum is cut to ``Math.round(max_interval * 0.9f)``. This is
    ``AbstractFetchSchedule.shouldFetch`` as Nutch 1.x applies it. Nutch 2.x computes the same
    correction but then tests the *original* fetch time, so such a page is never selected.

    >>> day = 86_400_000
    >>> should_fetch(100 * day, 200 * 86400, now=0, max_interval=90 * 86400)
    Due(due=True, fetch_interval=6998400)
    >>> should_fetch(89 * day, 200 * 86400, now=0, max_interval=90 * 86400)
    Due(due=False, fetch_interval=17280000)

    The cut is Java's, a float product rounded half up: a maximum of 25 s gives 23 s, where
    Python's ``round(25 * 0.9)`` gives 22.

    >>> should_fetch(day, 60, now=0, max_interval=25)
    Due(due=True, fetch_interval=23)
    """
    if fetch_time - now > max_interval * 1000:
        if fetch_interval > max_interval:
            fetch_interval = _ninety_percent(max_interval)
        return Due(True, fetch_interval)
    return Due(fetch_time <= now, fetch_interval)


class ChangeState(IntEnum):
    """Whether the content changed since the previous fetch (Nutch's ``FetchSchedule.STATUS_*``)."""

    UNKNOWN = 0
    MODIFIED = 1
    NOTMODIFIED = 2


#: One day in milliseconds: the retry delay of :meth:`FetchSchedule.set_page_retry_schedule`.
DAY_MS: Final = 86_400_000


@dataclass(frozen=True, slots=True)
class Schedule:
    """The schedule fields of a page: what a :class:`FetchSchedule` reads and returns.

    Times are milliseconds since the epoch, *fetch_interval* is seconds.
    """

    fetch_time: int
    fetch_interval: int
    retries_since_fetch: int = 0
    modified_time: int = 0
    prev_modified_time: int = 0


def _ninety_percent(max_interval: int) -> int:
    """Nutch's ``Math.round(maxInterval * 0.9f)``: a float product, rounded half up."""
    return java_round(f32(f32(max_interval) * _NINE_TENTHS))


#: Java's ``0.9f``.
_NINE_TENTHS: Final = f32(0.9)


class FetchSchedule:
    """Nutch's ``AbstractFetchSchedule``: retry, gone and forced refetch; the interval never changes.

    *default_interval* is ``db.fetch.interval.default`` and *max_interval*
    ``db.fetch.interval.max``, both in seconds. Subclasses override :meth:`set_fetch_schedule`.
    Every method returns a new :class:`Schedule` and reads no clock.

    >>> s = FetchSchedule().initialize(now=0)
    >>> s
    Schedule(fetch_time=0, fetch_interval=2592000, retries_since_fetch=0, modified_time=0, prev_modified_time=0)

    A page that keeps being gone waits 1.5 times longer each time, up to 90 % of the maximum:

    >>> intervals = []
    >>> for _ in range(4):
    ...     s = FetchSchedule().set_page_gone_schedule(s, fetch_time=s.fetch_time)
    ...     intervals.append(s.fetch_interval)
    >>> intervals
    [3888000, 5832000, 6998400, 6998400]
    """

    def __init__(self, default_interval: int = 2592000, max_interval: int = 7776000) -> None:
        if default_interval < 0:
            raise ValueError(f"'default_interval' must be >= 0, got {default_interval!r}")
        if max_interval < 0:
            raise ValueError(f"'max_interval' must be >= 0, got {max_interval!r}")
        self.default_interval = default_interval
        self.max_interval = max_interval

    def initialize(self, now: int) -> Schedule:
        """The schedule of a new page: due at *now*, default interval, no retries."""
        return Schedule(fetch_time=now, fetch_interval=self.default_interval)

    def set_fetch_schedule(
        self,
        schedule: Schedule,
        *,
        prev_fetch_time: int,
        prev_modified_time: int,
        fetch_time: int,
        modified_time: int,
        state: ChangeState,
    ) -> Schedule:
        """The schedule after a successful fetch at *fetch_time*; the base only resets retries."""
        # built directly rather than with dataclasses.replace: updatedb calls it for every
        # page of a batch
        return Schedule(
            schedule.fetch_time,
            schedule.fetch_interval,
            0,
            modified_time,
            prev_modified_time,
        )

    def set_page_gone_schedule(self, schedule: Schedule, *, fetch_time: int) -> Schedule:
        """The schedule of a gone page: the interval grows by half, up to 90 % of the maximum."""
        interval = schedule.fetch_interval
        grown = f32(f32(interval) * 1.5)  # (page.getFetchInterval() * 1.5f) < maxInterval
        if grown < f32(self.max_interval):
            interval = int(grown)
        else:
            interval = int(f32(f32(self.max_interval) * _NINE_TENTHS))
        return replace(schedule, fetch_interval=interval, fetch_time=fetch_time + interval * 1000)

    def set_page_retry_schedule(self, schedule: Schedule, *, fetch_time: int) -> Schedule:
        """The schedule of a transient failure: one more retry, again in a day.

        >>> FetchSchedule().set_page_retry_schedule(Schedule(5, 60, 1), fetch_time=5)
        Schedule(fetch_time=86400005, fetch_interval=60, retries_since_fetch=2, modified_time=0, prev_modified_time=0)
        """
        return replace(
            schedule,
            fetch_time=fetch_time + DAY_MS,
            retries_since_fetch=schedule.retries_since_fetch + 1,
        )

    def calculate_last_fetch_time(self, schedule: Schedule) -> int:
        """When the page was last fetched, as its schedule implies."""
        return schedule.fetch_time - schedule.fetch_interval * 1000

    def should_fetch(self, schedule: Schedule, *, now: int) -> Due:
        """Whether the page is due at *now* (see :func:`should_fetch`)."""
        return should_fetch(schedule.fetch_time, schedule.fetch_interval, now, self.max_interval)

    def force_refetch(self, schedule: Schedule, *, now: int, asap: bool) -> Schedule:
        """The schedule of a page to fetch again from scratch (the caller sets it UNFETCHED).

        The interval is cut to 90 % of the maximum if longer, retries and the modified time are
        reset, and with *asap* the page is due at *now*.

        >>> FetchSchedule().force_refetch(Schedule(9, 9000000, 2, 7), now=1, asap=True)
        Schedule(fetch_time=1, fetch_interval=6998400, retries_since_fetch=0, modified_time=0, prev_modified_time=0)
        """
        interval = schedule.fetch_interval
        if interval > self.max_interval:
            interval = _ninety_percent(self.max_interval)
        return replace(
            schedule,
            fetch_interval=interval,
            retries_since_fetch=0,
            modified_time=0,
            fetch_time=now if asap else schedule.fetch_time,
        )


class DefaultFetchSchedule(FetchSchedule):
    """Nutch's ``DefaultFetchSchedule``: fetch again after the same interval.

    >>> s = DefaultFetchSchedule().set_fetch_schedule(
    ...     Schedule(1000, 60, 2), prev_fetch_time=0, prev_modified_time=0,
    ...     fetch_time=1000, modified_time=0, state=ChangeState.UNKNOWN)
    >>> s.fetch_time, s.fetch_interval, s.retries_since_fetch
    (61000, 60, 0)
    """

    def set_fetch_schedule(
        self,
        schedule: Schedule,
        *,
        prev_fetch_time: int,
        prev_modified_time: int,
        fetch_time: int,
        modified_time: int,
        state: ChangeState,
    ) -> Schedule:
        base = super().set_fetch_schedule(
            schedule,
            prev_fetch_time=prev_fetch_time,
            prev_modified_time=prev_modified_time,
            fetch_time=fetch_time,
            modified_time=modified_time,
            state=state,
        )
        interval = base.fetch_interval
        return Schedule(
            fetch_time + interval * 1000,
            interval,
            base.retries_since_fetch,
            base.modified_time,
            base.prev_modified_time,
        )


class AdaptiveFetchSchedule(FetchSchedule):
    """Nutch's ``AdaptiveFetchSchedule``: shorter intervals for pages that change, longer otherwise.

    A modified page's interval shrinks by *dec_rate*, an unmodified one's grows by *inc_rate*, and
    the result is kept within [*min_interval*, *max_adaptive_interval*] seconds (the
    ``db.fetch.schedule.adaptive.*`` keys). With *sync_delta*, the next fetch is moved back
    towards the time the page last changed by *sync_delta_rate* of the time since then, and the
    interval is at least that time.

    Nutch 2.x subtracts that shift in seconds from a time in milliseconds, so it is 1000 times too
    small; nutchy subtracts milliseconds, as Nutch 1.x does. Unlike Nutch 1.x, the shift is at
    most *sync_delta_rate* of the (clamped) interval, so the next fetch never comes before this
    one: a page last changed ten years ago is due again (1 - *sync_delta_rate*) times
    *max_adaptive_interval* after this fetch, not at once.

    >>> a = AdaptiveFetchSchedule()
    >>> def next_interval(state):
    ...     return a.set_fetch_schedule(Schedule(0, 100), prev_fetch_time=0, prev_modified_time=0,
    ...         fetch_time=0, modified_time=0, state=state).fetch_interval
    >>> [next_interval(s) for s in ChangeState]
    [100, 80, 140]
    """

    def __init__(
        self,
        default_interval: int = 2592000,
        max_interval: int = 7776000,
        *,
        inc_rate: float = 0.4,
        dec_rate: float = 0.2,
        min_interval: int = 60,
        max_adaptive_interval: int = 31536000,
        sync_delta: bool = True,
        sync_delta_rate: float = 0.3,
    ) -> None:
        super().__init__(default_interval, max_interval)
        if min_interval > max_adaptive_interval:
            raise ValueError(
                f"'min_interval' ({min_interval!r}) must be <= 'max_adaptive_interval' "
                f"({max_adaptive_interval!r})"
            )
        self.inc_rate = inc_rate
        self.dec_rate = dec_rate
        self.min_interval = min_interval
        self.max_adaptive_interval = max_adaptive_interval
        self.sync_delta = sync_delta
        self.sync_delta_rate = sync_delta_rate

    def set_fetch_schedule(
        self,
        schedule: Schedule,
        *,
        prev_fetch_time: int,
        prev_modified_time: int,
        fetch_time: int,
        modified_time: int,
        state: ChangeState,
    ) -> Schedule:
        base = super().set_fetch_schedule(
            schedule,
            prev_fetch_time=prev_fetch_time,
            prev_modified_time=prev_modified_time,
            fetch_time=fetch_time,
            modified_time=modified_time,
            state=state,
        )
        ref_time = fetch_time
        if modified_time <= 0:
            modified_time = fetch_time
        interval = base.fetch_interval
        if state == ChangeState.MODIFIED:
            interval = int(f32(f32(interval) * f32(1.0 - f32(self.dec_rate))))
        elif state == ChangeState.NOTMODIFIED:
            interval = int(f32(f32(interval) * f32(1.0 + f32(self.inc_rate))))
        # A long division, truncated: a page "modified" 1.5 s after its fetch (a server clock
        # ahead of ours) has a delta of -1 s, not -2 s.
        delta = java_div(fetch_time - modified_time, 1000)
        if self.sync_delta:
            interval = max(interval, delta)
        interval = min(max(interval, self.min_interval), self.max_adaptive_interval)
        if self.sync_delta:
            # Milliseconds, as Nutch 1.x: Nutch 2.x subtracts round(delta * rate) seconds-as-ms.
            # The shift is a share of the time since the change, but of no more than the interval:
            # once the interval is clamped below that time (a page unchanged for years), Nutch
            # 1.x's full shift would schedule the next fetch before this one, so the page would
            # be due again at once, round after round.
            # Rounded half up as Math.round does (this shift is nutchy's, so it is computed in
            # double and not cut at Math.round(float)'s Integer.MAX_VALUE ms, 24.8 days).
            shift = min(delta, interval) * self.sync_delta_rate * 1000
            ref_time = fetch_time - _round_half_up(shift)
        return replace(base, fetch_interval=interval, fetch_time=ref_time + interval * 1000)


def _round_half_up(value: float) -> int:
    """*value* rounded to the nearest integer, halves up, as ``Math.round`` but unbounded."""
    return math.floor(value + 0.5)
