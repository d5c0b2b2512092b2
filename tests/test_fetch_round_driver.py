"""The round driver on its own, on a real embedded store, without a crawler: which batch comes
next, when the rounds stop, and what the end of a batch sends and says."""

from __future__ import annotations

import asyncio
import logging

import pytest
from scrapy.signalmanager import SignalManager
from sites import Stats, prepare_batch

from nutchy._fetch import FetchJob, batch_fetched, batch_parsed
from nutchy.core.generate import GenerateConfig
from nutchy.exceptions import StoreError
from nutchy.jobs.generate import GenerateOptions
from nutchy.rounds import RoundDriver
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.schema import RowUpdate
from nutchy.store.table import WebTable

URLS = [f"http://{h}.example/" for h in "abcde"]


@pytest.fixture
def store(tmp_path):
    store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
    store.create()
    yield store
    store.close()


def injected(store):
    """A table with URLS injected and none generated (the batch prepare_batch made is undone)."""
    table = prepare_batch(store, URLS, batch="old")
    table.write(
        [RowUpdate(row.key.encode(), deletes={b"mk:_gnmrk_"}) for row in table.scan(["markers"])]
    )
    return table


def generating(table, tmp_path, top_n=2):
    return RoundDriver(
        table,
        stats=Stats(),
        generate_options=GenerateOptions(GenerateConfig(top_n=top_n)),
        stop_file=tmp_path / "STOP",
    )


def test_a_given_batch_is_fetched_as_it_is(store):
    driver = RoundDriver(WebTable(store), stats=Stats())
    job = FetchJob("b7")
    assert asyncio.run(driver.first_batch(job)) is job
    assert driver.round == 0


def test_rounds_generate_batches_until_the_count_the_stop_file_or_nothing_due(store, tmp_path):
    table = injected(store)
    driver = generating(table, tmp_path)
    job = FetchJob(None, rounds=3, fixed=False)
    first = asyncio.run(driver.first_batch(job))
    assert first is not None and first.batch_id and first.rounds == 3
    marked = [r.url for r in table.scan(["markers"]) if r.markers.get("_gnmrk_") == first.batch_id]
    assert len(marked) == 2  # topN
    second = asyncio.run(driver.next_batch(first))
    assert second is not None and second.batch_id != first.batch_id
    (tmp_path / "STOP").touch()
    assert asyncio.run(driver.next_batch(second)) is None
    (tmp_path / "STOP").unlink()
    third = asyncio.run(driver.next_batch(second))
    assert third is not None
    assert asyncio.run(driver.next_batch(third)) is None  # three rounds done
    assert driver.round == 3
    assert driver.stats.values["nutch/rounds"] == 3

    # every URL is in a batch already (2 + 2 + 1): generate selects nothing
    driver = generating(table, tmp_path, top_n=10)
    assert asyncio.run(driver.first_batch(FetchJob(None, rounds=5, fixed=False))) is None
    assert driver.round == 0


def test_the_end_of_a_batch_sends_both_signals_in_order_and_a_failure_fails_it(store, caplog):
    signals = SignalManager()
    heard = []

    async def fetched(batch_id, complete):
        await asyncio.sleep(0.01)
        heard.append(("fetched", batch_id, complete))

    def parsed(batch_id, complete):
        heard.append(("parsed", batch_id, complete))
        if batch_id == "bad":
            raise StoreError("the table went away")

    signals.connect(fetched, signal=batch_fetched)
    signals.connect(parsed, signal=batch_parsed)
    driver = RoundDriver(WebTable(store), stats=Stats(), signals=signals)
    caplog.set_level(logging.INFO)
    assert asyncio.run(driver.finish(FetchJob("b1"), complete=True)) == "finished"
    assert heard == [("fetched", "b1", True), ("parsed", "b1", True)]
    assert "not fetched whole" not in caplog.text

    reason = asyncio.run(driver.finish(FetchJob("bad"), complete=False, why="its time limit"))
    assert reason == "nutch_update_failed"
    assert heard[2:] == [("fetched", "bad", False), ("parsed", "bad", False)]
    assert (
        "Batch bad was not fetched whole (its time limit): run nutchy updatedb bad once the rest"
        " is fetched" in caplog.text
    )
    assert "Traceback" not in caplog.text  # a store's error is the handler's to log


def test_a_partition_not_fetched_whole_is_said_only_when_the_crawl_updates(store, caplog):
    caplog.set_level(logging.INFO)
    job = FetchJob("b1", partition=1, partitions=2)
    RoundDriver(WebTable(store), stats=Stats(), updates=False).not_whole(job, "")
    assert "not fetched whole" not in caplog.text
    RoundDriver(WebTable(store), stats=Stats(), updates=True).not_whole(job, "")
    assert "Batch b1 was not fetched whole (partition 1/2)" in caplog.text
