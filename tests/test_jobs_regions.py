"""Region-parallel jobs (``-numTasks K``) on both stores: the key ranges a job is cut into, each
row scanned once, results merged in key order, the first failure raised; readdb and parse give
with K tasks what they give with one.

The HBase table is split into four regions on the test server; the embedded store cuts its key
space by sampling. Work functions run in worker processes, so they are module-level here.
"""

from __future__ import annotations

import itertools
import os

import pytest

from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.core.scoring import cash_bytes
from nutchy.core.signature import MD5Signature
from nutchy.core.status import CrawlStatus
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import ALL_FIELDS, WebPage
from nutchy.exceptions import NutchError, StoreError
from nutchy.jobs._cycle import parse_config
from nutchy.jobs._regions import Tasks, key_ranges, run
from nutchy.jobs.parse import parse_batch
from nutchy.jobs.readdb import dump, table_stats, top_scored
from nutchy.store import open_table

NOW = 1_700_000_000_000
DAY = 86_400_000
HOSTS = "abcdefgh"
#: Where the HBase table is split: four regions, two hosts each.
SPLIT_KEYS = [b"com.c", b"com.e", b"com.g"]

_ids = itertools.count()


@pytest.fixture(params=["embedded", "hbase"])
def open_new(request, tmp_path):
    """A function that creates a new, empty table and returns it with the settings that open it
    (what a task's process gets); on HBase the table is split into four regions."""
    opened = []

    def make():
        n = next(_ids)
        if request.param == "embedded":
            values = {"NUTCH_CRAWL_DIR": str(tmp_path / f"crawl{n}")}
        else:
            host, port = request.getfixturevalue("hbase_address")
            values = {
                "NUTCH_STORAGE_DATA_STORE_CLASS": "nutchy.store.hbase.HBaseStore",
                "NUTCH_HBASE_HOST": host,
                "NUTCH_HBASE_PORT": port,
                "NUTCH_STORAGE_CRAWL_ID": f"r{os.getpid()}x{n}",
            }
        settings = load_settings(values, project=False)
        table = open_table(settings)
        table.create()
        opened.append(table)
        return table, settings

    make.backend = request.param
    yield make
    for table in opened:
        if request.param == "hbase":
            table.store.drop()
        table.close()


def split(table, request):
    """Split an HBase table into its four regions (on the test server)."""
    if table.store.table_name.endswith("webpage") and hasattr(table.store, "host"):
        server = request.getfixturevalue("hbase_server")
        if server is not None:
            server.split_table(table.store.table_name, SPLIT_KEYS)


def fill(table, request) -> list[str]:
    """40 rows over 8 hosts: statuses, scores (exact in binary), intervals, batch marks and
    fetched HTML pages that link to each other; return their keys in key order."""
    pages = []
    for i in range(40):
        host = HOSTS[i % len(HOSTS)]
        url = f"http://{host}.com/p{i}"
        fetched = i % 3 == 0
        body = (
            f"<html><head><title>P{i}</title></head><body>Page {i}"
            f' <a href="/p{i + 1}">next</a> <a href="http://{HOSTS[(i + 1) % 8]}.com/">h</a>'
            "</body></html>"
        ).encode()
        pages.append(
            WebPage(
                reverse_url(url),
                status=CrawlStatus.FETCHED if fetched else CrawlStatus((i % 2) or 3),
                fetch_time=NOW + (i % 5 - 2) * DAY,
                fetch_interval=60 * (1 + i % 4),
                score=(i % 7) / 4,
                content=body if fetched else None,
                content_type="text/html" if fetched else None,
                base_url=url,
                metadata={"_csh_": cash_bytes(1.0)},
                markers={"_gnmrk_": "b1", "_ftcmrk_": "b1"} if fetched else {},
            )
        )
    with table.writer() as writer:
        for page in pages:
            writer.put(page, ALL_FIELDS)
    split(table, request)
    return sorted(page.key for page in pages)


def _keys(table, settings, start, stop):
    return [page.key for page in table.scan(("status",), start=start, stop=stop)]


def _fail_after_c(table, settings, start, stop):
    if start >= b"com.c":
        raise StoreError(f"the store failed in the range from {start!r}")
    return []


def _fail_undecodable(table, settings, start, stop):
    from nutchy.exceptions import CellDecodeError

    if start:
        raise CellDecodeError(start, b"f:st", "int", "3 bytes")
    return []


def test_key_ranges_cover_the_table_in_order(open_new, request):
    table, _ = open_new()
    keys = fill(table, request)
    assert key_ranges(table.store, 1) == [(b"", None)]
    ranges = key_ranges(table.store, 4)
    assert ranges[0][0] == b"" and ranges[-1][1] is None
    assert all(stop == start for (_, stop), (start, _) in itertools.pairwise(ranges))
    sizes = [
        sum(start <= k.encode() and (stop is None or k.encode() < stop) for k in keys)
        for start, stop in ranges
    ]
    assert sum(sizes) == len(keys)
    if open_new.backend == "hbase" and request.getfixturevalue("hbase_server") is not None:
        assert [stop for _, stop in ranges] == [*SPLIT_KEYS, None]
    if open_new.backend == "embedded":
        assert len(ranges) == 4
        assert all(5 <= size <= 15 for size in sizes), sizes  # about 10 each


def test_an_empty_or_one_row_embedded_table_is_one_range(tmp_path):
    from nutchy.store.embedded import EmbeddedStore

    with EmbeddedStore(tmp_path / "w.sqlite") as store:
        store.create()
        assert store.sample_splits(4) == [(b"", None)]
        table = open_table(load_settings({"NUTCH_CRAWL_DIR": str(tmp_path)}, project=False))
        table.store.close()
        table.store = store
        table.put(WebPage("com.a:http/"), ["status"])
        assert store.sample_splits(4) == [(b"", None)]
        with pytest.raises(ValueError, match="'n' must be >= 1"):
            store.sample_splits(0)


def test_each_row_is_scanned_once_and_results_come_in_key_order(open_new, request):
    table, settings = open_new()
    keys = fill(table, request)
    server = request.getfixturevalue("hbase_server") if open_new.backend == "hbase" else None
    if server is not None:
        server.reset_stats()
    arrived = []
    parts = run(table, Tasks.from_settings(settings, 3), _keys, on_result=arrived.append)
    assert [key for part in parts for key in part] == keys
    assert sorted(map(tuple, arrived)) == sorted(map(tuple, parts))
    if server is not None:
        assert len(parts) == 4
        assert server.rows_shipped == len(keys)  # no row read twice


def test_the_first_failing_task_raises_its_error_in_one_line(open_new, request):
    table, settings = open_new()
    fill(table, request)
    tasks = Tasks.from_settings(settings, 4)
    with pytest.raises(StoreError, match=r"^the store failed in the range from b'com\.") as info:
        run(table, tasks, _fail_after_c)
    assert type(info.value) is StoreError
    # An error that cannot travel as it is (its constructor takes more than a message) keeps
    # its message.
    with pytest.raises(NutchError, match="does not decode as int: 3 bytes"):
        run(table, tasks, _fail_undecodable)


def test_readdb_with_tasks_gives_what_one_scan_gives(open_new, request, tmp_path):
    table, settings = open_new()
    fill(table, request)
    tasks = Tasks.from_settings(settings, 3)
    one = table_stats(table, now=NOW)
    several = table_stats(table, now=NOW, tasks=tasks)
    assert several == one
    assert several.rows == 40 and several.hosts["a.com"] == 5
    assert top_scored(table, 7, tasks=tasks) == top_scored(table, 7)
    for fmt in ("jsonl", "csv"):
        path_one, count_one = dump(table, tmp_path / f"one-{fmt}", fmt=fmt, status=2, text=True)
        path_k, count_k = dump(
            table, tmp_path / f"k-{fmt}", fmt=fmt, status=2, text=True, tasks=tasks
        )
        assert count_k == count_one == 14
        assert path_k.read_bytes() == path_one.read_bytes()
        assert sorted(p.name for p in path_k.parent.iterdir()) == [path_k.name]  # no parts left


def test_parse_with_tasks_writes_what_one_task_writes(open_new, request, tmp_path):
    one, _ = open_new()
    several, settings = open_new()
    fill(one, request)
    fill(several, request)
    options = {"config": parse_config(settings), "signature": MD5Signature()}
    counts_one = parse_batch(one, None, **options)
    counts_k = parse_batch(several, None, **options, tasks=Tasks.from_settings(settings, 3))
    assert counts_k == counts_one
    assert counts_one.parsed == 14
    path_one, _ = dump(one, tmp_path / "one", text=True)
    path_k, _ = dump(several, tmp_path / "k", text=True)
    assert path_k.read_text() == path_one.read_text()
    assert "P39" in path_k.read_text()  # the last host's pages were parsed too
    # The second run by batch, with -resume, finds everything parsed.
    again = parse_batch(
        several, "b1", **options, resume=True, tasks=Tasks.from_settings(settings, 3)
    )
    assert (again.resumed, again.written) == (14, 0)


def test_the_command_line_takes_num_tasks(tmp_path, capsys, request):
    crawl = ["-s", f"NUTCH_CRAWL_DIR={tmp_path / 'crawl'}"]
    table = open_table(load_settings({"NUTCH_CRAWL_DIR": str(tmp_path / "crawl")}, project=False))
    table.create()
    fill(table, request)
    table.close()
    assert main(["readdb", "-stats", "-numTasks", "1", *crawl]) == 0
    one = capsys.readouterr().out
    assert main(["readdb", "-stats", "-numTasks", "3", *crawl]) == 0
    assert capsys.readouterr().out == one
    assert "TOTAL urls:\t40" in one
    assert main(["parse", "-all", "-numTasks", "2", *crawl]) == 0
    assert "nutchy parse: 14 parsed" in capsys.readouterr().err
    assert main(["parse", "b1", "-resume", "-numTasks", "2", *crawl]) == 0
    assert "14 already parsed" in capsys.readouterr().err
    assert main(["readdb", "-stats", "-numTasks", "0", *crawl]) == 2
    assert "must be at least 1" in capsys.readouterr().err
