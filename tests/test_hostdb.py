"""The host database (docs/hostdb.md): ``updatehostdb`` / ``readhostdb`` after a real fetch of
loopback hosts, one of which fails, on both stores; generate leaving out the failing host until
the delay passes; and the fetch leaving a queue for later after
``fetcher.max.exceptions.per.queue`` exceptions."""

from __future__ import annotations

import json
from contextlib import closing

import pytest
from sites import NOW_MS, FetchProject, Site, prepare_batch, store_settings

from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.core.hostdb import HostGate, HostStats
from nutchy.core.status import Mark
from nutchy.jobs.generate import GenerateOptions, generate
from nutchy.jobs.hostdb import read_hosts, suspended_hosts, update_hostdb
from nutchy.jobs.inject import InjectOptions, inject
from nutchy.store import open_host_store
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.hosts import open_host_memory_from_settings
from nutchy.store.schema import RowUpdate
from nutchy.store.table import WebTable

GOOD, BAD, DENY = "127.0.0.2", "127.0.0.3", "127.0.0.4"
DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def servers():
    robots = {DENY: (200, "User-agent: *\nDisallow: /private\n")}
    with Site((GOOD, BAD, DENY), robots=robots) as site:
        yield site


@pytest.fixture
def site(servers):
    servers.clear()
    return servers


def test_consecutive_errors_count_the_failures_after_the_last_success():
    stats = HostStats()
    # Out of time order, as a scan by key gives them: errors at 1..5, a success at 3.
    for at, code in ((5, 16), (1, 16), (3, 1), (4, 16), (2, 16)):
        stats.add(2 if code == 1 else 0x22, code, fetched_at=at, response_time=None, cap=3)
    stats.finish(cap=3)
    assert (stats.consecutive_errors, stats.last_success, stats.last_fetch) == (2, 3, 5)
    capped = HostStats()
    for at in range(10):
        capped.add(0x22, 16, fetched_at=at + 1, response_time=None, cap=3)
    capped.finish(cap=3)
    assert capped.consecutive_errors == 3
    assert len(capped._error_times) == 0
    # Rows fetched by Nutch carry no fetch time: counted, but not in the run of errors.
    untimed = HostStats()
    untimed.add(0x22, 16, fetched_at=None, response_time=None)
    untimed.finish()
    assert (untimed.errors, untimed.consecutive_errors, untimed.last_fetch) == (1, 0, 0)


def test_the_gate_by_error_rate_needs_enough_fetched_rows():
    gate = HostGate(max_error_rate=0.5, min_fetched=4, delay=1000)
    few = HostStats(fetched=3, errors=3, last_fetch=10)
    many = HostStats(fetched=4, errors=3, last_fetch=10)
    assert not gate.suspends(few, now=20)
    assert gate.suspends(many, now=20)
    assert not gate.suspends(many, now=1010)
    assert not HostGate().enabled


@pytest.mark.slow
def test_hostdb_after_a_real_fetch(store, tmp_path, site, capsys):
    urls = [
        site.url(GOOD, "/page/a"),
        site.url(GOOD, "/page/b"),
        site.url(GOOD, "/status/404"),
        *(site.url(BAD, f"/status/500?n={n}") for n in range(3)),
        site.url(DENY, "/page/c"),
        site.url(DENY, "/private/d"),
    ]
    table = prepare_batch(store, urls)
    settings = load_settings(
        {**store_settings(store), "NUTCH_FETCHER_MAX_EXCEPTIONS_PER_QUEUE": 3}, project=False
    )
    # A host row that Nutch's fetcher reads (q_mt), a stale key of nutchy's, and the row of a
    # host that has no row left in the web table.
    hosts = open_host_store(settings)
    hosts.create()
    hosts.write(
        [
            RowUpdate(b"3.0.0.127", puts={b"mtdt:q_mt": b"2", b"mtdt:nutchy.status.99": b"4"}),
            RowUpdate(b"com.example.gone", puts={b"mtdt:q_cd": b"1", b"mtdt:nutchy.rows": b"5"}),
        ]
    )
    result = FetchProject(tmp_path, store, NUTCH_HTTP_TIMEOUT=2000).crawl()
    assert result.returncode == 0, result.log[-3000:]

    with closing(open_host_memory_from_settings(settings)) as memory:
        done = update_hostdb(table, hosts, now=NOW_MS + 1, cap=4, memory=memory)
    assert (done.rows, done.hosts, done.removed, done.undecodable) == (len(urls), 3, 1, 0)
    entries = dict(read_hosts(hosts))
    assert set(entries) == {GOOD, BAD, DENY}
    good, bad, deny = entries[GOOD], entries[BAD], entries[DENY]
    assert (good.rows, good.fetched, good.errors, good.not_found) == (3, 3, 0, 1)
    assert good.status_names() == {"fetched": 2, "gone": 1}
    assert good.not_found_rate == pytest.approx(1 / 3)
    assert good.mean_response_time is not None and good.mean_response_time >= 0
    assert good.last_fetch >= NOW_MS and good.last_success == good.last_fetch
    assert good.consecutive_errors == 0 and good.updated == NOW_MS + 1
    assert (bad.rows, bad.errors, bad.consecutive_errors, bad.last_success) == (3, 3, 3, 0)
    assert bad.status_names() == {"retry": 3}
    assert bad.error_rate == 1.0 and bad.last_fetch >= NOW_MS
    assert (deny.robots_denied, deny.fetched, deny.errors) == (1, 2, 0)
    # robots.txt as the fetch got it, from the crawl's shared robots.txt cache
    assert (good.robots_status, bad.robots_status, deny.robots_status) == (404, 404, 200)
    assert deny.robots_fetched >= NOW_MS
    # Only nutchy's columns were written or removed.
    assert hosts.get(b"3.0.0.127", [b"mtdt:q_mt", b"mtdt:nutchy.status.99"]) == {b"mtdt:q_mt": b"2"}
    assert hosts.get(b"com.example.gone") == {b"mtdt:q_cd": b"1"}
    assert dict(read_hosts(hosts, "127.0.0.3")) == {BAD: bad}

    # Generate leaves the failing host out until NUTCH_GENERATE_HOSTDB_DELAY (1 day) has passed
    # since its last fetch; the other hosts' new URLs are taken.
    fresh = [site.url(GOOD, "/page/new"), site.url(BAD, "/page/new")]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(fresh) + "\n", encoding="utf-8")
    inject(table, [seeds], InjectOptions(2592000, 1.0, None), now=NOW_MS)
    assert suspended_hosts(hosts, HostGate(max_errors=3), now=NOW_MS) == {BAD}
    options = GenerateOptions.from_settings(settings)
    now = bad.last_fetch + 1000
    first = generate(table, options, now=now, batch_id="b2")
    assert first.counts.suspended == 1 and first.selected == 1
    assert table.get(fresh[0], ["markers"]).markers.get(Mark.GENERATE) == "b2"
    assert Mark.GENERATE not in table.get(fresh[1], ["markers"]).markers
    later = generate(table, options, now=bad.last_fetch + DAY_MS, batch_id="b3")
    assert later.counts.suspended == 0 and later.selected == 1
    assert table.get(fresh[1], ["markers"]).markers.get(Mark.GENERATE) == "b3"
    hosts.close()

    if "NUTCH_CRAWL_DIR" in store_settings(store):  # the commands, once
        crawl_dir = store_settings(store)["NUTCH_CRAWL_DIR"]
        assert main(["updatehostdb", "-s", f"NUTCH_CRAWL_DIR={crawl_dir}"]) == 0
        assert "10 rows read, 3 hosts written to host" in capsys.readouterr().out
        assert main(["readhostdb", "-json", "-s", f"NUTCH_CRAWL_DIR={crawl_dir}"]) == 0
        records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [r["host"] for r in records] == [GOOD, BAD, DENY]
        assert records[1]["consecutive_errors"] == 3 and records[2]["robots_status"] == 200
        assert main(["readhostdb", "-s", f"NUTCH_CRAWL_DIR={crawl_dir}"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith("host\trows") and lines[2].startswith(f"{BAD}\t4\t3\t3\t")
        assert main(["readhostdb", "-host", "x.example", "-s", f"NUTCH_CRAWL_DIR={crawl_dir}"])
        assert "x.example is not in host" in capsys.readouterr().err


def test_readhostdb_without_a_host_database(tmp_path, capsys):
    assert main(["readhostdb", "-s", f"NUTCH_CRAWL_DIR={tmp_path}"]) == 2
    assert "run 'nutchy updatehostdb' first" in capsys.readouterr().err


def test_a_queue_is_left_for_later_after_its_exceptions(tmp_path, site):
    # The scheduler's, whatever the store: the embedded one alone (the test above fetches on both).
    with EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite") as store:
        store.create()
        bad = [site.url(BAD, f"/status/500?n={n}") for n in range(6)]
        good = [site.url(GOOD, f"/page/{n}") for n in range(3)]
        table = prepare_batch(store, bad + good)
        project = FetchProject(tmp_path, store, NUTCH_FETCHER_MAX_EXCEPTIONS_PER_QUEUE=2)
        result = project.crawl()
        assert result.returncode == 0, result.log[-3000:]
        assert result.stats["nutch/fetch/queue_dropped/exceptions"] == 1
        assert result.stats["nutch/fetch/left_for_later"] == 4
        assert len([p for p in site.paths(BAD) if p != "/robots.txt"]) == 2
        pages = {page.url: page for page in table.scan(["markers"])}
        fetched = [url for url in bad if Mark.FETCH in pages[url].markers]
        assert len(fetched) == 2
        for url in bad:  # all still in the batch: updatedb releases the unfetched ones
            assert pages[url].markers[Mark.GENERATE] == "b1"
        assert all(Mark.FETCH in pages[url].markers for url in good)


def test_a_bad_hostdb_setting_is_named(tmp_path):
    settings = load_settings(
        {"NUTCH_CRAWL_DIR": str(tmp_path), "NUTCH_GENERATE_HOSTDB_MAX_ERROR_RATE": 2}, project=False
    )
    with pytest.raises(ValueError, match="NUTCH_GENERATE_HOSTDB_MAX_ERROR_RATE"):
        GenerateOptions.from_settings(settings)
    with closing(open_host_store(settings)) as hosts:
        assert not hosts.exists()
        assert not (tmp_path / "host.sqlite").exists()


@pytest.mark.slow
def test_nutchy_crawl_keeps_away_from_a_failing_host(tmp_path, site, monkeypatch, capfd):
    """Round 1 leaves the failing host's queue after 2 exceptions and updates the host database
    after its updatedb; round 2's generate leaves the host's 2 unfetched URLs out, so nothing is
    left to fetch and the host never sees a third request."""
    monkeypatch.chdir(tmp_path)  # no Scrapy project: the CLI's settings only
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    bad = [site.url(BAD, f"/status/500?n={n}") for n in range(4)]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join([site.url(GOOD, "/page/a"), *bad]) + "\n", encoding="utf-8")
    options = {
        "NUTCH_FETCHER_SERVER_DELAY": "0",
        "NUTCH_HTTP_TIMEOUT": "2000",
        "TELNETCONSOLE_ENABLED": "False",
        "NUTCH_FETCHER_MAX_EXCEPTIONS_PER_QUEUE": "2",
    }
    args = [x for name, value in options.items() for x in ("-s", f"{name}={value}")]
    assert main(["crawl", str(seeds), "-rounds", "3", *args]) == 0
    log = capfd.readouterr().err
    assert "round 1: updatehostdb: 5 rows read, 2 hosts written to host" in log, log
    assert "stopped, nothing left to fetch" in log
    assert len([p for p in site.paths(BAD) if p != "/robots.txt"]) == 2
    settings = load_settings({"NUTCH_CRAWL_DIR": str(tmp_path / "crawl")}, project=False)
    with closing(open_host_store(settings)) as hosts:
        entries = dict(read_hosts(hosts))
    assert entries[BAD].consecutive_errors == 2 and entries[BAD].fetched == 2
    assert entries[GOOD].consecutive_errors == 0 and entries[GOOD].fetched == 1


def test_bad_cells_are_skipped_and_counted(tmp_path):
    """A row whose status does not decode is skipped and counted; a host row whose values are
    not decimal numbers (written by hand, or by another tool) reads as zeros."""
    web = EmbeddedStore(tmp_path / "webpage.sqlite")
    hosts = EmbeddedStore(tmp_path / "host.sqlite", "host")
    with web, hosts:
        web.create()
        table = WebTable(web)
        web.write(
            [
                RowUpdate(b"com.a:http/1", puts={b"f:st": b"\x00\x02", b"s:s": b"\0\0\0\0"}),
                RowUpdate(b"com.a:http/2", puts={b"f:st": (2).to_bytes(4, "big")}),
                RowUpdate(b"no-colon", puts={b"f:st": (2).to_bytes(4, "big")}),
            ]
        )
        result = update_hostdb(table, hosts, now=7)
        assert (result.rows, result.undecodable, result.hosts) == (3, 2, 1)
        assert dict(read_hosts(hosts))["a.com"].rows == 1
        hosts.write(
            [RowUpdate(b"com.b", puts={b"mtdt:nutchy.rows": b"many", b"mtdt:nutchy.odd": b"1"})]
        )
        stats = dict(read_hosts(hosts))["b.com"]
        assert (stats.rows, stats.fetched, stats.mean_response_time) == (0, 0, None)
