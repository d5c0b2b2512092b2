"""The Prometheus exporter (NUTCH_METRICS_PORT), scraped over HTTP while a real ``scrapy crawl
nutch`` runs; a port in use stops it, and ``nutchy crawl``, before they start. What ``nutchy
crawl`` serves of its fetch children is tested on the crawl of tests/test_ops_history.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sites import FetchProject, Site, prepare_batch

from nutchy.jobs.history import HISTORY_FILE, read_history
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.table import WebTable

pytestmark = pytest.mark.slow

HOST = "127.0.0.2"


def environment():
    """This process's environment without the Scrapy project a command run in-process may have
    named (the repository's), for a crawl run elsewhere."""
    return {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(port):
    """The samples of the endpoint: {(name, labels): value}, or None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
            text = answer.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrapes_while(process, port):
    """Scrape every 0.1 s while *process* runs; the samples of every answer."""
    seen = []
    while process.poll() is None:
        samples = scrape(port)
        if samples is not None:
            seen.append(samples)
        time.sleep(0.1)
    return seen


def test_scrapy_crawl_nutch_serves_its_metrics(tmp_path):
    """A crawl of rounds (-a seeds, -a rounds): one round fetches the seeds, the next finds
    nothing due; that round is also in the crawl's history."""
    port = free_port()
    with Site(hosts=(HOST,)) as site:
        store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
        urls = [site.url(HOST, f"/slow?s=0.25&i={i}") for i in range(8)]
        urls.append(site.url(HOST, "/status/404"))
        (tmp_path / "seeds.txt").write_text("".join(f"{url}\n" for url in urls))
        project = FetchProject(
            tmp_path, store, NUTCH_METRICS_PORT=port, NUTCH_FETCHER_UPDATEDB=True
        )
        process = subprocess.Popen(
            project.command(None, {"seeds": str(tmp_path / "seeds.txt"), "rounds": "2"}, {}),
            cwd=tmp_path,
            env=project.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen = scrapes_while(process, port)
        log = process.stderr.read()
        process.stderr.close()
    assert process.returncode == 0, log
    (line,) = read_history(tmp_path / "crawl" / HISTORY_FILE).rounds
    assert line["round"] == 1 and line["selected"] == 9 and line["fetched"] == 9
    assert line["fetch_statuses"] == {"NOTFOUND": 1, "SUCCESS": 8}
    assert line["by_status"] == {"status_fetched": 8, "status_gone": 1}
    assert line["seconds"]["round"] > 0 and line["pages_per_s"] > 0
    assert f"Serving metrics on http://127.0.0.1:{port}/metrics" in log
    assert len(seen) >= 3, log
    success = [s.get(("nutchy_fetch_pages_total", (("status", "SUCCESS"),)), 0) for s in seen]
    assert success == sorted(success)  # a counter
    assert 0 < max(success) <= 8
    middle = [
        s for s in seen if 0 < s.get(("nutchy_fetch_pages_total", (("status", "SUCCESS"),)), 0) < 8
    ]
    assert middle, "no scrape while the fetch ran"
    sample = middle[-1]
    assert sample[("nutchy_fetch_queues", ())] == 1, sample
    assert sample[("nutchy_fetch_in_flight", ())] <= 1
    assert sample[("nutchy_fetch_rows_read_total", ())] == 9
    assert sample[("nutchy_fetch_processes", ())] == 1
    # a rate over the last snapshot interval: some interval of the fetch saw pages end
    assert any(s[("nutchy_fetch_pages_per_second", ())] > 0 for s in seen), seen
    assert max(s[("nutchy_fetch_bytes_total", ())] for s in seen) > 0
    assert max(s[("nutchy_store_write_seconds_count", ())] for s in seen) >= 1
    assert scrape(port) is None  # closed with the crawl


def test_a_metrics_port_in_use_stops_the_crawl_before_it_starts(tmp_path):
    with socket.socket() as taken, Site(hosts=(HOST,)) as site:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
        prepare_batch(store, [site.url(HOST, "/page/a")], "b1").close()
        project = FetchProject(tmp_path, store, NUTCH_METRICS_PORT=port)
        result = project.crawl("b1")
        hits = site.paths(HOST)
    assert result.returncode == 1
    assert f"cannot serve metrics on 127.0.0.1:{port}, the port is in use" in result.log, result.log
    assert "Traceback" not in result.log
    assert hits == []  # nothing was fetched, not even robots.txt
    with WebTable(EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")) as table:
        markers = table.get(site.url(HOST, "/page/a"), ["markers"]).markers
    assert markers["_gnmrk_"] == "b1" and "_ftcmrk_" not in markers


def nutchy_crawl(root, site, port, *extra):
    return [
        sys.executable,
        "-m",
        "nutchy",
        "crawl",
        str(root / "seeds.txt"),
        "-rounds",
        "2",
        "-s",
        f"NUTCH_CRAWL_DIR={root / 'crawl'}",
        "-s",
        "NUTCH_FETCHER_SERVER_DELAY=0",
        "-s",
        f"NUTCH_METRICS_PORT={port}",
        "-s",
        "NUTCH_METRICS_INTERVAL=0.2",
        *extra,
    ]


def test_nutchy_crawl_with_a_metrics_port_in_use_does_not_start(tmp_path):
    (tmp_path / "seeds.txt").write_text("http://127.0.0.1:9/\n", encoding="utf-8")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            nutchy_crawl(tmp_path, "", port),
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=environment(),
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"nutchy crawl: NUTCH_METRICS_PORT: cannot serve metrics on 127.0.0.1:{port}, the"
        " port is in use (Address already in use); choose another port, or -1 to turn the"
        " metrics off"
    )
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "crawl" / "webpage.sqlite").exists()


def test_the_grafana_dashboard_asks_for_metrics_the_exporter_has():
    import json
    import re
    from pathlib import Path

    from nutchy.metrics import metric_families, take_snapshot

    stats = {"nutch/fetch/status/SUCCESS": 1, "nutch/fetch/http/200": 1}
    snapshot = take_snapshot(stats, {}, previous=None, now=1.0)
    names = set()
    for family in metric_families([snapshot], {"round": 1, "batch_urls": 1, "rounds_done": 0}):
        names.update(sample.name for sample in family.samples)
    dashboard = json.loads(
        (Path(__file__).parent.parent / "docs" / "grafana-dashboard.json").read_text()
    )
    asked = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"nutchy_\w+", target["expr"])
    }
    assert asked and asked <= names, asked - names
