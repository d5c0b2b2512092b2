"""The local frontier and its batch reader on their own, on a real embedded store, without a
crawler: which rows of a batch come, in what bounds, and what skips them."""

from __future__ import annotations

import asyncio
from collections import Counter, deque

import pytest
from sites import Stats, prepare_batch

from nutchy._fetch import FetchJob, FetchSettings
from nutchy.core.fetch import FetchEntry
from nutchy.core.urls import reverse_url
from nutchy.frontier import BatchReader, LocalFrontier, ReadPlan
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.schema import RowUpdate
from nutchy.store.table import WebTable

HOSTS = ("a.example", "b.example", "c.example", "d.example")


@pytest.fixture
def store(tmp_path):
    store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
    store.create()
    yield store
    store.close()


def urls_of(hosts=HOSTS, per_host=12):
    return [f"http://{host}/page/{i:02d}" for host in hosts for i in range(per_host)]


def settings(**values):
    base = {"concurrency": 4, "depth_multiplier": 2, "threads_per_queue": 1}
    return FetchSettings(**{**base, **values})


def drain(frontier, *, take_per_round=1, queued=None, limit=1000):
    """Drive *frontier* as the scheduler does: read while it wants to, take rows from the
    queues round-robin, tell it which queues run low. Returns every entry delivered, in order,
    and the most rows held at once, in all and per queue."""
    queues: dict[str, deque[FetchEntry]] = queued if queued is not None else {}
    delivered: list[tuple[str, FetchEntry]] = []
    most = 0
    most_per_queue = 0
    for _ in range(limit):
        held = sum(len(q) for q in queues.values())
        if frontier.wants(held):
            budget = frontier.capacity - held
            room = {q: frontier.per_queue - len(rows) for q, rows in queues.items()}
            items = asyncio.run(frontier.read(budget, room))
            for queue, entry in items:
                queues.setdefault(queue, deque()).append(entry)
            delivered += items
        held = sum(len(q) for q in queues.values())
        most = max(most, held)
        most_per_queue = max([most_per_queue, *(len(q) for q in queues.values())])
        if not held and not frontier.more():
            break
        for queue, rows in queues.items():
            for _ in range(min(take_per_round, len(rows))):
                rows.popleft()
            if len(rows) * 2 < frontier.per_queue:
                frontier.low(queue)
    return delivered, most, most_per_queue


def test_the_reader_fills_each_queue_to_its_room_and_notes_where_each_host_resumes(store):
    table = prepare_batch(store, urls_of(per_host=5))
    reader = BatchReader(table, FetchJob("b1"), settings(), resume=False)
    result = reader.read(ReadPlan({}, b"", budget=100, room={}, default_room=2))
    counts = Counter(queue for queue, _ in result.items)
    assert counts == {f"http://{host}": 2 for host in HOSTS}
    assert result.main is None  # the whole batch was scanned, hosts jumped over
    assert result.rows == 4 * 3  # two taken, and the one that found its queue full
    assert set(result.hosts) == {f"example.{h[0]}:".encode() for h in HOSTS}
    # the next read of a host resumes at its third row
    prefix, (start, queue) = next(iter(result.hosts.items()))
    plan = ReadPlan({prefix: (start, queue)}, None, budget=100, room={}, default_room=10)
    again = reader.read(plan)
    assert [e.url.rsplit("/", 1)[1] for _, e in again.items] == ["02", "03", "04"]
    assert again.hosts == {prefix: None}  # that host is read


def test_the_local_frontier_brings_every_row_once_within_its_memory_bounds(store):
    urls = urls_of()
    table = prepare_batch(store, urls)
    fetch = settings()
    frontier = LocalFrontier(table, fetch, stats=Stats())
    assert asyncio.run(frontier.start(FetchJob("b1")))
    delivered, most, most_per_queue = drain(frontier)
    assert sorted(entry.url for _, entry in delivered) == sorted(urls)
    assert most <= fetch.capacity == 8
    assert most_per_queue <= fetch.queue_room == 2
    # rows come host after host, but the hosts are interleaved: the first reads reach them all
    assert {queue for queue, _ in delivered[:8]} == {f"http://{h}" for h in HOSTS}
    assert not frontier.more()
    assert frontier.stats.values["nutch/fetch/rows_read"] >= len(urls)


def test_resume_and_partitions_skip_rows_and_count_them(store):
    urls = urls_of(per_host=3)
    table = prepare_batch(store, urls, num_fetchers=2)
    done = urls[:2]
    table.write([RowUpdate(reverse_url(u).encode(), puts={b"mk:_ftcmrk_": b"b1"}) for u in done])
    stats = Stats()
    frontier = LocalFrontier(table, settings(), stats=stats, resume=True)
    asyncio.run(frontier.start(FetchJob("b1", resume=True)))
    delivered, _, _ = drain(frontier)
    assert sorted(e.url for _, e in delivered) == sorted(set(urls) - set(done))
    assert stats.values["nutch/fetch/skipped/resumed"] == 2

    parts = []
    for k in (0, 1):
        frontier = LocalFrontier(table, settings(), stats=Stats())
        asyncio.run(frontier.start(FetchJob("b1", partition=k, partitions=2)))
        parts.append({e.url for _, e in drain(frontier)[0]})
    assert parts[0] | parts[1] == set(urls)
    assert not parts[0] & parts[1]
    hosts_of = [{u.split("/")[2] for u in part} for part in parts]
    assert not hosts_of[0] & hosts_of[1]  # a host is in one partition


def test_a_dropped_queue_brings_no_more_rows_and_a_stopped_frontier_none(store):
    table = prepare_batch(store, urls_of(per_host=10))
    frontier = LocalFrontier(table, settings(), stats=Stats())
    asyncio.run(frontier.start(FetchJob("b1")))
    first = asyncio.run(frontier.read(8, {}))
    frontier.drop("http://a.example")
    queued = {}
    for queue, entry in first:
        if queue != "http://a.example":
            queued.setdefault(queue, deque()).append(entry)
    rest, _, _ = drain(frontier, queued=queued)
    assert "http://a.example" not in {queue for queue, _ in rest}
    assert len(first) + len(rest) - sum(q == "http://a.example" for q, _ in first) == 30

    frontier = LocalFrontier(table, settings(), stats=Stats())
    asyncio.run(frontier.start(FetchJob("b1")))
    assert frontier.more()
    frontier.stop()
    assert not frontier.more()
    assert not frontier.wants(0)
    assert asyncio.run(frontier.read(8, {})) == []


def test_a_followed_redirect_joins_the_batch_once(store):
    urls = urls_of(hosts=("a.example",), per_host=3)
    table = prepare_batch(store, urls)
    frontier = LocalFrontier(table, settings(), stats=Stats())
    asyncio.run(frontier.start(FetchJob("b1")))
    queue, entry, new = asyncio.run(frontier.lookup(urls[2], "b1"))
    assert (queue, entry.url, new) == ("http://a.example", urls[2], False)
    queue, entry, new = asyncio.run(frontier.lookup("http://a.example/new", "b1"))
    assert (entry.batch_id, new) == ("b1", True)
    delivered, _, _ = drain(frontier)
    assert sorted(e.url for _, e in delivered) == urls[:2]  # the target is not read again


def test_a_table_read_by_two_frontiers_one_after_the_other_gives_the_same_rows(tmp_path):
    path = tmp_path / "crawl" / "webpage.sqlite"
    store = EmbeddedStore(path)
    store.create()
    prepare_batch(store, urls_of(per_host=4))
    store.close()
    seen = []
    for _ in range(2):
        table = WebTable(EmbeddedStore(path))
        frontier = LocalFrontier(table, settings(), stats=Stats())
        asyncio.run(frontier.start(FetchJob("b1")))
        seen.append(sorted(e.key for _, e in drain(frontier)[0]))
        table.close()
    assert seen[0] == seen[1]
    assert len(seen[0]) == 16
