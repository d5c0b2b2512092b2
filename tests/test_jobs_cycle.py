"""The parse and updatedb jobs on both stores: a fetched batch parsed and folded back, re-runs
that change nothing, and two crawls updating the same rows."""

from __future__ import annotations

import gc
import logging
import pickle
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial

import pytest

from nutchy.core.parse import ParseConfig
from nutchy.core.schedule import AdaptiveFetchSchedule, DefaultFetchSchedule
from nutchy.core.scoring import cash_bytes, read_cash
from nutchy.core.signature import MD5Signature
from nutchy.core.status import CrawlStatus, ParseStatusMajor
from nutchy.core.update import SHARE_FIELDS, UpdateConfig
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import WebPage
from nutchy.jobs.parse import parse_batch
from nutchy.jobs.updatedb import ParsedShares, parsed_ahead, read_ahead, updatedb
from nutchy.progress import Progress
from nutchy.store.table import WebTable

NOW = 1_700_000_000_000
DAY = 86_400_000
BATCH = "1700000000-1"
PAGE = b"""<html><head><title>Home</title></head><body>Welcome
<a href="/b">B</a> <a href="/c">C</a> <a href="http://d.example.org/">D</a>
<a href="http://e.example.org/">E</a></body></html>"""

ALL_FIELDS = None


@pytest.fixture
def table(store):
    return WebTable(store, read_limit=3, write_limit=2)


def fetched(
    table,
    url: str,
    content: bytes,
    *,
    status=CrawlStatus.FETCHED,
    batch=BATCH,
    score=1.0,
    cash=1.0,
    content_type="text/html",
    **fields,
) -> str:
    key = reverse_url(url)
    page = WebPage(
        key,
        status=status,
        fetch_time=NOW,
        prev_fetch_time=NOW - DAY,
        fetch_interval=2592000,
        score=score,
        content=content,
        content_type=content_type,
        base_url=url,
        metadata={"_csh_": cash_bytes(cash)},
        markers={"_gnmrk_": batch, "_ftcmrk_": batch, "dist": "0"},
        **fields,
    )
    table.put(
        page,
        [
            "status",
            "fetch_time",
            "prev_fetch_time",
            "fetch_interval",
            "score",
            "content",
            "content_type",
            "base_url",
            "metadata",
            "markers",
            *fields,
        ],
    )
    return key


def run_parse(table, batch=BATCH, **kwargs):
    return parse_batch(table, batch, config=ParseConfig(), signature=MD5Signature(), **kwargs)


def run_update(table, batch=BATCH, now=NOW + 1000):
    return updatedb(table, batch, now=now, config=UpdateConfig(schedule=DefaultFetchSchedule()))


def snapshot(table) -> dict[str, WebPage]:
    return {p.key: p for p in table.scan()}


def test_parse_then_updatedb_the_worked_example(table):
    a = fetched(table, "http://a.example.com/", PAGE)
    counts = run_parse(table)
    assert (counts.parsed, counts.written) == (1, 1)
    page = table.get_key(a)
    assert page.title == "Home"
    assert page.parse_status.major == ParseStatusMajor.SUCCESS
    assert page.outlinks == {
        "http://a.example.com/b": "B",
        "http://a.example.com/c": "C",
        "http://d.example.org/": "D",
        "http://e.example.org/": "E",
    }
    assert page.markers["__prsmrk__"] == BATCH

    counts = run_update(table)
    assert (counts.batch_pages, counts.new_rows) == (1, 4)
    rows = snapshot(table)
    home = rows[a]
    assert home.markers == {"_updmrk_": BATCH, "dist": "0"}
    assert home.fetch_time == NOW + 2592000 * 1000
    assert (home.score, read_cash(home.metadata)) == (1.0, 0.0)
    for url, anchor in [("http://a.example.com/b", "B"), ("http://d.example.org/", "D")]:
        row = rows[reverse_url(url)]
        assert row.status == CrawlStatus.UNFETCHED
        assert row.fetch_time == NOW + 1000
        assert (row.score, read_cash(row.metadata)) == (0.25, 0.25)
        assert row.inlinks == {"http://a.example.com/": anchor}
        assert row.markers["dist"] == "1"


def test_updatedb_logs_its_progress_reading_then_writing(table, caplog):
    caplog.set_level(logging.INFO, logger="nutchy.progress")
    fetched(table, "http://a.example.com/", PAGE)
    fetched(table, "http://x.example.com/", PAGE)
    run_parse(table)
    # off a terminal, with no time between log lines: a line at the first row and a last one
    progress = partial(Progress, enabled=False, log_interval=0)
    counts = updatedb(
        table, BATCH, now=NOW + 1000, config=UpdateConfig(schedule=DefaultFetchSchedule()),
        progress=progress,
    )
    assert (counts.batch_pages, counts.new_rows) == (2, 6)  # b, c of each; d and e shared
    lines = [re.sub(r", [\d,]+ (pages|rows)/s$", ", R", m) for m in caplog.messages]
    assert lines == [
        "updatedb: batch pages read: 1 pages, R",
        "updatedb: batch pages read: 2 pages, R",
        "updatedb: rows written: 1 rows (12%), R",
        "updatedb: rows written: 8 rows (100%), R",
    ]


def test_updatedb_runs_with_the_cyclic_collector_off_and_turns_it_back(table):
    fetched(table, "http://a.example.com/", PAGE)
    fetched(table, "http://x.example.com/", PAGE)
    run_parse(table)
    seen = []

    def progress(label, **kwargs):
        seen.append(gc.isenabled())  # once reading the batch, once writing the rows
        return Progress(label, enabled=False, **kwargs)

    assert gc.isenabled()
    config = UpdateConfig(schedule=DefaultFetchSchedule())
    counts = updatedb(table, BATCH, now=NOW + 1000, config=config, progress=progress)
    assert (counts.batch_pages, seen, gc.isenabled()) == (2, [False, False], True)
    # off before, off after
    fetched(table, "http://b.example.com/", PAGE, batch="b2")
    gc.disable()
    try:
        updatedb(table, "b2", now=NOW + 2000, config=config)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_updatedb_leaves_no_reference_cycles(tmp_path):
    from nutchy.store.embedded import EmbeddedStore

    store = EmbeddedStore(tmp_path / "webpage.sqlite")
    store.create()
    table = WebTable(store, read_limit=3, write_limit=2)
    try:
        for name in "abcd":
            fetched(table, f"http://{name}.example.com/", PAGE)
        fetched(table, "http://n.example.com/", b"", status=CrawlStatus.NOTMODIFIED)
        run_parse(table)
        # until nothing is left: freeing what earlier tests left (Scrapy's signal handlers, held
        # by weak references) leaves more to collect the next time
        while gc.collect():
            pass
        gc.disable()
        try:
            assert run_update(table).batch_pages == 5
            # what the collector would have found, had it run: nothing
            assert gc.collect() == 0
        finally:
            gc.enable()
    finally:
        store.close()


def test_rerun_changes_nothing(table):
    fetched(table, "http://a.example.com/", PAGE)
    run_parse(table)
    first = snapshot(table)
    run_parse(table)
    assert snapshot(table) == first
    run_update(table)
    updated = snapshot(table)
    counts = run_update(table)
    assert counts.batch_pages == 0
    assert snapshot(table) == updated
    run_parse(table)
    assert snapshot(table) == updated


def test_rerun_after_crash_does_not_count_scores_twice(table):
    a = fetched(table, "http://a.example.com/", PAGE)
    run_parse(table)
    before = table.get_key(a)
    run_update(table)
    done = snapshot(table)
    # As if the run had crashed after writing the targets, before writing the batch page.
    table.put(before, ["fetch_time", "fetch_interval", "metadata", "markers", "score"])
    counts = run_update(table)
    assert counts.already_counted == 4
    assert snapshot(table) == done


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (CrawlStatus.RETRY, CrawlStatus.UNFETCHED),
        (CrawlStatus.GONE, CrawlStatus.GONE),
        (CrawlStatus.NOTMODIFIED, CrawlStatus.NOTMODIFIED),
    ],
)
def test_outcomes_not_parsed_but_updated(table, status, expected):
    key = fetched(table, "http://x.example.com/", b"", status=status)
    assert run_parse(table).not_fetched == 1
    run_update(table)
    page = table.get_key(key)
    assert page.status == expected
    assert "_gnmrk_" not in page.markers and "_ftcmrk_" not in page.markers
    assert page.fetch_time > NOW


def test_parse_skips_truncated_and_other_batches_and_resumes(table):
    fetched(table, "http://t.example.com/", b"<p>x</p>", headers={"Content-Length": "999"})
    fetched(table, "http://o.example.com/", b"<p>x</p>", batch="other")
    counts = run_parse(table)
    assert (counts.truncated, counts.written) == (1, 0)
    assert run_parse(table, skip_truncated=False).parsed == 1
    assert run_parse(table, skip_truncated=False, resume=True).resumed == 1
    assert (
        run_parse(table, None).written == 1
    )  # -all: the other batch too (the truncated one is skipped)


def test_existing_target_keeps_status_and_schedule(table):
    target = reverse_url("http://a.example.com/b")
    table.put(
        WebPage(
            target,
            status=CrawlStatus.FETCHED,
            fetch_time=NOW + 5 * DAY,
            score=2.0,
            inlinks={"http://old.example.com/": "old"},
            markers={"_gnmrk_": "someone-else"},
        ),
        ["status", "fetch_time", "score", "inlinks", "markers"],
    )
    fetched(table, "http://a.example.com/", PAGE)
    run_parse(table)
    run_update(table)
    row = table.get_key(target)
    assert (row.status, row.fetch_time, row.score) == (CrawlStatus.FETCHED, NOW + 5 * DAY, 2.25)
    assert row.markers["_gnmrk_"] == "someone-else"
    assert row.inlinks == {"http://old.example.com/": "old", "http://a.example.com/": "B"}


def test_two_batches_feeding_the_same_row(table):
    # Two crawls sharing one table: each batch adds its inlink and its score to the same target.
    fetched(table, "http://p.example.com/", b'<a href="http://t.example.net/">P</a>', batch="b1")
    fetched(table, "http://q.example.com/", b'<a href="http://t.example.net/">Q</a>', batch="b2")
    run_parse(table, "b1")
    run_parse(table, "b2")
    run_update(table, "b1")
    run_update(table, "b2")
    row = table.get_key(reverse_url("http://t.example.net/"))
    assert row.inlinks == {"http://p.example.com/": "P", "http://q.example.com/": "Q"}
    assert row.score == 2.0


def test_concurrent_updatedb_runs_lose_no_contribution(store_factory, table):
    """Two crawls update their batches at the same time, each from its own store, and each
    batch links to the other's pages. OPIC's cash is conserved: none lost, none counted twice.

    Which run reads first decides how much cash a page shares out (a page that already received
    the other batch's share passes it on), so the checks hold for every interleaving. A read of
    the score followed by a separate write fails them.
    """
    targets = [f"http://t.example.net/{i}" for i in range(60)]
    sources = {
        "b1": [f"http://p.example.com/{i}" for i in range(4)],
        "b2": [f"http://q.example.com/{i}" for i in range(4)],
    }
    for batch, urls in sources.items():
        others = sources["b2" if batch == "b1" else "b1"]
        links = "".join(f'<a href="{u}">x</a>' for u in targets + others).encode()
        for url in urls:
            fetched(table, url, links, batch=batch)
        run_parse(table, batch)
    share = 1.0 / 64  # each source shares its cash of 1.0 among 64 outlinks

    def run(batch: str) -> None:
        run_update(WebTable(store_factory(), read_limit=5), batch)

    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(run, batch) for batch in sources]:
            done.result()  # raises what the run raised
    rows = snapshot(table)
    assert sum(read_cash(row.metadata) for row in rows.values()) == 8.0
    for url in targets:
        row = rows[reverse_url(url)]
        assert row.score == read_cash(row.metadata) >= 8 * share, url
        assert len(row.inlinks) == 8
    for url in sources["b1"] + sources["b2"]:
        row = rows[reverse_url(url)]
        # received at least the other batch's 4 shares; kept them unless it read them first
        assert row.score - 1.0 >= 4 * share, url
        assert read_cash(row.metadata) in (0.0, row.score - 1.0), url
        assert len(row.inlinks) == 4


# --- updatedb's first read done ahead, during the fetch (nutchy crawl) -----------------------


def _world(table, n: int) -> list[str]:
    """A crawled world of six pages on host w<n>, generated into batch b<n>: five fetched pages
    linking to each other and to an external host, one never fetched; keys in URL order."""
    urls = [f"http://w{n}.example.com/{i}" for i in range(6)]
    for i, url in enumerate(urls):
        links = {u: f"to {j}" for j, u in enumerate(urls) if j != i}
        links[f"http://x{n}.example.org/"] = "out"
        fetched_before = i < 5
        page = WebPage(
            reverse_url(url),
            status=CrawlStatus.FETCHED if fetched_before else CrawlStatus.UNFETCHED,
            fetch_time=NOW - DAY,
            fetch_interval=2592000,
            score=1.0 + i / 4,
            outlinks=links if fetched_before else {},
            metadata={"_csh_": cash_bytes(1.0 + i / 4)},
            markers={"_gnmrk_": f"b{n}", "dist": str(i % 3)},
        )
        table.put(page, ["status", "fetch_time", "fetch_interval", "score", "outlinks", "metadata"])
        table.update(page.key, entries={"markers": page.markers})
    return [reverse_url(u) for u in urls]


PAGE_5 = b'<a href="/1">one</a> <a href="/8">eight</a>'


def _fetch_world(table, n: int, keys: list[str]) -> None:
    """The fetch of batch b<n>: a 304, a changed page (parsed), a redirect, a row deleted, a page
    left unfetched, and the never-fetched page fetched and parsed."""
    batch = f"b{n}"
    mark = {"markers": {"_ftcmrk_": batch}}
    table.update(keys[0], {"status": CrawlStatus.NOTMODIFIED, "fetch_time": NOW}, mark)
    # relative links only: the same bytes (and signature) in every world
    for key, body in [(keys[1], b'<a href="/0">zero</a> <a href="/9">new</a>'), (keys[5], PAGE_5)]:
        fields = {"status": CrawlStatus.FETCHED, "fetch_time": NOW, "content": body}
        table.update(key, {**fields, "content_type": "text/html"}, mark)
    moved = {f"http://w{n}.example.com/moved": ""}
    table.update(keys[2], {"status": CrawlStatus.REDIR_TEMP}, mark, replace={"outlinks": moved})
    table.store.delete_rows([keys[3].encode()])
    run_parse(table, batch)


def _renamed(table, n: int) -> dict[str, str]:
    """Every row of world *n*, as text with the world's names made neutral."""
    names = re.compile(rf"\b([wxb]){n}\b")
    return {
        names.sub(r"\1", page.key): names.sub(r"\1", repr(page))
        for page in table.scan()
        if re.search(rf"\.[wx]{n}:", page.key)
    }


def spy_reads(table) -> list[str]:
    """The keys *table*'s ``get_many`` reads from now on (until ``del table.get_many``)."""
    reread: list[str] = []
    get_many = table.get_many

    def spy(keys, fields=None, **kwargs):
        reread.extend(keys)
        return get_many(keys, fields, **kwargs)

    table.get_many = spy
    return reread


def test_updatedb_with_the_batch_read_ahead_writes_what_it_writes_without(table):
    config = UpdateConfig(schedule=DefaultFetchSchedule())
    ahead_keys = _world(table, 1)
    plain_keys = _world(table, 2)
    ahead = read_ahead(table, "b1", config)
    assert sorted(ahead.shares) == ahead_keys[:5]  # the never-fetched page has no outlinks
    _fetch_world(table, 1, ahead_keys)
    _fetch_world(table, 2, plain_keys)

    reread = spy_reads(table)
    with_ahead = updatedb(table, "b1", now=NOW + 1000, config=config, ahead=ahead)
    # read again: every page still in the batch but the 304 (the deleted row is gone)
    assert sorted(reread) == [ahead_keys[i] for i in (1, 2, 4, 5)]
    del table.get_many
    without = updatedb(table, "b2", now=NOW + 1000, config=config)

    assert (with_ahead.read_ahead, without.read_ahead) == (1, 0)
    assert replace(with_ahead, read_ahead=0) == without
    assert with_ahead.batch_pages == 5 and with_ahead.new_rows > 0
    world_1, world_2 = _renamed(table, 1), _renamed(table, 2)
    for key in world_1:
        assert world_1[key] == world_2.get(key), key
    assert len(world_1) > 6


def test_read_ahead_shares_the_cash_read_and_keeps_what_arrives_later(table):
    config = UpdateConfig(schedule=DefaultFetchSchedule())
    keys = _world(table, 1)
    before = sum(read_cash(p.metadata) for p in table.scan(["metadata"]))
    ahead = read_ahead(table, "b1", config)
    # every page answers 304; meanwhile another crawl's updatedb gives the first page 0.5 more
    for key in keys[:5]:
        table.update(key, {"status": CrawlStatus.NOTMODIFIED}, {"markers": {"_ftcmrk_": "b1"}})
    table.update(keys[0], entries={"metadata": {"_csh_": cash_bytes(1.5)}})
    updatedb(table, "b1", now=NOW + 1000, config=config, ahead=ahead)
    rows = snapshot(table)
    # it gave away the 1.0 read ahead, kept the 0.5 that arrived later, and received a sixth of
    # the cash of each other page of the batch
    received = sum((1 + i / 4) / 6 for i in range(1, 5))
    assert read_cash(rows[keys[0]].metadata) == pytest.approx(0.5 + received, rel=1e-6)
    assert sum(read_cash(p.metadata) for p in rows.values()) == pytest.approx(before + 0.5)


def test_read_ahead_of_another_batch_is_not_used(table):
    config = UpdateConfig(schedule=DefaultFetchSchedule())
    keys = _world(table, 1)
    stale = read_ahead(table, "b1", config)
    stale.batch_id = "b9"
    for key in keys[:5]:
        table.update(key, {"status": CrawlStatus.NOTMODIFIED}, {"markers": {"_ftcmrk_": "b1"}})
    table.update(keys[0], replace={"outlinks": {"http://w1.example.com/new": "n"}})
    counts = updatedb(table, "b1", now=NOW + 1000, config=config, ahead=stale)
    assert counts.new_rows == 2  # the external host and /new, read now
    assert table.get("http://w1.example.com/new").inlinks == {"http://w1.example.com/0": "n"}


def test_read_ahead_holds_at_most_max_outlinks(table):
    config = UpdateConfig(schedule=DefaultFetchSchedule())
    keys = _world(table, 1)  # five pages with 6 outlinks each
    ahead = read_ahead(table, "b1", config, max_outlinks=13)
    assert sorted(ahead.shares) == keys[:2]
    for key in keys[:5]:
        table.update(key, {"status": CrawlStatus.NOTMODIFIED}, {"markers": {"_ftcmrk_": "b1"}})
    counts = updatedb(table, "b1", now=NOW + 1000, config=config, ahead=ahead)
    assert (counts.read_ahead, counts.batch_pages) == (2, 6)


def test_updatedb_with_the_shares_the_parse_process_kept_writes_what_it_writes_without(table):
    """The parse process keeps the shares of the pages whose parses it wrote (ParsedShares);
    updatedb uses a page's share only if the page is still FETCHED in the batch, and writes the
    rows it writes without them."""
    config = UpdateConfig(schedule=DefaultFetchSchedule())
    shared_keys = _world(table, 1)
    plain_keys = _world(table, 2)
    _fetch_world(table, 1, shared_keys)
    _fetch_world(table, 2, plain_keys)
    shares = ParsedShares(config, 1000)
    # the two pages parsed, and the redirect (kept as if FETCHED, so not to be used)
    shares.add("b1", table.get_many([shared_keys[i] for i in (1, 2, 5)], SHARE_FIELDS).values())
    # another batch's: dropped when b1's are taken
    shares.add("b2", table.get_many([plain_keys[1]], SHARE_FIELDS).values())
    taken = shares.take("b1")
    assert sorted(key for key, *_ in taken) == [shared_keys[i] for i in (1, 2, 5)]
    assert shares.take("b2") == []
    ahead = parsed_ahead("b1", pickle.loads(pickle.dumps(taken)))

    reread = spy_reads(table)
    with_shares = updatedb(table, "b1", now=NOW + 1000, config=config, ahead=ahead)
    # read now: the 304, the redirect and the page left unfetched (the deleted row is gone)
    assert sorted(reread) == [shared_keys[i] for i in (0, 2, 4)]
    del table.get_many
    without = updatedb(table, "b2", now=NOW + 1000, config=config)

    assert (with_shares.read_ahead, without.read_ahead) == (2, 0)
    assert replace(with_shares, read_ahead=0) == without
    world_1, world_2 = _renamed(table, 1), _renamed(table, 2)
    assert world_1 == world_2
    assert len(world_1) > 6


def test_parsed_shares_hold_at_most_max_outlinks_and_only_the_pages_of_the_batch(table):
    config = UpdateConfig(schedule=DefaultFetchSchedule())
    keys = _world(table, 1)  # five pages with 6 outlinks each
    pages = table.get_many(keys[:5], SHARE_FIELDS)
    shares = ParsedShares(config, 13)
    shares.add("b1", [pages[k] for k in keys[:5]])
    assert [key for key, *_ in shares.take("b1")] == keys[:2]
    shares = ParsedShares(config, 1000)
    shares.add("b2", pages.values())  # updatedb reads them after the fetch
    assert shares.take("b2") == []


def test_nutchy_crawl_reads_ahead_unless_turned_off(table):
    from nutchy.config import load_settings
    from nutchy.jobs.crawl import _read_ahead

    _world(table, 1)
    on = load_settings({}, project=False)
    off = load_settings({"NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS": "0"}, project=False)
    assert len(_read_ahead(table, on, "b1").shares) == 5
    assert _read_ahead(table, off, "b1") is None


def test_the_parse_process_keeps_shares_unless_turned_off_or_updatedb_is_misconfigured():
    from nutchy._pageparse import parsed_shares
    from nutchy.config import load_settings

    kept = parsed_shares(load_settings({}, project=False))
    assert kept is not None and kept.max_outlinks == 500000
    for settings in (
        {"NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS": "0"},
        # the fetch goes on; updatedb says what is wrong when it runs
        {"NUTCH_DB_FETCH_RETRY_MAX": "-1"},
    ):
        assert parsed_shares(load_settings(settings, project=False)) is None, settings


def test_a_page_read_as_a_304_then_fetched_again_is_written_with_its_signatures(table):
    """updatedb reads the pages that answered 304 without their signatures (their parse record
    holds the page's text); one fetched again between the first read and the write (a resumed
    fetch of the batch) has them read in the write, and ends as if it had been read fetched."""
    config = UpdateConfig(schedule=AdaptiveFetchSchedule())
    keys_1, keys_2 = _world(table, 1), _world(table, 2)
    _fetch_world(table, 1, keys_1)
    _fetch_world(table, 2, keys_2)
    again = {"status": CrawlStatus.FETCHED, "signature": b"new", "prev_signature": b"old"}
    table.update(keys_2[0], again)  # world 2: read fetched, its content changed
    modify, get_key = table.modify, table.get_key
    signed: list[str] = []

    def fetched_meanwhile(keys, fields, change):
        if not signed:  # the first write: world 1's first read is done, its page 0 read as a 304
            table.update(keys_1[0], again)
        return modify(keys, fields, change)

    def spy(key, fields=None):
        if fields is not None and "signature" in fields:
            signed.append(key)
        return get_key(key, fields)

    table.modify, table.get_key = fetched_meanwhile, spy
    updatedb(table, "b1", now=NOW + 1000, config=config)
    del table.modify, table.get_key
    assert signed == [keys_1[0]]
    updatedb(table, "b2", now=NOW + 1000, config=config)
    # (its share was read as a 304's: its inlinks count as stored in world 1, not in world 2)
    page_0 = reverse_url("http://w.example.com/0")
    assert _renamed(table, 1)[page_0] == _renamed(table, 2)[page_0]
    assert table.get_key(keys_1[0]).fetch_interval < 2592000  # a change shortens it
