"""The dedup job on both stores: which page of a signature is kept, the others marked
DUPLICATE with the kept URL, a streaming external sort, and rows changed during the run."""

from __future__ import annotations

import pytest

from nutchy.cli import main
from nutchy.core.dedup import parse_compare_order
from nutchy.core.status import CrawlStatus, Metadata
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import ALL_FIELDS, WebPage
from nutchy.jobs.dedup import DedupOptions, SortStats, dedup, external_sort
from nutchy.jobs.readdb import parse_status_filter, table_stats
from nutchy.store.schema import RowUpdate
from nutchy.store.table import WebTable

NOW = 1_700_000_000_000
SIG_A = bytes(range(16))
SIG_B = bytes(range(1, 17))
FETCHED = CrawlStatus.FETCHED
DUPLICATE = CrawlStatus.DUPLICATE


@pytest.fixture
def table(store):
    return WebTable(store, read_limit=3, write_limit=2)


def add(table, url, *, sig=SIG_A, score=1.0, fetch_time=NOW, status=FETCHED, **fields):
    page = WebPage(
        reverse_url(url),
        status=status,
        signature=sig,
        score=score,
        fetch_time=fetch_time,
        **fields,
    )
    table.put(page, ALL_FIELDS)
    return page


def state(table, url):
    page = table.get(url, ["status", "metadata"])
    dup = page.metadata.get(Metadata.DUPLICATE_OF)
    return page.status, None if dup is None else dup.decode()


def test_the_highest_score_is_kept_and_the_others_point_at_it(table):
    add(table, "http://a.com/low", score=0.5)
    add(table, "http://a.com/best", score=2.0)
    add(table, "http://b.com/mid", score=1.0, status=CrawlStatus.NOTMODIFIED)
    add(table, "http://a.com/alone", sig=SIG_B, score=0.1)
    # Same content but not a fetched page: never compared.
    add(table, "http://a.com/gone", status=CrawlStatus.GONE, score=9.0)
    add(table, "http://a.com/moved", status=CrawlStatus.REDIR_PERM, score=9.0)
    add(table, "http://a.com/nosig", sig=None, score=9.0)
    result = dedup(table)
    assert state(table, "http://a.com/best") == (FETCHED, None)
    assert state(table, "http://a.com/low") == (DUPLICATE, "http://a.com/best")
    assert state(table, "http://b.com/mid") == (DUPLICATE, "http://a.com/best")
    assert state(table, "http://a.com/alone") == (FETCHED, None)
    assert state(table, "http://a.com/gone") == (CrawlStatus.GONE, None)
    assert state(table, "http://a.com/moved") == (CrawlStatus.REDIR_PERM, None)
    assert state(table, "http://a.com/nosig") == (FETCHED, None)
    counts = result.counts
    assert (counts.pages, counts.groups, counts.marked, counts.kept) == (4, 1, 2, 0)
    assert result.written == 2
    # readdb names the status, and dumps it by name.
    assert "status 7 (status_duplicate):\t2" in table_stats(table, now=NOW).lines()
    assert parse_status_filter("duplicate") == 7
    # Again: nothing to change.
    again = dedup(table)
    assert (again.counts.marked, again.counts.unchanged, again.written) == (0, 2, 0)


def test_ties_go_to_the_shortest_url_then_the_latest_fetch(table):
    add(table, "http://a.com/index.html", fetch_time=NOW + 5)
    add(table, "http://a.com/", fetch_time=NOW)
    add(table, "http://a.com/x%41", sig=SIG_B, fetch_time=NOW)  # 'xA' once decoded: 2 chars
    add(table, "http://a.com/yy", sig=SIG_B, fetch_time=NOW + 1)
    dedup(table)
    assert state(table, "http://a.com/") == (FETCHED, None)
    assert state(table, "http://a.com/index.html") == (DUPLICATE, "http://a.com/")
    assert state(table, "http://a.com/yy") == (FETCHED, None)
    assert state(table, "http://a.com/x%41") == (DUPLICATE, "http://a.com/yy")


def test_nutchs_order_keeps_the_latest_fetch_first(table):
    add(table, "http://a.com/index.html", fetch_time=NOW + 5)
    add(table, "http://a.com/", fetch_time=NOW)
    order = parse_compare_order("score,fetchTime,urlLength")
    dedup(table, DedupOptions(order=order))
    assert state(table, "http://a.com/index.html") == (FETCHED, None)
    assert state(table, "http://a.com/") == (DUPLICATE, "http://a.com/index.html")


def test_https_over_http_and_groups_by_host(table):
    add(table, "http://a.com/p")
    add(table, "https://a.com/p")
    add(table, "http://b.com/p")
    order = parse_compare_order("httpsOverHttp,score,urlLength,fetchTime")
    dedup(table, DedupOptions(order=order, group_mode="host"))
    assert state(table, "https://a.com/p") == (FETCHED, None)
    assert state(table, "http://a.com/p") == (DUPLICATE, "https://a.com/p")
    assert state(table, "http://b.com/p") == (FETCHED, None)  # alone on its host


def test_a_duplicate_whose_group_changed_is_kept_again(table):
    add(table, "http://a.com/a", score=2.0)
    add(table, "http://a.com/b")
    add(table, "http://a.com/c")
    dedup(table)
    assert state(table, "http://a.com/c") == (DUPLICATE, "http://a.com/a")
    # /a's content changes: /b is now the best of the signature, /c a duplicate of it.
    table.update(reverse_url("http://a.com/a"), {"signature": SIG_B})
    result = dedup(table)
    assert state(table, "http://a.com/a") == (FETCHED, None)
    assert state(table, "http://a.com/b") == (FETCHED, None)
    assert state(table, "http://a.com/c") == (DUPLICATE, "http://a.com/b")
    assert (result.counts.kept, result.counts.marked) == (1, 1)


def test_the_external_sort_spills_runs_and_decides_the_same(table):
    for i in range(40):
        add(table, f"http://h{i % 7}.com/page{i}", sig=bytes([i % 5]) * 16, score=float(i % 3))
    spilled = WebTable(table.store, read_limit=4, write_limit=3)
    assert dedup(spilled, DedupOptions(sort_rows=3)).sort.runs == 14
    by_sorting_in_memory: dict[str, tuple[int, str | None]] = {}
    pages = list(table.scan(["signature", "score", "status", "metadata"]))
    for page in pages:
        group = sorted(
            (p for p in pages if p.signature == page.signature),
            key=lambda p: (-p.score, len(p.url), p.key),
        )
        kept = group[0].url
        by_sorting_in_memory[page.url] = (FETCHED, None) if page.url == kept else (DUPLICATE, kept)
    assert {p.url: state(table, p.url) for p in pages} == by_sorting_in_memory
    assert sum(1 for s, _ in by_sorting_in_memory.values() if s == DUPLICATE) == 35


def test_external_sort_holds_runs_on_disk(tmp_path):
    items = [(i * 7919 % 1000, str(i)) for i in range(1000)]
    stats = SortStats()
    merged = list(external_sort(iter(items), run_size=64, folder=str(tmp_path), stats=stats))
    assert merged == sorted(items)
    assert stats.runs == 16
    assert stats.spilled_bytes > 1000 * 4
    assert list(tmp_path.iterdir()) == []  # the runs are gone


def test_a_row_fetched_during_the_run_is_left_alone(table):
    add(table, "http://a.com/", score=2.0)
    add(table, "http://a.com/b")
    add(table, "http://a.com/c")

    class FetchDuringScan:
        """Progress that, when the scan reaches the last row, writes what a fetch of /b writes."""

        def advance(self, n=1, position=None):
            self.seen = getattr(self, "seen", 0) + 1
            if self.seen == 3:
                table.update(reverse_url("http://a.com/b"), {"status": CrawlStatus.RETRY})

    result = dedup(table, progress=FetchDuringScan())
    assert state(table, "http://a.com/b") == (CrawlStatus.RETRY, None)
    assert state(table, "http://a.com/c") == (DUPLICATE, "http://a.com/")
    assert (result.changed_meanwhile, result.written) == (1, 1)


def test_an_undecodable_row_is_skipped(table):
    add(table, "http://a.com/a")
    add(table, "http://a.com/b")
    bad = RowUpdate(
        reverse_url("http://a.com/c").encode(), puts={b"f:st": b"\x00\x02", b"p:sig": SIG_A}
    )
    table.store.write([bad])
    result = dedup(table)
    assert result.skipped == 1
    assert state(table, "http://a.com/b") == (DUPLICATE, "http://a.com/a")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("score,urlLength", "needs score, fetchTime and urlLength"),
        ("score,urlLength,fetchTime,size", "unknown criterion 'size'"),
        ("score,score,urlLength,fetchTime", "appears twice"),
    ],
)
def test_a_bad_compare_order_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_compare_order(text)


def test_the_command(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    monkeypatch.chdir(tmp_path)
    crawl = ["-s", f"NUTCH_CRAWL_DIR={tmp_path / 'crawl'}"]
    assert main(["storage", "init", *crawl]) == 0
    from nutchy.config import load_settings
    from nutchy.store import open_table

    with open_table(load_settings({"NUTCH_CRAWL_DIR": str(tmp_path / "crawl")})) as table:
        add(table, "http://a.com/")
        add(table, "http://a.com/other")
    capsys.readouterr()
    assert main(["dedup", *crawl]) == 0
    err = capsys.readouterr().err
    assert "2 fetched pages compared, 1 signatures shared by several pages: 1 marked" in err
    assert main(["dedup", "-compareOrder", "score,urlLength", *crawl]) == 2
    assert "NUTCH_DEDUPLICATION_COMPARE_ORDER: a compare order needs" in capsys.readouterr().err
    assert main(["dedup", "-group", "site", *crawl]) == 2
    assert main(["dedup", "-s", "NUTCH_DEDUPLICATION_SORT_ROWS=0", *crawl]) == 2
    assert "NUTCH_DEDUPLICATION_SORT_ROWS must be >= 1" in capsys.readouterr().err
