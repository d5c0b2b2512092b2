"""The Redis frontier against a real redis-server: leases, acknowledgements, politeness times,
reclaims, republishing, isolation, cleanup, the round lock, and Redis going away."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from scrapy.settings import Settings

import nutchy.default_settings
from nutchy.core.fetch import FetchEntry
from nutchy.exceptions import ConfigError, FrontierUnavailable, LeaseLost
from nutchy.redis_frontier import (
    QueueLease,
    RedisFrontier,
    crawl_namespace,
    decode_entry,
    encode_entry,
    entry_item,
    open_redis_frontier,
)
from nutchy.testing.redis_server import RedisServer, free_port

BATCH = "1732000000-42"


def frontier(client, crawl="webpage", worker="w1", **kwargs) -> RedisFrontier:
    kwargs.setdefault("lease_timeout", 5.0)
    kwargs.setdefault("default_delay", 0.0)
    return RedisFrontier(client, crawl, worker_id=worker, **kwargs)


def rows(hosts=3, per_host=4, batch=BATCH):
    """Publish items: *per_host* rows on each of *hosts* hosts, with their entries."""
    items, entries = [], {}
    for h in range(hosts):
        for i in range(per_host):
            entry = FetchEntry(
                f"com.h{h}:http/p{i}", f"http://h{h}.com/p{i}", batch, fetch_time=1000 + i
            )
            items.append(entry_item(f"http://h{h}.com", entry))
            entries[entry.key] = entry
    return items, entries


def drain(f: RedisFrontier, lease: QueueLease, batch=BATCH, page=2) -> list[FetchEntry]:
    """Every row of a held queue, read a page at a time."""
    got: list[FetchEntry] = []
    after = None
    while True:
        page_rows = f.entries(batch, lease, after=after, limit=page)
        if not page_rows:
            return got
        got += page_rows
        after = page_rows[-1].key


def second_client(redis_server):
    return redis.Redis.from_url(
        redis_server.url, socket_timeout=2, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
    )


# --- the payload ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry",
    [
        FetchEntry("com.a:http/", "http://a.com/", "b"),
        FetchEntry(
            "com.a:https:8443/x?y=1",
            "https://a.com:8443/x?y=1",
            "b",
            5,
            6,
            'W/"é"',
            "http://a.com/r",
            0,
            True,
        ),
        FetchEntry("not a key", "http://odd.example/", "b", partition=-3),
    ],
)
def test_entry_payload_round_trips(entry):
    assert decode_entry(entry.key, encode_entry(entry), entry.batch_id) == entry
    assert decode_entry(entry.key, encode_entry(entry).decode(), entry.batch_id) == entry


def test_a_payload_that_does_not_decode_gives_the_row_key_alone(caplog):
    entry = decode_entry("com.a:http/x", b'{"t": "soon"}', "b")
    assert entry == FetchEntry("com.a:http/x", "http://a.com/x", "b")
    assert "does not decode" in caplog.text
    assert decode_entry("garbage", b"[", "b").url == "garbage"


# --- one worker ----------------------------------------------------------------------------------


def test_publish_lease_read_ack_give_back_until_done(redis_client):
    f = frontier(redis_client)
    items, entries = rows(hosts=3, per_host=4)
    assert f.state(BATCH) == "unknown"
    assert f.publish(BATCH, items) == 12
    assert f.state(BATCH) == "open"
    assert f.stats(BATCH) | {"created": 0} == {
        "state": "open",
        "created": 0,
        "published": 12,
        "pending": 12,
        "ready": 3,
        "leased": 0,
    }

    leases = f.lease(BATCH, 10)
    assert leases.state == "open" and leases.wait is None
    assert sorted(lease.queue for lease in leases.queues) == [
        "http://h0.com",
        "http://h1.com",
        "http://h2.com",
    ]
    seen = []
    for lease in leases.queues:
        got = drain(f, lease)
        assert [e.key for e in got] == sorted(e.key for e in got)  # key order
        assert all(entries[e.key] == e for e in got)
        seen += got
        assert f.ack(BATCH, lease, [e.key for e in got]) == 4
        assert f.ack(BATCH, lease, [got[0].key]) == 0  # twice is harmless
        assert f.entries(BATCH, lease) == []
        assert f.give_back(BATCH, lease, 0.0) is False  # nothing left: the queue is gone
    assert sorted(e.key for e in seen) == sorted(entries)

    assert f.stats(BATCH)["acked"] == 12
    assert f.state(BATCH) == "done"
    assert f.lease(BATCH, 1) == type(leases)([], "done", None)
    # Only the small "done" record is left, and it expires.
    assert f.redis_keys(BATCH) == [f"nutchy:{{webpage}}:{BATCH}:meta"]
    assert 0 < redis_client.pttl(f"nutchy:{{webpage}}:{BATCH}:meta") <= 86_400_000
    assert f.publish(BATCH, items) == 0  # a done batch takes nothing
    assert f.state(BATCH) == "done"


def test_a_batch_is_not_done_while_a_queue_is_held_even_with_every_row_acknowledged(
    redis_client,
):
    f = frontier(redis_client)
    f.publish(BATCH, rows(hosts=1, per_host=2)[0])
    (lease,) = f.lease(BATCH, 1).queues
    f.ack(BATCH, lease, [e.key for e in f.entries(BATCH, lease)])
    assert f.state(BATCH) == "open"
    again = f.lease(BATCH, 1)
    assert again.queues == [] and again.state == "open" and again.wait is not None
    f.give_back(BATCH, lease, 0.0)
    assert f.state(BATCH) == "done"


def test_an_empty_batch_is_done_at_once(redis_client):
    f = frontier(redis_client)
    assert f.publish(BATCH, []) == 0
    assert f.state(BATCH) == "done"


def test_give_back_keeps_the_rows_left_and_hands_the_politeness_state_on(redis_client):
    f = frontier(redis_client)
    f.publish(BATCH, rows(hosts=1, per_host=3)[0])
    (lease,) = f.lease(BATCH, 1).queues
    assert lease.state is None
    first = f.entries(BATCH, lease, limit=1)
    f.ack(BATCH, lease, [first[0].key])
    assert f.give_back(BATCH, lease, 0.0, state='{"crawl_delay": 2.5}') is True
    (again,) = f.lease(BATCH, 1).queues
    assert again.state == '{"crawl_delay": 2.5}' and again.token != lease.token
    assert [e.key for e in drain(f, again)] == ["com.h0:http/p1", "com.h0:http/p2"]
    f.give_back(BATCH, again, 0.0)  # None keeps the state
    assert f.lease(BATCH, 1).queues[0].state == '{"crawl_delay": 2.5}'


def test_lease_can_bring_the_first_rows_and_give_back_many_releases_in_one_round_trip(
    redis_client, redis_server
):
    f = frontier(redis_client)
    items, entries = rows(hosts=3, per_host=3)
    f.publish(BATCH, items)
    leases = f.lease(BATCH, 2, rows=2)
    assert sorted(leases.rows) == sorted(lease.queue for lease in leases.queues)
    for lease in leases.queues:
        first = leases.rows[lease.queue]
        assert first == f.entries(BATCH, lease, limit=2)
        assert all(entries[e.key] == e for e in first)
        f.ack(BATCH, lease, [e.key for e in first])
    assert f.lease(BATCH, 5).rows == {}  # not asked for
    h0, h1 = leases.queues
    gone = frontier(second_client(redis_server), worker="w2")
    forged = QueueLease("http://h2.com", "w2/forged")
    result = f.give_back_many(
        BATCH, [(h0, 0.0, '{"crawl_delay": 1}'), (forged, 0, None), (h1, 0.0, None)]
    )
    assert result == [True, None, True]
    assert f.give_back_many(BATCH, []) == []
    back = {lease.queue: lease.state for lease in gone.lease(BATCH, 5).queues}
    assert back == {h0.queue: '{"crawl_delay": 1}', h1.queue: None}


def test_drop_gives_up_the_rest_of_a_queue_for_the_batch(redis_client):
    f = frontier(redis_client)
    items, _ = rows(hosts=1, per_host=3)
    f.publish(BATCH, items)
    (lease,) = f.lease(BATCH, 1).queues
    assert f.drop(BATCH, lease) == 3
    assert f.publish(BATCH, items) == 0  # dropped rows do not come back in this batch
    assert f.stats(BATCH)["dropped"] == 3
    assert f.state(BATCH) == "done"


# --- politeness: the next allowed time -----------------------------------------------------------


def test_a_queue_given_back_with_a_delay_is_not_leasable_before_it(redis_client):
    f = frontier(redis_client)
    f.publish(BATCH, rows(hosts=1, per_host=3)[0])
    (lease,) = f.lease(BATCH, 1).queues
    f.ack(BATCH, lease, [f.entries(BATCH, lease, limit=1)[0].key])
    given = time.monotonic()
    f.give_back(BATCH, lease, 0.6)
    waits = []
    while True:
        leases = f.lease(BATCH, 1)
        if leases.queues:
            break
        assert leases.wait is not None and leases.wait <= 0.6
        waits.append(leases.wait)
        time.sleep(min(leases.wait, 0.1))  # what a worker does: sleep, never spin
    # Redis's clock said when; the worker's clock agrees to within the round trips.
    assert time.monotonic() - given >= 0.55
    assert waits and all(0 < wait <= 0.6 for wait in waits)
    assert len(waits) <= 12  # slept, not polled


def test_the_wait_hint_counts_leases_held_by_others(redis_client, redis_server):
    f1 = frontier(redis_client, lease_timeout=1.0)
    f2 = frontier(second_client(redis_server), worker="w2", lease_timeout=1.0)
    f1.publish(BATCH, rows(hosts=1, per_host=1)[0])
    assert f1.lease(BATCH, 1).queues
    leases = f2.lease(BATCH, 1)
    assert leases.queues == [] and leases.state == "open"
    assert 0.5 < leases.wait <= 1.0


# --- several workers -----------------------------------------------------------------------------


def test_two_workers_never_hold_one_queue(redis_client, redis_server):
    f1 = frontier(redis_client)
    f2 = frontier(second_client(redis_server), worker="w2")
    f1.publish(BATCH, rows(hosts=40, per_host=2)[0])
    held: dict[str, list[str]] = {"w1": [], "w2": []}
    start = threading.Barrier(2)

    def work(f: RedisFrontier, name: str) -> None:
        start.wait()
        while True:
            leases = f.lease(BATCH, 3)
            if not leases.queues:
                return
            held[name] += [lease.queue for lease in leases.queues]

    threads = [threading.Thread(target=work, args=(f, n)) for f, n in ((f1, "w1"), (f2, "w2"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not set(held["w1"]) & set(held["w2"])
    assert len(held["w1"]) + len(held["w2"]) == 40
    assert len(set(held["w1"]) | set(held["w2"])) == 40


def test_a_lease_that_expires_returns_the_unacknowledged_rows_to_another_worker(
    redis_client, redis_server
):
    dead = frontier(redis_client, worker="dead", lease_timeout=0.5, default_delay=0.2)
    other = frontier(second_client(redis_server), worker="w2", lease_timeout=0.5, default_delay=0.2)
    items, _ = rows(hosts=1, per_host=4)
    dead.publish(BATCH, items)
    (lease,) = dead.lease(BATCH, 1).queues
    in_flight = dead.entries(BATCH, lease, limit=3)
    dead.ack(BATCH, lease, [in_flight[0].key])  # one outcome written; then the worker dies
    taken = time.monotonic()

    assert other.lease(BATCH, 1).queues == []  # still held
    while not (leases := other.lease(BATCH, 1)).queues:
        time.sleep(min(leases.wait or 0.05, 0.05))
    # Back after the lease's expiry plus the queue's delay.
    assert time.monotonic() - taken >= 0.65
    (reclaimed,) = leases.queues
    assert [e.key for e in drain(other, reclaimed)] == [
        "com.h0:http/p1",
        "com.h0:http/p2",
        "com.h0:http/p3",
    ]
    assert other.stats(BATCH)["reclaimed"] == 1
    # The dead worker's lease is gone for good.
    with pytest.raises(LeaseLost, match="no longer held"):
        dead.ack(BATCH, lease, [in_flight[1].key])
    assert dead.renew(BATCH, [lease]) == ["http://h0.com"]


def test_renew_keeps_a_lease_past_its_timeout(redis_client, redis_server):
    f1 = frontier(redis_client, lease_timeout=0.5)
    f2 = frontier(second_client(redis_server), worker="w2", lease_timeout=0.5)
    f1.publish(BATCH, rows(hosts=1, per_host=2)[0])
    (lease,) = f1.lease(BATCH, 1).queues
    until = time.monotonic() + 1.5
    while time.monotonic() < until:
        assert f1.renew(BATCH, [lease]) == []
        assert f2.lease(BATCH, 1).queues == []
        time.sleep(0.1)
    assert len(f1.entries(BATCH, lease)) == 2  # still the holder, three timeouts later
    while not f2.lease(BATCH, 1).queues:  # no more renewals: it expires
        time.sleep(0.05)
    assert f1.renew(BATCH, [lease]) == ["http://h0.com"]


def test_a_renewal_after_the_timeout_keeps_a_lease_nobody_took(redis_client):
    f = frontier(redis_client, lease_timeout=0.1)
    f.publish(BATCH, rows(hosts=1, per_host=1)[0])
    (lease,) = f.lease(BATCH, 1).queues
    time.sleep(0.2)
    assert f.renew(BATCH, [lease]) == []
    assert len(f.entries(BATCH, lease)) == 1


def test_only_the_holder_may_read_ack_give_back_or_drop(redis_client, redis_server):
    f1 = frontier(redis_client)
    f2 = frontier(second_client(redis_server), worker="w2")
    f1.publish(BATCH, rows(hosts=1, per_host=2)[0])
    (lease,) = f1.lease(BATCH, 1).queues
    forged = QueueLease(lease.queue, "w2/0000")
    key = "com.h0:http/p0"
    with pytest.raises(LeaseLost):
        f2.entries(BATCH, forged)
    with pytest.raises(LeaseLost):
        f2.ack(BATCH, forged, [key])
    with pytest.raises(LeaseLost):
        f2.give_back(BATCH, forged, 0.0)
    with pytest.raises(LeaseLost):
        f2.drop(BATCH, forged)
    assert f2.renew(BATCH, [forged]) == [lease.queue]
    # Nothing changed for the holder.
    assert [e.key for e in f1.entries(BATCH, lease)] == [key, "com.h0:http/p1"]
    assert f1.stats(BATCH)["pending"] == 2


def test_ack_many_acknowledges_the_queues_still_held_in_one_round_trip(redis_client, redis_server):
    f = frontier(redis_client, lease_timeout=0.3)
    other = frontier(second_client(redis_server), worker="w2")
    f.publish(BATCH, rows(hosts=3, per_host=2)[0])
    h0, h1, h2 = sorted(f.lease(BATCH, 3).queues, key=lambda lease: lease.queue)
    time.sleep(0.35)
    f.renew(BATCH, [h0, h2])  # too late for h1...
    assert [lease.queue for lease in other.lease(BATCH, 3).queues] == ["http://h1.com"]
    lost = f.ack_many(
        BATCH, [(h0, ["com.h0:http/p0"]), (h1, ["com.h1:http/p0"]), (h2, []), (h0, ["nope"])]
    )
    assert lost == [h1]  # ...which another worker holds now
    assert [e.key for e in f.entries(BATCH, h0)] == ["com.h0:http/p1"]
    assert f.stats(BATCH)["acked"] == 1
    assert f.ack_many(BATCH, []) == []


# --- republishing, isolation ---------------------------------------------------------------------


def test_republishing_adds_only_what_is_missing_and_never_what_was_acknowledged(
    redis_client, redis_server
):
    f = frontier(redis_client)
    items, _ = rows(hosts=2, per_host=3)
    assert f.publish(BATCH, items[:4]) == 4
    assert f.publish(BATCH, items) == 2
    leases = f.lease(BATCH, 2).queues
    h0 = next(lease for lease in leases if lease.queue == "http://h0.com")
    f.ack(BATCH, h0, ["com.h0:http/p0", "com.h0:http/p1"])
    f.give_back(BATCH, h0, 0.0)
    # The table read again (say, by a worker that thinks Redis lost the batch): nothing new.
    assert f.publish(BATCH, items) == 0
    # A queue held while it is republished stays with its holder.
    other = frontier(second_client(redis_server), worker="w2")
    leased = other.lease(BATCH, 5).queues
    assert [lease.queue for lease in leased] == ["http://h0.com"]
    assert [e.key for e in drain(other, leased[0])] == ["com.h0:http/p2"]
    stats = f.stats(BATCH)
    assert stats["published"] == 6 and stats["pending"] == 4 and stats["acked"] == 2


def test_a_new_row_published_into_a_held_queue_reaches_its_holder(redis_client):
    f = frontier(redis_client)
    f.publish(BATCH, rows(hosts=1, per_host=2)[0])
    (lease,) = f.lease(BATCH, 1).queues
    got = drain(f, lease)
    # A redirect target of the same host joins the batch, with a key before the cursor.
    redirect = FetchEntry("com.h0:http/a", "http://h0.com/a", BATCH)
    assert f.publish(BATCH, [entry_item("http://h0.com", redirect)]) == 1
    assert f.entries(BATCH, lease, after=got[-1].key) == []
    assert f.entries(BATCH, lease)[0].key == "com.h0:http/a"
    assert f.lease(BATCH, 1).queues == []  # not handed to anyone else


def test_crawls_and_batches_do_not_mix(redis_client):
    a = frontier(redis_client, crawl="a_webpage")
    b = frontier(redis_client, crawl="b_webpage")
    a.publish(BATCH, rows(hosts=2, per_host=1)[0])
    a.publish("other", rows(hosts=1, per_host=1, batch="other")[0])
    b.publish(BATCH, rows(hosts=3, per_host=1)[0])
    assert len(a.lease(BATCH, 10).queues) == 2
    assert len(b.lease(BATCH, 10).queues) == 3
    assert len(a.lease("other", 10).queues) == 1
    assert a.state("never") == b.state("never") == "unknown"
    assert all(k.startswith("nutchy:{a_webpage}:") for k in a.redis_keys())
    assert all(k.startswith("nutchy:{b_webpage}:") for k in b.redis_keys())
    assert all(f":{BATCH}:" in k for k in a.redis_keys(BATCH))
    assert sorted(a.redis_keys()) == sorted(a.redis_keys(BATCH) + a.redis_keys("other"))


def test_a_batch_is_not_done_while_it_is_being_published(redis_client, redis_server):
    publisher = frontier(redis_client, publish_chunk=2, publish_pipeline=1)
    worker = frontier(second_client(redis_server), worker="w2")
    items, _ = rows(hosts=2, per_host=2)
    states = []

    def items_read_from_the_table():
        yield from items[:2]
        yield items[2]  # the first chunk is in Redis now: a worker fetches all of it
        for lease in worker.lease(BATCH, 10).queues:
            worker.ack(BATCH, lease, [e.key for e in worker.entries(BATCH, lease)])
            worker.give_back(BATCH, lease, 0.0)
        states.append(worker.state(BATCH))
        yield items[3]

    assert publisher.publish(BATCH, items_read_from_the_table()) == 4
    assert states == ["open"]
    assert worker.state(BATCH) == "open"  # the second chunk is there
    assert [lease.queue for lease in worker.lease(BATCH, 10).queues] == ["http://h1.com"]


def test_ids_that_would_mix_keys_are_refused(redis_client):
    f = frontier(redis_client)
    with pytest.raises(ConfigError, match="batch id"):
        f.state("a:b")
    with pytest.raises(ConfigError, match="crawl"):
        frontier(redis_client, crawl="x{y}")
    with pytest.raises(ConfigError, match="NUL"):
        f.publish(BATCH, [("http://a.com", "com.a:http/\0", b"{}")])
    with pytest.raises(ValueError, match="max_queues"):
        f.lease(BATCH, 0)


# --- rounds --------------------------------------------------------------------------------------


def test_one_leader_per_round_and_only_it_sets_the_current_batch(redis_client, redis_server):
    f1 = frontier(redis_client)
    f2 = frontier(second_client(redis_server), worker="w2")
    assert f1.current_batch() is None
    lock = f1.try_lead(2.0)
    assert lock is not None
    assert f2.try_lead(2.0) is None
    assert f2.release_lead(type(lock)("w2/forged")) is False
    assert f2.set_current_batch(type(lock)("w2/forged"), "b2", 2) is False
    assert f1.renew_lead(lock, 2.0) is True
    assert f1.set_current_batch(lock, BATCH, 1) is True
    assert f2.current_batch() == type(f2.current_batch())(BATCH, 1)
    assert f1.release_lead(lock) is True
    assert f1.release_lead(lock) is False

    # A leader that dies: its lock expires and another worker leads.
    dead = f1.try_lead(0.5)
    assert dead is not None and f2.try_lead(0.5) is None
    time.sleep(0.6)
    lock2 = f2.try_lead(1.0)
    assert lock2 is not None
    assert f1.set_current_batch(dead, "late", 2) is False  # the dead leader's write is refused
    assert f1.renew_lead(dead, 1.0) is False
    assert f2.set_current_batch(lock2, None, 2) is True  # the crawl has ended
    current = f1.current_batch()
    assert current is not None and current.batch_id is None and current.round == 2


def test_attendance_ends_with_leave_or_expiry_and_flags_need_the_lock(redis_client, redis_server):
    f1 = frontier(redis_client)
    f2 = frontier(second_client(redis_server), worker="w2")
    assert f1.attending(BATCH) == 0
    f1.attend(BATCH, "w1/a", 5.0)
    f2.attend(BATCH, "w2/b", 0.3)
    f2.attend(BATCH, "w2/b", 0.3)  # again: still one
    assert f1.attending(BATCH) == 2
    # the key expires by itself, after the longest attendance
    assert 9_000 < redis_client.pttl(f"{f1.batch_prefix(BATCH)}:workers") <= 10_000
    f1.leave(BATCH, "w1/a")
    assert f2.attending(BATCH) == 1
    time.sleep(0.4)  # w2 stops renewing: it died
    assert f1.attending(BATCH) == 0

    assert not f1.batch_marked(BATCH, "updated")
    lock = f1.try_lead(2.0)
    assert lock is not None
    assert f2.mark_batch(type(lock)("w2/forged"), BATCH, "updated") is False
    assert not f2.batch_marked(BATCH, "updated")
    assert f1.mark_batch(lock, BATCH, "updated") is True
    assert f2.batch_marked(BATCH, "updated")
    assert 0 < redis_client.pttl(f"{f1.batch_prefix(BATCH)}:meta") <= 86_400_000


# --- Redis away ----------------------------------------------------------------------------------


def test_redis_down_at_start_is_one_error_naming_host_and_port():
    port = free_port()
    client = redis.Redis(
        host="127.0.0.1", port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )
    f = RedisFrontier(client, "webpage")
    with pytest.raises(FrontierUnavailable, match=f"Redis at 127.0.0.1:{port} cannot be reached"):
        f.check()


def test_redis_restarted_mid_batch(tmp_path):
    with RedisServer() as server:
        client = redis.Redis.from_url(
            server.url, socket_timeout=1, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
        )
        f = frontier(client)
        items, _ = rows(hosts=2, per_host=2)
        f.publish(BATCH, items)
        (lease, _other) = f.lease(BATCH, 2).queues
        first = f.entries(BATCH, lease, limit=1)[0]
        f.ack(BATCH, lease, [first.key])  # its outcome is in the table

        server.kill()
        for call in (
            lambda: f.lease(BATCH, 1),
            lambda: f.ack(BATCH, lease, ["x"]),
            lambda: f.renew(BATCH, [lease]),
            lambda: f.state(BATCH),
            lambda: f.publish(BATCH, items),
        ):
            with pytest.raises(FrontierUnavailable, match=f"127.0.0.1:{server.port}"):
                call()

        server.start()
        # The restarted Redis kept nothing: the batch is unknown and its lease gone...
        assert f.state(BATCH) == "unknown"
        with pytest.raises(LeaseLost):
            f.ack(BATCH, lease, [first.key])
        # ...so it is published again from the table, without the row whose outcome is there.
        assert f.publish(BATCH, [item for item in items if item[1] != first.key]) == 3
        got = [e.key for q in f.lease(BATCH, 2).queues for e in drain(f, q)]
        assert sorted(got) == sorted(item[1] for item in items if item[1] != first.key)
        client.close()


# --- settings ------------------------------------------------------------------------------------


def test_open_redis_frontier_uses_scrapy_redis_settings(redis_server, tmp_path):
    settings = Settings()
    settings.setmodule(nutchy.default_settings, priority="default")
    settings.set("REDIS_URL", redis_server.url)
    settings.set("REDIS_PARAMS", {"socket_timeout": 2, "decode_responses": True})
    settings.set("NUTCH_STORAGE_CRAWL_ID", "news")
    settings.set("NUTCH_STORAGE_DATA_STORE_CLASS", "nutchy.store.hbase.HBaseStore")
    settings.set("NUTCH_FRONTIER_LEASE_TIMEOUT", 12.5)
    f = open_redis_frontier(settings, worker_id="host-a:1")
    assert (f.crawl, f.lease_timeout, f.worker_id) == ("news_webpage", 12.5, "host-a:1")
    kwargs = f.client.connection_pool.connection_kwargs
    # REDIS_PARAMS wins; otherwise no socket wait outlasts a third of the lease timeout.
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (2, 4.166666666666667)
    assert f.address == f"127.0.0.1:{redis_server.port}"
    f.check()
    # decoded responses work as well as bytes
    f.client.delete(*f.redis_keys() or ["none"])
    f.publish(BATCH, rows(hosts=1, per_host=1)[0])
    (lease,) = f.lease(BATCH, 1).queues
    assert f.entries(BATCH, lease)[0].url == "http://h0.com/p0"
    f.client.delete(*f.redis_keys())

    embedded = settings.copy()
    embedded.set("NUTCH_STORAGE_DATA_STORE_CLASS", "nutchy.store.embedded.EmbeddedStore")
    embedded.set("NUTCH_CRAWL_DIR", str(tmp_path / "crawl"))
    assert crawl_namespace(embedded) == f"news_webpage@{tmp_path / 'crawl'}"
    settings.set("NUTCH_FRONTIER_LEASE_TIMEOUT", 0)
    with pytest.raises(ConfigError, match="NUTCH_FRONTIER_LEASE_TIMEOUT"):
        open_redis_frontier(settings)


# --- many workers, some of which die, in random order --------------------------------------------


class _Worker:
    """A simulated fetch worker: what it believes it holds, until when, and what it fetched but
    has not acknowledged yet."""

    def __init__(self, f: RedisFrontier) -> None:
        self.f = f
        self.held: dict[str, QueueLease] = {}
        self.deadline: dict[str, float] = {}  # local monotonic time its belief is valid until
        self.cursor: dict[str, str | None] = {}
        self.in_flight: dict[str, set[str]] = {}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_workers_that_die_lose_nothing_and_refetch_only_what_they_held(redis_client, seed):
    """Three workers lease, read, acknowledge, give back, renew and die in a random order, and
    the batch is published again now and then.
    Invariants: no two workers ever believe they hold one queue at once (a belief lasts until
    the lease's local deadline, counted from before the call that took or renewed it); a row
    acknowledged never comes back; in the end every row is acknowledged, and the rows fetched
    twice were all in flight at a worker that died or lost its lease."""
    import random

    rng = random.Random(seed)
    ttl = 0.3
    items, _ = rows(hosts=8, per_host=5)
    all_keys = {key for _, key, _ in items}
    publisher = frontier(redis_client, lease_timeout=ttl)
    publisher.publish(BATCH, items)
    names = iter(range(1000))

    def new_worker() -> _Worker:
        return _Worker(frontier(redis_client, worker=f"w{next(names)}", lease_timeout=ttl))

    workers = [new_worker() for _ in range(3)]
    acked: set[str] = set()
    fetched: dict[str, int] = {}
    orphaned: set[str] = set()  # in flight at a worker that died or lost the queue

    def forget(w: _Worker, queue: str) -> None:
        orphaned.update(w.in_flight.pop(queue, set()))
        for table in (w.held, w.deadline, w.cursor):
            table.pop(queue, None)

    def check_no_other_holder(w: _Worker, queue: str, now: float) -> None:
        for other in workers:
            if other is not w and queue in other.held:
                # The other's belief must have run out: it stops at its deadline.
                assert other.deadline[queue] <= now + 0.002, (queue, other.f.worker_id)
                forget(other, queue)

    deadline = time.monotonic() + 20
    while publisher.state(BATCH) != "done":
        assert time.monotonic() < deadline, publisher.stats(BATCH)
        w = rng.choice(workers)
        # A worker drops beliefs that outlived their deadline (it would stop fetching them).
        for queue in [q for q, d in w.deadline.items() if d <= time.monotonic()]:
            forget(w, queue)
        action = rng.choices(
            ["lease", "read", "ack", "give_back", "renew", "die", "sleep", "republish"],
            weights=[3, 4, 4, 2, 3, 0.3, 0.5, 0.3],
        )[0]
        if action == "lease":
            sent = time.monotonic()
            leases = w.f.lease(BATCH, rng.randint(1, 3))
            for lease in leases.queues:
                check_no_other_holder(w, lease.queue, time.monotonic())
                w.held[lease.queue] = lease
                w.deadline[lease.queue] = sent + ttl
                w.cursor[lease.queue] = None
                w.in_flight.setdefault(lease.queue, set())
        elif action == "read" and w.held:
            queue = rng.choice(sorted(w.held))
            got = w.f.entries(BATCH, w.held[queue], after=w.cursor[queue], limit=2)
            for entry in got:
                assert entry.key not in acked, "an acknowledged row came back"
                fetched[entry.key] = fetched.get(entry.key, 0) + 1
                w.in_flight[queue].add(entry.key)
            if got:
                w.cursor[queue] = got[-1].key
        elif action == "ack" and any(w.in_flight.values()):
            batch = [(w.held[q], sorted(keys)) for q, keys in w.in_flight.items() if keys]
            lost = w.f.ack_many(BATCH, batch)
            for lease, keys in batch:
                if lease in lost:
                    forget(w, lease.queue)
                else:
                    acked.update(keys)
                    w.in_flight[lease.queue] -= set(keys)
        elif action == "give_back" and w.held:
            queue = rng.choice(sorted(w.held))
            if not w.in_flight[queue]:  # acknowledge first
                with contextlib.suppress(LeaseLost):
                    w.f.give_back(BATCH, w.held[queue], rng.choice([0.0, 0.02]))
                forget(w, queue)
        elif action == "renew" and w.held:
            sent = time.monotonic()
            for queue in w.f.renew(BATCH, list(w.held.values())):
                forget(w, queue)
            for queue in w.held:
                w.deadline[queue] = sent + ttl
        elif action == "die":
            for queue in list(w.held):
                forget(w, queue)
            workers[workers.index(w)] = new_worker()
        elif action == "sleep":
            time.sleep(0.05)
        elif action == "republish":  # the table read again: nothing acknowledged may return
            publisher.publish(BATCH, items)

    assert acked == all_keys
    assert set(fetched) == all_keys
    assert {key for key, n in fetched.items() if n > 1} <= orphaned
