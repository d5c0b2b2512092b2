"""Tests for OPIC scoring (reference §10), with the reference's worked example."""

from __future__ import annotations

import pytest

from nutchy.core.scoring import OPICScoring, cash_bytes, read_cash
from nutchy.core.update import Inlink, UpdateConfig, outlink_inlinks, update_row
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import WebPage

NOW = 1_700_000_000_000


def test_distribute_internal_external_factors() -> None:
    opic = OPICScoring(internal_link_factor=2.0, external_link_factor=0.5)
    shares = opic.distribute_score_to_outlinks(
        "http://A.com/", 1.0, ["http://a.com/x", "http://b.com/", "not a url"]
    )
    assert shares.scores == pytest.approx(
        {"http://a.com/x": 2 / 3, "http://b.com/": 1 / 6, "not a url": 1 / 6}
    )
    assert shares.cash == 0.0


def test_equal_factors_give_every_outlink_the_same_share() -> None:
    opic = OPICScoring(internal_link_factor=0.5, external_link_factor=0.5)
    targets = ["http://a.com/x", "http://b.com/", "not a url"]
    shares = opic.distribute_score_to_outlinks("http://a.com/", 0.75, targets)
    assert shares.scores == dict.fromkeys(targets, 0.125)
    assert shares.cash == 0.0


def test_no_cash_keeps_cash_and_gives_nothing() -> None:
    shares = OPICScoring().distribute_score_to_outlinks("http://a/", 0.0, ["http://b/"])
    assert shares.scores == {"http://b/": 0.0}
    assert OPICScoring().distribute_score_to_outlinks("http://a/", 0.7, []).cash == 0.7


def test_cash_codec() -> None:
    assert cash_bytes(1.0) == b"\x3f\x80\x00\x00"
    assert read_cash({"_csh_": cash_bytes(0.125)}) == 0.125
    assert read_cash({"_csh_": b"xx"}) == 0.0
    assert OPICScoring().injected_cash(2.5) == 2.5
    assert OPICScoring().generator_sort_value(0.25) == 0.0625


def _apply(page: WebPage | None, key: str, change) -> WebPage:
    page = page or WebPage(key)
    for name, value in change.fields.items():
        setattr(page, name, value)
    for family, values in change.entries.items():
        target = getattr(page, family)
        for k, v in values.items():
            if v is None:
                target.pop(k, None)
            else:
                target[k] = v
    return page


def test_worked_example() -> None:
    """Reference §10: A → B, C (same host), D, E; then B → A, C."""
    config = UpdateConfig()
    rows: dict[str, WebPage] = {}
    a = WebPage(
        reverse_url("http://a.com/"),
        score=1.0,
        fetch_time=NOW,
        fetch_interval=2592000,
        status=2,
        metadata={"_csh_": cash_bytes(1.0)},
        markers={"_gnmrk_": "b1"},
        outlinks={
            "http://a.com/b": "",
            "http://a.com/c": "",
            "http://d.com/": "",
            "http://e.com/": "",
        },
    )
    rows[a.key] = a

    def run_round(batch_page: WebPage) -> None:
        contributions: dict[str, list[Inlink]] = {}
        for target, inlink in outlink_inlinks(batch_page, config):
            contributions.setdefault(reverse_url(target), []).append(inlink)
        keys = {batch_page.key, *contributions}
        for key in keys:
            page = rows.get(key)
            change = update_row(page, key, contributions.get(key, []), now=NOW, config=config)
            assert change is not None
            rows[key] = _apply(page, key, change)

    run_round(a)
    assert rows[a.key].score == 1.0
    assert read_cash(rows[a.key].metadata) == 0.0
    for url in ("http://a.com/b", "http://a.com/c", "http://d.com/", "http://e.com/"):
        row = rows[reverse_url(url)]
        assert (row.score, read_cash(row.metadata), row.status) == (0.25, 0.25, 1)
        assert row.inlinks == {"http://a.com/": ""}

    b = rows[reverse_url("http://a.com/b")]
    b.status, b.markers["_gnmrk_"] = 2, "b2"
    b.outlinks = {"http://a.com/": "home", "http://a.com/c": "c"}
    run_round(b)
    a = rows[a.key]
    assert (a.score, read_cash(a.metadata)) == (1.125, 0.125)
    assert a.inlinks == {"http://a.com/b": "home"}
    c = rows[reverse_url("http://a.com/c")]
    assert (c.score, read_cash(c.metadata)) == (0.375, 0.375)
    b = rows[b.key]
    assert (b.score, read_cash(b.metadata)) == (0.25, 0.0)
