"""The outcome writer on its own, on a real embedded store, without a crawler: when outcomes are
written, what it says once they are, and what a failed write does."""

from __future__ import annotations

import asyncio

import pytest
from sites import Stats, prepare_batch

from nutchy.core.fetch import FetchEntry, FetchOutcome, exception_status, fetch_change
from nutchy.core.urls import reverse_url
from nutchy.exceptions import StoreError
from nutchy.outcomes import OutcomeWriter
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.schema import build_update

URLS = [f"http://a.example/page/{i:02d}" for i in range(7)]


@pytest.fixture
def table(tmp_path):
    store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
    store.create()
    table = prepare_batch(store, URLS)
    yield table
    store.close()


def outcome(url):
    entry = FetchEntry(reverse_url(url), url, "b1")
    change = fetch_change(entry, FetchOutcome(exception_status("timeout", "slow")), now=1)
    return build_update(entry.key, *change), entry


def fetched(table):
    return [u for u in URLS if "_ftcmrk_" in table.get(u, ["markers"]).markers]


def test_outcomes_are_written_by_the_flush_size_and_the_rest_when_drained(table):
    async def main():
        said = []
        writer = OutcomeWriter(
            table.write, flush_size=3, flush_interval=60, stats=Stats(), written=said.append
        )
        for url in URLS[:2]:
            writer.add(*outcome(url))
        assert writer.pending == 2
        assert not writer.backlogged()
        writer.add(*outcome(URLS[2]))  # the third: a write starts, in a thread
        for url in URLS[3:6]:
            writer.add(*outcome(url))
        assert writer.backlogged()  # twice the flush size waits
        while writer.written < 6:  # the second three are written once the first are
            await asyncio.sleep(0.01)
        assert fetched(table) == URLS[:6]
        writer.add(*outcome(URLS[6]))
        await writer.drain()
        assert writer.pending == 0
        assert writer.written == 7
        assert writer.stats.values["nutch/fetch/written"] == 7
        assert [[e.url for e in entries] for entries in said] == [URLS[:3], URLS[3:6], URLS[6:]]

    asyncio.run(main())
    assert fetched(table) == URLS


def test_the_flush_interval_writes_what_waits(table):
    async def main():
        writer = OutcomeWriter(table.write, flush_size=100, flush_interval=0.05, stats=Stats())
        writer.start()
        writer.add(*outcome(URLS[0]))
        for _ in range(200):
            if writer.written:
                break
            await asyncio.sleep(0.01)
        writer.stop()
        assert writer.written == 1

    asyncio.run(main())
    assert fetched(table) == URLS[:1]


def test_a_failed_write_is_counted_said_once_and_never_acknowledged(table, caplog):
    calls = []

    def write(updates):
        calls.append(len(updates))
        if len(calls) > 1:
            raise StoreError("the disk is full")
        table.write(updates)

    async def main():
        said, failed = [], []
        writer = OutcomeWriter(
            write,
            flush_size=2,
            flush_interval=60,
            stats=Stats(),
            written=said.append,
            failed=lambda: failed.append(1),
        )
        for url in URLS[:6]:
            writer.add(*outcome(url))
            await asyncio.sleep(0)
        while writer.pending > 2:
            await asyncio.sleep(0.01)
        writer.add(*outcome(URLS[6]))
        await writer.drain()
        return writer, said, failed

    writer, said, failed = asyncio.run(main())
    assert [e.url for e in said[0]] == URLS[:2]
    assert len(said) == 1  # nothing written after the failure is said to be
    assert writer.written == 2
    assert writer.lost == 5
    assert writer.stats.values["nutch/store/put_error"] == 5
    assert len(failed) >= 1
    errors = [r for r in caplog.records if "Cannot write" in r.getMessage()]
    assert errors
    assert "the disk is full" in errors[0].getMessage()
    assert errors[0].exc_info is None  # a store's error names what failed: no traceback
    assert fetched(table) == URLS[:2]


def test_an_outcome_claimed_waits_until_confirmed_and_one_given_back_is_written_here(table):
    """An outcome the parse pipeline claims leaves the buffer but still counts as waiting (the
    backlog, the crash bound) until the parse process confirms it written; one given back is
    written by the writer itself."""

    async def main():
        said = []
        writer = OutcomeWriter(
            table.write, flush_size=3, flush_interval=60, stats=Stats(), written=said.append
        )
        held = [outcome(url) for url in URLS[:5]]
        writer.add(*held[0])
        writer.add(*held[1])
        assert writer.claim(held[0][1]) is held[0][0]
        assert writer.claim(held[0][1]) is None  # claimed already
        assert writer.claim(held[2][1]) is None  # never added
        assert writer.pending == 2
        writer.add(*held[2])
        writer.add(*held[3])  # three buffered: written, in a thread, without the one claimed
        while writer.written < 3:
            await asyncio.sleep(0.01)
        assert writer.pending == 1
        assert fetched(table) == URLS[1:4]
        writer.confirm(["not.claimed:http/"])  # nothing to count
        assert writer.written == 3
        writer.give_back([held[0][1].key])  # the parse process could not write it: written here
        while writer.written < 4:
            await asyncio.sleep(0.01)
        assert fetched(table) == URLS[:4]
        writer.add(*held[4])
        assert writer.claim(held[4][1]) is held[4][0]
        assert writer.backlogged() is False
        writer.confirm([held[4][1].key])  # written by the parse process: counted, not written
        await writer.drain()
        assert writer.pending == 0 and writer.written == 5 and writer.lost == 0
        assert writer.stats.values["nutch/fetch/written"] == 5
        assert [[e.url for e in entries] for entries in said] == [
            URLS[1:4],
            URLS[:1],
            URLS[4:5],
        ]

    asyncio.run(main())
    assert fetched(table) == URLS[:4]  # the parse process did not really write the fifth


def test_claimed_outcomes_wait_but_do_not_hold_the_fetch_back_until_given_back(table):
    async def main():
        writer = OutcomeWriter(table.write, flush_size=2, flush_interval=60, stats=Stats())
        held = [outcome(url) for url in URLS[:4]]
        for update, entry in held:
            writer.add(update, entry)  # one at a time: the buffer never fills
            writer.claim(entry)
        assert writer.pending == 4 and not writer.backlogged()
        writer.give_back()  # every one: the parse process is gone; written here, at once
        assert writer.pending == 4 and writer.backlogged()
        await writer.drain()
        assert writer.written == 4 and writer.pending == 0 and not writer.backlogged()

    asyncio.run(main())
    assert fetched(table) == URLS[:4]


def test_outcomes_claimed_are_asked_to_be_written_at_the_flush_interval(table):
    async def main():
        asked = []
        writer = OutcomeWriter(table.write, flush_size=100, flush_interval=0.05, stats=Stats())
        writer.start()
        update, entry = outcome(URLS[0])
        writer.add(update, entry)
        writer.claim(entry, lambda: asked.append(writer.pending))
        await asyncio.sleep(0.2)
        assert asked and set(asked) == {1}  # asked while it waits...
        writer.confirm([entry.key])
        count = len(asked)
        await asyncio.sleep(0.15)
        writer.stop()
        assert len(asked) == count  # ...and no more once written

    asyncio.run(main())
