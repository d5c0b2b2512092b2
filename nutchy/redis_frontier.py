"""The shared frontier: a generated batch as per-queue work in Redis, leased by fetch workers.

Several ``scrapy crawl nutch`` processes, on one machine or many, fetch one batch together through
:class:`RedisFrontier`. The web table stays the record of every row; Redis only says which rows of
the batch are still to be fetched, which worker may fetch each queue (host, domain or IP, as
``fetcher.queue.mode`` says) and when the queue may be fetched next. This module knows nothing of
Scrapy: it takes a :class:`redis.Redis` client and plain values, and every method blocks (callers
on the Twisted reactor run them in a thread). docs/distributed.md tells the whole story.

The API, in the order a worker uses it
    - :meth:`RedisFrontier.publish` puts a batch's rows in Redis: items ``(queue id, row key,
      payload)``, the payload made by :func:`encode_entry`. Publishing again (the same batch,
      read from the table again after Redis lost its data) adds only what is missing and never
      brings back a row already acknowledged.
    - :meth:`RedisFrontier.lease` takes up to *max_queues* queues whose next allowed time has
      come and that no live lease holds; each comes with a token and the politeness state its
      last holder left. When nothing can be leased, the answer says how long until something
      may be (:attr:`Leases.wait`), or that the batch is done or unknown (:attr:`Leases.state`).
      ``lease(..., rows=N)`` brings each queue's first rows in the same round trip.
    - :meth:`RedisFrontier.entries` reads a held queue's rows not yet acknowledged, in key order,
      a page at a time (pass the last key read as *after*).
    - :meth:`RedisFrontier.ack` acknowledges rows once their outcome is written to the table
      (:meth:`RedisFrontier.ack_many`: the rows of several queues in one round trip).
    - :meth:`RedisFrontier.renew` extends the worker's leases (call it every third of the lease
      timeout) and names the ones it no longer holds.
    - :meth:`RedisFrontier.give_back` releases a queue with its next allowed time (Redis's clock
      plus a delay) and its politeness state; a queue with nothing left disappears
      (:meth:`RedisFrontier.give_back_many`: several in one round trip).
      :meth:`RedisFrontier.drop` gives up the rest of a queue for this batch.
    - :meth:`RedisFrontier.state` says whether a batch is ``unknown``, ``open`` or ``done``; the
      first call (of any worker) that finds it finished removes its keys.
    - Rounds: :meth:`RedisFrontier.try_lead`, :meth:`RedisFrontier.renew_lead`,
      :meth:`RedisFrontier.release_lead`, :meth:`RedisFrontier.current_batch` and
      :meth:`RedisFrontier.set_current_batch` let the first worker that sees a batch done run
      updatedb and the next generate while the others wait for the new batch id.

Only the holder of a queue's lease (its token) may read, acknowledge, give back or drop it; the
others get :exc:`~nutchy.exceptions.LeaseLost`. A lease is kept until it is given back, or until
it expired *and* another worker's :meth:`~RedisFrontier.lease` or any
:meth:`~RedisFrontier.state` reclaimed it: the queue then returns, with every row not acknowledged,
ready after its last delay. Every step that reads and then writes is one Lua script, and every
time is Redis's own (``TIME``), never a worker's clock. A Redis that cannot be reached raises
:exc:`~nutchy.exceptions.FrontierUnavailable` (retry later); other Redis failures raise
:exc:`~nutchy.exceptions.FrontierError`.

Keys
    Every key of a crawl starts with ``nutchy:{<crawl>}:``, *crawl* being the table name (see
    :func:`crawl_namespace`); the braces make them one Redis Cluster hash tag. A batch's keys add
    its id: ``nutchy:{<crawl>}:<batch>:meta`` (a hash: ``state``, counts), ``…:ready`` (queues
    scored by next allowed time, ms), ``…:leases`` (held queues scored by lease expiry, ms),
    ``…:holder`` (queue → token), ``…:pstate`` and ``…:delay`` (queue → politeness state and last
    delay), ``…:acked`` (row keys acknowledged), ``…:pub`` (live publishers), and one sorted set
    per queue, ``…:q:<queue id>``, of ``<row key>\\0<payload>`` members (score 0, so they sort by
    row key). The crawl's own keys are ``nutchy:{<crawl>}:lead`` (the round lock) and
    ``nutchy:{<crawl>}:current`` (the current batch and round). When a batch is done, all its
    keys go but ``meta``, which says ``done`` for *done_ttl* seconds and then expires.

>>> entry = FetchEntry("com.example:http/a", "http://example.com/a", "b1", fetch_time=5)
>>> encode_entry(entry)
b'{"t":5}'
>>> decode_entry("com.example:http/a", b'{"t":5}', "b1") == entry
True
"""

from __future__ import annotations

import functools
import json
import logging
import os
import secrets
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, ParamSpec, TypeVar, cast

try:
    import redis
except ImportError as exc:  # pragma: no cover - the redis extra is part of the test extra
    raise ImportError(
        "nutchy's Redis frontier needs the redis extra: pip install 'nutchy[redis]'"
    ) from exc

from nutchy.core.fetch import FetchEntry
from nutchy.core.urls import InvalidURL, unreverse_url
from nutchy.exceptions import ConfigError, FrontierError, FrontierUnavailable, LeaseLost

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = [
    "BatchState",
    "CurrentBatch",
    "LeadLock",
    "Leases",
    "QueueLease",
    "RedisFrontier",
    "crawl_namespace",
    "decode_entry",
    "encode_entry",
    "entry_item",
    "open_redis_frontier",
]

logger = logging.getLogger(__name__)

#: What :meth:`RedisFrontier.state` says of a batch: never published (or its keys were lost),
#: published with rows or leases left, or finished.
BatchState = Literal["unknown", "open", "done"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

# --- the payload of a row ---------------------------------------------------------------------


def encode_entry(entry: FetchEntry) -> bytes:
    """The payload of *entry* in the frontier: compact JSON of the fields that are not their
    default. The row key is stored beside it and the batch id is the batch's, so neither is
    repeated; the URL is stored only when it is not the one the row key gives.

    >>> encode_entry(FetchEntry("com.a:http/", "http://a.com/", "b", 1, 2, '"e"', "http://a.com/r",
    ...                         3, True))
    b'{"t":1,"m":2,"e":"\\\\"e\\\\"","r":"http://a.com/r","p":3,"f":1}'
    >>> encode_entry(FetchEntry("com.a:http/x", "http://a.com/X", "b"))
    b'{"u":"http://a.com/X"}'
    """
    fields: dict[str, object] = {}
    try:
        if unreverse_url(entry.key) != entry.url:
            fields["u"] = entry.url
    except InvalidURL:
        fields["u"] = entry.url
    if entry.fetch_time:
        fields["t"] = entry.fetch_time
    if entry.modified_time:
        fields["m"] = entry.modified_time
    if entry.etag is not None:
        fields["e"] = entry.etag
    if entry.repr_url is not None:
        fields["r"] = entry.repr_url
    if entry.partition is not None:
        fields["p"] = entry.partition
    if entry.fetched:
        fields["f"] = 1
    return json.dumps(fields, separators=(",", ":")).encode("ascii")


def decode_entry(key: str, payload: bytes | str, batch_id: str) -> FetchEntry:
    """The :class:`~nutchy.core.fetch.FetchEntry` of row *key* of batch *batch_id* from its
    *payload* (:func:`encode_entry`).

    A payload that does not decode (written by something else) gives the entry the row key alone
    gives, with a warning: the row is still fetched, only not conditionally.

    >>> decode_entry("com.a:http/", b"garbage", "b")
    FetchEntry(key='com.a:http/', url='http://a.com/', batch_id='b', fetch_time=0, modified_time=0, etag=None, repr_url=None, partition=None, fetched=False, signature=None)
    """
    try:
        fields = json.loads(payload)
        if not isinstance(fields, dict):
            raise TypeError(f"not an object: {type(fields).__name__}")
        url = fields.get("u")
        return FetchEntry(
            key=key,
            url=str(url) if url is not None else unreverse_url(key),
            batch_id=batch_id,
            fetch_time=int(fields.get("t", 0)),
            modified_time=int(fields.get("m", 0)),
            etag=_opt_str(fields.get("e")),
            repr_url=_opt_str(fields.get("r")),
            partition=None if fields.get("p") is None else int(fields["p"]),
            fetched=bool(fields.get("f", 0)),
        )
    except (ValueError, TypeError, InvalidURL) as exc:
        logger.warning(
            "Frontier entry of row %r does not decode (%s): fetched without it", key, exc
        )
    try:
        url = unreverse_url(key)
    except InvalidURL:
        url = key  # the fetch records it as an invalid URL
    return FetchEntry(key=key, url=url, batch_id=batch_id)


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def entry_item(queue: str, entry: FetchEntry) -> tuple[str, str, bytes]:
    """The :meth:`RedisFrontier.publish` item of *entry* in *queue*.

    >>> entry_item("http://a.com", FetchEntry("com.a:http/", "http://a.com/", "b"))
    ('http://a.com', 'com.a:http/', b'{}')
    """
    return queue, entry.key, encode_entry(entry)


# --- results ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueLease:
    """A queue leased to a worker: its id, the *token* that proves the lease (pass it to every
    call on the queue), and the politeness *state* its last holder gave back (``None``: none)."""

    queue: str
    token: str
    state: str | None = None


@dataclass(frozen=True, slots=True)
class Leases:
    """The answer of :meth:`RedisFrontier.lease`.

    *queues* are the queues leased now, and *rows* their first rows by queue id when they were
    asked for (``lease(..., rows=N)``). *state* is the batch's (``unknown``: nothing to lease,
    ever, until it is published; ``done``: finished). *wait* is set when the batch is open and
    nothing was leased: the seconds until a queue's next allowed time comes or a lease expires,
    whichever is first. A holder may give a queue back sooner, so sleep at most that long, and
    at most as long as you can afford to miss a give back.
    """

    queues: list[QueueLease]
    state: BatchState
    wait: float | None = None
    rows: dict[str, list[FetchEntry]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CurrentBatch:
    """The batch a crawl's workers fetch now, and its round (1, 2...). *batch_id* ``None``: the
    crawl has ended (no more rounds, or generate selected nothing)."""

    batch_id: str | None
    round: int


@dataclass(frozen=True, slots=True)
class LeadLock:
    """The crawl's round lock, held by whoever has the *token*."""

    token: str


# --- Lua ----------------------------------------------------------------------------------------

# Every script gets the batch's key prefix as ARGV[1]. Times are ms of Redis's clock. Every
# script that finds expired leases reclaims them (the queue comes back, with its rows not
# acknowledged, ready at its lease's expiry plus its last delay).
_PRELUDE = r"""
local P = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function reclaim(now, default_delay)
  local expired = redis.call('ZRANGEBYSCORE', P .. ':leases', '-inf', now, 'WITHSCORES')
  for i = 1, #expired, 2 do
    local q, expiry = expired[i], tonumber(expired[i + 1])
    redis.call('ZREM', P .. ':leases', q)
    redis.call('HDEL', P .. ':holder', q)
    if redis.call('EXISTS', P .. ':q:' .. q) == 1 then
      local delay = tonumber(redis.call('HGET', P .. ':delay', q) or default_delay)
      redis.call('ZADD', P .. ':ready', expiry + delay, q)
      redis.call('HINCRBY', P .. ':meta', 'reclaimed', 1)
    else
      redis.call('HDEL', P .. ':pstate', q)
      redis.call('HDEL', P .. ':delay', q)
    end
  end
end
-- 'unknown', 'open' or 'done'; a batch found finished loses its keys but a 'done' meta.
local function finish(now, done_ttl)
  local state = redis.call('HGET', P .. ':meta', 'state')
  if not state then return 'unknown' end
  if state == 'done' then return 'done' end
  redis.call('ZREMRANGEBYSCORE', P .. ':pub', '-inf', now)
  if redis.call('ZCARD', P .. ':ready') > 0 or redis.call('ZCARD', P .. ':leases') > 0
      or redis.call('ZCARD', P .. ':pub') > 0 then
    return 'open'
  end
  redis.call('UNLINK', P .. ':ready', P .. ':leases', P .. ':holder', P .. ':pstate',
             P .. ':delay', P .. ':acked', P .. ':pub')
  redis.call('HSET', P .. ':meta', 'state', 'done', 'finished', now)
  redis.call('PEXPIRE', P .. ':meta', done_ttl)
  return 'done'
end
local function holds(q, token)
  return redis.call('HGET', P .. ':holder', q) == token
end
"""

# ARGV: prefix, publisher token, publisher ttl, a JSON array of [queue, key, payload] triples
# (decoded by Redis's cjson, in C: much faster than as separate arguments).
# Returns the rows added, or -1 if the batch is done.
_PUBLISH = (
    _PRELUDE
    + r"""
local now = now_ms()
local state = redis.call('HGET', P .. ':meta', 'state')
if state == 'done' then return -1 end
if not state then
  redis.call('HSET', P .. ':meta', 'state', 'open', 'created', now)
end
redis.call('ZADD', P .. ':pub', now + tonumber(ARGV[3]), ARGV[2])
local added = 0
local queues = {}
for _, item in ipairs(cjson.decode(ARGV[4])) do
  local q, k = item[1], item[2]
  if redis.call('SISMEMBER', P .. ':acked', k) == 0 then
    local qk = P .. ':q:' .. q
    if #redis.call('ZRANGEBYLEX', qk, '[' .. k .. '\0', '(' .. k .. '\1', 'LIMIT', 0, 1) == 0 then
      redis.call('ZADD', qk, 0, k .. '\0' .. item[3])
      added = added + 1
      queues[q] = true
    end
  end
end
for q in pairs(queues) do
  if not redis.call('ZSCORE', P .. ':leases', q) then
    redis.call('ZADD', P .. ':ready', 'NX', now, q)
  end
end
if added > 0 then
  redis.call('HINCRBY', P .. ':meta', 'published', added)
  redis.call('HINCRBY', P .. ':meta', 'pending', added)
end
return added
"""
)

# ARGV: prefix, publisher token.
_PUBLISHED = r"""
redis.call('ZREM', ARGV[1] .. ':pub', ARGV[2])
return 1
"""

# ARGV: prefix, token, ttl, max queues, default delay, done ttl, rows per queue.
# Returns {state, wait (ms, -1: none), {queue, state, {members}, queue, state, {members}...}}.
_LEASE = (
    _PRELUDE
    + r"""
local now = now_ms()
local token, ttl = ARGV[2], tonumber(ARGV[3])
local state = redis.call('HGET', P .. ':meta', 'state')
if state ~= 'open' then return {state or 'unknown', -1, {}} end
reclaim(now, tonumber(ARGV[5]))
local out = {}
local ready = redis.call('ZRANGEBYSCORE', P .. ':ready', '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, q in ipairs(ready) do
  redis.call('ZREM', P .. ':ready', q)
  redis.call('ZADD', P .. ':leases', now + ttl, q)
  redis.call('HSET', P .. ':holder', q, token)
  out[#out + 1] = q
  out[#out + 1] = redis.call('HGET', P .. ':pstate', q) or ''
  local rows = tonumber(ARGV[7])
  if rows > 0 then
    out[#out + 1] = redis.call('ZRANGEBYLEX', P .. ':q:' .. q, '-', '+', 'LIMIT', 0, rows)
  else
    out[#out + 1] = {}
  end
end
if #out > 0 then return {'open', 0, out} end
if finish(now, tonumber(ARGV[6])) == 'done' then return {'done', -1, {}} end
local wait = -1
for _, key in ipairs({':ready', ':leases', ':pub'}) do
  local first = redis.call('ZRANGE', P .. key, 0, 0, 'WITHSCORES')
  if #first > 0 then
    local w = math.max(0, tonumber(first[2]) - now)
    if wait < 0 or w < wait then wait = w end
  end
end
return {'open', wait, {}}
"""
)

# ARGV: prefix, queue, token, first member ('-' or '(...'), limit.
_ENTRIES = (
    _PRELUDE
    + r"""
if not holds(ARGV[2], ARGV[3]) then return false end
return redis.call('ZRANGEBYLEX', P .. ':q:' .. ARGV[2], ARGV[4], '+', 'LIMIT', 0, tonumber(ARGV[5]))
"""
)

# ARGV: prefix, queue, token, keys... Returns the rows acknowledged now, or -1: not the holder.
_ACK = (
    _PRELUDE
    + r"""
if not holds(ARGV[2], ARGV[3]) then return -1 end
local qk = P .. ':q:' .. ARGV[2]
local n = 0
for i = 4, #ARGV do
  local k = ARGV[i]
  n = n + redis.call('ZREMRANGEBYLEX', qk, '[' .. k .. '\0', '(' .. k .. '\1')
  redis.call('SADD', P .. ':acked', k)
end
if n > 0 then
  redis.call('HINCRBY', P .. ':meta', 'pending', -n)
  redis.call('HINCRBY', P .. ':meta', 'acked', n)
end
return n
"""
)

# ARGV: prefix, queue, token, delay, has state ('0'/'1'), state.
# Returns 1 (the queue has rows left), 0 (it is gone) or -1 (not the holder).
_GIVE_BACK = (
    _PRELUDE
    + r"""
local q = ARGV[2]
if not holds(q, ARGV[3]) then return -1 end
local now = now_ms()
redis.call('ZREM', P .. ':leases', q)
redis.call('HDEL', P .. ':holder', q)
if redis.call('EXISTS', P .. ':q:' .. q) == 1 then
  redis.call('ZADD', P .. ':ready', now + tonumber(ARGV[4]), q)
  redis.call('HSET', P .. ':delay', q, ARGV[4])
  if ARGV[5] == '1' then redis.call('HSET', P .. ':pstate', q, ARGV[6]) end
  return 1
end
redis.call('HDEL', P .. ':pstate', q)
redis.call('HDEL', P .. ':delay', q)
return 0
"""
)

# ARGV: prefix, queue, token. Returns the rows dropped, or -1: not the holder.
_DROP = (
    _PRELUDE
    + r"""
local q = ARGV[2]
if not holds(q, ARGV[3]) then return -1 end
local qk = P .. ':q:' .. q
local members = redis.call('ZRANGE', qk, 0, -1)
for _, m in ipairs(members) do
  redis.call('SADD', P .. ':acked', string.sub(m, 1, string.find(m, '\0', 1, true) - 1))
end
redis.call('UNLINK', qk)
redis.call('ZREM', P .. ':leases', q)
redis.call('HDEL', P .. ':holder', q)
redis.call('HDEL', P .. ':pstate', q)
redis.call('HDEL', P .. ':delay', q)
if #members > 0 then
  redis.call('HINCRBY', P .. ':meta', 'pending', -#members)
  redis.call('HINCRBY', P .. ':meta', 'dropped', #members)
end
return #members
"""
)

# ARGV: prefix, ttl, then (queue, token) pairs. Returns the queues no longer held.
_RENEW = (
    _PRELUDE
    + r"""
local now = now_ms()
local lost = {}
for i = 3, #ARGV, 2 do
  local q = ARGV[i]
  if holds(q, ARGV[i + 1]) then
    redis.call('ZADD', P .. ':leases', 'XX', now + tonumber(ARGV[2]), q)
  else
    lost[#lost + 1] = q
  end
end
return lost
"""
)

# ARGV: prefix, default delay, done ttl. Returns the state.
_STATE = (
    _PRELUDE
    + r"""
local now = now_ms()
if redis.call('HGET', P .. ':meta', 'state') == 'open' then reclaim(now, tonumber(ARGV[2])) end
return finish(now, tonumber(ARGV[3]))
"""
)

# KEYS: lock. ARGV: token, ttl. Compare-and-expire / compare-and-delete.
_RENEW_LOCK = r"""
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE_LOCK = r"""
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# KEYS: lock, current. ARGV: token, batch id ('' for none), round.
_SET_CURRENT = r"""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], 'batch', ARGV[2], 'round', ARGV[3])
return 1
"""
# KEYS: lock, the batch's meta. ARGV: token, flag, ttl of a meta made here (ms).
_MARK = r"""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local fresh = redis.call('EXISTS', KEYS[2]) == 0
redis.call('HSET', KEYS[2], ARGV[2], '1')
if fresh then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return 1
"""
# The workers that attend a batch (they fetch it, or still write what they fetched of it):
# ARGV: prefix, token, ttl (ms). The key outlives the batch's other keys and expires by itself.
_ATTEND = (
    _PRELUDE
    + r"""
local ttl = tonumber(ARGV[3])
redis.call('ZADD', P .. ':workers', now_ms() + ttl, ARGV[2])
if redis.call('PTTL', P .. ':workers') < ttl * 2 then
  redis.call('PEXPIRE', P .. ':workers', ttl * 2)
end
return 1
"""
)
# ARGV: prefix. Returns how many workers attend the batch (their attendance not expired).
_ATTENDING = (
    _PRELUDE
    + r"""
redis.call('ZREMRANGEBYSCORE', P .. ':workers', '-inf', now_ms())
return redis.call('ZCARD', P .. ':workers')
"""
)


# --- the frontier -------------------------------------------------------------------------------


def _redis_errors(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """Turn Redis's errors into nutchy's: unreachable → FrontierUnavailable, others →
    FrontierError, both naming the server."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return method(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            frontier = cast("RedisFrontier", args[0])
            raise FrontierUnavailable(
                f"Redis at {frontier.address} cannot be reached: {exc}"
            ) from exc
        except redis.RedisError as exc:
            frontier = cast("RedisFrontier", args[0])
            raise FrontierError(f"Redis at {frontier.address} failed: {exc}") from exc

    return wrapper


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _check_id(kind: str, value: str, forbidden: str) -> str:
    if not value or any(c in value for c in forbidden) or any(ord(c) < 32 for c in value):
        raise ConfigError(
            f"a {kind} in Redis keys must be non-empty, without control characters or any of "
            f"{forbidden!r}; got {value!r}"
        )
    return value


class RedisFrontier:
    """A crawl's batches as leased per-queue work in Redis (see the module docstring).

    *client* is a :class:`redis.Redis` (bytes or decoded responses both work). *crawl* names the
    crawl (:func:`crawl_namespace`); batches of different crawls never meet. *worker_id* names
    this worker in lease tokens (default: host name and process id). *lease_timeout* (s) is how
    long a lease lives without :meth:`renew`; *default_delay* (s) is the delay after the expiry
    of a lease whose queue was never given back; *done_ttl* (s) is how long a finished batch is
    still said to be ``done``; *publish_chunk* rows go in one script call, and
    *publish_pipeline* calls in one round trip.

    The frontier keeps no state of its own between calls, so threads may share one (redis-py's
    client is thread-safe). A worker must stop fetching a queue when its lease's local deadline
    passes: the time it sent the :meth:`lease` or last successful :meth:`renew` call, plus the
    lease timeout. That deadline is never later than the expiry Redis recorded, so no other
    worker can hold the queue before it.
    """

    def __init__(
        self,
        client: redis.Redis,
        crawl: str,
        *,
        worker_id: str | None = None,
        lease_timeout: float = 30.0,
        default_delay: float = 5.0,
        done_ttl: float = 86400.0,
        publish_chunk: int = 500,
        publish_pipeline: int = 8,
    ) -> None:
        if lease_timeout <= 0:
            raise ConfigError(f"the lease timeout must be > 0 s, got {lease_timeout!r}")
        self.client = client
        self.crawl = _check_id("crawl", crawl, "{}")
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.lease_timeout = lease_timeout
        self.default_delay = default_delay
        self.done_ttl = done_ttl
        self.publish_chunk = max(1, publish_chunk)
        self.publish_pipeline = max(1, publish_pipeline)
        self._scripts = {
            name: client.register_script(source)
            for name, source in (
                ("publish", _PUBLISH),
                ("published", _PUBLISHED),
                ("lease", _LEASE),
                ("entries", _ENTRIES),
                ("ack", _ACK),
                ("give_back", _GIVE_BACK),
                ("drop", _DROP),
                ("renew", _RENEW),
                ("state", _STATE),
                ("renew_lock", _RENEW_LOCK),
                ("release_lock", _RELEASE_LOCK),
                ("set_current", _SET_CURRENT),
                ("mark", _MARK),
                ("attend", _ATTEND),
                ("attending", _ATTENDING),
            )
        }

    @property
    def address(self) -> str:
        """``host:port`` (or the socket path) of the Redis server, for messages."""
        kwargs = self.client.connection_pool.connection_kwargs
        if "path" in kwargs:
            return str(kwargs["path"])
        return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"

    # --- keys -------------------------------------------------------------------------------

    def crawl_key(self, name: str) -> str:
        """The key *name* of the crawl: ``nutchy:{<crawl>}:<name>``."""
        return f"nutchy:{{{self.crawl}}}:{name}"

    def batch_prefix(self, batch_id: str) -> str:
        """The prefix of the keys of *batch_id*: ``nutchy:{<crawl>}:<batch>``."""
        return self.crawl_key(_check_id("batch id", batch_id, "{}:"))

    def _ms(self, seconds: float) -> int:
        return max(0, round(seconds * 1000))

    def _token(self) -> str:
        return f"{self.worker_id}/{secrets.token_hex(8)}"

    # --- checks -----------------------------------------------------------------------------

    @_redis_errors
    def check(self) -> None:
        """Reach the server once: :exc:`~nutchy.exceptions.FrontierUnavailable` names it when it
        cannot be reached. Call it (in a thread) when a worker starts."""
        self.client.ping()

    # --- publishing -------------------------------------------------------------------------

    @_redis_errors
    def publish(self, batch_id: str, items: Iterable[tuple[str, str, bytes | str]]) -> int:
        """Add *items* ``(queue id, row key, payload)`` to *batch_id*; return how many were new.

        Rows already in their queue, or acknowledged in this batch, are skipped: publishing the
        same batch again, whole or in part, adds only what is missing. A batch that is ``done``
        takes nothing (0); an empty publish makes the batch known, and done. *items* may be a generator (read from the table as it goes): they go
        in chunks of *publish_chunk*, pipelined. While a publish runs (and for a minute after a
        publisher that died), the batch cannot be found finished.

        A row key must not contain a NUL character (:exc:`~nutchy.exceptions.ConfigError`).
        """
        prefix = self.batch_prefix(batch_id)
        token = self._token()
        script = self._scripts["publish"]
        publisher_ttl = str(max(60_000, self._ms(self.lease_timeout) * 2))
        added = 0
        done = False
        pipe = self.client.pipeline(transaction=False)
        calls = 0
        chunks = 0
        try:
            for chunk in _chunks(items, self.publish_chunk):
                chunks += 1
                script(args=[prefix, token, publisher_ttl, _triples(chunk)], client=pipe)
                calls += 1
                if calls >= self.publish_pipeline:
                    added, done = _count(pipe.execute(), added, done)
                    calls = 0
            if not chunks:  # nothing to publish: the batch is still known, and soon done
                script(args=[prefix, token, publisher_ttl, "[]"], client=pipe)
                calls += 1
            if calls:
                added, done = _count(pipe.execute(), added, done)
        finally:
            self._scripts["published"](args=[prefix, token])
        if done:
            logger.info("Batch %s is done: nothing published", batch_id)
        return added

    # --- leasing ----------------------------------------------------------------------------

    @_redis_errors
    def lease(self, batch_id: str, max_queues: int, *, rows: int = 0) -> Leases:
        """Lease up to *max_queues* queues of *batch_id* whose next allowed time has come and
        that no live lease holds (leases expired are reclaimed first). See :class:`Leases`.

        With *rows*, the first *rows* rows of each queue leased come in the same round trip
        (:attr:`Leases.rows`), as :meth:`entries` would read them: a crawl of many hosts with
        few pages each then costs one round trip less per host."""
        if max_queues < 1:
            raise ValueError(f"max_queues must be >= 1, got {max_queues!r}")
        token = self._token()
        reply = self._scripts["lease"](
            args=[
                self.batch_prefix(batch_id),
                token,
                self._ms(self.lease_timeout),
                max_queues,
                self._ms(self.default_delay),
                self._ms(self.done_ttl),
                max(0, rows),
            ]
        )
        state = cast("BatchState", _text(reply[0]))
        wait = int(reply[1])
        triples = reply[2]
        queues = []
        first_rows = {}
        for i in range(0, len(triples), 3):
            queue = _text(triples[i])
            queues.append(QueueLease(queue, token, _text(triples[i + 1]) or None))
            if rows > 0:
                first_rows[queue] = _decode_members(triples[i + 2], batch_id)
        return Leases(queues, state, wait / 1000 if wait >= 0 and not queues else None, first_rows)

    @_redis_errors
    def entries(
        self, batch_id: str, lease: QueueLease, *, after: str | None = None, limit: int = 100
    ) -> list[FetchEntry]:
        """Up to *limit* rows of a held queue not yet acknowledged, in row key order, starting
        after row key *after* (``None``: from the first). Rows published behind the last key
        read are found by starting again from the first; skip the keys you already hold.
        :exc:`~nutchy.exceptions.LeaseLost` if *lease* is no longer held."""
        first = "-" if after is None else f"({after}\x01"
        reply = self._scripts["entries"](
            args=[self.batch_prefix(batch_id), lease.queue, lease.token, first, max(1, limit)]
        )
        if reply is None:
            raise LeaseLost(f"{self._lost(batch_id, lease)}: cannot read its rows")
        return _decode_members(reply, batch_id)

    @_redis_errors
    def ack(self, batch_id: str, lease: QueueLease, keys: Sequence[str]) -> int:
        """Acknowledge rows *keys* of a held queue, once their outcome is in the table: they
        never come back in this batch. Returns how many were still in the queue.
        :exc:`~nutchy.exceptions.LeaseLost` if *lease* is no longer held (the rows will be
        fetched again by the queue's next holder)."""
        if not keys:
            return 0
        n = int(
            self._scripts["ack"](
                args=[self.batch_prefix(batch_id), lease.queue, lease.token, *keys]
            )
        )
        if n < 0:
            raise LeaseLost(f"{self._lost(batch_id, lease)}: {len(keys)} rows not acknowledged")
        return n

    @_redis_errors
    def ack_many(
        self, batch_id: str, acks: Iterable[tuple[QueueLease, Sequence[str]]]
    ) -> list[QueueLease]:
        """:meth:`ack` for several queues in one round trip (one flush of outcomes to the table
        acknowledges the rows of every queue it wrote). Returns the leases no longer held, whose
        rows were not acknowledged; the others' rows are."""
        prefix = self.batch_prefix(batch_id)
        script = self._scripts["ack"]
        pipe = self.client.pipeline(transaction=False)
        sent = []
        for lease, keys in acks:
            if keys:
                script(args=[prefix, lease.queue, lease.token, *keys], client=pipe)
                sent.append(lease)
        if not sent:
            return []
        return [lease for lease, n in zip(sent, pipe.execute(), strict=True) if int(n) < 0]

    @_redis_errors
    def renew(self, batch_id: str, leases: Iterable[QueueLease]) -> list[str]:
        """Extend *leases* by the lease timeout, from now on Redis's clock; return the queues
        this worker no longer holds (stop fetching them: another worker has them)."""
        args: list[str | int] = [self.batch_prefix(batch_id), self._ms(self.lease_timeout)]
        for lease in leases:
            args += (lease.queue, lease.token)
        if len(args) == 2:
            return []
        return [_text(q) for q in self._scripts["renew"](args=args)]

    @_redis_errors
    def give_back(
        self, batch_id: str, lease: QueueLease, delay: float, state: str | None = None
    ) -> bool:
        """Release a held queue: it may be leased again *delay* seconds from now (Redis's clock),
        with politeness *state* (e.g. a Crawl-delay; ``None`` keeps the last one) for its next
        holder. Returns whether the queue has rows left; one with none disappears. Acknowledge
        the rows fetched first: a row given back unacknowledged is the next holder's to fetch.
        :exc:`~nutchy.exceptions.LeaseLost` if *lease* is no longer held."""
        n = int(
            self._scripts["give_back"](
                args=self._give_back_args(self.batch_prefix(batch_id), lease, delay, state)
            )
        )
        if n < 0:
            raise LeaseLost(f"{self._lost(batch_id, lease)}: cannot give it back")
        return n > 0

    @_redis_errors
    def give_back_many(
        self, batch_id: str, give: Iterable[tuple[QueueLease, float, str | None]]
    ) -> list[bool | None]:
        """:meth:`give_back` for several queues ``(lease, delay, state)`` in one round trip.
        Returns for each, in order, whether its queue has rows left, or ``None`` if the lease
        was no longer held."""
        prefix = self.batch_prefix(batch_id)
        script = self._scripts["give_back"]
        pipe = self.client.pipeline(transaction=False)
        sent = 0
        for lease, delay, state in give:
            script(args=self._give_back_args(prefix, lease, delay, state), client=pipe)
            sent += 1
        if not sent:
            return []
        return [None if int(n) < 0 else int(n) > 0 for n in pipe.execute()]

    def _give_back_args(
        self, prefix: str, lease: QueueLease, delay: float, state: str | None
    ) -> list[str | int]:
        return [
            prefix,
            lease.queue,
            lease.token,
            self._ms(delay),
            "0" if state is None else "1",
            state or "",
        ]

    @_redis_errors
    def drop(self, batch_id: str, lease: QueueLease) -> int:
        """Give up the rest of a held queue for this batch (a host deferred too often, a
        Retry-After too long): its rows not acknowledged leave the frontier unfetched, as if
        acknowledged, and keep their generate mark in the table. Returns how many."""
        n = int(self._scripts["drop"](args=[self.batch_prefix(batch_id), lease.queue, lease.token]))
        if n < 0:
            raise LeaseLost(f"{self._lost(batch_id, lease)}: cannot drop it")
        return n

    def _lost(self, batch_id: str, lease: QueueLease) -> str:
        return f"queue {lease.queue!r} of batch {batch_id} is no longer held by {lease.token}"

    # --- batches ----------------------------------------------------------------------------

    @_redis_errors
    def state(self, batch_id: str) -> BatchState:
        """``unknown`` (never published here, or Redis lost it: publish it again from the
        table), ``open``, or ``done``. The test is atomic: a batch is done when it has no rows
        left, no lease and no live publisher, and the call that finds it so removes its keys."""
        reply = self._scripts["state"](
            args=[
                self.batch_prefix(batch_id),
                self._ms(self.default_delay),
                self._ms(self.done_ttl),
            ]
        )
        return cast("BatchState", _text(reply))

    @_redis_errors
    def stats(self, batch_id: str) -> dict[str, int | str]:
        """What Redis holds of *batch_id*: its ``state``, the rows ``published``, ``pending``,
        ``acked`` and ``dropped``, the leases ``reclaimed``, and the queues ``ready`` and
        ``leased`` now (no counts once it is done, or if unknown)."""
        prefix = self.batch_prefix(batch_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.hgetall(f"{prefix}:meta")
        pipe.zcard(f"{prefix}:ready")
        pipe.zcard(f"{prefix}:leases")
        meta, ready, leased = pipe.execute()
        result: dict[str, int | str] = {"state": "unknown"}
        for name, value in meta.items():
            text = _text(value)
            result[_text(name)] = int(text) if text.lstrip("-").isdigit() else text
        result.update(ready=int(ready), leased=int(leased))
        return result

    # --- rounds -----------------------------------------------------------------------------

    @_redis_errors
    def try_lead(self, timeout: float) -> LeadLock | None:
        """Take the crawl's round lock for *timeout* seconds, if nobody holds it; ``None``
        otherwise. The holder runs updatedb and the next generate, publishes the new batch, then
        :meth:`set_current_batch`; it renews the lock while it works (:meth:`renew_lead`)."""
        token = self._token()
        if self.client.set(self.crawl_key("lead"), token, nx=True, px=self._ms(timeout)):
            return LeadLock(token)
        return None

    @_redis_errors
    def renew_lead(self, lock: LeadLock, timeout: float) -> bool:
        """Extend *lock* to *timeout* seconds from now; ``False`` if it was lost."""
        return bool(
            self._scripts["renew_lock"](
                keys=[self.crawl_key("lead")], args=[lock.token, self._ms(timeout)]
            )
        )

    @_redis_errors
    def release_lead(self, lock: LeadLock) -> bool:
        """Release *lock* if it is still held; ``False`` if it had expired (and maybe been
        taken by another worker)."""
        return bool(self._scripts["release_lock"](keys=[self.crawl_key("lead")], args=[lock.token]))

    @_redis_errors
    def current_batch(self) -> CurrentBatch | None:
        """The crawl's current batch and round, or ``None`` if no leader has set one."""
        fields = {
            _text(k): _text(v) for k, v in self.client.hgetall(self.crawl_key("current")).items()
        }
        if "round" not in fields:
            return None
        return CurrentBatch(fields.get("batch") or None, int(fields["round"]))

    @_redis_errors
    def set_current_batch(self, lock: LeadLock, batch_id: str | None, round: int) -> bool:
        """Make *batch_id* (``None``: the crawl has ended) the crawl's current batch, as round
        *round*, if *lock* is still held (atomically); ``False`` otherwise, and nothing changes."""
        if batch_id is not None:
            self.batch_prefix(batch_id)  # checks the id
        return bool(
            self._scripts["set_current"](
                keys=[self.crawl_key("lead"), self.crawl_key("current")],
                args=[lock.token, batch_id or "", round],
            )
        )

    @_redis_errors
    def mark_batch(self, lock: LeadLock, batch_id: str, flag: str) -> bool:
        """Record *flag* (say ``updated``) on *batch_id*, if *lock* is still held; ``False``
        otherwise, and nothing changes. The flag lives as long as the batch's ``done`` record."""
        return bool(
            self._scripts["mark"](
                keys=[self.crawl_key("lead"), f"{self.batch_prefix(batch_id)}:meta"],
                args=[lock.token, flag, self._ms(self.done_ttl)],
            )
        )

    @_redis_errors
    def batch_marked(self, batch_id: str, flag: str) -> bool:
        """Whether *flag* was recorded on *batch_id* (:meth:`mark_batch`)."""
        return bool(self.client.hexists(f"{self.batch_prefix(batch_id)}:meta", flag))

    @_redis_errors
    def attend(self, batch_id: str, token: str, ttl: float) -> None:
        """Say that the worker *token* attends *batch_id* for the next *ttl* seconds: it fetches
        the batch, or still writes what it fetched (its parse). Call it again to stay; a worker
        that dies stops attending when its last *ttl* ends."""
        self._scripts["attend"](args=[self.batch_prefix(batch_id), token, self._ms(ttl)])

    @_redis_errors
    def leave(self, batch_id: str, token: str) -> None:
        """The worker *token* no longer attends *batch_id*: what it fetched is written."""
        self.client.zrem(f"{self.batch_prefix(batch_id)}:workers", token)

    @_redis_errors
    def attending(self, batch_id: str) -> int:
        """How many workers attend *batch_id* (:meth:`attend`): the round's updatedb waits for
        none, so that every worker's parse is in the table."""
        return int(self._scripts["attending"](args=[self.batch_prefix(batch_id)]))

    # --- inspection -------------------------------------------------------------------------

    @_redis_errors
    def redis_keys(self, batch_id: str | None = None) -> list[str]:
        """The keys Redis holds for the crawl (for *batch_id* only, if given), for tests and
        troubleshooting; scans, never ``KEYS``."""
        pattern = (
            self.batch_prefix(batch_id) + ":*" if batch_id is not None else self.crawl_key("*")
        )
        return sorted(_text(k) for k in self.client.scan_iter(match=_glob_escape(pattern)))


def _glob_escape(pattern: str) -> str:
    """Escape the glob characters of a key prefix, keeping a trailing ``*``."""
    body, star = (pattern[:-1], "*") if pattern.endswith("*") else (pattern, "")
    for char in "\\[]?*":
        body = body.replace(char, "\\" + char)
    return body + star


def _chunks(
    items: Iterable[tuple[str, str, bytes | str]], size: int
) -> Iterator[list[tuple[str, str, bytes | str]]]:
    chunk: list[tuple[str, str, bytes | str]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _decode_members(members: Iterable[bytes | str], batch_id: str) -> list[FetchEntry]:
    """The entries of queue members ``<row key>\\0<payload>``."""
    result = []
    for member in members:
        key, _, payload = _text(member).partition("\0")
        result.append(decode_entry(key, payload, batch_id))
    return result


def _triples(chunk: list[tuple[str, str, bytes | str]]) -> str:
    """The JSON array of a chunk of publish items."""
    triples = []
    for queue, key, payload in chunk:
        if "\0" in key:
            raise ConfigError(f"a row key cannot contain NUL: {key!r}")
        try:
            text = payload.decode("utf-8") if isinstance(payload, bytes) else payload
        except UnicodeDecodeError:
            raise ConfigError(f"the payload of row {key!r} is not UTF-8 text") from None
        triples.append((queue, key, text))
    return json.dumps(triples, ensure_ascii=False, separators=(",", ":"))


def _count(replies: list[object], added: int, done: bool) -> tuple[int, bool]:
    for reply in replies:
        n = int(cast("int", reply))
        if n < 0:
            done = True
        else:
            added += n
    return added, done


# --- from settings ------------------------------------------------------------------------------


def crawl_namespace(settings: BaseSettings) -> str:
    """The crawl part of the Redis keys: the table name (``webpage`` or ``<crawlId>_webpage``),
    and for the embedded store also the absolute crawl directory, so two crawls in two
    directories of one machine do not share keys through a shared Redis."""
    from nutchy.store import EMBEDDED, table_name

    name = table_name(settings)
    if settings.get("NUTCH_STORAGE_DATA_STORE_CLASS") == EMBEDDED:
        crawl_dir = Path(settings.get("NUTCH_CRAWL_DIR") or ".").resolve()
        return f"{name}@{crawl_dir}"
    return name


def open_redis_frontier(settings: BaseSettings, *, worker_id: str | None = None) -> RedisFrontier:
    """The Redis frontier of the crawl *settings* describe: the client is scrapy-redis's
    (``REDIS_URL``, ``REDIS_PARAMS``..., through ``scrapy_redis.connection
    .get_redis_from_settings``), the crawl is :func:`crawl_namespace`, the lease timeout is
    ``NUTCH_FRONTIER_LEASE_TIMEOUT`` and the default delay ``NUTCH_FETCHER_SERVER_DELAY``.
    The socket timeouts are a third of the lease timeout, at most 5 s, unless ``REDIS_PARAMS``
    sets them (scrapy-redis's default, 30 s, would outlast a lease). Nothing is sent to Redis
    here; :meth:`RedisFrontier.check` tries the connection."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    from scrapy_redis.connection import get_redis_from_settings

    from nutchy.jobs import _settings

    timeout = _settings.get_float(settings, "NUTCH_FRONTIER_LEASE_TIMEOUT")
    if timeout <= 0:
        raise ConfigError(f"NUTCH_FRONTIER_LEASE_TIMEOUT must be > 0, got {timeout!r}")
    # scrapy-redis waits up to 30 s for a socket: a worker stuck that long on one call could not
    # renew its leases in time. Unless REDIS_PARAMS says otherwise, wait at most a third of the
    # lease timeout (and 5 s).
    params = settings.getdict("REDIS_PARAMS")
    for name in ("socket_timeout", "socket_connect_timeout"):
        params.setdefault(name, min(5.0, timeout / 3))
    # Nor does it retry a call that failed (redis-py retries 3 times by default, with backoff):
    # a worker that cannot reach Redis says so at once, goes on with what it holds, and asks
    # again itself.
    params.setdefault("retry", Retry(NoBackoff(), 0))
    settings = settings.copy()
    settings.frozen = False  # a crawler's settings are frozen, and so is their deep copy
    settings.set("REDIS_PARAMS", params, priority=settings.getpriority("REDIS_PARAMS") or 0)
    return RedisFrontier(
        get_redis_from_settings(settings),
        crawl_namespace(settings),
        worker_id=worker_id,
        lease_timeout=timeout,
        default_delay=_settings.get_float(settings, "NUTCH_FETCHER_SERVER_DELAY"),
    )
