"""Tests for OPIC scoring (reference §10), with the reference's worked example."""

from __future__ import annotations

import struct

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


# Nutch's OPICScoringFilter computes in Java floats. Each case: the target row's score and cash,
# the pages linking to it (cash, number of outlinks), the link factor, and the float bits Java
# gives (OpenJDK 17 running the filter's arithmetic: float scoreUnit = cash / allCount; share =
# scoreUnit * factor; float adjust = 0f; adjust += share, best share first; score + adjust,
# cash + adjust): the shares, then the new score and cash.
JAVA_OPIC_VECTORS = [
    (
        (0.0, 0.0),
        [(1.0, 2), (1.0, 3), (1.0, 5)],
        1.0,
        ["3f000000", "3eaaaaab", "3e4ccccd"],
        ("3f844445", "3f844445"),
    ),
    (
        (0.8, 0.1),
        [(0.7, 3), (0.3, 7), (0.45, 11), (0.05, 13)],
        1.0,
        ["3e6eeeef", "3d2f8af9", "3d27904a", "3b7c0fc1"],
        ("3f8f7b26", "3ed78633"),
    ),
    (
        (0.25, 0.25),
        [(1.0, 7), (1.0, 9), (0.6, 3)],
        0.3,
        ["3d75c290", "3d2f8afa", "3d088889"],
        ("3ec5bac2", "3ec5bac2"),
    ),
]


def _bits(value: float) -> str:
    return cash_bytes(value).hex()


def _receive(
    target_score: float, target_cash: float, sources: list[tuple[float, int]], factor: float
) -> tuple[list[float], WebPage]:
    """The shares a target receives from *sources* and the target row after updatedb."""
    config = UpdateConfig(
        scoring=OPICScoring(internal_link_factor=factor, external_link_factor=factor)
    )
    target = "http://t.com/"
    inlinks = []
    for i, (cash, outlinks) in enumerate(sources):
        links = {target: ""} | {f"http://s{i}.com/{j}": "" for j in range(1, outlinks)}
        source = WebPage(
            reverse_url(f"http://s{i}.com/"),
            status=2,
            metadata={"_csh_": cash_bytes(cash)},
            markers={"_gnmrk_": "b"},
            outlinks=links,
        )
        inlinks += [inlink for url, inlink in outlink_inlinks(source, config) if url == target]
    key = reverse_url(target)
    page = WebPage(
        key,
        score=read_cash({"_csh_": cash_bytes(target_score)}),
        metadata={"_csh_": cash_bytes(target_cash)},
    )
    change = update_row(page, key, inlinks, now=NOW, config=config)
    assert change is not None
    return sorted((i.score for i in inlinks), reverse=True), _apply(page, key, change)


@pytest.mark.parametrize(("target", "sources", "factor", "shares", "result"), JAVA_OPIC_VECTORS)
def test_opic_arithmetic_is_javas_float_arithmetic(
    target: tuple[float, float],
    sources: list[tuple[float, int]],
    factor: float,
    shares: list[str],
    result: tuple[str, str],
) -> None:
    received, row = _receive(*target, sources, factor)
    assert [_bits(s) for s in received] == shares
    assert (_bits(row.score), row.metadata["_csh_"].hex()) == result


def test_double_arithmetic_would_be_one_ulp_off() -> None:
    # The first vector: three inlinks whose float sum, added one at a time as Java does, is one
    # unit in the last place above the double sum rounded once to a float (what nutchy stored
    # before it did float arithmetic).
    received, row = _receive(0.0, 0.0, [(1.0, 2), (1.0, 3), (1.0, 5)], 1.0)
    java = struct.unpack(">f", bytes.fromhex("3f844445"))[0]
    double_once = read_cash({"_csh_": cash_bytes(sum(received))})
    assert row.score == java
    assert double_once != java
    assert abs(struct.unpack(">i", cash_bytes(double_once))[0] - 0x3F844445) == 1
