"""The crawl's history, ``nutchy readdb -stats -json``, ``nutchy plot`` and the metrics ``nutchy
crawl`` serves, on a real 3-round ``nutchy crawl`` of a loopback site (one crawl for the module,
scraped while it runs: each round forks a fetch child)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time

import pytest
from sites import graph_site
from test_ops_metrics import environment, free_port, scrape, scrapes_while

from nutchy.cli import main
from nutchy.jobs.history import HISTORY_FILE, read_history

# Round 1 fetches /, round 2 its links /a and /b, round 3 /c and /gone (a 404): three rounds.
GRAPH = {
    "/": ("Home", ["/a", "/b"]),
    "/a": ("A", ["/c"]),
    "/b": ("B", ["/", "/gone"]),
    "/c": ("C", []),
}

pytestmark = pytest.mark.slow


def run(crawl_dir, *args):
    return main(
        [
            *args,
            "-s",
            f"NUTCH_CRAWL_DIR={crawl_dir}",
            "-s",
            "NUTCH_FETCHER_SERVER_DELAY=0",
            "-s",
            "TELNETCONSOLE_ENABLED=False",
        ]
    )


@pytest.fixture(scope="module")
def crawl_run(tmp_path_factory):
    """``nutchy crawl -rounds 3`` with its metrics on, scraped every 0.1 s while it ran: the crawl
    directory, the samples of every scrape, and the metrics port."""
    root = tmp_path_factory.mktemp("history")
    port = free_port()
    # each answer takes 0.1 s, so that the scrapes meet the fetch children at work
    with graph_site(GRAPH, on_request=lambda path: time.sleep(0.1)) as server:
        seeds = root / "seeds.txt"
        seeds.write_text(f"http://127.0.0.1:{server.server_address[1]}/\n", encoding="utf-8")
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nutchy",
                "crawl",
                str(seeds),
                "-rounds",
                "3",
                "-s",
                f"NUTCH_CRAWL_DIR={root / 'crawl'}",
                "-s",
                "NUTCH_FETCHER_SERVER_DELAY=0",
                "-s",
                f"NUTCH_METRICS_PORT={port}",
                "-s",
                "NUTCH_METRICS_INTERVAL=0.2",
                # a fetch child, whose last snapshot is served while the crawl waits for it
                "-s",
                "NUTCH_CRAWL_FETCH_IN_PROCESS=false",
            ],
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
            env=environment(),
        )
        seen = scrapes_while(process, port)
        log = process.stderr.read()
        process.stderr.close()
    assert process.returncode == 0, log
    return root / "crawl", seen, port


@pytest.fixture(scope="module")
def crawled(crawl_run):
    """The crawl directory after ``nutchy crawl -rounds 3``."""
    return crawl_run[0]


def test_nutchy_crawl_serves_the_metrics_of_its_fetch_children(crawl_run):
    _, seen, port = crawl_run
    rounds = [s[("nutchy_crawl_round", ())] for s in seen]
    assert rounds == sorted(rounds) and rounds[-1] == 3
    success = [s.get(("nutchy_fetch_pages_total", (("status", "SUCCESS"),)), 0) for s in seen]
    assert success == sorted(success)  # the children's counters add up across rounds
    assert success[-1] == 4  # / in round 1, /a /b in round 2, /c in round 3
    assert seen[-1][("nutchy_fetch_pages_total", (("status", "NOTFOUND"),))] == 1
    running = [s for s in seen if s[("nutchy_fetch_processes", ())] == 1]
    assert running, "no scrape while a fetch child ran"
    assert {s[("nutchy_crawl_batch_urls", ())] for s in running} <= {1, 2}
    assert max(s[("nutchy_fetch_rows_queued", ())] for s in running) <= 2
    assert scrape(port) is None


def test_each_round_of_a_crawl_appends_its_statistics(crawled):
    history = read_history(crawled / HISTORY_FILE)
    assert history.skipped == 0
    assert [r["round"] for r in history.rounds] == [1, 2, 3]
    first, second, third = history.rounds
    assert [r["fetched"] for r in history.rounds] == [1, 2, 2]
    assert first["fetch_statuses"] == {"SUCCESS": 1}
    assert third["fetch_statuses"] == {"NOTFOUND": 1, "SUCCESS": 1}
    assert [r["new"] for r in history.rounds] == [2, 2, 0]
    assert all(r["errors"] == 0 and r["not_modified"] == 0 for r in history.rounds)
    # the table after each round: every row counted once, by status
    assert [r["rows"] for r in history.rounds] == [3, 5, 5]
    assert all(sum(r["by_status"].values()) == r["rows"] for r in history.rounds)
    assert first["by_status"] == {"status_fetched": 1, "status_unfetched": 2}
    assert third["by_status"] == {"status_fetched": 4, "status_gone": 1}
    assert second["due"] == 2  # /c and /gone, new in round 2
    assert third["due"] == 0
    assert third["fetch_interval"]["mean"] > 0
    assert all(r["pages_per_s"] > 0 and r["seconds"]["fetch"] > 0 for r in history.rounds)
    assert first["batch"] != second["batch"] != third["batch"]


def test_readdb_stats_json_is_the_table_after_the_last_round(crawled, capsys):
    capsys.readouterr()
    assert run(crawled, "readdb", "-stats", "-json") == 0
    stats = json.loads(capsys.readouterr().out)
    last = read_history(crawled / HISTORY_FILE).rounds[-1]
    for key in ("rows", "by_status", "hosts", "top_hosts", "score", "fetch_interval"):
        assert stats[key] == last[key], key
    assert stats["batches"] == {}


def test_json_needs_stats(crawled, capsys):
    assert run(crawled, "readdb", "-topN", "3", "-json") == 2
    assert "-json only applies to -stats" in capsys.readouterr().err


def test_plot_draws_a_png_of_the_rounds(crawled, tmp_path, capsys):
    out = tmp_path / "crawl.png"
    assert run(crawled, "plot", "-out", str(out)) == 0
    assert "Drew 3 rounds and 5 rows into" in capsys.readouterr().out
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert (width, height) == (1200, 800)
    assert 20_000 < len(data) < 2_000_000


def test_plot_skips_unreadable_history_lines(crawled, tmp_path, capsys):
    copy = tmp_path / "crawl"
    copy.mkdir()
    text = (crawled / HISTORY_FILE).read_text(encoding="utf-8")
    # a cut last line (a crash while writing it), a line of another kind, and a blank one
    (copy / HISTORY_FILE).write_text(text + '[1, 2]\n\n{"round": 4, "fetch', encoding="utf-8")
    assert read_history(copy / HISTORY_FILE).skipped == 2
    out = tmp_path / "again.svg"
    assert run(copy, "plot", "-out", str(out)) == 2
    assert "table 'webpage' does not exist" in capsys.readouterr().err
    assert run(copy, "storage", "init") == 0
    assert run(copy, "plot", "-out", str(out)) == 0  # an empty table: no rows to draw
    assert "Drew 3 rounds and 0 rows" in capsys.readouterr().out
    assert out.read_bytes().lstrip().startswith(b"<?xml")


def test_plot_refuses_an_unknown_image_format(crawled, tmp_path, capsys):
    assert run(crawled, "plot", "-out", str(tmp_path / "crawl.gif")) == 2
    err = capsys.readouterr().err
    assert "nutchy plot: cannot draw crawl.gif" in err
    assert not (tmp_path / "crawl.gif").exists()
