"""The generate job on both stores: Nutch's selection, the marks it writes, partitions, and
batches that expire."""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from nutchy.core.generate import GenerateConfig, new_batch_id, partition_for
from nutchy.core.urlfilter import DEFAULT_RULES_PATH, load_url_filter
from nutchy.core.urls import domain_of, host_of, reverse_url
from nutchy.core.webpage import WebPage
from nutchy.jobs.generate import GenerateOptions, generate, resolve_hosts
from nutchy.store.base import Scan
from nutchy.store.schema import RowUpdate
from nutchy.store.table import WebTable

NOW = 1_700_000_000_000
DAY = 86_400_000
BATCH = new_batch_id(NOW, 42)


@pytest.fixture
def table(store):
    return WebTable(store, read_limit=7, write_limit=5)


def add(table, url: str, score: float = 1.0, fetch_time: int = NOW, **fields) -> str:
    key = reverse_url(url)
    table.put(
        WebPage(key, score=score, fetch_time=fetch_time, fetch_interval=2592000, **fields),
        ["score", "fetch_time", "fetch_interval", *fields],
    )
    return key


def options(**config) -> GenerateOptions:
    num_fetchers = config.pop("num_fetchers", 1)
    mode = config.pop("partition_mode", "byHost")
    return GenerateOptions(GenerateConfig(**config), num_fetchers=num_fetchers, partition_mode=mode)


def marked(table) -> dict[str, str]:
    """URL → generate mark of every marked row."""
    return {
        page.url: page.markers["_gnmrk_"]
        for page in table.scan(["markers"])
        if "_gnmrk_" in page.markers
    }


def test_top_n_of_101_urls_and_the_marks_written(table):
    for i in range(101):
        add(table, f"http://aaa/{i:03d}", score=float(i))
    result = generate(table, options(top_n=2), now=NOW, batch_id=BATCH)
    assert result.selected == 2
    assert marked(table) == {"http://aaa/100": BATCH, "http://aaa/099": BATCH}
    cells = table.store.get(reverse_url("http://aaa/100").encode())
    assert cells is not None
    assert cells[b"mk:_gnmrk_"] == cells[b"f:bid"] == BATCH.encode()
    assert cells[b"mtdt:_npt_"] == (0).to_bytes(4, "big")
    assert b"mtdt:_ngt_" not in cells  # the batch id carries the time
    assert b"f:fi" in cells and cells[b"s:s"]  # untouched columns are still there


def test_host_limit_over_two_runs(table):
    for i in range(3):
        add(table, f"http://www.example.com/{i}")
    first = generate(table, options(max_count=1), now=NOW, batch_id="b1")
    assert first.selected == 1
    second = generate(table, options(max_count=2), now=NOW, batch_id="b2")
    assert second.selected == 2
    assert second.counts.generated == 1
    assert sorted(marked(table).values()) == ["b1", "b2", "b2"]


def test_domain_mode(table):
    for host in ("one", "two", "three"):
        add(table, f"http://{host}.example.com/")
    add(table, "http://other.org/")
    result = generate(table, options(max_count=1, count_mode="domain"), now=NOW, batch_id="b")
    assert result.selected == 2
    assert {domain_of(url) for url in marked(table)} == {"example.com", "other.org"}


def test_top_n_is_exact_across_partitions(table):
    urls = [f"http://h{i % 13}.example.com/{i}" for i in range(100)]
    for i, url in enumerate(urls):
        add(table, url, score=float(i))
    result = generate(table, options(top_n=10, num_fetchers=3), now=NOW, batch_id="b")
    assert result.selected == 10
    assert sum(result.partitions) == 10
    assert set(marked(table)) == set(urls[-10:])
    for url in urls[-10:]:
        cells = table.store.get(reverse_url(url).encode())
        assert cells is not None
        expected = partition_for(host_of(url), 3)
        assert int.from_bytes(cells[b"mtdt:_npt_"], "big") == expected


def test_partitions_by_domain(table):
    for host in ("a.x.com", "b.x.com", "c.y.org", "d.z.net"):
        add(table, f"http://{host}/")
    generate(table, options(num_fetchers=5, partition_mode="byDomain"), now=NOW, batch_id="b")
    for page in table.scan(["metadata"]):
        expected = partition_for(domain_of(page.url), 5)
        assert int.from_bytes(page.metadata["_npt_"], "big") == expected


def test_partitions_by_ip_with_a_fallback_to_the_host(table, caplog):
    add(table, "http://127.0.0.1:8080/")
    add(table, "http://localhost/")
    add(table, "http://unresolved.test/")

    def resolver(hosts, timeout):
        assert timeout == 5.0
        return {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1"}

    result = generate(
        table,
        options(num_fetchers=7, partition_mode="byIP"),
        now=NOW,
        batch_id="b",
        resolver=resolver,
    )
    assert result.unresolved == 1
    assert "1 of 3 hosts did not resolve" in caplog.text
    parts = {p.url: int.from_bytes(p.metadata["_npt_"], "big") for p in table.scan(["metadata"])}
    assert parts["http://127.0.0.1:8080/"] == parts["http://localhost/"]
    assert parts["http://localhost/"] == partition_for("127.0.0.1", 7)
    assert parts["http://unresolved.test/"] == partition_for("unresolved.test", 7)


def test_resolve_hosts_on_loopback():
    found = resolve_hosts({"127.0.0.1", "localhost"}, 5.0)
    assert found["127.0.0.1"] == "127.0.0.1"
    assert found["localhost"] in ("127.0.0.1", "::1")
    assert resolve_hosts(set(), 1.0) == {}


def test_min_score(table):
    add(table, "http://a.com/low", score=0.4)
    add(table, "http://a.com/ok", score=0.5)
    result = generate(table, options(min_score=0.25), now=NOW, batch_id="b")
    assert list(marked(table)) == ["http://a.com/ok"]
    assert result.counts.min_score == 1


def test_only_due_rows_are_read(table):
    for i in range(10):
        add(table, f"http://a.com/{i}", fetch_time=NOW + (i - 4) * DAY)
    result = generate(table, options(), now=NOW, batch_id="b")
    assert result.counts.seen == 5  # the store hands over due rows only
    assert result.selected == 5
    later = generate(table, options(), now=NOW, batch_id="c", add_days=2)
    assert later.counts.seen == 7
    assert (later.counts.generated, later.selected) == (5, 2)


def test_gen_delay_expiry(table):
    add(table, "http://a.com/", fetch_time=NOW - 30 * DAY)
    old = new_batch_id(NOW - 7 * DAY, 1)
    assert generate(table, options(), now=NOW - 7 * DAY, batch_id=old).selected == 1
    early = generate(table, options(), now=NOW - 1000, batch_id=new_batch_id(NOW - 1000, 2))
    assert (early.selected, early.counts.generated) == (0, 1)
    assert marked(table) == {"http://a.com/": old}
    late = generate(table, options(), now=NOW, batch_id=BATCH)
    assert (late.selected, late.counts.expired) == (1, 1)
    assert marked(table) == {"http://a.com/": BATCH}


def test_regeneration_after_a_crashed_batch_with_a_custom_id(table):
    for i in range(9):  # more than a read chunk (7): the _ngt_ lookups come in two chunks
        add(table, f"http://a.com/{i}", fetch_time=NOW - 30 * DAY)
    assert generate(table, options(), now=NOW - 8 * DAY, batch_id="crashed").selected == 9
    cells = table.store.get(reverse_url("http://a.com/0").encode())
    assert cells is not None
    assert cells[b"mtdt:_ngt_"] == (NOW - 8 * DAY).to_bytes(8, "big")
    # the fetcher got through half the batch, then the process died
    table.store.write(
        [
            RowUpdate(reverse_url(f"http://a.com/{i}").encode(), {b"mk:_ftcmrk_": b"crashed"})
            for i in (0, 1)
        ]
    )
    assert generate(table, options(gen_delay=-1), now=NOW, batch_id="again").selected == 0
    result = generate(table, options(), now=NOW, batch_id=BATCH)
    assert (result.selected, result.counts.expired) == (9, 9)
    assert set(marked(table).values()) == {BATCH}


def test_unnormalized_keys_are_skipped_and_no_other_row_is_written(table):
    table.update("com.Example:http/a/../b", {"fetch_time": NOW, "score": 1.0})
    result = generate(table, options(), now=NOW, batch_id="b")
    assert (result.selected, result.counts.unnormalized) == (0, 1)
    assert [p.key for p in table.scan(["fetch_time"])] == ["com.Example:http/a/../b"]
    assert marked(table) == {}


def test_nothing_selected_writes_nothing(table):
    add(table, "http://a.com/", fetch_time=NOW + DAY)
    result = generate(table, options(), now=NOW, batch_id="b")
    assert (result.selected, result.partitions) == (0, [])
    assert marked(table) == {}


def test_undecodable_rows_are_skipped(table):
    add(table, "http://a.com/good")
    bad = add(table, "http://a.com/bad")
    table.store.write([RowUpdate(bad.encode(), {b"s:s": b"\x00\x01"})])
    result = generate(table, options(), now=NOW, batch_id="b")
    assert (result.selected, result.undecodable) == (1, 1)
    assert list(marked(table)) == ["http://a.com/good"]


def test_options_from_settings_validate(tmp_path):
    from nutchy.config import load_settings
    from nutchy.exceptions import ConfigError

    good = GenerateOptions.from_settings(load_settings(project=False), top_n=5, num_fetchers=2)
    assert (good.config.top_n, good.config.max_count, good.num_fetchers) == (5, -1, 2)
    assert good.config.url_filter is not None
    off = GenerateOptions.from_settings(load_settings(project=False), filter_urls=False)
    assert off.config.url_filter is None
    for name, value, message in [
        ("NUTCH_GENERATE_COUNT_MODE", "ip", "NUTCH_GENERATE_COUNT_MODE must be one of"),
        ("NUTCH_GENERATE_MAX_COUNT", "-2", "NUTCH_GENERATE_MAX_COUNT must be >= -1"),
        ("NUTCH_GENERATE_MAX_COUNT", "many", "NUTCH_GENERATE_MAX_COUNT must be an integer"),
        ("NUTCH_PARTITION_URL_MODE", "byPort", "NUTCH_PARTITION_URL_MODE must be one of"),
        ("NUTCH_GENERATE_MIN_SCORE", "nan", "NUTCH_GENERATE_MIN_SCORE must be a finite"),
        ("NUTCH_CRAWL_GEN_DELAY", "-5", "NUTCH_CRAWL_GEN_DELAY must be >= -1"),
        ("NUTCH_GENERATE_FILTER", "maybe", "NUTCH_GENERATE_FILTER must be a boolean"),
        ("NUTCH_PARTITION_RESOLVE_TIMEOUT", "0", "NUTCH_PARTITION_RESOLVE_TIMEOUT must be > 0"),
        ("NUTCH_URLFILTER_REGEX_FILE", str(tmp_path / "none.txt"), "cannot read"),
    ]:
        with pytest.raises(ConfigError, match=message):
            GenerateOptions.from_settings(load_settings({name: value}, project=False))


def _same_sort_value(page: WebPage) -> float:
    """OPIC's sort value, as a function of its own: it turns the score-order path off."""
    return page.score * page.score


def _varied_rows(table) -> None:
    """Rows for every rule of the selection: ties, hosts over max.count, low scores, marks that
    have and have not expired (timed and custom batch ids), distances, rows that are not due,
    unnormalized keys and URLs the default filter rejects."""
    for i in range(60):
        host = ["a.com", "b.a.com", "c.org", "www.d.org"][i % 4]
        fields: dict = {}
        if i % 9 == 4:
            fields["markers"] = {"_gnmrk_": new_batch_id(NOW - 9 * DAY, 1)}  # expired
        elif i % 9 == 5:
            fields["markers"] = {"_gnmrk_": new_batch_id(NOW - DAY, 1)}  # still running
        elif i % 9 == 6:
            fields["markers"] = {"_gnmrk_": "crashed"}
            fields["metadata"] = {"_ngt_": (NOW - 9 * DAY).to_bytes(8, "big")}
        elif i % 9 == 7:
            fields["markers"] = {"dist": str(i % 4)}
        suffix = ".png" if i % 11 == 3 else ""
        add(
            table,
            f"http://{host}/p{i}{suffix}",
            score=[0.0, 0.5, 1.0, 2.0][i % 3] if i % 5 else 1.0,
            fetch_time=NOW + DAY if i % 10 == 9 else NOW - i * 1000,
            **fields,
        )
    table.update("com.Example:http/a/../b", {"fetch_time": NOW, "score": 2.0})
    table.update("com.a:http/no-score", {"fetch_time": NOW})


def _batch_cells(table) -> dict[str, tuple]:
    """Key → the cells generate writes, for every marked row."""
    columns = [b"mk:_gnmrk_", b"mtdt:_npt_", b"f:fi", b"f:bid"]
    found = {}
    for key, cells in table.store.scan(Scan(columns=columns)):
        if cells.get(b"mk:_gnmrk_") == BATCH.encode():
            found[key.decode()] = tuple(cells.get(c) for c in columns)
    return found


def _generate_both_ways(table, **config) -> tuple:
    """Generate on *table* with the default sort value, then again from the same rows with a
    sort value that is the same function under another name (the general path), both with the
    default URL filter and normalization; return what each wrote and counted."""
    snapshot = list(table.store.scan())
    url_filter = load_url_filter(DEFAULT_RULES_PATH)
    runs = []
    for extra in ({}, {"sort_value": _same_sort_value}):
        table.store.delete_rows([key for key, _ in table.store.scan(Scan(columns=[b"f:ts"]))])
        table.store.write([RowUpdate(key, dict(cells)) for key, cells in snapshot])
        opts = GenerateOptions(
            GenerateConfig(url_filter=url_filter, **config, **extra), num_fetchers=3
        )
        result = generate(table, opts, now=NOW, batch_id=BATCH)
        counts = {n: getattr(result.counts, n) for n in ORDER_FREE_COUNTS}
        runs.append((_batch_cells(table), result.partitions, counts))
    return runs[0], runs[1]


ORDER_FREE_COUNTS = ("seen", "generated", "expired", "distance", "not_due", "min_score", "selected")


@pytest.mark.parametrize(
    "config",
    [
        {"top_n": 20},
        {"top_n": 17, "max_count": 2},
        {"top_n": 30, "max_count": 3, "count_mode": "domain"},
        {"max_count": 1, "min_score": 0.25},
        {"top_n": 9, "max_distance": 1, "gen_delay": -1},
        {"top_n": 1000},
    ],
)
def test_score_order_path_selects_the_batch_of_the_general_path(table, config):
    _varied_rows(table)
    fast, general = _generate_both_ways(table, **config)
    assert fast == general
    assert fast[0]  # something was selected


def test_score_order_path_is_taken_on_the_embedded_store_only(table, monkeypatch):
    import nutchy.jobs.generate as job

    _varied_rows(table)
    calls = []
    general = job._select
    monkeypatch.setattr(job, "_select", lambda *a: calls.append(1) or general(*a))
    result = generate(table, options(top_n=10, max_count=2), now=NOW, batch_id=BATCH)
    assert result.selected == 8  # two for each of the four hosts
    assert bool(calls) is (not hasattr(table.store, "scan_due_by_score"))


@pytest.mark.parametrize("score", [-0.5, -0.0, float("nan")])
def test_scores_the_order_cannot_rank_fall_back_to_the_general_path(table, score, caplog):
    for i in range(12):
        add(table, f"http://a.com/{i}", score=float(i % 4))
    add(table, "http://b.com/odd", score=score)
    caplog.set_level("INFO", logger="nutchy.jobs.generate")
    result = generate(table, options(top_n=5, max_count=3), now=NOW, batch_id=BATCH)
    expected = ["http://a.com/11", "http://a.com/3", "http://a.com/7"]
    if not math.isnan(score):  # a NaN score ranks below every minimum; -0.5 and -0.0 pass it
        expected.append("http://b.com/odd")
    assert sorted(marked(table)) == expected
    if hasattr(table.store, "scan_due_by_score"):
        assert "Selecting with the general path" in caplog.text
    assert result.counts.seen == 13


def test_concurrent_generates_never_share_a_row(store_factory, table):
    """Three generates at once, each with its own store: each batch is its own 10 rows and holds
    as many rows as it says. The resolver's pause keeps each one's selection and marks apart, so
    without the generate lock they would all select the same 10 best rows."""
    for i in range(30):
        add(table, f"http://h{i}.example.com/", score=float(i))

    def slow_resolver(hosts, timeout):
        time.sleep(0.3)
        return {}

    def run(n: int):
        mine = WebTable(store_factory(), read_limit=7, write_limit=5)
        opts = options(top_n=10, num_fetchers=2, partition_mode="byIP")
        return generate(mine, opts, now=NOW, batch_id=f"b{n}", resolver=slow_resolver)

    with ThreadPoolExecutor(3) as pool:
        results = [done.result() for done in [pool.submit(run, n) for n in range(3)]]
    marks = marked(table)
    assert len(marks) == 30
    for result in results:
        assert result.selected == 10
        assert sum(batch == result.batch_id for batch in marks.values()) == 10
