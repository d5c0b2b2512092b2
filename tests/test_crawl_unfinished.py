"""How ``nutchy crawl`` takes over the rounds a killed crawl left (nutchy/jobs/_unfinished.py),
without a fetch: a generate cut short is made again whole under its batch id, a batch finished
by hand since is dropped with a line, and a round a live crawl holds is left to it."""

from __future__ import annotations

import fcntl
import os

import pytest

from nutchy.config import load_settings
from nutchy.core.urls import reverse_url
from nutchy.jobs import _unfinished
from nutchy.jobs.crawl import crawl
from nutchy.store import open_table

SEEDS = ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b", "http://127.0.0.1:9/c"]


@pytest.fixture
def crawl_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    (tmp_path / "seeds.txt").write_text("".join(f"{u}\n" for u in SEEDS), encoding="utf-8")
    return tmp_path


def run(crawl_dir, lines, fetches):
    """:func:`crawl` of the seeds, each fetch noted in *fetches* and failing at once (exit 1)."""
    overrides = {"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")}

    def start_fetch(batch_id, overrides, partition):
        fetches.append((batch_id, overrides.get("NUTCH_FETCHER_JOB_RESUME")))
        return lambda: 1

    return crawl(
        load_settings(overrides, project=False),
        [crawl_dir / "seeds.txt"],
        rounds=3,
        top_n=None,
        overrides=overrides,
        start_fetch=start_fetch,
        log=lines.append,
    )


def marks(crawl_dir):
    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")}, project=False)
    with open_table(settings) as table:
        return {p.url: p.markers.get("_gnmrk_") for p in table.scan()}


def left(crawl_dir, batch, phase, partitions=None, *, mark=()):
    """A round of a crawl that is gone: its file, unlocked, in *phase*, and *mark*'s rows."""
    directory = crawl_dir / "crawl" / "unfinished"
    held = _unfinished.Round.start(directory, "webpage", batch)
    held.enter(phase, partitions)
    held.release()
    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")}, project=False)
    with open_table(settings) as table:
        for url in mark:
            table.update(reverse_url(url), entries={"markers": {"_gnmrk_": batch}})
    return directory / f"webpage.{batch}"


def test_a_generate_cut_short_is_made_again_whole_under_its_id(crawl_dir):
    lines, fetches = [], []
    run(crawl_dir, lines, fetches)  # injects, then round 1's fetch fails: batch left
    first = fetches[0][0]
    assert set(marks(crawl_dir).values()) == {first}
    path = left(crawl_dir, "1000000000-1", _unfinished.GENERATE)
    # the killed generate had marked one row before it died; the first batch is still marked
    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")}, project=False)
    with open_table(settings) as table:
        for url in SEEDS:
            table.update(reverse_url(url), entries={"markers": {"_gnmrk_": None}})
        table.update(reverse_url(SEEDS[1]), entries={"markers": {"_gnmrk_": "1000000000-1"}})
    (crawl_dir / "crawl" / "unfinished" / f"webpage.{first}").unlink()
    lines.clear()
    fetches.clear()
    report = run(crawl_dir, lines, fetches)
    assert lines[1] == (
        "round 1: batch 1000000000-1, left by a crawl that stopped during its generate"
        " (1 URLs marked): generating it again"
    )
    assert lines[2].startswith("round 1: batch 1000000000-1, 3 URLs; generate ")
    assert fetches == [("1000000000-1", None)]  # a fetch of the whole batch, not a resume
    assert report.batches == ["1000000000-1"]
    assert set(marks(crawl_dir).values()) == {"1000000000-1"}
    assert path.exists()  # the fetch failed: left for the next, now in its fetch phase
    assert _unfinished.take_over(path.parent, "webpage")[0].phase == _unfinished.FETCH


def test_a_batch_finished_since_is_dropped_and_a_killed_fetch_resumed(crawl_dir):
    lines, fetches = [], []
    run(crawl_dir, lines, fetches)
    first = fetches[0][0]
    gone = left(crawl_dir, "1000000000-2", _unfinished.FETCH, [2])  # no row has its mark
    lines.clear()
    fetches.clear()
    run(crawl_dir, lines, fetches)
    assert lines[1] == (
        "round 1: batch 1000000000-2, left by a crawl that stopped, has been finished since"
    )
    assert not gone.exists()
    assert lines[2] == (
        f"round 2: batch {first}, 3 URLs, left by a crawl that stopped: finishing its fetch"
    )
    assert fetches == [(first, True)]  # resumed: the rows whose fetch was written are left


def test_a_round_a_live_crawl_holds_is_left_to_it(crawl_dir):
    lines, fetches = [], []
    run(crawl_dir, lines, fetches)
    first = fetches[0][0]
    path = crawl_dir / "crawl" / "unfinished" / f"webpage.{first}"
    handle = os.open(path, os.O_RDWR)  # another crawl, alive, holds it
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fetches.clear()
        run(crawl_dir, lines, fetches)
        assert fetches == []  # its rows are marked: generate selects nothing else
        assert lines[-1] == "stopped, nothing left to fetch"
        assert path.exists()
    finally:
        os.close(handle)
