"""Region-parallel jobs (``-numTasks K``) on both stores: the key ranges a job is cut into, each
row scanned once, results merged in key order, the first failure raised; readdb and parse give
with K tasks what they give with one.

The HBase table is split into four regions on the test server; the embedded store cuts its key
space by sampling. Work functions run in worker processes, which import them from tests/region_work.py.
"""

from __future__ import annotations

import io
import itertools
import logging
import os

import pytest
import region_work
from hypothesis import given, settings
from hypothesis import strategies as st

from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.core.generate import GenerateConfig, Selector, merge_selections
from nutchy.core.scoring import cash_bytes
from nutchy.core.signature import MD5Signature
from nutchy.core.status import CrawlStatus
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import ALL_FIELDS, WebPage
from nutchy.exceptions import NutchError, StoreError
from nutchy.jobs._cycle import parse_config, update_config
from nutchy.jobs._regions import Tasks, key_ranges, key_text, parse_key, run
from nutchy.jobs.generate import GenerateOptions, generate
from nutchy.jobs.parse import parse_batch
from nutchy.jobs.readdb import dump, table_stats, top_scored
from nutchy.jobs.updatedb import updatedb
from nutchy.progress import Progress
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
            values = {
                **request.getfixturevalue("hbase_settings"),
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
    parts = run(table, Tasks.from_settings(settings, 3), region_work.keys, on_result=arrived.append)
    assert [key for part in parts for key in part] == keys
    assert sorted(map(tuple, arrived)) == sorted(map(tuple, parts))
    if server is not None:
        assert len(parts) == 4
        assert server.rows_shipped == len(keys)  # no row read twice


def test_the_first_failing_task_raises_its_error_in_one_line(open_new, request):
    table, settings = open_new()
    fill(table, request)
    tasks = Tasks.from_settings(settings, 2)
    with pytest.raises(StoreError, match=r"^the store failed in the range from b'com\.") as info:
        run(table, tasks, region_work.fail_after_c)
    assert type(info.value) is StoreError
    # An error that cannot travel as it is (its constructor takes more than a message) keeps
    # its message.
    with pytest.raises(NutchError, match="does not decode as int: 3 bytes"):
        run(table, tasks, region_work.fail_undecodable)


@pytest.mark.slow
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
    progress_one, progress_k = (Progress("parse", stream=io.StringIO()) for _ in range(2))
    counts_one = parse_batch(one, None, **options, progress=progress_one)
    counts_k = parse_batch(
        several, None, **options, tasks=Tasks.from_settings(settings, 3), progress=progress_k
    )
    assert counts_k == counts_one
    assert counts_one.parsed == 14
    # every row read is counted once, here or when its range's task is done
    assert progress_k.count == progress_one.count == counts_one.rows > 14
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


def fill_due(table, request) -> None:
    """60 rows over six hosts, due or not, some in an unfinished batch, with one negative score
    (so that the embedded store selects with the general path, range by range). The best rows
    are those of b.com and e.com, whose rows lie in two ranges each: on HBase a region boundary
    falls inside b.com, and the embedded store's four ranges cut both."""
    pages = []
    for i in range(60):
        host = "abcdef"[i // 10]
        pages.append(
            WebPage(
                reverse_url(f"http://{host}.com/p{i % 10}"),
                fetch_time=NOW + (DAY if i % 11 == 0 else -DAY),
                fetch_interval=60,
                score=-1.0 if i == 59 else (2 + i % 10 / 8 if host in "be" else (i * 7) % 13 / 8),
                markers={"_gnmrk_": "old"} if i % 9 == 4 else {},
            )
        )
    with table.writer() as writer:
        for page in pages:
            writer.put(page, ALL_FIELDS)
    server = server_of(request, table)
    if server is not None:
        server.split_table(table.store.table_name, [b"com.b:http/p4", b"com.d", b"com.e:"])


def server_of(request, table):
    """The HBase test server that holds *table*, or ``None`` (embedded store, or a real HBase)."""
    return request.getfixturevalue("hbase_server") if hasattr(table.store, "host") else None


@pytest.mark.parametrize("max_count", [-1, 2])
def test_generate_with_tasks_selects_what_one_task_selects(open_new, request, caplog, max_count):
    one, _ = open_new()
    several, settings_k = open_new()
    fill_due(one, request)
    fill_due(several, request)
    ranges = key_ranges(several.store, 4)
    if open_new.backend == "embedded" or server_of(request, several) is not None:
        assert len(ranges) == 4  # (a real HBase keeps the table in one region)
        assert any(start.startswith(b"com.b:") for start, _ in ranges)
    values = {"NUTCH_GENERATE_MAX_COUNT": max_count, "NUTCH_GENERATE_COUNT_MODE": "host"}
    options = GenerateOptions.from_settings(load_settings(values, project=False), top_n=9)
    server = request.getfixturevalue("hbase_server") if open_new.backend == "hbase" else None
    shipped = []
    results = []
    for table, tasks in ((one, None), (several, Tasks.from_settings(settings_k, 4))):
        if server is not None:
            server.reset_stats()
        with caplog.at_level(logging.INFO, logger="nutchy.jobs.generate"):
            results.append(generate(table, options, now=NOW, batch_id="b2", tasks=tasks))
        # The embedded store's read best first meets the negative score and gives way.
        assert ("general path" in caplog.text) == (open_new.backend == "embedded")
        caplog.clear()
        if server is not None:
            shipped.append(server.rows_shipped)
    first, second = results
    assert second.batch_id == first.batch_id
    assert (second.selected, second.counts.seen, second.counts.generated) == (
        first.selected,
        first.counts.seen,
        first.counts.generated,
    )
    assert second.counts.limited == first.counts.limited
    assert first.selected == 9
    batches = [
        sorted(p.url for p in table.scan(("markers",), marker=("_gnmrk_", "b2")))
        for table in (one, several)
    ]
    assert batches[1] == batches[0]
    if max_count == 2:
        hosts = [url.split("/")[2] for url in batches[0]]
        assert max(hosts.count(h) for h in set(hosts)) == 2
    if server is not None:
        assert shipped[1] == shipped[0]  # every due row read once, by one task


def test_updatedb_with_tasks_writes_what_one_task_writes(open_new, request, tmp_path):
    tables = []
    for _ in range(2):
        table, settings = open_new()
        fill(table, request)
        parse_batch(table, "b1", config=parse_config(settings), signature=MD5Signature())
        tables.append((table, settings))
    (one, _), (several, settings) = tables
    config = update_config(settings, "b1")
    counts_one = updatedb(one, "b1", now=NOW, config=config)
    counts_k = updatedb(
        several, "b1", now=NOW, config=config, tasks=Tasks.from_settings(settings, 3)
    )
    assert counts_k == counts_one
    assert counts_one.batch_pages == 14 and counts_one.new_rows > 0
    path_one, rows_one = dump(one, tmp_path / "one")
    path_k, rows_k = dump(several, tmp_path / "k")
    assert rows_k == rows_one
    assert path_k.read_text() == path_one.read_text()


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a.com", "x.a.com", "b.com", "b.org", "c.net", "y.c.net"]),
            st.integers(0, 30),
            st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, float("nan")]),
        ),
        max_size=40,
        unique_by=lambda row: row[:2],
    ),
    cuts=st.lists(st.integers(0, 40), max_size=4),
    top_n=st.one_of(st.none(), st.integers(1, 12)),
    max_count=st.integers(-1, 3),
    count_mode=st.sampled_from(["host", "domain"]),
)
def test_merged_range_batches_are_the_whole_tables_batch(rows, cuts, top_n, max_count, count_mode):
    """merge_selections over the batches of any cut of the key space gives the batch one
    Selector gives over all rows, hosts and domains spanning ranges included."""
    config = GenerateConfig(top_n=top_n, max_count=max_count, count_mode=count_mode)
    pages = sorted(
        (
            WebPage(reverse_url(f"http://{host}/p{n}"), score=score, fetch_interval=60)
            for host, n, score in rows
        ),
        key=lambda page: page.key.encode(),
    )
    whole = Selector(config, NOW)
    whole.add_all(pages)
    expected = whole.result()
    parts = []
    for start, stop in itertools.pairwise([0, *sorted(cuts), len(pages)]):
        selector = Selector(config, NOW)
        selector.add_all(pages[start:stop])
        parts.append(selector.result())
    assert merge_selections(parts, config) == expected


def cli_settings(settings) -> list[str]:
    """``-s NAME=VALUE`` arguments that open the table of *settings* (an ``open_new`` table)."""
    names = [
        "NUTCH_CRAWL_DIR",
        "NUTCH_STORAGE_DATA_STORE_CLASS",
        "NUTCH_HBASE_HOST",
        "NUTCH_HBASE_PORT",
        "NUTCH_HBASE_TRANSPORT",
        "NUTCH_HBASE_PROTOCOL",
        "NUTCH_STORAGE_CRAWL_ID",
    ]
    return [arg for name in names for arg in ("-s", f"{name}={settings.get(name) or ''}")]


def test_machines_share_a_table_by_ranges(open_new, request, tmp_path, capsys):
    """``nutchy storage splits -numTasks 3`` prints ranges; one ``-range`` process per line
    (what several machines would run) parses and dumps what one process does."""
    one, _ = open_new()
    several, settings = open_new()
    keys = fill(one, request)
    fill(several, request)
    args = cli_settings(settings)
    assert main(["storage", "splits", *args]) == 0
    regions = capsys.readouterr().out.splitlines()
    assert main(["storage", "splits", "-numTasks", "3", *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    ranges = [line.split("\t") for line in lines]
    real_hbase = open_new.backend == "hbase" and request.getfixturevalue("hbase_server") is None
    assert len(ranges) == (1 if real_hbase else 3)
    assert ranges[0][0] == "" and ranges[-1][1] == ""
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    if open_new.backend == "hbase" and request.getfixturevalue("hbase_server") is not None:
        assert [line.split("\t")[1] for line in regions] == ["com.c", "com.e", "com.g", ""]
        assert [stop for _, stop in ranges] == ["com.c", "com.e", ""]  # 4 regions in 3
    else:
        assert regions == ["\t"]  # the embedded store has no regions of its own
    parse_batch(one, None, config=parse_config(settings), signature=MD5Signature())
    parsed = 0
    for start, stop in ranges:
        assert main(["parse", "-all", "-range", start, stop, *args]) == 0
        parsed += int(capsys.readouterr().err.split("nutchy parse: ")[1].split(" parsed")[0])
    assert parsed == 14
    whole, _ = dump(one, tmp_path / "whole", text=True)
    pieces = []
    for n, (start, stop) in enumerate(ranges):
        out = tmp_path / f"part{n}"
        assert main(["readdb", "-dump", str(out), "-text", "-range", start, stop, *args]) == 0
        pieces.append(next(out.iterdir()).read_text())
    assert "".join(pieces) == whole.read_text()
    assert len(whole.read_text().splitlines()) == len(keys)


def test_a_bad_range_is_refused(tmp_path, capsys):
    crawl = ["-s", f"NUTCH_CRAWL_DIR={tmp_path / 'crawl'}"]
    assert main(["storage", "init", *crawl]) == 0
    assert main(["readdb", "-stats", "-range", "com.b", "com.a", *crawl]) == 2
    assert "its stop key must sort after its start key" in capsys.readouterr().err
    assert main(["parse", "-all", "-range", r"com.\x4", "", *crawl]) == 2
    assert "bad key" in capsys.readouterr().err
    assert main(["readdb", "-stats", "-range", r"com.\x62", "", *crawl]) == 0
    assert "TOTAL urls:\t0" in capsys.readouterr().out


def test_keys_print_and_parse_back():
    key = bytes(range(256))
    assert parse_key(key_text(key)) == key
    assert key_text(b"com.a:http/x y") == "com.a:http/x y"
