"""Tests for the updatedb merge of nutchy.core.update (reference §8)."""

from __future__ import annotations

import pytest

from nutchy.core.java import f32_sum
from nutchy.core.schedule import AdaptiveFetchSchedule, DefaultFetchSchedule
from nutchy.core.scoring import cash_bytes
from nutchy.core.status import CrawlStatus
from nutchy.core.update import Inlink, UpdateConfig, in_batch, share_cash, update_row
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import WebPage

NOW = 1_700_000_000_000
DAY = 86_400_000
MONTH = 2592000
KEY = reverse_url("http://a.com/")


def fetched(status: CrawlStatus, **fields) -> WebPage:
    fields.setdefault("fetch_interval", MONTH)
    fields.setdefault("markers", {"_gnmrk_": "b1", "_ftcmrk_": "b1", "__prsmrk__": "b1"})
    return WebPage(KEY, status=status, fetch_time=NOW, prev_fetch_time=NOW - DAY, **fields)


def change(page: WebPage | None, inlinks=(), **config):
    config.setdefault("batch_id", "b1")
    result = update_row(page, KEY, list(inlinks), now=NOW + 5, config=UpdateConfig(**config))
    assert result is not None
    return result


@pytest.mark.parametrize(
    "status",
    [CrawlStatus.FETCHED, CrawlStatus.REDIR_TEMP, CrawlStatus.REDIR_PERM, CrawlStatus.NOTMODIFIED],
)
def test_successful_outcomes_keep_status_and_reschedule(status: CrawlStatus) -> None:
    c = change(fetched(status, retries_since_fetch=2))
    assert "status" not in c.fields
    assert c.fields["fetch_time"] == NOW + MONTH * 1000
    assert c.fields["retries_since_fetch"] == 0


def test_interval_over_max_forces_refetch() -> None:
    c = change(fetched(CrawlStatus.FETCHED, fetch_interval=100 * 86400))
    assert c.fields["status"] == CrawlStatus.UNFETCHED
    assert c.fields["fetch_interval"] == 6998400
    assert c.fields["fetch_time"] == NOW + 100 * DAY


@pytest.mark.parametrize(
    ("retries", "expected"),
    [
        (0, CrawlStatus.UNFETCHED),
        (1, CrawlStatus.UNFETCHED),
        (2, CrawlStatus.GONE),
        (7, CrawlStatus.GONE),
    ],
)
def test_retry(retries: int, expected: CrawlStatus) -> None:
    c = change(fetched(CrawlStatus.RETRY, retries_since_fetch=retries))
    assert c.fields["status"] == expected
    assert c.fields["fetch_time"] == NOW + DAY
    assert c.fields["retries_since_fetch"] == retries + 1


def test_gone() -> None:
    c = change(fetched(CrawlStatus.GONE))
    assert "status" not in c.fields
    assert c.fields["fetch_interval"] == 3888000
    assert c.fields["fetch_time"] == NOW + 3888000 * 1000


@pytest.mark.parametrize("status", [CrawlStatus.INJECTED, CrawlStatus.UNFETCHED])
def test_generated_but_not_fetched_only_loses_marks(status: CrawlStatus) -> None:
    c = change(fetched(status, markers={"_gnmrk_": "b1"}))
    assert "fetch_time" not in c.fields
    assert "status" not in c.fields
    assert c.entries["markers"] == {"_gnmrk_": None}


def test_markers_moved_as_nutch() -> None:
    page = fetched(CrawlStatus.FETCHED, metadata={"___rdrdsc__": b"y"})
    c = change(page)
    assert c.entries["markers"] == {
        "_gnmrk_": None,
        "_ftcmrk_": None,
        "_updmrk_": "b1",
        "__prsmrk__": None,
    }
    assert c.entries["metadata"]["___rdrdsc__"] is None
    assert c.replace == {}


def test_row_of_another_batch_keeps_status_schedule_and_marks() -> None:
    page = fetched(CrawlStatus.FETCHED, markers={"_gnmrk_": "other"}, score=1.0)
    c = change(page, [Inlink("http://b.com/", "x", 0.5, 3)])
    assert set(c.fields) == {"score"}
    assert c.fields["score"] == 1.5
    assert c.entries["markers"] == {"dist": "4"}
    assert c.entries["inlinks"] == {"http://b.com/": "x"}


def test_not_modified_304_beats_signatures() -> None:
    # Nutch 2.x counts a 304 with differing sig/psig as MODIFIED (reference §12 #11).
    adaptive = AdaptiveFetchSchedule()
    page = fetched(
        CrawlStatus.NOTMODIFIED,
        fetch_interval=1000,
        signature=b"a",
        prev_signature=b"b",
        modified_time=NOW,
    )
    assert change(page, schedule=adaptive).fields["fetch_interval"] == 1400


@pytest.mark.parametrize(
    ("sig", "psig", "interval"), [(b"a", b"b", 800), (b"a", b"a", 1400), (b"a", None, 1000)]
)
def test_signature_decides_modified(sig, psig, interval) -> None:
    page = fetched(
        CrawlStatus.FETCHED,
        fetch_interval=1000,
        signature=sig,
        prev_signature=psig,
        modified_time=NOW,
    )
    fields = change(page, schedule=AdaptiveFetchSchedule()).fields
    assert fields.get("fetch_interval", 1000) == interval  # unchanged fields are not written


def test_last_modified_header_sets_modified_time() -> None:
    page = fetched(
        CrawlStatus.FETCHED,
        modified_time=77,
        headers={"Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT"},
    )
    c = change(page, schedule=DefaultFetchSchedule())
    assert c.fields["modified_time"] == 784111777000
    assert c.fields["prev_modified_time"] == 77


def test_new_row_and_additions() -> None:
    inlinks = [Inlink(f"http://s{i}.com/", str(i), i / 10, None) for i in range(5)]
    c = change(None, inlinks, max_inlinks=2)
    assert c.fields["status"] == CrawlStatus.UNFETCHED
    assert c.fields["fetch_time"] == NOW + 5
    assert c.fields["fetch_interval"] == MONTH
    assert c.entries["inlinks"] == {"http://s4.com/": "4", "http://s3.com/": "3"}
    assert c.fields["score"] == pytest.approx(0.7)
    assert "markers" not in c.entries
    assert (
        update_row(None, KEY, inlinks, now=NOW, config=UpdateConfig(additions_allowed=False))
        is None
    )


def test_inlinks_kept_best_first_ties_in_arrival_order() -> None:
    # Which inlinks db.update.max.inlinks keeps, their order, and the order their scores are
    # summed in (floating-point addition is not associative) are those of a stable sort on
    # descending score.
    scores = [0.1, 0.3, 0.1, 1e-17, 0.3, 0.2, 0.1, 1e16, 0.3]
    inlinks = [Inlink(f"http://s{i}.com/", str(i), s, None) for i, s in enumerate(scores)]
    expected = sorted(inlinks, key=lambda i: -i.score)
    for limit in (3, 5, len(inlinks)):
        c = change(None, inlinks, max_inlinks=limit)
        kept = expected[:limit]
        assert list(c.entries["inlinks"]) == [i.source for i in kept]
        # exactly: the same float additions in the same order
        assert c.fields["score"] == f32_sum(i.score for i in kept)


def test_distance_only_decreases() -> None:
    page = fetched(CrawlStatus.FETCHED, markers={"dist": "2"})
    assert "markers" not in change(page, [Inlink("http://b/", "", 0.0, 5)], batch_id="x").entries
    c = change(
        page, [Inlink("http://b/", "", 0.0, 0), Inlink("http://c/", "", 0.0, None)], batch_id="x"
    )
    assert c.entries["markers"] == {"dist": "1"}


def test_batch_page_gives_away_cash() -> None:
    page = fetched(
        CrawlStatus.FETCHED,
        outlinks={"http://b/": ""},
        metadata={"_csh_": cash_bytes(0.5)},
        score=2.0,
    )
    c = change(page, [Inlink("http://z/", "", 0.25, None)])
    assert c.entries["metadata"]["_csh_"] == cash_bytes(0.25)
    assert c.fields["score"] == 2.25


def test_in_batch_and_config_validation() -> None:
    assert not in_batch(WebPage(KEY, markers={"_ftcmrk_": "b"}), None)
    with pytest.raises(ValueError, match="retry_max"):
        UpdateConfig(retry_max=-1)
    with pytest.raises(ValueError, match="max_inlinks"):
        UpdateConfig(max_inlinks=-1)


def test_an_unmodified_page_sends_score_but_no_inlink_its_targets_hold_already() -> None:
    source = WebPage(
        reverse_url("http://s.com/"),
        status=CrawlStatus.NOTMODIFIED,
        outlinks={"http://a.com/": "A"},
        metadata={"_csh_": cash_bytes(0.5)},
    )
    ((_, inlink),), given = share_cash(source, UpdateConfig())
    assert (inlink.stored, inlink.score, given) == (True, 0.5, 0.5)
    target = WebPage(KEY, status=CrawlStatus.FETCHED, score=1.0, inlinks={"http://s.com/": "A"})
    existing = change(target, [inlink], batch_id=None)
    assert existing.fields["score"] == 1.5
    assert "inlinks" not in existing.entries  # il:http://s.com/ is there since its last parse
    new = change(None, [inlink], batch_id=None)
    assert new.entries["inlinks"] == {"http://s.com/": "A"}  # a new row gets it all the same
    fetched_source = WebPage(source.key, status=CrawlStatus.FETCHED, outlinks=source.outlinks)
    ((_, fresh),), _ = share_cash(fetched_source, UpdateConfig())
    assert change(target, [fresh], batch_id=None).entries["inlinks"] == {"http://s.com/": "A"}


DUP = {"_dup_": b"http://a.com/kept"}


@pytest.mark.parametrize(
    ("status", "sig", "psig"),
    [
        (CrawlStatus.FETCHED, b"1", b"1"),  # fetched again, same content
        (CrawlStatus.NOTMODIFIED, b"2", b"1"),  # a 304: not modified, whatever older sigs say
        (CrawlStatus.FETCHED, b"1", None),  # not parsed again: nothing says it changed
    ],
)
def test_a_duplicate_fetched_unchanged_stays_a_duplicate(status, sig, psig) -> None:
    c = change(fetched(status, signature=sig, prev_signature=psig, metadata=dict(DUP)))
    assert c.fields["status"] == CrawlStatus.DUPLICATE
    assert c.fields["fetch_time"] == NOW + MONTH * 1000  # rescheduled as the fetch says
    assert "_dup_" not in c.entries.get("metadata", {})


@pytest.mark.parametrize(
    ("status", "sig", "expected"),
    [
        (CrawlStatus.FETCHED, b"2", None),  # its content changed
        (CrawlStatus.GONE, b"1", None),
        (CrawlStatus.REDIR_PERM, b"1", None),
        (CrawlStatus.RETRY, b"1", CrawlStatus.UNFETCHED),
    ],
)
def test_a_duplicate_stops_being_one_when_its_content_changes_or_is_gone(
    status, sig, expected
) -> None:
    c = change(fetched(status, signature=sig, prev_signature=b"1", metadata=dict(DUP)))
    assert c.fields.get("status") == expected
    assert c.entries["metadata"]["_dup_"] is None


def test_a_duplicate_generated_but_not_fetched_stays_one() -> None:
    page = fetched(CrawlStatus.DUPLICATE, signature=b"1", metadata=dict(DUP))
    page.markers = {"_gnmrk_": "b1"}
    c = change(page)
    assert "status" not in c.fields
    assert "_dup_" not in c.entries.get("metadata", {})
    assert c.entries["markers"] == {"_gnmrk_": None}
