"""``nutchy crawl``: inject, then whole rounds of generate, fetch, parse and updatedb, on a small
loopback site; STOP files and running out of URLs end it."""

from __future__ import annotations

import contextlib
import re
import signal
import sys
import time
from pathlib import Path

import pytest
from sites import graph_site

from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.core.status import CrawlStatus
from nutchy.exceptions import StoreError
from nutchy.jobs import crawl as crawl_job
from nutchy.jobs.crawl import (
    FetchProcesses,
    _reads_ahead,
    crawl,
    fetch_in_process,
    long_lived,
    start_fetch_in_child,
)
from nutchy.store import open_table
from nutchy.store.embedded import EmbeddedStore
from nutchy.testing.hbase_server import HBaseThriftServer

GRAPH = {
    "/": ("Home", ["/a", "/b"]),
    "/a": ("A", ["/c"]),
    "/b": ("B", ["/"]),
    "/c": ("C", []),
}


@pytest.fixture
def site():
    with graph_site(GRAPH) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def crawl_dir(tmp_path, monkeypatch, site):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    (tmp_path / "seeds.txt").write_text(f"{site}/\n", encoding="utf-8")
    return tmp_path


def nutchy(crawl_dir, *args):
    return main(
        [
            *args,
            "-s",
            f"NUTCH_CRAWL_DIR={crawl_dir / 'crawl'}",
            "-s",
            "NUTCH_FETCHER_SERVER_DELAY=0",
            "-s",
            "TELNETCONSOLE_ENABLED=False",
            "-s",
            "LOG_LEVEL=WARNING",
        ]
    )


def crawl_with(crawl_dir, start_fetch, lines, *, rounds=3, **settings):
    """:func:`crawl` of ``crawl_dir/seeds.txt`` into ``crawl_dir/crawl`` through the Python API,
    each fetch started by *start_fetch*, the log lines into *lines*."""
    overrides = {
        "NUTCH_CRAWL_DIR": str(crawl_dir / "crawl"),
        "NUTCH_FETCHER_SERVER_DELAY": 0,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        **settings,
    }
    return crawl(
        load_settings(overrides, project=False),
        [crawl_dir / "seeds.txt"],
        rounds=rounds,
        top_n=None,
        overrides=overrides,
        start_fetch=start_fetch,
        log=lines.append,
    )


def test_a_checkpoint_follows_the_fetch_and_updatedb_of_each_round(crawl_dir, monkeypatch):
    # The store copies the log of each burst of writes into its file in a thread (the fetch's,
    # then updatedb's), rather than leaving it to the close after the round's end.
    events: list[str] = []
    checkpoint, finish = EmbeddedStore.checkpoint, crawl_job.finish_batch

    def noted_checkpoint(store):
        events.append("checkpoint")
        checkpoint(store)

    def noted_finish(*args, **kwargs):
        done = finish(*args, **kwargs)
        events.append("updatedb")
        return done

    monkeypatch.setattr(EmbeddedStore, "checkpoint", noted_checkpoint)
    monkeypatch.setattr(crawl_job, "finish_batch", noted_finish)
    report = crawl_with(crawl_dir, start_fetch_in_child, [], rounds=2)
    assert len(report.batches) == 2
    assert events == ["checkpoint", "updatedb", "checkpoint"] * 2


def left_for(batch):
    """What the crawl says finishes *batch* by hand."""
    return (
        "the same nutchy crawl command, which finishes it before it generates another (or by"
        f" hand: scrapy crawl nutch -a batch={batch} -a resume=true, which fetches what is left,"
        " parses what was not parsed and updates the batch)"
    )


def rows(crawl_dir, **settings):
    settings = load_settings(
        {"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl"), **settings}, project=False
    )
    with open_table(settings) as table:
        return {p.url: p for p in table.scan()}


def test_rounds_until_nothing_is_due(crawl_dir, site, capsys):
    assert nutchy(crawl_dir, "crawl", str(crawl_dir / "seeds.txt"), "-rounds", "5") == 0
    err = capsys.readouterr().err
    assert "stopped, nothing left to fetch" in err
    assert err.count("pages parsed") == 3  # /, then /a and /b, then /c
    table = rows(crawl_dir)
    assert set(table) == {f"{site}{path}" for path in GRAPH}
    for url, page in table.items():
        assert page.status == CrawlStatus.FETCHED, url
        assert page.title == GRAPH[url.removeprefix(site)][0]
        assert "_gnmrk_" not in page.markers and "_updmrk_" in page.markers
    assert table[f"{site}/"].inlinks == {f"{site}/b": "to /"}
    assert table[f"{site}/c"].markers["dist"] == "2"


def test_round_limit_and_stop_file(crawl_dir, site, capsys):
    assert nutchy(crawl_dir, "crawl", str(crawl_dir / "seeds.txt"), "-rounds", "1") == 0
    assert "stopped, 1 rounds done" in capsys.readouterr().err
    table = rows(crawl_dir)
    assert table[f"{site}/a"].status == CrawlStatus.UNFETCHED
    (crawl_dir / "crawl" / "STOP").write_text("")
    assert nutchy(crawl_dir, "crawl", str(crawl_dir / "seeds.txt"), "-rounds", "3") == 0
    assert "STOP found" in capsys.readouterr().err
    assert rows(crawl_dir)[f"{site}/a"].status == CrawlStatus.UNFETCHED


def test_adddays_makes_fetched_pages_due_again(crawl_dir, site, capsys):
    seeds = str(crawl_dir / "seeds.txt")
    assert nutchy(crawl_dir, "crawl", seeds, "-rounds", "5") == 0
    fetched = {url: page.fetch_time for url, page in rows(crawl_dir).items()}
    capsys.readouterr()
    assert nutchy(crawl_dir, "crawl", seeds, "-rounds", "1") == 0
    assert "stopped, nothing left to fetch" in capsys.readouterr().err
    # Every page is due again 30 days (NUTCH_DB_FETCH_INTERVAL_DEFAULT) after its fetch.
    assert nutchy(crawl_dir, "crawl", seeds, "-rounds", "1", "-adddays", "31") == 0
    err = capsys.readouterr().err
    assert f", {len(GRAPH)} URLs" in err and "stopped, 1 rounds done" in err
    for url, page in rows(crawl_dir).items():
        assert page.fetch_time > fetched[url], url


@pytest.mark.parametrize("fetchers", [1, 2])
def test_a_fetch_that_cannot_start_stops_the_crawl(crawl_dir, site, capsys, fetchers):
    # A setting only the fetch's Scrapy reads: the fetch child fails as it starts. (A bad
    # nutchy setting never gets this far: nutchy crawl checks them all before it writes.)
    bad = ["-s", "SCHEDULER=nosuch.Scheduler"]
    seeds = str(crawl_dir / "seeds.txt")
    code = nutchy(crawl_dir, "crawl", seeds, "-rounds", "3", "-numFetchers", str(fetchers), *bad)
    assert code == 1
    err = capsys.readouterr().err
    (last,) = [line for line in err.splitlines() if line.startswith("nutchy crawl: stopped, ")]
    if fetchers == 1:
        assert re.fullmatch(
            r"nutchy crawl: stopped, the fetch of batch \S+ failed \(exit code 1\)", last
        )
    else:
        # One host: one partition has the URL, and only it gets a child.
        split = re.search(r"1 URLs in 2 partitions \((\d), (\d)\)", err)
        assert split is not None and sorted(split.groups()) == ["0", "1"], err
        failed = f"partition {split.groups().index('1')}/2: exit code 1"
        assert re.fullmatch(
            rf"nutchy crawl: stopped, the fetch of batch \S+ failed \({failed}\)", last
        )
    assert "pages parsed" not in err  # no parse or updatedb of a batch not fetched
    page = rows(crawl_dir)[f"{site}/"]
    # Left generated and not fetched, for scrapy crawl nutch -a batch=ID -a resume=true.
    assert "_gnmrk_" in page.markers and "_ftcmrk_" not in page.markers
    assert page.status != CrawlStatus.FETCHED and page.prev_fetch_time == 0


def test_ignore_internal_links_keeps_the_crawl_on_its_seeds(crawl_dir, site, capsys):
    # Every link of this one-host site is internal: only the seed is fetched.
    seeds = str(crawl_dir / "seeds.txt")
    ignore = ["-s", "NUTCH_DB_IGNORE_INTERNAL_LINKS=true"]
    assert nutchy(crawl_dir, "crawl", seeds, "-rounds", "3", *ignore) == 0
    err = capsys.readouterr().err
    assert "round 1: parse: 1 pages parsed (1 during the fetch);" in err, err
    assert "round 1: updatedb: 1 pages updated, 0 new URLs;" in err, err
    assert "stopped, nothing left to fetch" in err and "round 2: batch" not in err
    table = rows(crawl_dir)
    assert list(table) == [f"{site}/"]
    home = table[f"{site}/"]
    assert home.status == CrawlStatus.FETCHED and home.title == "Home" and not home.outlinks


def test_a_store_that_goes_away_during_a_fetch_stops_the_crawl_with_what_to_do(
    tmp_path, monkeypatch, capfd
):
    # The HBase server stops when round 2 asks for its first page: that page's outcome, and
    # every read and write after, fail.
    hbase = HBaseThriftServer()
    hbase.start()

    def stop_hbase(path: str) -> None:
        if path == "/a":
            hbase.stop()

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    with graph_site(GRAPH, on_request=stop_hbase) as server:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"http://127.0.0.1:{server.server_address[1]}/\n", encoding="utf-8")
        code = nutchy(
            tmp_path,
            "crawl",
            str(seeds),
            "-rounds",
            "3",
            "-s",
            "NUTCH_STORAGE_DATA_STORE_CLASS=nutchy.store.hbase.HBaseStore",
            "-s",
            "NUTCH_HBASE_HOST=127.0.0.1",
            "-s",
            f"NUTCH_HBASE_PORT={hbase.port}",
            "-s",
            "NUTCH_HBASE_TIMEOUT=3000",
        )
        hits = list(server.hits)
    assert code == 1
    err = capfd.readouterr().err
    lines = err.strip().splitlines()
    assert any(
        re.fullmatch(r"nutchy crawl: stopped, the fetch of batch \S+ failed \(exit code 1\)", line)
        for line in lines
    )
    batch = re.search(r"round 2: batch (\S+),", err).group(1)
    assert f"nutchy crawl: round 2: batch {batch} is left for {left_for(batch)}" in lines
    assert "round 2: parse" not in err and "round 2: updatedb" not in err  # not of that batch
    assert f"127.0.0.1:{hbase.port}" in err  # the fetch says which store failed
    assert "Traceback" not in err
    assert hits.count("/a") == 1  # the fetch did not go on asking for pages it cannot record


def test_a_store_that_goes_away_after_a_fetch_names_the_batch_to_finish(crawl_dir, site):
    hbase = HBaseThriftServer()
    hbase.start()

    def fetch_then_stop_hbase(batch_id, overrides, partition):
        wait = start_fetch_in_child(batch_id, overrides, partition)

        def wait_then_stop() -> int:
            code = wait()
            hbase.stop()
            return code

        return wait_then_stop

    lines = []
    with pytest.raises(StoreError) as raised:
        crawl_with(
            crawl_dir,
            fetch_then_stop_hbase,
            lines,
            NUTCH_STORAGE_DATA_STORE_CLASS="nutchy.store.hbase.HBaseStore",
            NUTCH_HBASE_HOST="127.0.0.1",
            NUTCH_HBASE_PORT=hbase.port,
            NUTCH_HBASE_TIMEOUT=3000,
        )
    batch = re.fullmatch(r"round 1: batch (\S+), 1 URLs; generate \S+ s", lines[-2]).group(1)
    assert lines[-1].startswith("round 1: fetch: ")
    message = str(raised.value)
    assert message.startswith(f"round 1: cannot parse and update batch {batch}: the HBase")
    assert f"127.0.0.1:{hbase.port}" in message
    assert message.endswith(f"finish the batch with {left_for(batch)}")


def test_a_fetch_stopped_by_a_signal_stops_the_crawl_before_updatedb(tmp_path, monkeypatch):
    # SIGTERM reaches the fetch child when round 2 asks for /a: Scrapy shuts down gracefully,
    # the child exits 1, and the crawl stops with the batch generated and not updated.
    children = []

    def start_fetch(batch_id, overrides, partition):
        wait = start_fetch_in_child(batch_id, overrides, partition)
        children.append(wait.process)
        return wait

    def stop_the_fetch(path: str) -> None:
        if path == "/a":
            children[-1].send_signal(signal.SIGTERM)

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    lines = []
    with graph_site(GRAPH, on_request=stop_the_fetch) as server:
        site = f"http://127.0.0.1:{server.server_address[1]}"
        (tmp_path / "seeds.txt").write_text(f"{site}/\n", encoding="utf-8")
        report = crawl_with(tmp_path, start_fetch, lines, rounds=5)
    assert len(report.batches) == 2
    batch = report.batches[1]
    assert report.stopped == f"the fetch of batch {batch} failed (exit code 1)"
    assert f"round 2: batch {batch} is left for {left_for(batch)}" in lines
    assert not any(line.startswith("round 2: parse") for line in lines)
    settings = load_settings({"NUTCH_CRAWL_DIR": str(tmp_path / "crawl")}, project=False)
    with open_table(settings) as table:
        marks = {p.url: p.markers.get("_gnmrk_") for p in table.scan()}
    # round 2's rows still carry its generate mark: updatedb did not run on the cut batch
    assert marks[f"{site}/a"] == marks[f"{site}/b"] == batch


@pytest.mark.slow
def test_a_long_lived_fetch_stopped_by_a_signal_stops_the_crawl_before_updatedb(
    tmp_path, monkeypatch
):
    # One fetch process for every round (FetchProcesses, nutchy crawl's default): SIGTERM
    # reaches it when round 2 asks for /a; it shuts down gracefully and exits 1, and the crawl
    # stops with round 2's batch generated and not updated, as when a child per round is stopped.
    processes = FetchProcesses()

    def stop_the_fetch(path: str) -> None:
        if path == "/a":
            processes.processes[0].send_signal(signal.SIGTERM)

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    lines = []
    with graph_site(GRAPH, on_request=stop_the_fetch) as server, contextlib.closing(processes):
        site = f"http://127.0.0.1:{server.server_address[1]}"
        (tmp_path / "seeds.txt").write_text(f"{site}/\n", encoding="utf-8")
        report = crawl_with(tmp_path, processes, lines, rounds=5)
        assert len(processes.processes) == 1  # round 1 and round 2 in the same process
    assert len(report.batches) == 2
    batch = report.batches[1]
    assert report.stopped == f"the fetch of batch {batch} failed (exit code 1)"
    assert report.rounds[0].statuses == {"SUCCESS": 1}  # round 1's own fetch, from its report
    assert f"round 2: batch {batch} is left for {left_for(batch)}" in lines
    assert not any(line.startswith("round 2: parse") for line in lines)
    settings = load_settings({"NUTCH_CRAWL_DIR": str(tmp_path / "crawl")}, project=False)
    with open_table(settings) as table:
        marks = {p.url: p.markers.get("_gnmrk_") for p in table.scan()}
    assert marks[f"{site}/a"] == marks[f"{site}/b"] == batch
    assert marks[f"{site}/"] is None  # round 1 was updated


@pytest.mark.slow
@pytest.mark.parametrize("store", ["embedded", "hbase"])
def test_the_last_round_lets_the_fetch_process_end_beside_its_parse_and_updatedb(
    tmp_path, monkeypatch, store, request
):
    # -rounds 2: round 1 and round 2 are fetched by one long-lived process; once round 2's fetch
    # is over, no round follows, and the process is told so before the parse and updatedb of
    # round 2, so that its end (Scrapy's close, the interpreter's exit) is beside them rather
    # than after them. It ends by itself: nothing waits for it or closes it here.
    settings = {}
    if store == "hbase":
        hbase = request.getfixturevalue("hbase_settings")
        settings = {**hbase, "NUTCH_STORAGE_CRAWL_ID": f"last{tmp_path.name[-12:]}"}
    events: list = []

    class Watched(FetchProcesses):
        def finish(self) -> None:
            events.append(("finish", [process.poll() for process in self.processes]))
            super().finish()

    processes = Watched()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    with graph_site(GRAPH) as server:
        site = f"http://127.0.0.1:{server.server_address[1]}"
        (tmp_path / "seeds.txt").write_text(f"{site}/\n", encoding="utf-8")
        report = crawl_with(tmp_path, processes, events, rounds=2, **settings)
        (process,) = processes.processes  # both rounds in one process
        assert process.wait(timeout=30) == 0
    (finish,) = [i for i, event in enumerate(events) if isinstance(event, tuple)]
    processes.close()
    assert report.stopped == "2 rounds done"
    assert events[finish] == ("finish", [None])  # still running when told
    fetched = next(i for i, e in enumerate(events) if str(e).startswith("round 2: fetch:"))
    parsed = next(i for i, e in enumerate(events) if str(e).startswith("round 2: parse:"))
    batch = next(i for i, e in enumerate(events) if str(e).startswith("round 2: batch"))
    assert batch < finish < fetched < parsed
    table = rows(tmp_path, **settings)
    assert {url: page.status for url, page in table.items()} == {
        f"{site}/": CrawlStatus.FETCHED,
        f"{site}/a": CrawlStatus.FETCHED,
        f"{site}/b": CrawlStatus.FETCHED,
        f"{site}/c": CrawlStatus.UNFETCHED,
    }


def test_a_fetch_limit_per_round_keeps_a_fetch_process_per_round():
    # Scrapy counts these per process: each round's fetch must have its own to get its own.
    assert long_lived(load_settings({}, project=False))
    for name, value in (
        ("NUTCH_FETCHER_TIMELIMIT_MINS", "5"),
        ("NUTCH_FETCHER_TIMELIMIT_MINS", "0"),
        ("CLOSESPIDER_PAGECOUNT", "1"),
        ("CLOSESPIDER_TIMEOUT", "0.5"),
    ):
        assert not long_lived(load_settings({name: value}, project=False)), name


def test_the_fetch_runs_in_the_crawls_process_unless_asked_or_logged_to_a_file():
    # (the crawls of this test process fetch in a child: conftest.py)
    on = {"NUTCH_CRAWL_FETCH_IN_PROCESS": "true"}
    free = "twisted.internet.reactor" not in sys.modules  # as in a fresh nutchy crawl
    assert fetch_in_process(load_settings(on, project=False)) == free
    assert not fetch_in_process(load_settings({**on, "LOG_FILE": "fetch.log"}, project=False))
    off = {"NUTCH_CRAWL_FETCH_IN_PROCESS": "false"}
    assert not fetch_in_process(load_settings(off, project=False))


def test_the_read_ahead_is_off_beside_a_fetch_in_this_process_unless_given():
    overrides = {"NUTCH_CRAWL_DIR": "crawl"}
    here, child = FetchProcesses(overrides, in_process=True), FetchProcesses(overrides)
    settings = load_settings({}, project=False)
    assert not _reads_ahead(settings, here, overrides)
    assert _reads_ahead(settings, child, overrides)
    assert _reads_ahead(settings, start_fetch_in_child, overrides)
    # the batch of a killed crawl, resumed in a child of its own (other settings)
    assert _reads_ahead(settings, here, {**overrides, "NUTCH_FETCHER_JOB_RESUME": True})
    given = load_settings({"NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS": "1000"}, project=False)
    assert _reads_ahead(given, here, overrides)


def test_ctrl_c_during_a_crawl_names_the_batch_left_and_exits_130(crawl_dir, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("nutchy.cli.crawl", interrupted)
    assert nutchy(crawl_dir, "crawl", str(crawl_dir / "seeds.txt")) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "nutchy crawl: interrupted"


def test_ctrl_c_during_a_fetch_logs_the_batch_left(crawl_dir):
    def start_fetch(batch_id, overrides, partition):
        wait = start_fetch_in_child(batch_id, overrides, partition)

        def wait_then_interrupt() -> int:
            wait()
            raise KeyboardInterrupt

        return wait_then_interrupt

    lines = []
    with pytest.raises(KeyboardInterrupt):
        crawl_with(crawl_dir, start_fetch, lines)
    batch = re.fullmatch(r"round 1: batch (\S+), 1 URLs; generate \S+ s", lines[-2]).group(1)
    assert lines[-1] == f"round 1: interrupted; batch {batch} is left for {left_for(batch)}"


def test_a_fetch_closed_early_by_closespider_is_updated_and_the_crawl_goes_on(crawl_dir, capsys):
    # Scrapy's CloseSpider ends each fetch after one page: not a failure, as a fetch time limit
    # is not in Nutch. Each round updates what it fetched; the rest is generated again.
    seeds = str(crawl_dir / "seeds.txt")
    assert nutchy(crawl_dir, "crawl", seeds, "-rounds", "10", "-s", "CLOSESPIDER_PAGECOUNT=1") == 0
    err = capsys.readouterr().err
    assert "nutchy crawl: stopped, nothing left to fetch" in err.splitlines()
    assert {url.rsplit("/", 1)[1]: page.status for url, page in rows(crawl_dir).items()} == {
        "": CrawlStatus.FETCHED,
        "a": CrawlStatus.FETCHED,
        "b": CrawlStatus.FETCHED,
        "c": CrawlStatus.FETCHED,
    }


def test_the_crawl_says_what_inject_made_of_each_seed_line(crawl_dir, site, capsys):
    seeds = crawl_dir / "mixed.txt"
    seeds.write_text(f"{site}/\nwww.nope.com\n{site}/\n", encoding="utf-8")
    assert nutchy(crawl_dir, "crawl", str(seeds), "-rounds", "1") == 0
    lines = capsys.readouterr().err.splitlines()
    assert (
        "nutchy crawl: inject: 1 URLs injected (3 lines read; 1 duplicates, 1 malformed)" in lines
    )
    assert (
        f"nutchy crawl: inject: malformed line {seeds}:2: no scheme (an absolute URL such as"
        " 'http://host/' is needed): 'www.nope.com'"
    ) in lines


def test_each_phase_of_each_round_is_one_line_and_the_children_are_quiet(crawl_dir, site, capfd):
    # No LOG_LEVEL or TELNETCONSOLE_ENABLED given: the crawl quiets its fetch children itself.
    seeds = str(crawl_dir / "seeds.txt")
    options = ["-s", f"NUTCH_CRAWL_DIR={crawl_dir / 'crawl'}", "-s", "NUTCH_FETCHER_SERVER_DELAY=0"]
    assert main(["crawl", seeds, "-rounds", "5", *options]) == 0
    err = capfd.readouterr().err
    for noise in ("Scrapy", "started (bot:", "Versions:", "Telnet Password", "Dumping Scrapy"):
        assert noise not in err, err
    lines = [line.removeprefix("nutchy crawl: ") for line in err.splitlines()]
    phases = [re.sub(r"[\d.]+ s$", "T s", re.sub(r"batch \S+,", "batch B,", x)) for x in lines]
    assert phases[:13] == [
        "inject: 1 URLs injected",
        "round 1: batch B, 1 URLs; generate T s",
        "round 1: fetch: 1 URLs fetched: 1 success; T s",
        "round 1: parse: 1 pages parsed (1 during the fetch); T s",
        "round 1: updatedb: 1 pages updated, 2 new URLs; T s",
        "round 2: batch B, 2 URLs; generate T s",
        "round 2: fetch: 2 URLs fetched: 2 success; T s",
        "round 2: parse: 2 pages parsed (2 during the fetch); T s",
        "round 2: updatedb: 2 pages updated, 1 new URLs; T s",
        "round 3: batch B, 1 URLs; generate T s",
        "round 3: fetch: 1 URLs fetched: 1 success; T s",
        "round 3: parse: 1 pages parsed (1 during the fetch); T s",
        "round 3: updatedb: 1 pages updated, 0 new URLs; T s",
    ], err
    assert lines[13] == "stopped, nothing left to fetch"
    table = [line.split() for line in lines[14:]]
    assert table[0] == ["round", "batch", "URLs", "fetched", "parsed", "new", "URLs", "seconds"]
    assert [row[:2] + row[2:-1] for row in table[1:]] == [
        ["1", table[1][1], "1", "1", "success", "1", "2"],
        ["2", table[2][1], "2", "2", "success", "2", "1"],
        ["3", table[3][1], "1", "1", "success", "1", "0"],
    ]
    assert len({row[1] for row in table[1:]}) == 3  # three batches


def test_the_crawl_with_v_shows_the_childrens_scrapy_log(crawl_dir, capfd):
    seeds = str(crawl_dir / "seeds.txt")
    options = ["-s", f"NUTCH_CRAWL_DIR={crawl_dir / 'crawl'}", "-s", "NUTCH_FETCHER_SERVER_DELAY=0"]
    assert main(["-v", "crawl", seeds, "-rounds", "1", *options]) == 0
    err = capfd.readouterr().err
    assert "started (bot:" in err and "INFO: Fetched batch" in err
    assert "nutchy crawl: round 1: fetch: 1 URLs fetched: 1 success;" in err


def _children(pid: int) -> list[str]:
    """The command lines of *pid*'s children."""
    try:
        pids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [Path(f"/proc/{child}/cmdline").read_bytes().decode() for child in pids]


@pytest.mark.slow
def test_a_fetch_process_started_ahead_opens_its_crawl_before_its_first_batch(crawl_dir):
    # nutchy crawl starts its fetch process before inject and generate: the process builds its
    # crawler and opens its spider (which starts the parse process) while they run, then
    # fetches the batch it is given.
    overrides = {
        "NUTCH_CRAWL_DIR": str(crawl_dir / "crawl"),
        "NUTCH_FETCHER_SERVER_DELAY": 0,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
    }
    with open_table(load_settings(overrides, project=False)) as table:
        table.create()
    processes = FetchProcesses(overrides)
    lines: list[str] = []
    with contextlib.closing(processes):
        processes.prestart(1)
        (process,) = processes.processes
        for _ in range(600):
            if any("nutchy._parsework" in child for child in _children(process.pid)):
                break
            assert process.poll() is None
            time.sleep(0.05)
        assert any("nutchy._parsework" in child for child in _children(process.pid))
        report = crawl_with(crawl_dir, processes, lines, rounds=1)
        assert processes.processes == [process]  # the batch went to it
    assert report.rounds[0].statuses == {"SUCCESS": 1}
    assert process.returncode == 0


def test_a_fetch_process_never_given_a_batch_is_killed(crawl_dir):
    # A crawl that ends before its first fetch (nothing due) does not wait for the start-up of
    # the processes it started ahead.
    processes = FetchProcesses({"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")})
    processes.prestart(2)
    started = processes.processes
    processes.close()
    assert [p.returncode for p in started] == [-signal.SIGKILL, -signal.SIGKILL]
