"""``scrapy crawl nutch`` as a whole crawl: without ``-a batch`` it generates its batches and runs
rounds of generate, fetch, parse and updatedb in one process; with ``-a batch`` it updates the
batch once it is fetched whole, and leaves a batch fetched in part alone."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from sites import NOW_MS, FetchProject, Site, graph_site, prepare_batch

from nutchy.core.status import CrawlStatus
from nutchy.jobs.inject import InjectOptions, inject
from nutchy.store.table import WebTable

#: path -> (title, links). "/" reaches everything in three rounds; "/lost" is linked from nowhere.
GRAPH = {
    "/": ("Home", ["/a", "/b"]),
    "/a": ("A", ["/c", "/missing"]),
    "/b": ("B", ["/"]),
    "/c": ("C", []),
    "/lost": ("Lost", ["/"]),
}


@pytest.fixture
def site():
    with graph_site(GRAPH) as server:
        yield server


def base(site) -> str:
    return f"http://127.0.0.1:{site.server_address[1]}"


def seed(store, *urls: str) -> WebTable:
    table = WebTable(store)
    seeds = Path(tempfile.mkdtemp()) / "seeds.txt"
    seeds.write_text("".join(f"{url}\n" for url in urls), encoding="utf-8")
    inject(table, [seeds], InjectOptions(2592000, 1.0, None), now=NOW_MS)
    return table


def pages(table: WebTable) -> dict[str, object]:
    return {page.url: page for page in table.scan()}


def test_rounds_in_one_process_until_nothing_is_due(store, tmp_path, site):
    root = base(site)
    table = seed(store, f"{root}/")
    project = FetchProject(tmp_path, store, NUTCH_FETCHER_UPDATEDB=True)
    result = project.crawl(None, rounds="10")
    assert result.returncode == 0, result.log[-3000:]
    assert result.stats["nutch/rounds"] == 3  # /, then /a and /b, then /c and /missing
    assert "Generate selected no URL: nothing left to fetch" in result.log
    assert result.stats["finish_reason"] == "finished"
    # the closing line names every batch fetched, in the order of the rounds
    batches = re.findall(r"Round \d of 10: batch (\S+),", result.log)
    assert len(set(batches)) == 3, result.log[-3000:]
    assert f"Fetched batches {', '.join(batches)} (finished): 5 rows" in result.log
    rows = pages(table)
    assert set(rows) == {f"{root}{path}" for path in ("/", "/a", "/b", "/c", "/missing")}
    for path in ("/", "/a", "/b", "/c"):
        row = rows[f"{root}{path}"]
        assert row.status == CrawlStatus.FETCHED, path
        assert row.title == GRAPH[path][0]
        assert "_gnmrk_" not in row.markers and "_updmrk_" in row.markers
    assert rows[f"{root}/missing"].status == CrawlStatus.GONE
    assert rows[f"{root}/"].inlinks == {f"{root}/b": "to /"}
    assert rows[f"{root}/c"].markers["dist"] == "2"
    # each page once, every round in this one process
    assert sorted(site.hits) == sorted(["/robots.txt", "/", "/a", "/b", "/c", "/missing"])


def test_updatedb_takes_what_the_parse_process_read_back_and_writes_the_same_rows(tmp_path, site):
    """The parse process keeps what the pages whose parses it wrote give their outlinks, for the updatedb of each
    round (its log line says how many pages it updated from them); the rows are those a crawl
    whose updatedb reads every page after the fetch writes."""
    from nutchy.core.scoring import read_cash
    from nutchy.store.embedded import EmbeddedStore

    root = base(site)
    rows = {}
    for limit in (500000, 0):  # NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS: 0 turns it off
        store = EmbeddedStore(tmp_path / str(limit) / "webpage.sqlite")
        table = seed(store, f"{root}/")
        project = FetchProject(
            tmp_path, store, NUTCH_FETCHER_UPDATEDB=True, NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS=limit
        )
        result = project.crawl(None, rounds="10")
        assert result.returncode == 0, result.log[-3000:]
        shared = re.findall(r"(\d+) pages updated from what the parse process kept", result.log)
        # every page parsed: not /missing, a 404, which updatedb reads
        assert shared == (["1", "2", "1"] if limit else []), result.log[-3000:]
        rows[limit] = {
            page.url: (
                page.status,
                page.score,
                read_cash(page.metadata),
                page.markers.get("dist"),
                page.inlinks,
                page.fetch_interval,
            )
            for page in table.scan()
        }
        store.close()
    assert len(rows[0]) == 5
    assert rows[500000] == rows[0]


def test_rounds_and_top_n_bound_the_crawl(store, tmp_path, site):
    root = base(site)
    table = seed(store, f"{root}/", f"{root}/lost")
    project = FetchProject(tmp_path, store, NUTCH_FETCHER_UPDATEDB=True)
    result = project.crawl(None, rounds="2", topN="1")
    assert result.returncode == 0, result.log[-3000:]
    assert result.stats["nutch/rounds"] == 2
    assert "2 rounds done" in result.log
    fetched = {url for url, row in pages(table).items() if row.status == CrawlStatus.FETCHED}
    assert len(fetched) == 2  # one URL a round
    assert len([h for h in site.hits if h != "/robots.txt"]) == 2


def test_a_stop_file_ends_the_crawl_before_the_next_round(store, tmp_path, site):
    seed(store, f"{base(site)}/")
    project = FetchProject(tmp_path, store, NUTCH_FETCHER_UPDATEDB=True)
    # NUTCH_CRAWL_DIR: the embedded store's directory, or "crawl" in the project's directory
    crawl_dir = store.path.parent if hasattr(store, "path") else tmp_path / "crawl"
    crawl_dir.mkdir(exist_ok=True)
    (crawl_dir / "STOP").touch()
    result = project.crawl(None, rounds="5")
    assert result.returncode == 0, result.log[-3000:]
    assert "STOP found: no more rounds" in result.log
    assert "Fetched no batch (finished): 0 rows" in result.log
    assert site.hits == []


def test_nothing_due_ends_at_once(store, tmp_path):
    seed(store)  # creates the table, injects nothing
    project = FetchProject(tmp_path, store, NUTCH_FETCHER_UPDATEDB=True)
    result = project.crawl(None, rounds="3")
    assert result.returncode == 0, result.log[-3000:]
    assert "Generate selected no URL" in result.log
    assert result.stats.get("nutch/rounds") is None


def test_a_given_batch_fetched_whole_is_updated(store, tmp_path):
    with Site(("127.0.0.2",)) as site:
        urls = [site.url("127.0.0.2", f"/page/{i}") for i in range(5)] + [
            site.url("127.0.0.2", "/status/404")
        ]
        table = prepare_batch(store, urls)
        project = FetchProject(tmp_path, store, NUTCH_FETCHER_UPDATEDB=True)
        result = project.crawl("b1")
        assert result.returncode == 0, result.log[-3000:]
        assert "Updated batch b1" in result.log
        assert result.stats["nutch/updatedb/batch_pages"] == 6
        rows = pages(table)
        for url in urls:
            assert "_gnmrk_" not in rows[url].markers and "_ftcmrk_" not in rows[url].markers
        for url in urls[:-1]:  # parsed pages carry the batch's updatedb mark
            assert rows[url].markers["_updmrk_"] == "b1"
        assert rows[urls[-1]].status == CrawlStatus.GONE
        assert rows[urls[0]].status == CrawlStatus.FETCHED
        assert rows[urls[0]].fetch_time > NOW_MS  # rescheduled by the fetch schedule


def test_a_batch_cut_short_by_its_time_limit_is_left_for_updatedb(store, tmp_path):
    with Site(("127.0.0.2",)) as site:
        urls = [site.url("127.0.0.2", f"/page/{i:02d}") for i in range(20)]
        table = prepare_batch(store, urls)
        project = FetchProject(
            tmp_path, store, NUTCH_FETCHER_UPDATEDB=True, NUTCH_FETCHER_SERVER_DELAY=0.5
        )
        result = project.crawl("b1", timelimit="0.02")
        assert result.returncode == 0, result.log[-3000:]
        assert "was not fetched whole (its time limit): run nutchy updatedb b1" in result.log
        assert "nutch/updatedb/batch_pages" not in result.stats
        rows = pages(table)
        assert all(rows[url].markers.get("_gnmrk_") == "b1" for url in urls)


def test_a_bad_updatedb_setting_stops_the_crawl_before_any_fetch(store, tmp_path, site):
    seed(store, f"{base(site)}/")
    project = FetchProject(
        tmp_path, store, NUTCH_FETCHER_UPDATEDB=True, NUTCH_DB_FETCH_SCHEDULE_CLASS="nope"
    )
    result = project.crawl(None, rounds="2")
    assert "NUTCH_DB_FETCH_SCHEDULE_CLASS must be one of" in result.log
    assert site.hits == []


def test_adddays_makes_fetched_pages_due_again(store, tmp_path, site):
    root = base(site)
    seed(store, f"{root}/")
    project = FetchProject(tmp_path, store, NUTCH_FETCHER_UPDATEDB=True)
    assert project.crawl(None, rounds="10").returncode == 0
    first = sorted(h for h in site.hits if h != "/robots.txt")
    again = project.crawl(None, rounds="1")
    assert "Generate selected no URL" in again.log  # nothing is due for a month
    later = project.crawl(None, rounds="1", adddays="31")
    assert later.returncode == 0, later.log[-3000:]
    assert later.stats["nutch/rounds"] == 1
    # every fetched page once more; not /missing, GONE after its 404 for 1.5 intervals (45 days)
    refetched = [h for h in first if h != "/missing"]
    assert sorted(h for h in site.hits if h != "/robots.txt") == sorted(first + refetched)
