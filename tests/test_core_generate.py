"""Tests for nutchy.core.generate and nutchy.core.schedule: Nutch's batch selection, exactly."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nutchy.core.generate import (
    GenerateConfig,
    OutOfOrder,
    ScoredRow,
    Selector,
    batch_time,
    generator_sort_value,
    java_string_hash,
    new_batch_id,
    partition_for,
    read_generate_time,
    select_in_score_order,
)
from nutchy.core.schedule import Due, should_fetch
from nutchy.core.urlfilter import RegexURLFilter
from nutchy.core.urls import host_key, reverse_url
from nutchy.core.webpage import WebPage

NOW = 1_700_000_000_000
DAY = 86_400_000


def page(url: str, score: float = 1.0, fetch_time: int = NOW, **fields) -> WebPage:
    fields.setdefault("fetch_interval", 2592000)
    return WebPage(reverse_url(url), score=score, fetch_time=fetch_time, **fields)


def select(pages, **config) -> list[str]:
    selector = Selector(GenerateConfig(**config), cur_time=NOW)
    selector.add_all(pages)
    return [s.url for s in selector.result()]


# --- Nutch's TestGenerator expectations -----------------------------------------------------


def test_top_n_of_101_urls_scored_0_to_100():
    pages = [page(f"http://aaa/{i:03d}", score=float(i)) for i in range(101)]
    random.Random(7).shuffle(pages)
    assert select(pages, top_n=2) == ["http://aaa/100", "http://aaa/099"]


def test_host_limit_then_a_second_run_adds_more():
    pages = [page(f"http://www.example.com/{i}") for i in range(3)]
    first = Selector(GenerateConfig(max_count=1), NOW)
    first.add_all(pages)
    chosen = first.result()
    assert len(chosen) == 1
    # generate marks the selected row; the next run skips it as already generated
    for p in pages:
        if p.key == chosen[0].key:
            p.markers["_gnmrk_"] = new_batch_id(NOW, 1)
    second = Selector(GenerateConfig(max_count=2), NOW)
    second.add_all(pages)
    assert len(second.result()) == 2
    assert second.counts.generated == 1


def test_domain_mode_counts_subdomains_as_one():
    pages = [page(f"http://{h}.example.com/") for h in ("one", "two", "three")]
    assert len(select(pages, max_count=1, count_mode="domain")) == 1
    assert len(select(pages, max_count=1, count_mode="host")) == 3


# --- exactness against a brute-force reference ----------------------------------------------


def reference(pages: list[WebPage], top_n: int | None, max_count: int, mode: str) -> list[str]:
    """Nutch's reducer: walk everything by sort value descending, URL ascending."""
    ranked = sorted(pages, key=lambda p: (-generator_sort_value(p), p.url))
    counts: dict[str, int] = {}
    out: list[str] = []
    for p in ranked:
        if top_n is not None and len(out) >= top_n:
            break
        if max_count > 0:
            key = host_key(p.url, mode)
            if counts.get(key, 0) >= max_count:
                continue
            counts[key] = counts.get(key, 0) + 1
        out.append(p.url)
    return out


HOSTS = ["a.com", "b.a.com", "c.org", "d.c.org", "e.net", "f.io"]
pages_strategy = st.lists(
    st.tuples(
        st.sampled_from(HOSTS),
        st.integers(0, 40),
        st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, -1.0]),
    ),
    max_size=80,
    unique_by=lambda t: (t[0], t[1]),
)


#: Rows, topN, max count, count mode and a shuffle: the cases the selectors are compared on.
selection_cases = given(
    pages_strategy,
    st.one_of(st.none(), st.integers(1, 30)),
    st.sampled_from([-1, 0, 1, 2, 3, 5]),
    st.sampled_from(["host", "domain"]),
    st.randoms(use_true_random=False),
)


@settings(max_examples=300, deadline=None)
@selection_cases
def test_selection_equals_nutchs_walk(rows, top_n, max_count, mode, rnd):
    pages = [page(f"http://{h}/p{n}", score=s) for h, n, s in rows]
    expected = reference(pages, top_n, max_count, mode)
    rnd.shuffle(pages)
    selector = Selector(
        GenerateConfig(top_n=top_n, max_count=max_count, count_mode=mode, min_score=-1.0),
        NOW,
    )
    selector.add_all(pages)
    assert [s.url for s in selector.result()] == expected
    counts = selector.counts
    assert counts.selected == len(expected)
    assert counts.selected + counts.limited == len(pages)


def test_memory_stays_within_top_n_and_its_hosts():
    rnd = random.Random(3)
    selector = Selector(GenerateConfig(top_n=50, max_count=3), NOW)
    for i in range(20_000):
        selector.add(page(f"http://h{rnd.randrange(5000)}.com/{i}", score=rnd.random()))
        # internal structures: the global heap (with dead entries) and one heap per host
        assert len(selector._hosts) <= 50
        assert sum(map(len, selector._hosts.values())) <= 50
        assert len(selector._top) <= 2 * 50 + 1024
    assert len(selector.result()) == 50


# --- the other checks, in Nutch's mapper order ----------------------------------------------


def test_min_score_compares_the_sort_value():
    pages = [page("http://a.com/low", score=0.4), page("http://a.com/ok", score=0.5)]
    selector = Selector(GenerateConfig(min_score=0.25), NOW)
    selector.add_all(pages)
    assert [s.url for s in selector.result()] == ["http://a.com/ok"]
    assert selector.counts.min_score == 1


def test_nan_score_ranks_below_the_minimum():
    selector = Selector(GenerateConfig(), NOW)
    selector.add(page("http://a.com/", score=float("nan")))
    assert selector.result() == []
    assert selector.counts.min_score == 1


def test_negative_scores_rank_by_their_square_as_in_nutch():
    pages = [page("http://a.com/neg", score=-3.0), page("http://a.com/pos", score=2.0)]
    assert select(pages) == ["http://a.com/neg", "http://a.com/pos"]


def test_not_due_rows_are_skipped():
    selector = Selector(GenerateConfig(), NOW)
    selector.add(page("http://a.com/later", fetch_time=NOW + 1))
    selector.add(page("http://a.com/now", fetch_time=NOW))
    assert [s.url for s in selector.result()] == ["http://a.com/now"]
    assert selector.counts.not_due == 1


def test_far_future_rows_are_due_with_a_capped_interval():
    far = page("http://a.com/far", fetch_time=NOW + 91 * DAY, fetch_interval=200 * 86400)
    near = page("http://a.com/near", fetch_time=NOW + 89 * DAY, fetch_interval=200 * 86400)
    selector = Selector(GenerateConfig(), NOW)
    selector.add_all([far, near])
    [chosen] = selector.result()
    assert chosen.url == "http://a.com/far"
    assert chosen.fetch_interval == round(7776000 * 0.9)


def test_max_distance():
    pages = [
        page("http://a.com/0", markers={"dist": "0"}),
        page("http://a.com/3", markers={"dist": "3"}),
        page("http://a.com/x", markers={"dist": "x"}),
        page("http://a.com/none"),
    ]
    selector = Selector(GenerateConfig(max_distance=2), NOW)
    selector.add_all(pages)
    assert sorted(s.url for s in selector.result()) == [
        "http://a.com/0",
        "http://a.com/none",
        "http://a.com/x",
    ]
    assert selector.counts.distance == 1
    assert len(select(pages)) == 4


def test_unnormalized_rows_are_skipped_never_rekeyed():
    odd = WebPage("com.Example:http/a/../b", fetch_time=NOW, score=1.0)
    good = page("http://example.com/b")
    selector = Selector(GenerateConfig(), NOW)
    selector.add_all([odd, good])
    assert [s.key for s in selector.result()] == [good.key]
    assert selector.counts.unnormalized == 1
    # without the check the row is selected under its own key, not a normalized one
    selector = Selector(GenerateConfig(normalize=False), NOW)
    selector.add(odd)
    assert [s.key for s in selector.result()] == ["com.Example:http/a/../b"]


def test_url_filter_and_malformed_keys():
    url_filter = RegexURLFilter.from_lines([r"-\.png$", "+."])
    pages = [
        page("http://a.com/logo.png"),
        page("http://a.com/index.html"),
        WebPage("not a key", fetch_time=NOW, score=1.0),
    ]
    selector = Selector(GenerateConfig(url_filter=url_filter), NOW)
    selector.add_all(pages)
    assert [s.url for s in selector.result()] == ["http://a.com/index.html"]
    assert selector.counts.filtered == 1
    assert selector.counts.malformed == 1


def test_ties_break_by_url_ascending():
    pages = [page(f"http://a.com/{c}") for c in "dbca"]
    assert select(pages, top_n=3) == ["http://a.com/a", "http://a.com/b", "http://a.com/c"]
    # a prefix sorts first, as in Java's compareTo
    assert select([page("http://a.com/ab"), page("http://a.com/a")], top_n=1) == ["http://a.com/a"]


# --- generate marks and crawl.gen.delay -----------------------------------------------------


def marked(url: str, batch: str, generated: int | None = None) -> WebPage:
    metadata = {} if generated is None else {"_ngt_": generated.to_bytes(8, "big")}
    return page(url, markers={"_gnmrk_": batch}, metadata=metadata)


def test_marks_expire_after_the_gen_delay():
    old = marked("http://a.com/old", new_batch_id(NOW - 7 * DAY, 1))
    fresh = marked("http://a.com/fresh", new_batch_id(NOW - 7 * DAY + 1000, 2))
    selector = Selector(GenerateConfig(gen_delay=7 * DAY), NOW)
    selector.add_all([old, fresh])
    assert [s.url for s in selector.result()] == ["http://a.com/old"]
    assert (selector.counts.expired, selector.counts.generated) == (1, 1)


def test_custom_batch_ids_use_the_generate_time_metadata():
    old = marked("http://a.com/old", "nightly", generated=NOW - 8 * DAY)
    fresh = marked("http://a.com/fresh", "nightly", generated=NOW - DAY)
    unknown = marked("http://a.com/unknown", "nightly")
    selector = Selector(GenerateConfig(), NOW)
    selector.add_all([old, fresh, unknown])
    assert [s.url for s in selector.result()] == ["http://a.com/old"]
    assert selector.counts.generated == 2


def test_gen_delay_minus_one_locks_forever_as_nutch_2():
    old = marked("http://a.com/old", new_batch_id(NOW - 365 * DAY, 1))
    assert select([old], gen_delay=-1) == []
    assert select([old], gen_delay=0) == ["http://a.com/old"]


def test_batch_ids():
    assert new_batch_id(1_443_000_000_999, 5) == "1443000000-5"
    assert batch_time("1443000000-5") == 1_443_000_000_000
    for custom in ("nightly", "1-1", "123-", "-5", "1443000000-5-x", "01443000000-5"):
        assert batch_time(custom) is None, custom
    with pytest.raises(ValueError, match="nonce"):
        new_batch_id(NOW, -1)


def test_read_generate_time_without_a_mark():
    assert read_generate_time(page("http://a.com/")) is None
    bad = marked("http://a.com/", "b")
    bad.metadata["_ngt_"] = b"\x01"
    assert read_generate_time(bad) is None


# --- partitions and schedule ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("a", 97), ("www.example.com", -1878290138), ("é", 233), ("\U0001f600", 1772899)],
)
def test_java_string_hash(text, expected):
    assert java_string_hash(text) == expected


def test_partitions_follow_nutchs_url_partitioner():
    assert partition_for("www.example.com", 2) == 269193510 % 2
    assert partition_for("www.example.com", 7) == 269193510 % 7
    assert (
        partition_for("www.example.com", 7, seed=12345) == ((-1878290138 ^ 12345) & 0x7FFFFFFF) % 7
    )
    assert partition_for("anything", 1) == 0
    assert {partition_for(f"h{i}.com", 4) for i in range(100)} == {0, 1, 2, 3}
    with pytest.raises(ValueError, match="partitions"):
        partition_for("x", 0)


def test_should_fetch():
    assert should_fetch(NOW, 60, NOW, 7776000) == Due(True, 60)
    assert should_fetch(NOW + 1, 60, NOW, 7776000) == Due(False, 60)
    # far ahead with a short interval: due now, interval unchanged
    assert should_fetch(NOW + 100 * DAY, 60, NOW, 7776000) == Due(True, 60)
    # exactly max ahead is not "more than max"
    assert should_fetch(NOW + 90 * DAY, 10**8, NOW, 7776000) == Due(False, 10**8)
    assert should_fetch(NOW + 90 * DAY + 1, 10**8, NOW, 7776000) == Due(True, 6998400)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"top_n": 0}, "'top_n' must be >= 1"),
        ({"top_n": -5}, "'top_n' must be >= 1"),
        ({"max_count": -2}, "'max_count' must be >= -1"),
        ({"count_mode": "ip"}, "'count_mode' must be one of host, domain"),
        ({"min_score": float("nan")}, "'min_score' must be a number"),
        ({"max_distance": -3}, "'max_distance'"),
        ({"gen_delay": -2}, "'gen_delay'"),
        ({"max_interval": 0}, "'max_interval'"),
    ],
)
def test_config_is_validated(config, message):
    with pytest.raises(ValueError, match=message):
        GenerateConfig(**config)


REJECT_SEVENS = RegexURLFilter.from_lines(["-7$", "+."])


@settings(max_examples=300, deadline=None)
@selection_cases
def test_deferred_url_checks_give_the_batch_or_say_they_cannot(rows, top_n, max_count, mode, rnd):
    pages = [page(f"http://{h}/p{n}", score=s) for h, n, s in rows]
    passing = [p for p in pages if REJECT_SEVENS.accepts(p.url)]
    expected = reference(passing, top_n, max_count, mode)
    rnd.shuffle(pages)
    config = GenerateConfig(
        top_n=top_n, max_count=max_count, count_mode=mode, min_score=-1.0, url_filter=REJECT_SEVENS
    )
    deferred = Selector(config, NOW, defer_url_checks=True)
    deferred.add_all(pages)
    batch = [s.url for s in deferred.result()]
    if deferred.exact:
        assert batch == expected
    else:  # the batch held a rejected URL; the caller selects again with the checks on
        assert any(not REJECT_SEVENS.accepts(url) for url in batch)
        eager = Selector(config, NOW)
        eager.add_all(pages)
        assert [s.url for s in eager.result()] == expected


#: Rows for the walk in score order: host, path number, score, generate mark, ``_ngt_``, dist.
scored_rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(HOSTS),
        st.integers(0, 40),
        st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0]),
        st.sampled_from(
            [None, None, None, new_batch_id(NOW - 9 * DAY, 1), new_batch_id(NOW, 1), "custom"]
        ),
        st.sampled_from([None, (NOW - 9 * DAY).to_bytes(8, "big"), b"bad"]),
        st.sampled_from([None, None, "0", "2", "x"]),
    ),
    max_size=80,
    unique_by=lambda t: (t[0], t[1]),
)
ORDER_FREE_COUNTS = ("seen", "generated", "expired", "distance", "not_due", "min_score", "selected")


@settings(max_examples=400, deadline=None)
@given(
    scored_rows_strategy,
    st.one_of(st.none(), st.integers(1, 30)),
    st.sampled_from([-1, 0, 1, 2, 3]),
    st.sampled_from(["host", "domain"]),
    st.sampled_from([0.0, 1.0, 2.5]),
    st.sampled_from([-1, 1]),
    st.sampled_from([-1, 0, 604_800_000]),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_walk_in_score_order_selects_as_the_selector(
    rows, top_n, max_count, mode, min_score, max_distance, gen_delay, checks, rnd
):
    config = GenerateConfig(
        top_n=top_n,
        max_count=max_count,
        count_mode=mode,
        min_score=min_score,
        max_distance=max_distance,
        gen_delay=gen_delay,
        normalize=checks,
        url_filter=REJECT_SEVENS if checks else None,
    )
    # Some keys are not normalized ("HTTP" in the host) and some are not keys at all.
    keys = {
        (h, n): reverse_url(f"http://{h}/p{n}") if n % 13 else f"{h}:http/P{n}/../x"
        for h, n, *_ in rows
    }
    keys.update({(h, n): "nocolon" for h, n, *_ in rows if n == 39})
    pages = []
    for h, n, score, mark, ngt, dist in rows:
        markers = {k: v for k, v in (("_gnmrk_", mark), ("dist", dist)) if v is not None}
        metadata = {} if ngt is None else {"_ngt_": ngt}
        pages.append(
            WebPage(
                keys[h, n],
                score=score,
                fetch_time=NOW - DAY,
                fetch_interval=2592000,
                markers=markers,
                metadata=metadata,
            )
        )
    rnd.shuffle(pages)
    selector = Selector(config, NOW)
    selector.add_all(pages)
    expected = selector.result()
    # Best score first; rows of one score in any order.
    ordered = sorted(pages, key=lambda p: (-p.score, rnd.random()))
    scored = [
        ScoredRow(
            p.score,
            p.key,
            p.markers.get("_gnmrk_"),
            p.markers.get("dist"),
            p.metadata.get("_ngt_"),
        )
        for p in ordered
    ]
    batch, counts = select_in_score_order(scored, config, NOW)
    assert batch == expected
    for name in ORDER_FREE_COUNTS:
        assert getattr(counts, name) == getattr(selector.counts, name), name
    assert sum(counts.as_dict().values()) - counts.expired == counts.seen * 2


def test_walk_in_score_order_refuses_what_it_cannot_rank():
    config = GenerateConfig(top_n=5)
    row = ScoredRow(1.0, "com.a:http/", None, None, None)
    with pytest.raises(OutOfOrder):
        select_in_score_order([row, row._replace(score=2.0)], config, NOW)
    for bad in (-1.0, -0.0, float("nan")):
        with pytest.raises(ValueError):
            select_in_score_order([row._replace(score=bad)], config, NOW)
    custom = GenerateConfig(sort_value=lambda p: p.score)
    with pytest.raises(ValueError, match="default sort value"):
        select_in_score_order([row], custom, NOW)
