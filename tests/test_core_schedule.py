"""Tests for the fetch schedules of nutchy.core.schedule (reference §9)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nutchy.core.schedule import (
    AdaptiveFetchSchedule,
    ChangeState,
    DefaultFetchSchedule,
    FetchSchedule,
    Schedule,
)

DAY = 86_400_000
NOW = 1_700_000_000_000


def adapt(schedule: FetchSchedule, interval: int, state: ChangeState, **times: int) -> Schedule:
    fetch_time = times.get("fetch_time", NOW)
    return schedule.set_fetch_schedule(
        Schedule(fetch_time, interval, 3),
        prev_fetch_time=fetch_time - DAY,
        prev_modified_time=0,
        fetch_time=fetch_time,
        modified_time=times.get("modified_time", 0),
        state=state,
    )


@pytest.mark.parametrize(
    ("state", "expected"),
    [(ChangeState.UNKNOWN, 100), (ChangeState.MODIFIED, 80), (ChangeState.NOTMODIFIED, 140)],
)
def test_adaptive_matches_nutch_test(state: ChangeState, expected: int) -> None:
    # TestAdaptiveFetchSchedule: interval 100, last modified 0.
    result = adapt(AdaptiveFetchSchedule(), 100, state)
    assert result.fetch_interval == expected
    assert result.fetch_time == NOW + expected * 1000
    assert result.retries_since_fetch == 0


def test_adaptive_clamps_to_min_and_max() -> None:
    a = AdaptiveFetchSchedule(min_interval=60, max_adaptive_interval=1000)
    assert adapt(a, 61, ChangeState.MODIFIED).fetch_interval == 60
    assert adapt(a, 900, ChangeState.NOTMODIFIED).fetch_interval == 1000


def test_adaptive_sync_delta_shifts_milliseconds() -> None:
    # Modified 10 days before the fetch: the interval becomes at least 10 days, and the next
    # fetch is pulled back by 30 % of those 10 days (3 days), in milliseconds, as Nutch 1.x.
    a = AdaptiveFetchSchedule(max_adaptive_interval=365 * 86400)
    result = adapt(a, 86400, ChangeState.UNKNOWN, modified_time=NOW - 10 * DAY)
    assert result.fetch_interval == 10 * 86400
    assert result.fetch_time == NOW - 3 * DAY + 10 * DAY
    assert result.modified_time == NOW - 10 * DAY


def test_adaptive_sync_delta_never_schedules_before_the_fetch() -> None:
    # Unchanged for ten years: the interval is clamped to a year, and the shift to 30 % of that
    # year. Nutch 1.x shifts by 30 % of ten years: three years back, two before this fetch, so
    # the page would be due again at once, in every round of a crawl.
    a = AdaptiveFetchSchedule(max_adaptive_interval=365 * 86400)
    result = adapt(a, 86400, ChangeState.NOTMODIFIED, modified_time=NOW - 3650 * DAY)
    assert result.fetch_interval == 365 * 86400
    assert result.fetch_time == NOW - round(0.3 * 365 * DAY) + 365 * DAY


def test_adaptive_without_sync_delta() -> None:
    a = AdaptiveFetchSchedule(sync_delta=False)
    result = adapt(a, 86400, ChangeState.UNKNOWN, modified_time=NOW - 10 * DAY)
    assert result.fetch_interval == 86400
    assert result.fetch_time == NOW + DAY


def test_adaptive_rejects_inverted_bounds() -> None:
    with pytest.raises(ValueError, match="min_interval"):
        AdaptiveFetchSchedule(min_interval=10, max_adaptive_interval=5)


def test_default_keeps_interval_and_resets_retries() -> None:
    result = adapt(DefaultFetchSchedule(), 2592000, ChangeState.MODIFIED, modified_time=5)
    assert result == Schedule(NOW + 2592000 * 1000, 2592000, 0, 5, 0)


def test_gone_schedule_sequence() -> None:
    s = Schedule(0, 2592000)
    seen = []
    for _ in range(4):
        s = FetchSchedule().set_page_gone_schedule(s, fetch_time=NOW)
        seen.append(s.fetch_interval)
    assert seen == [3888000, 5832000, 6998400, 6998400]
    assert s.fetch_time == NOW + 6998400 * 1000


def test_retry_schedule() -> None:
    s = FetchSchedule().set_page_retry_schedule(Schedule(NOW, 100, 0), fetch_time=NOW)
    assert (s.fetch_time, s.retries_since_fetch, s.fetch_interval) == (NOW + DAY, 1, 100)


def test_force_refetch() -> None:
    s = Schedule(NOW, 9_000_000, 2, 77, 66)
    late = FetchSchedule().force_refetch(s, now=5, asap=False)
    assert late == Schedule(NOW, 6998400, 0, 0, 66)
    assert FetchSchedule().force_refetch(s, now=5, asap=True).fetch_time == 5


def test_initialize_and_last_fetch_time() -> None:
    schedule = FetchSchedule(default_interval=10)
    s = schedule.initialize(NOW)
    assert s == Schedule(NOW, 10)
    assert schedule.calculate_last_fetch_time(s) == NOW - 10_000
    assert schedule.should_fetch(s, now=NOW).due


@pytest.mark.parametrize("name", ["default_interval", "max_interval"])
def test_negative_intervals_rejected(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        FetchSchedule(**{name: -1})


@given(
    interval=st.integers(0, 10**9),
    state=st.sampled_from(list(ChangeState)),
    modified_ago=st.integers(-(10**12), 10**12),
)
def test_adaptive_interval_always_within_bounds(interval, state, modified_ago) -> None:
    a = AdaptiveFetchSchedule(min_interval=60, max_adaptive_interval=31536000)
    result = adapt(a, interval, state, modified_time=NOW - modified_ago)
    assert 60 <= result.fetch_interval <= 31536000
    assert result.retries_since_fetch == 0
    # Moved back by at most 30 % of the interval: never due again before this fetch.
    assert result.fetch_time >= NOW + result.fetch_interval * 700


@given(interval=st.integers(0, 10**9))
def test_gone_interval_never_exceeds_max(interval) -> None:
    s = FetchSchedule().set_page_gone_schedule(Schedule(NOW, interval), fetch_time=NOW)
    assert s.fetch_interval <= max(interval * 1.5, 7776000)
    assert s.fetch_interval < 7776000 or interval * 1.5 < 7776000
    assert s.fetch_time == NOW + s.fetch_interval * 1000


# Nutch's Math.round(maxInterval * 0.9f), as OpenJDK 17 computes it, against Python's round() of
# the double product: the float product and the halves rounded up make them differ.
@pytest.mark.parametrize(
    ("max_interval", "java", "python"),
    [
        (5, 5, 4),
        (25, 23, 22),
        (7776000, 6998400, 6998400),
        (7776005, 6998405, 6998404),
        (16777217, 15099494, 15099495),
    ],
)
def test_ninety_percent_of_max_is_javas_math_round(max_interval, java, python) -> None:
    assert round(max_interval * 0.9) == python
    due = FetchSchedule(max_interval=max_interval).should_fetch(
        Schedule(NOW + (max_interval + 1) * 1000, max_interval + 1), now=NOW
    )
    assert due == (True, java)
    forced = FetchSchedule(max_interval=max_interval).force_refetch(
        Schedule(NOW, max_interval + 1), now=NOW, asap=True
    )
    assert forced.fetch_interval == java


def test_gone_schedule_compares_in_floats() -> None:
    # 11184811 * 1.5 = 16777216.5 < 16777217 in doubles, but Java's (fi * 1.5f) < maxInterval
    # compares floats: 16777216f < 16777216f is false, so Nutch takes 90 % of the maximum.
    s = FetchSchedule(max_interval=16777217).set_page_gone_schedule(
        Schedule(NOW, 11184811), fetch_time=NOW
    )
    assert s.fetch_interval == 15099494


def test_adaptive_negative_sync_delta_truncates_towards_zero() -> None:
    # Last-Modified 1.5 s after the fetch (the server's clock ahead): Java's long division gives
    # a delta of -1 s, so the next fetch moves 300 ms later (floor division gave -2 s, 600 ms).
    a = AdaptiveFetchSchedule()
    result = adapt(a, 86400, ChangeState.UNKNOWN, modified_time=NOW + 1500)
    assert result.fetch_interval == 86400
    assert result.fetch_time == NOW + 300 + 86400 * 1000
