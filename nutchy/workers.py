"""The fetch's side of the shared frontier: workers that lease the queues of a batch in Redis.

With ``NUTCH_FRONTIER = "redis"``, :class:`~nutchy.scheduler.NutchScheduler` takes the rows of its
batch from :class:`WorkerFrontier` instead of reading the web table, and ends batches and rounds
with :class:`WorkerRounds`, so that several ``scrapy crawl nutch`` processes, on one machine or
many, fetch one batch together. :mod:`nutchy.redis_frontier` is the Redis side (Scrapy-free, every
call blocking); this module calls it in threads, never on the reactor. docs/distributed.md tells
the whole story.

A worker
    - finds its batch in Redis, or publishes it from the table when Redis does not know it
      (:func:`publish_batch`: the rows of the batch without a fetch mark, one queue per
      ``fetcher.queue.mode``; publishing is idempotent, so several workers may do it at once);
    - leases queues when its scheduler has room, reads their rows a page at a time, and fetches
      them as the local fetch does: one download slot per queue, at the queue's delay. A queue is
      only leased once its next allowed time (Redis's clock) has come, so the delay holds across
      workers;
    - acknowledges a row once the outcome writer has written it to the table, renews its leases
      every third of ``NUTCH_FRONTIER_LEASE_TIMEOUT``, and gives a queue back, with the time its
      next request may start, once every row it read of it is acknowledged and the queue has no
      row left or was held ``NUTCH_FRONTIER_QUEUE_HOLD`` seconds (so that one worker never keeps
      a queue from the others);
    - with nothing to lease, waits for the time Redis says something may be leased (at most
      half a second, since another worker may give a queue back sooner), without polling in
      between, and ends when the batch is done;
    - when Redis cannot be reached, goes on with the rows it holds, says so in one line, tries
      again every half second, and says when Redis answers again;
    - when Redis no longer knows the batch (restarted without its data), drops every lease it
      held, says so in one line, and publishes the batch again from the table once the other
      workers have found out too and written what they fetched (a third of the lease timeout,
      plus the delay).

The end of a batch, and rounds
    Every worker attends the batch it fetches until its own parse is written (the parse
    pipeline's ``batch_fetched``). updatedb then runs once for the batch, in the worker that takes
    the crawl's round lock, once no worker attends it (a dead worker's attendance expires with
    its lease timeout); the batch is then flagged ``updated``, and a leader that died before the
    flag is replaced by the next. With ``-a rounds=N`` (no ``-a batch``), the lock holder also
    generates the next batch, publishes it and makes it the crawl's current batch; the other
    workers wait for it. A worker started while no round is under way starts the rounds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from scrapy.utils.asyncio import call_later, create_looping_call, run_in_thread, sleep

from nutchy.exceptions import ConfigError, FrontierError, LeaseLost
from nutchy.frontier import BatchReader
from nutchy.jobs._batches import ALL_BATCHES
from nutchy.redis_frontier import entry_item, open_redis_frontier
from nutchy.rounds import RoundDriver

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from nutchy._fetch import FetchJob, FetchSettings
    from nutchy.core.fetch import FetchEntry
    from nutchy.frontier import FrontierOwner
    from nutchy.redis_frontier import CurrentBatch, QueueLease, RedisFrontier
    from nutchy.store.table import WebTable

__all__ = ["WorkerFrontier", "WorkerRounds", "publish_batch"]

logger = logging.getLogger(__name__)

#: The longest a worker waits before asking Redis again, when nothing could be leased or Redis
#: could not be reached: another worker may give a queue back, or finish the batch, sooner than
#: Redis's wait hint says.
WAIT_MAX: Final = 0.5
#: New queues leased at most in one read.
LEASE_MAX: Final = 64


def check_redis(settings: BaseSettings) -> None:
    """Reach the Redis server *settings* name, once, when a worker starts:
    :exc:`~nutchy.exceptions.FrontierUnavailable` names it when it cannot be reached.

    This is the one Redis call made on the reactor thread, and on purpose: it runs while the
    spider is built, before the crawl's engine exists and before anything is fetched, bounded by
    the connect timeout; failing there is what makes ``scrapy crawl`` exit with code 1 and one
    line, as a bad setting does (a failure once the engine runs ends the crawl with code 0).
    Every other call of a worker runs in a thread."""
    redis = open_redis_frontier(settings)
    try:
        redis.check()
    finally:
        redis.client.close()


def publish_batch(redis: RedisFrontier, reader: BatchReader, batch_id: str) -> int:
    """Publish the rows *reader* reads of *batch_id* (blocks; run it in a thread); return how
    many rows were new in Redis."""
    return redis.publish(batch_id, (entry_item(queue, entry) for queue, entry in reader.rows()))


@dataclass(eq=False, slots=True)
class _Held:
    """A queue this worker leased."""

    lease: QueueLease
    #: monotonic time of the lease
    since: float
    #: the last row key read of it
    after: str | None = None
    #: no more rows are read of it: none left, or its hold is over
    exhausted: bool = False
    #: the keys of its rows read and not acknowledged yet
    outstanding: set[str] = field(default_factory=set)
    #: a give back (or drop) is under way
    leaving: bool = False


@dataclass(slots=True)
class _Read:
    """What one read in a thread brought."""

    rows: dict[str, list[FetchEntry]] = field(default_factory=dict)
    leased: list[QueueLease] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    state: str = "open"
    wait: float | None = None
    limits: dict[str, int] = field(default_factory=dict)
    error: FrontierError | None = None
    #: the held queues more rows were asked of
    refill: list[str] = field(default_factory=list)


class WorkerFrontier:
    """A :class:`~nutchy.frontier.Frontier` on queues leased from a batch in Redis (see the
    module docstring).

    *redis* is the crawl's :class:`~nutchy.redis_frontier.RedisFrontier`; *table* the open web
    table (to publish a batch Redis does not know, and to look up followed redirects); *owner*
    the scheduler it fills. A queue is given back after *hold* seconds at most.
    """

    def __init__(
        self,
        redis: RedisFrontier,
        table: WebTable,
        settings: FetchSettings,
        owner: FrontierOwner,
        *,
        stats: StatsCollector,
        hold: float,
    ) -> None:
        self.redis = redis
        self.table = table
        self.settings = settings
        self.owner = owner
        self.stats = stats
        self.hold = hold
        self.capacity = settings.capacity
        self.per_queue = settings.queue_room
        #: this worker's attendance token
        self.token = f"{redis.worker_id}/{secrets.token_hex(4)}"
        self.batch_id: str | None = None
        self.reader: BatchReader | None = None
        self._held: dict[str, _Held] = {}
        self._keys: dict[str, str] = {}  # row key → queue, for the rows read and not acked
        self._needy: set[str] = set()
        self._ready_at: dict[str, float] = {}
        self._acks: list[str] = []
        self._acking = False
        self._done = False
        self._stopped = False
        self._attending = False
        self._waiting: Any = None
        self._loop: Any = None
        self._down_since: float | None = None

    # --- the batch ------------------------------------------------------------------------------

    async def start(self, job: FetchJob) -> bool:
        batch_id = job.batch_id
        if batch_id in (None, ALL_BATCHES):
            raise ConfigError(
                "the Redis frontier fetches one batch at a time: -a batch=ID, or -a rounds=N"
            )
        if job.partition is not None:
            raise ConfigError(
                "-a partition=k/K splits a batch between processes by hand; with NUTCH_FRONTIER"
                ' = "redis" the workers share the batch by themselves: leave it out'
            )
        await self._end_batch()
        self.batch_id = batch_id
        self.reader = BatchReader(self.table, job, self.settings, resume=True)
        self._held, self._keys, self._needy, self._ready_at = {}, {}, set(), {}
        self._acks, self._done, self._stopped = [], False, False
        state, published = await run_in_thread(self._begin, batch_id)
        if published is not None:
            logger.info(
                "Published batch %(batch)s to Redis at %(redis)s from the table: %(n)d URLs",
                {"batch": batch_id, "redis": self.redis.address, "n": published},
            )
        if state != "open":
            self._done = True
            logger.info(
                "Batch %(batch)s is %(what)s in Redis at %(redis)s: nothing to fetch",
                {
                    "batch": batch_id,
                    "what": "done" if published is None else "empty (no row left to fetch)",
                    "redis": self.redis.address,
                },
            )
            return False
        self._attending = True
        self._loop = create_looping_call(self._renew)
        self._loop.start(self.redis.lease_timeout / 3, now=False)
        return True

    def _begin(self, batch_id: str) -> tuple[str, int | None]:
        """The batch's state, published first when Redis does not know it (in a thread)."""
        state = self.redis.state(batch_id)
        published = None
        if state == "unknown":
            assert self.reader is not None
            published = publish_batch(self.redis, self.reader, batch_id)
            state = self.redis.state(batch_id)
        if state == "open":
            self.redis.attend(batch_id, self.token, self.redis.lease_timeout)
        return state, published

    def more(self) -> bool:
        return not self._stopped and not self._done

    def wants(self, queued: int) -> bool:
        if self._stopped or self._done or self._waiting is not None or self.reader is None:
            return False
        return bool(self._needy) or queued * 2 < self.capacity

    # --- reading --------------------------------------------------------------------------------

    async def read(self, budget: int, room: Mapping[str, int]) -> list[tuple[str, FetchEntry]]:
        room = dict(room)  # as it is now, with the queues that ran low since it was asked for
        if not self.wants(sum(self.per_queue - r for r in room.values())) or budget <= 0:
            return []
        now = time.monotonic()
        refill: list[tuple[QueueLease, str | None, int]] = []
        left = budget
        for queue in list(self._needy):
            self._needy.discard(queue)
            if left <= 0:
                self._needy.add(queue)
                continue
            held = self._held.get(queue)
            if held is None or held.exhausted or held.leaving:
                continue
            if now - held.since >= self.hold:
                held.exhausted = True  # its turn is over: given back once its rows are done
                self._maybe_give_back(queue)
                continue
            queue_room = room.get(queue, self.per_queue)
            if queue_room * 2 <= self.per_queue:
                continue  # not low any more
            limit = min(queue_room, left)
            if limit > 0:
                refill.append((held.lease, held.after, limit))
                left -= limit
            else:
                self._needy.add(queue)  # no room this time: the next read
        queued = sum(self.per_queue - r for r in room.values())
        new = 0
        if left > 0 and queued * 2 < self.capacity:
            new = max(1, min(LEASE_MAX, left // max(1, self.per_queue)))
        if not refill and not new:
            return []
        assert self.batch_id is not None
        result = await run_in_thread(self._read, self.batch_id, refill, new, left)
        return self._took(result)

    def _read(
        self,
        batch_id: str,
        refill: list[tuple[QueueLease, str | None, int]],
        new: int,
        budget: int,
    ) -> _Read:
        """Read more rows of held queues, and lease new ones (in a thread)."""
        result = _Read(refill=[lease.queue for lease, _, _ in refill])
        redis = self.redis
        try:
            for lease, after, limit in refill:
                try:
                    result.rows[lease.queue] = redis.entries(
                        batch_id, lease, after=after, limit=limit
                    )
                    result.limits[lease.queue] = limit
                except LeaseLost:
                    result.lost.append(lease.queue)
            if new:
                # Each new queue's first rows come with its lease, in the same round trip.
                limit = max(1, min(self.per_queue, budget // new))
                leases = redis.lease(batch_id, new, rows=limit)
                result.state, result.wait = leases.state, leases.wait
                for lease in leases.queues:
                    result.leased.append(lease)
                    result.rows[lease.queue] = leases.rows.get(lease.queue, [])
                    result.limits[lease.queue] = limit
        except FrontierError as exc:
            result.error = exc
        return result

    def _took(self, result: _Read) -> list[tuple[str, FetchEntry]]:
        """Keep what a read brought, on the reactor thread; return the rows for the queues."""
        now = time.monotonic()
        for lease in result.leased:
            self._held[lease.queue] = _Held(lease, now)
        self.stats.inc_value("nutch/fetch/leases", len(result.leased))
        items: list[tuple[str, FetchEntry]] = []
        for queue, entries in result.rows.items():
            held = self._held.get(queue)
            if held is None:
                continue
            for entry in entries:
                if entry.key in self._keys:
                    continue
                self._keys[entry.key] = queue
                held.outstanding.add(entry.key)
                items.append((queue, entry))
            if entries:
                held.after = entries[-1].key
            if len(entries) < result.limits.get(queue, 0):
                held.exhausted = True
            if self._stopped:
                held.exhausted = True
            self._maybe_give_back(queue)
        for queue in result.lost:
            self._lost(queue)
        self.stats.inc_value("nutch/fetch/rows_read", len(items))
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "Read %(n)d rows (%(rows)s); leased %(leased)s; state %(state)s, wait %(wait)s;"
                " held %(held)s",
                {
                    "n": len(items),
                    "rows": {q: len(e) for q, e in result.rows.items()},
                    "leased": [lease.queue for lease in result.leased],
                    "state": result.state,
                    "wait": result.wait,
                    "held": {
                        q: (len(h.outstanding), h.exhausted, h.leaving)
                        for q, h in self._held.items()
                    },
                },
            )
        if result.error is not None:
            # The queues whose rows did not come are asked again with the next read: nothing
            # else would ask (they ran low once, before Redis went away).
            self._needy.update(q for q in result.refill if q in self._held and q not in result.rows)
            self._unreachable(result.error)
            self._wait(WAIT_MAX)
            return items
        self._reachable()
        if result.state == "done":
            self._done = True
        elif result.state == "unknown":
            # Redis lost the batch (restarted without persistence): publish it again.
            self._republish()
        elif not result.leased and result.wait is not None and not items:
            self._wait(min(result.wait, WAIT_MAX))
        return items

    def _wait(self, seconds: float) -> None:
        """Read again in *seconds* (no read until then)."""
        if self._waiting is None:
            self._waiting = call_later(max(seconds, 0.01), self._woken)

    def _woken(self) -> None:
        self._waiting = None
        self.owner.wake()

    def _republish(self) -> None:
        batch_id = self.batch_id
        if self._waiting is True or batch_id is None:
            return  # a publish is under way
        if self._waiting is not None:
            self._waiting.cancel()
        self._waiting = True  # no read until it is published
        self._forget_leases()
        logger.warning(
            "Redis at %(redis)s no longer knows batch %(batch)s (restarted without its data?):"
            " this worker's leases are gone; in %(hold).1f s it publishes the batch again from the"
            " table (its rows without a fetch mark)",
            {"redis": self.redis.address, "batch": batch_id, "hold": self._republish_hold},
        )

        async def publish() -> None:
            await sleep(self._republish_hold)
            try:
                _, published = await run_in_thread(self._begin_again, batch_id)
                logger.info(
                    "Published batch %(batch)s to Redis again: %(n)d URLs",
                    {"batch": batch_id, "n": published},
                )
            except FrontierError as exc:
                self._unreachable(exc)
            self._waiting = None
            self._wait(0.0)

        _spawn(publish())

    @property
    def _republish_hold(self) -> float:
        """How long a worker waits before it publishes again a batch Redis lost: the queues'
        holders before the loss may fetch from them until their next renewal (every third of
        the lease timeout) finds their leases gone; then the delay passes, and what they
        fetched meanwhile is written, so that it is not published again."""
        return self.redis.lease_timeout / 3 + self.redis.default_delay

    def _forget_leases(self) -> None:
        """Redis lost the batch: every lease of this worker is gone, its rows held in memory
        are another worker's now (once published again)."""
        if not self._held:
            return
        self.stats.inc_value("nutch/fetch/lease_lost", len(self._held))
        for queue, held in list(self._held.items()):
            for key in held.outstanding:
                self._keys.pop(key, None)
            del self._held[queue]
            self.owner.forget(queue)
        self._needy.clear()

    def _begin_again(self, batch_id: str) -> tuple[str, int]:
        assert self.reader is not None
        published = publish_batch(self.redis, self.reader, batch_id)
        self.redis.attend(batch_id, self.token, self.redis.lease_timeout)
        return "open", published

    # --- news from the scheduler ----------------------------------------------------------------

    def low(self, queue: str) -> None:
        held = self._held.get(queue)
        if held is not None and not held.exhausted:
            self._needy.add(queue)

    def idle(self, queue: str, ready_in: float) -> None:
        self._ready_at[queue] = time.monotonic() + ready_in
        self._maybe_give_back(queue)

    def drop(self, queue: str) -> None:
        held = self._held.get(queue)
        if held is None or self.batch_id is None:
            return
        held.leaving = True
        for key in held.outstanding:
            self._keys.pop(key, None)
        held.outstanding.clear()
        batch_id = self.batch_id

        async def drop() -> None:
            try:
                await run_in_thread(self.redis.drop, batch_id, held.lease)
            except LeaseLost:
                pass
            except FrontierError as exc:
                self._unreachable(exc)  # its lease expires; the next holder fetches the rest
            self._forget_held(queue, held)

        _spawn(drop())

    def stop(self) -> None:
        self._stopped = True
        for held in self._held.values():
            held.exhausted = True
        self._needy.clear()

    def written(self, entries: Sequence[FetchEntry]) -> None:
        self._acks += [e.key for e in entries if e.key in self._keys]
        self._ack()

    def skipped(self, entries: Sequence[FetchEntry]) -> None:
        # Left for a later fetch, as the local fetch leaves them: acknowledged, so that no
        # worker asks for them again in this batch.
        self.written(entries)

    async def lookup(self, url: str, batch_id: str) -> tuple[str | None, FetchEntry, bool]:
        assert self.reader is not None
        return await run_in_thread(self.reader.lookup, url, batch_id)

    # --- acknowledging and giving back ------------------------------------------------------------

    def _ack(self) -> None:
        if self._acking or not self._acks or self.batch_id is None:
            return
        keys, self._acks = self._acks, []
        by_queue: dict[str, list[str]] = {}
        for key in keys:
            queue = self._keys.get(key)
            if queue is not None and queue in self._held:
                by_queue.setdefault(queue, []).append(key)
        if not by_queue:
            return
        acks = [(self._held[q].lease, k) for q, k in by_queue.items()]
        self._acking = True
        batch_id = self.batch_id

        def send() -> tuple[list[QueueLease], str]:
            lost = self.redis.ack_many(batch_id, acks)
            return lost, self.redis.state(batch_id) if lost else "open"

        async def ack() -> None:
            try:
                lost, state = await run_in_thread(send)
            except FrontierError as exc:
                self._unreachable(exc)
                self._acks = keys + self._acks  # again with the next renewal
                self._acking = False
                return
            self._acking = False
            self._reachable()
            if state == "unknown":
                # Redis lost the batch: these rows are written, and not in the table's
                # republished batch unless it was read before they were.
                for queue_keys in by_queue.values():
                    for key in queue_keys:
                        self._keys.pop(key, None)
                self._republish()
                return
            lost_queues = {lease.queue for lease in lost}
            for queue, queue_keys in by_queue.items():
                held = self._held.get(queue)
                for key in queue_keys:
                    self._keys.pop(key, None)
                    if held is not None:
                        held.outstanding.discard(key)
                if queue in lost_queues:
                    self._lost(queue)
                else:
                    self._maybe_give_back(queue)
            self.stats.inc_value("nutch/fetch/acked", sum(map(len, by_queue.values())))
            self._ack()

        _spawn(ack())

    def _maybe_give_back(self, queue: str) -> None:
        """Give *queue* back once no row is read of it any more and every row read of it is
        acknowledged: its next request may start when its delay from the last one ends."""
        held = self._held.get(queue)
        if held is None or held.leaving or self.batch_id is None:
            return
        if not held.exhausted and time.monotonic() - held.since >= self.hold:
            held.exhausted = True
        if not held.exhausted or held.outstanding:
            return
        held.leaving = True
        delay = max(0.0, self._ready_at.get(queue, 0.0) - time.monotonic())
        batch_id = self.batch_id
        logger.debug(
            "Giving %(queue)s back, next in %(delay).3f s", {"queue": queue, "delay": delay}
        )

        async def give_back() -> None:
            try:
                await run_in_thread(self.redis.give_back, batch_id, held.lease, delay)
            except LeaseLost:
                pass
            except FrontierError as exc:
                self._unreachable(exc)
                held.leaving = False  # again with the next renewal
                return
            self._forget_held(queue, held)
            self.stats.inc_value("nutch/fetch/given_back")
            self.owner.wake()  # lease more, or learn that the batch is done

        _spawn(give_back())

    def _forget_held(self, queue: str, held: _Held) -> None:
        if self._held.get(queue) is held:
            del self._held[queue]
        self._needy.discard(queue)

    def _lost(self, queue: str) -> None:
        """Another worker has *queue* now: fetch nothing more of it."""
        held = self._held.pop(queue, None)
        if held is None:
            return
        for key in held.outstanding:
            self._keys.pop(key, None)
        self._needy.discard(queue)
        self.stats.inc_value("nutch/fetch/lease_lost")
        logger.warning(
            "Lost the lease of %(queue)s (not renewed in time): another worker fetches the rest",
            {"queue": queue},
        )
        self.owner.forget(queue)

    # --- renewing -------------------------------------------------------------------------------

    def _renew(self) -> None:
        batch_id = self.batch_id
        if batch_id is None:
            return
        leases = [h.lease for h in self._held.values() if not h.leaving]
        attend = self._attending

        def renew() -> tuple[list[str], str]:
            lost = self.redis.renew(batch_id, leases)
            if attend:
                self.redis.attend(batch_id, self.token, self.redis.lease_timeout)
            return lost, self.redis.state(batch_id) if lost else "open"

        async def run() -> None:
            try:
                lost, state = await run_in_thread(renew)
            except FrontierError as exc:
                self._unreachable(exc)
                return
            self._reachable()
            if state == "unknown":
                self._republish()  # Redis lost the batch, and every lease with it
                return
            for queue in lost:
                self._lost(queue)
            self._ack()
            for queue, held in list(self._held.items()):
                if not held.outstanding and not held.exhausted:
                    self._needy.add(queue)  # a queue with nothing in flight reads on
                self._maybe_give_back(queue)

        _spawn(run())

    def _unreachable(self, exc: FrontierError) -> None:
        self.stats.inc_value("nutch/frontier/unreachable")
        if self._down_since is None:
            self._down_since = time.monotonic()
            logger.warning(
                "%(error)s; the fetch goes on with the rows it holds and asks Redis again every"
                " %(wait)s s",
                {"error": exc, "wait": WAIT_MAX},
            )

    def _reachable(self) -> None:
        if self._down_since is not None:
            logger.info(
                "Redis at %(redis)s answers again after %(secs).1f s",
                {"redis": self.redis.address, "secs": time.monotonic() - self._down_since},
            )
            self._down_since = None

    # --- the end --------------------------------------------------------------------------------

    async def leave(self) -> None:
        """This worker's part of the batch is written (its parse too): it no longer attends."""
        if self._attending and self.batch_id is not None:
            self._attending = False
            try:
                await run_in_thread(self.redis.leave, self.batch_id, self.token)
            except FrontierError as exc:
                self._unreachable(exc)  # the attendance expires by itself

    async def _end_batch(self) -> None:
        """Give back every queue still held, and stop renewing (the batch ended for this
        worker, or the crawl closes)."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        if self._waiting not in (None, True):
            self._waiting.cancel()
        self._waiting = None
        batch_id = self.batch_id
        if batch_id is None:
            return
        held = [(q, h) for q, h in self._held.items() if not h.leaving]
        self._held = {}
        if not held:
            return
        now = time.monotonic()
        back = [(h.lease, max(0.0, self._ready_at.get(q, 0.0) - now)) for q, h in held]

        try:
            await run_in_thread(
                self.redis.give_back_many, batch_id, [(lease, delay, None) for lease, delay in back]
            )
        except FrontierError as exc:
            self._unreachable(exc)  # the leases expire; their rows go to the other workers

    async def close(self) -> None:
        self._stopped = True
        while self._acking:
            await sleep(0.01)
        self._ack()  # what the last writes covered
        while self._acking:
            await sleep(0.01)
        await self._end_batch()
        await self.leave()


def _spawn(coro: Any) -> None:
    """Run *coro* on the reactor, its errors logged."""
    from scrapy.utils.defer import deferred_from_coro

    d = deferred_from_coro(coro)
    d.addErrback(lambda failure: logger.error("Redis frontier: %s", failure.getErrorMessage()))


class WorkerRounds(RoundDriver):
    """Ends a shared batch, and runs the rounds of a shared crawl (see the module docstring).

    *frontier* is this worker's :class:`WorkerFrontier`; the other arguments are those of
    :class:`~nutchy.rounds.RoundDriver`.
    """

    def __init__(self, table: WebTable, frontier: WorkerFrontier, **kwargs: Any) -> None:
        super().__init__(table, **kwargs)
        self.frontier = frontier
        self.redis = frontier.redis

    @property
    def _lock_timeout(self) -> float:
        return self.redis.lease_timeout

    async def first_batch(self, job: FetchJob) -> FetchJob | None:
        if not job.generates:
            return job
        return await self._advance(job, None)

    async def next_batch(self, job: FetchJob) -> FetchJob | None:
        return await self._advance(job, job.batch_id)

    async def finish(self, job: FetchJob, *, complete: bool, why: str = "") -> str:
        # Every worker writes its parse, then leaves the batch; updatedb runs once, for all.
        await self.fetched(job, complete=complete)
        await self.frontier.leave()
        if not complete:
            logger.info(
                "Stopped fetching batch %(batch)s (%(why)s): its rows not fetched go back to"
                " the other workers",
                {"batch": job.batch_id, "why": why},
            )
            return "finished"
        if not self.updates:
            return "finished"
        return await self._update_once(job)

    async def _update_once(self, job: FetchJob) -> str:
        """Run updatedb on *job*'s batch in one worker: the holder of the round lock, once no
        worker attends the batch; the others wait until it is flagged ``updated``."""
        batch_id = job.batch_id
        assert batch_id is not None
        redis = self.redis
        while True:
            if await run_in_thread(redis.batch_marked, batch_id, "updated"):
                return "finished"
            async with self._lead() as lock:
                if lock is None:
                    await sleep(WAIT_MAX)
                    continue
                if await run_in_thread(redis.batch_marked, batch_id, "updated"):
                    return "finished"
                while await run_in_thread(redis.attending, batch_id):
                    await sleep(WAIT_MAX)  # a worker still writes its parse
                reason = await self.parsed(job, complete=True)
                if reason == "finished":
                    await run_in_thread(redis.mark_batch, lock, batch_id, "updated")
                return reason

    @contextlib.asynccontextmanager
    async def _lead(self) -> AsyncIterator[Any]:
        """The crawl's round lock, renewed every third of its timeout while held and released
        at the end; ``None`` when another worker holds it."""
        lock = await run_in_thread(self.redis.try_lead, self._lock_timeout)
        if lock is None:
            yield None
            return
        renewal = create_looping_call(self._renew_lead, lock)
        renewal.start(self._lock_timeout / 3, now=False)
        try:
            yield lock
        finally:
            renewal.stop()
            await run_in_thread(self.redis.release_lead, lock)

    def _renew_lead(self, lock: Any) -> None:
        _spawn(run_in_thread(self.redis.renew_lead, lock, self._lock_timeout))

    async def _advance(self, job: FetchJob, ended: str | None) -> FetchJob | None:
        """The job of the crawl's next batch once *ended* is over (``None``: the first one):
        the lock holder generates and publishes it, the others wait for it."""
        redis = self.redis
        while True:
            current = await run_in_thread(redis.current_batch)
            settled, found = self._found(job, current, ended)
            if settled:
                return found
            async with self._lead() as lock:
                if lock is None:
                    await sleep(WAIT_MAX)
                    continue
                current = await run_in_thread(redis.current_batch)
                settled, found = self._found(job, current, ended)
                if settled:
                    return found
                done = current.round if current is not None and ended is not None else 0
                self.round = done
                batch = None
                if self.more_rounds(job, done):
                    generated = await self.generate(job)
                    if generated is not None:
                        batch_id, selected = generated
                        published = await run_in_thread(
                            publish_batch,
                            redis,
                            BatchReader(
                                self.table,
                                dataclasses.replace(job, batch_id=batch_id),
                                self.frontier.settings,
                                resume=True,
                            ),
                            batch_id,
                        )
                        self.round = done + 1
                        self.log_round(job, batch_id, selected)
                        logger.info(
                            "Published batch %(batch)s to Redis: %(n)d URLs",
                            {"batch": batch_id, "n": published},
                        )
                        batch = batch_id
                if not await run_in_thread(
                    redis.set_current_batch, lock, batch, self.round if batch else done
                ):
                    continue  # the lock was lost: another worker leads now
                return None if batch is None else dataclasses.replace(job, batch_id=batch)

    def _found(
        self, job: FetchJob, current: CurrentBatch | None, ended: str | None
    ) -> tuple[bool, FetchJob | None]:
        """Whether *current* settles this worker's next batch, and that batch's job (``None``:
        the crawl has ended); not settled: a leader must act."""
        if ended is None:
            # Starting: join the round under way, if any.
            if current is not None and current.batch_id is not None:
                self.round = current.round
                return True, dataclasses.replace(job, batch_id=current.batch_id)
            return False, None
        if current is None or current.batch_id == ended:
            return False, None
        if current.batch_id is None:
            return True, None  # the crawl has ended
        self.round = current.round
        return True, dataclasses.replace(job, batch_id=current.batch_id)
