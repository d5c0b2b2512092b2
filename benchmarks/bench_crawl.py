"""A whole crawl against a plain Scrapy CrawlSpider, and a re-crawl of the unchanged site.

    python benchmarks/bench_crawl.py                      # 5,000 pages x 40 links, 3 rounds
    python benchmarks/bench_crawl.py --rounds 1 --pages 1000
    python benchmarks/bench_crawl.py --quick              # a small smoke run (60 pages)
    python benchmarks/bench_crawl.py --rounds 0 --profile DIR   # only the profiled crawls (py-spy)
    python benchmarks/bench_crawl.py --variant "nutchy crawl CONCURRENT_ITEMS=100"  # one variant

The site is generated from ``--seed``: ``--pages`` pages spread over ``--hosts`` loopback hosts
(127.0.0.2, 127.0.0.3...; page *i* on host *i* mod hosts), each with ``--links`` distinct links
(relative on the same host, absolute to the others) and about 2 KB of text. Page *j* > 0 is
linked from page (*j* - 1) // links, so every page is reachable from page 0; the other links
are random. The seeds are the first page of each host. A small asyncio HTTP/1.1 server serves
it in a process of its own (keep-alive, ``Last-Modified`` and ``ETag`` on every page, 304 to a
matching ``If-None-Match`` or ``If-Modified-Since``) and counts its answers and the bytes it
sends (status lines, headers and bodies). With ``--sitemaps`` (the default for ``--shape docs``)
each host serves a robots.txt naming its ``/sitemap.xml``, which lists the host's pages with
``lastmod`` = each page's ``Last-Modified`` (a changed page's moves with it); with
``--no-sitemaps`` robots.txt is 404, as before.

Each round of the benchmark (``--rounds``), every crawl in a process tree of its own:

- ``plain``: a Scrapy ``CrawlSpider`` (``allowed_domains`` = the hosts, one
  ``Rule(LinkExtractor(), follow=True)``), started on the seeds, with Scrapy's memory queues and
  dupefilter and no persistence;
- ``floor``: a plain Scrapy ``Spider`` asking for every page of the site once, with
  ``If-Modified-Since``, and dropping the 304s, with only the Scrapy components the ``nutch``
  spider keeps: what Scrapy alone spends on the requests of a re-crawl, the least a re-crawl in
  Scrapy can cost;
- each nutchy variant of :data:`VARIANTS` (``nutchy crawl``, ``scrapy crawl nutch -a
  rounds=N`` in this repository's Scrapy project, and ``nutchy crawl -numFetchers 2``, which
  fetches each round in two processes) on a new table: the first crawl, rounds until
  nothing is due, then a re-crawl of the unchanged site with every page made due again
  (generate's ``-adddays``), which the server answers with 304s. The script checks that the
  server sent every page once, that the table holds them all as fetched, that the first crawl
  read no sitemap, and that the re-crawl got 304s for the pages left unchanged and 200s for
  the ``--changed`` percent changed before it. With sitemaps, the ``nutchy crawl`` variants
  then re-crawl a copy of the table left by the first crawl, after the same changes, as a
  Nutch user would a site that publishes ``lastmod``: ``nutchy crawl SEEDS -rounds 1
  -sitemapsFromHostdb once`` (no ``-adddays``), which must get exactly the changed pages as
  200s, no 304, and one sitemap a host.

Both sides get the same ``CONCURRENT_REQUESTS`` (``--concurrency``), the same requests per host
(Scrapy's ``CONCURRENT_REQUESTS_PER_DOMAIN``, nutchy's ``fetcher.threads.per.queue``,
``--per-host``), no politeness delay, robots.txt obeyed, ``LOG_LEVEL=INFO``. Times are wall
times of the whole command, process start to exit, as a user sees them; pages/s is the pages
fetched (200s the server sent) over that time. Peak RSS is the largest sum of the RSS of the
command's process tree (the crawl and its fetch children), sampled every 0.1 s; peak PSS the
same with each process's PSS (``/proc/PID/smaps_rollup``), which counts a page shared by
several processes once in all; and each process's own peak RSS (``VmHWM``) is given by kind of
process (the module of ``python -m``).

The issue's targets: nutchy's first crawl at least 0.8x the plain spider's pages/s (goal 1.0x),
and the re-crawl at least 3x cheaper than the first crawl. The table also gives each first crawl
over the floor: what a re-crawl would save if it cost no more than Scrapy's own requests, the
most a re-crawl made of them can reach.

``--profile DIR`` then runs the floor (a plain Spider asking every page again) and each
variant's first crawl and re-crawl again (the same change of
``--changed`` percent of the pages in between) under py-spy (``pip install 'nutchy[bench]'``),
which samples every thread of the command and of each process it starts (the long-lived fetch
process, the parse process), writes the samples to *DIR* (py-spy's raw format, one file a
command) and prints, process by process, the CPU seconds sampled, split by the part of the
crawl they were in (start-up, inject, generate, the fetch's components, parse, updatedb...),
and the functions with the most samples of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import dataclasses
import email.utils
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
DATA = Path("/work/bench-crawl")
LAST_MODIFIED = 1_750_000_000  # s
STATS_PATH = b"/__stats"
CHANGE_PATH = b"/__change?percent="
WORDS = [
    *("crawl", "fetch", "parse", "update", "generate", "inject", "table", "score", "link"),
    *("anchor", "host", "page", "queue", "batch", "signature", "schedule", "interval"),
    *("status", "robots", "politeness", "content", "header", "outlink", "inlink"),
]


# --- the site ----------------------------------------------------------------------------------


def site_links(pages: int, links: int, seed: int) -> list[list[int]]:
    """The pages each page links to: its children in a *links*-ary tree over the page numbers
    (so that every page is reachable from page 0), then distinct random pages up to *links*."""
    rng = random.Random(seed)
    graph: list[list[int]] = []
    for i in range(pages):
        targets = list(range(i * links + 1, min(pages, (i + 1) * links + 1)))
        chosen = set(targets) | {i}
        wanted = min(links, pages - 1)
        while len(targets) < wanted:
            j = rng.randrange(pages)
            if j not in chosen:
                chosen.add(j)
                targets.append(j)
        rng.shuffle(targets)
        graph.append(targets)
    return graph


def page_path(i: int) -> str:
    return f"/p/{i:06d}.html"


@dataclass(frozen=True)
class Site:
    """A site to crawl: the links of each page, the host (index) each page is on, the size (bytes
    of text) of each page, and the seeds (page numbers)."""

    links: list[list[int]]
    host_of: list[int]
    sizes: list[int]
    seeds: list[int]


def uniform_site(pages: int, links: int, n_hosts: int, seed: int, words: int) -> Site:
    """The synthetic site of :func:`site_links`: page *i* on host *i* mod *n_hosts*, each page
    about *words* words, the first page of each host a seed."""
    return Site(
        site_links(pages, links, seed),
        [i % n_hosts for i in range(pages)],
        [words * 7] * pages,
        list(range(min(n_hosts, pages))),
    )


def doc_site(pages: int, n_hosts: int, seed: int) -> Site:
    """A site shaped like a documentation site: a tree of sections, chapters and pages (index,
    then levels of 4 to 12 children a page, so that the deepest pages are 4 or 5 links from the
    index), pages of 5 to 80 KB of text (log-uniform), 10 to 50 links a page (parent, children,
    the sidebar's sections, the previous and next page, the rest cross-references to pages at
    most one level deeper), and three hubs (a general index and two module indexes) with 200 to
    600 links each to anywhere in the site. With several hosts, each chapter (level 2) and what
    is below it is on one host, chapter *c* on host *c* mod hosts, as sites of several projects
    linked together; the index and the sections are on host 0 and the seed is the index."""
    rng = random.Random(seed)
    level = [0]
    parent = [-1]
    children: list[list[int]] = [[]]
    frontier = [0]
    while len(level) < pages:
        nxt = []
        for node in frontier:
            for _ in range(rng.randint(4, 12)):
                if len(level) == pages:
                    break
                child = len(level)
                level.append(level[node] + 1)
                parent.append(node)
                children.append([])
                children[node].append(child)
                nxt.append(child)
        frontier = nxt or [len(level) - 1]
    by_level: dict[int, list[int]] = {}
    for i, lv in enumerate(level):
        by_level.setdefault(lv, []).append(i)
    sections = children[0]
    chapter = [-1] * pages
    for i in range(pages):
        j = i
        while j >= 0 and level[j] > 2:
            j = parent[j]
        chapter[i] = j if level[j] == 2 else -1
    chapters = by_level.get(2, [])
    host_of = [
        (chapters.index(chapter[i]) % n_hosts) if chapter[i] >= 0 else 0 for i in range(pages)
    ]
    hubs = set(rng.sample(chapters, min(3, len(chapters)))) if chapters else set()
    graph: list[list[int]] = []
    for i in range(pages):
        targets = dict.fromkeys([*sections, *children[i]])
        if parent[i] >= 0:
            targets[parent[i]] = None
        if i > 0:
            targets[i - 1] = None
        if i + 1 < pages:
            targets[i + 1] = None
        if i in hubs:
            targets.update(
                dict.fromkeys(rng.sample(range(pages), min(pages, rng.randint(200, 600))))
            )
        wanted = rng.randint(10, 50)
        near = [j for lv in range(level[i] + 2) for j in by_level.get(lv, [])]
        for _ in range(4 * wanted):
            if len(targets) >= wanted:
                break
            targets[rng.choice(near)] = None
        targets.pop(i, None)
        graph.append(list(targets))
    sizes = [int(5000 * 16 ** rng.random()) for _ in range(pages)]
    return Site(graph, host_of, sizes, [0])


def render_site(
    site: Site, hosts: list[str], ports: dict[str, int], seed: int
) -> dict[tuple[int, bytes], bytes]:
    """Every page's HTML, by (host index, path): its text (about its size, in paragraphs of
    words), then its links (relative on its own host, absolute to the others)."""
    rng = random.Random(seed + 1)
    pool = " ".join(rng.choice(WORDS) for _ in range(40_000))  # about 300 KB of words
    bodies = {}
    for i, targets in enumerate(site.links):
        own = site.host_of[i]
        items = []
        for j in targets:
            host = hosts[site.host_of[j]]
            href = (
                page_path(j)
                if site.host_of[j] == own
                else f"http://{host}:{ports[host]}{page_path(j)}"
            )
            items.append(f'<li><a href="{href}">Page {j} about {rng.choice(WORDS)}</a></li>')
        paragraphs = []
        left = site.sizes[i]
        while left > 0:
            n = min(left, 700)
            start = rng.randrange(len(pool) - n)
            paragraphs.append(pool[start : start + n])
            left -= n
        text = "</p><p>".join(paragraphs)
        html = (
            f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>Page {i}</title></head>'
            f"<body><h1>Page {i}</h1><p>{text}</p><ul>{''.join(items)}</ul></body></html>"
        )
        bodies[own, page_path(i).encode()] = html.encode()
    return bodies


class _Site(asyncio.Protocol):
    #: every page's HTML as rendered, by (host index, path)
    original: dict[tuple[int, bytes], bytes] = {}
    #: what is served: the HTML, its ETag and its modification time (s)
    bodies: dict[tuple[int, bytes], tuple[bytes, bytes, int]] = {}
    #: answers by status (pages), and ``robots`` and ``sitemap`` requests answered, and
    #: ``bytes`` sent (status lines, headers and bodies of every answer but the controls')
    counts: Counter[int | str] = Counter()
    #: whether each host serves a robots.txt naming its sitemap, and the sitemap (else 404)
    sitemaps = False
    #: ``http://host:port`` of each host, by index
    origins: dict[int, str] = {}

    def __init__(self, host: int) -> None:
        self.host = host

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            path = lines[0].split(b" ", 2)[1]
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                headers[name.strip().lower()] = value.strip()
            answer = self.answer(path, headers)
            if not path.startswith((STATS_PATH, CHANGE_PATH)):
                self.counts["bytes"] += len(answer)
            self.transport.write(answer)  # type: ignore[attr-defined]

    def answer(self, path: bytes, headers: dict[bytes, bytes]) -> bytes:
        if path == STATS_PATH:
            body = json.dumps(self.counts).encode()
            return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        if path.startswith(CHANGE_PATH):
            body = str(self.change(int(path.partition(b"=")[2] or b"0"))).encode()
            return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        if self.sitemaps and path == b"/robots.txt":
            self.counts["robots"] += 1
            origin = self.origins[self.host]
            body = f"User-agent: *\nDisallow:\nSitemap: {origin}/sitemap.xml\n".encode()
            return (
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                % (
                    len(body),
                    body,
                )
            )
        if self.sitemaps and path == b"/sitemap.xml":
            self.counts["sitemap"] += 1
            body = self.sitemap()
            return (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n"
                b"\r\n%s" % (len(body), body)
            )
        page = self.bodies.get((self.host, path))
        if page is None:
            self.counts[404] += 1
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"
        body, etag, modified = page
        validators = b"ETag: %s\r\nLast-Modified: %s\r\n" % (
            etag,
            email.utils.formatdate(modified, usegmt=True).encode(),
        )
        if self.not_modified(headers, etag, modified):
            self.counts[304] += 1
            return b"HTTP/1.1 304 Not Modified\r\n%s\r\n" % validators
        self.counts[200] += 1
        return (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n"
            b"%s\r\n%s" % (len(body), validators, body)
        )

    def sitemap(self) -> bytes:
        """The host's sitemap: each of its pages with its modification time as ``lastmod``
        (what its ``Last-Modified`` says), in page order."""
        origin = self.origins[self.host]
        pages = sorted(
            (int(path.rsplit(b"/", 1)[1].split(b".")[0]), path.decode(), modified)
            for (host, path), (_, _, modified) in self.bodies.items()
            if host == self.host
        )
        entries = "".join(
            f"<url><loc>{origin}{path}</loc><lastmod>"
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(modified))}</lastmod></url>\n"
            for _, path, modified in pages
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{entries}</urlset>\n'
        ).encode()

    @classmethod
    def change(cls, percent: int) -> int:
        """Change the text of *percent* % of the pages (every page whose number is below
        *percent* modulo 100; their links stay), modified now (the next second, so that their
        ``lastmod`` is later than every fetch before the change); 0 puts every page back as it
        was. Returns the pages changed."""
        changed = 0
        now = int(time.time()) + 1
        for key, body in cls.original.items():
            number = int(key[1].rsplit(b"/", 1)[1].split(b".")[0])
            if number % 100 < percent:
                body = body.replace(b"<h1>", b"<h1>Changed: ", 1)
                cls.bodies[key] = (body, b'"%08x"' % zlib.crc32(body), now)
                changed += 1
            else:
                cls.bodies[key] = (body, b'"%08x"' % zlib.crc32(body), LAST_MODIFIED)
        return changed

    @staticmethod
    def not_modified(headers: dict[bytes, bytes], etag: bytes, modified: int) -> bool:
        if b"if-none-match" in headers:
            return etag in [t.strip() for t in headers[b"if-none-match"].split(b",")]
        since = headers.get(b"if-modified-since")
        if since is None:
            return False
        try:
            parsed = email.utils.parsedate_to_datetime(since.decode())
        except (TypeError, ValueError):
            return False
        return parsed.timestamp() >= modified


def describe(site: Site) -> str:
    """The site in one line: pages, hosts, links and text a page, and its depth from the seeds."""
    depth = dict.fromkeys(site.seeds, 0)
    todo = list(site.seeds)
    for page in todo:
        for j in site.links[page]:
            if j not in depth:
                depth[j] = depth[page] + 1
                todo.append(j)
    links = sorted(len(targets) for targets in site.links)
    sizes = sorted(site.sizes)
    return (
        f"{len(site.links)} pages on {max(site.host_of) + 1} hosts, links a page"
        f" {links[0]}-{links[-1]} (median {links[len(links) // 2]}, {sum(links)} in all),"
        f" text a page {sizes[0] // 1000}-{sizes[-1] // 1000} KB (median"
        f" {sizes[len(sizes) // 2] // 1000} KB, {sum(sizes) / 1e6:.0f} MB in all), depth"
        f" {max(depth.values())} from {len(site.seeds)} seed(s)"
    )


def make_site(shape: str, pages: int, links: int, n_hosts: int, seed: int, words: int) -> Site:
    if shape == "docs":
        return doc_site(pages, n_hosts, seed)
    return uniform_site(pages, links, n_hosts, seed, words)


def serve(
    shape: str, pages: int, links: int, n_hosts: int, seed: int, words: int, sitemaps: int = 0
) -> None:
    """Serve the site, one port per host (with a robots.txt naming a sitemap, and the sitemap,
    when *sitemaps*); print ``{host: port}`` once listening."""
    hosts = [f"127.0.0.{i + 2}" for i in range(n_hosts)]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        ports = {}
        for index, host in enumerate(hosts):
            server = await loop.create_server(
                lambda index=index: _Site(index),  # type: ignore[misc]
                host,
                0,
                backlog=1024,
            )
            ports[host] = server.sockets[0].getsockname()[1]
        site = make_site(shape, pages, links, n_hosts, seed, words)
        _Site.sitemaps = bool(sitemaps)
        _Site.origins = {index: f"http://{host}:{ports[host]}" for index, host in enumerate(hosts)}
        _Site.original = render_site(site, hosts, ports, seed)
        _Site.change(0)
        print(json.dumps(ports), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def server_get(ports: dict[str, int], path: str) -> bytes:
    host, port = next(iter(ports.items()))
    with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=10) as r:
        body: bytes = r.read()
        return body


def server_counts(ports: dict[str, int]) -> Counter[int | str]:
    """The server's counts: answers by status (an int), ``robots``, ``sitemap``, ``bytes``."""
    counts = json.loads(server_get(ports, STATS_PATH.decode()))
    return Counter({(int(k) if k.isdigit() else k): v for k, v in counts.items()})


# --- the plain Scrapy crawl (a child process) ------------------------------------------------


def crawl_plain(seeds_file: str, hosts_csv: str, concurrency: int, per_host: int) -> dict[str, Any]:
    from scrapy import Request
    from scrapy.linkextractors import LinkExtractor
    from scrapy.spiders import CrawlSpider, Rule

    seeds = Path(seeds_file).read_text().split()
    hosts = hosts_csv.split(",")

    class PlainSpider(CrawlSpider):
        name = "plain"
        allowed_domains = hosts

        async def start(self) -> Any:
            # Not start_urls: their requests skip the dupefilter, and each seed would be fetched
            # again when a page links to it.
            for url in seeds:
                yield Request(url)

        # allowed_domains (Scrapy's OffsiteMiddleware) keeps the crawl on the hosts; the
        # extractor's own allow_domains would compare them with "host:port" and match nothing.
        rules = (Rule(LinkExtractor(), follow=True),)

    stats = _run_spider(PlainSpider, concurrency, per_host)
    return {
        # the pages: not the robots.txt answers (200s where the site serves them)
        "pages": stats.get("downloader/response_status_count/200", 0)
        - stats.get("robotstxt/response_status_count/200", 0),
        "elapsed": stats["elapsed_time_seconds"],
    }


def crawl_floor(
    urls_file: str, concurrency: int, per_host: int, conditional: int = 1
) -> dict[str, Any]:
    """The least a re-crawl costs in Scrapy: a plain ``Spider`` asks for every page of the site
    once, with ``If-Modified-Since``, and drops the 304 it gets; no link extraction, no
    persistence, and only the Scrapy components and settings the ``nutch`` spider keeps (its
    ``SPIDER_DEFAULTS``, without its ``UNUSED_MIDDLEWARES`` and ``UNUSED_EXTENSIONS``). Without
    *conditional*, the same spider downloads every page (200s) and drops it: what a first crawl
    costs Scrapy with no parse, no link extraction and no table, the most pages/s any crawler in
    Scrapy reaches."""
    from scrapy import Request, Spider
    from scrapy.settings.default_settings import EXTENSIONS_BASE

    from nutchy.spiders import SPIDER_DEFAULTS, UNUSED_EXTENSIONS, UNUSED_MIDDLEWARES

    urls = Path(urls_file).read_text().split()  # every page of the site
    since = email.utils.formatdate(LAST_MODIFIED, usegmt=True)

    class FloorSpider(Spider):
        name = "floor"

        async def start(self) -> Any:
            for url in urls:
                headers = {"If-Modified-Since": since} if conditional else {}
                yield Request(url, headers=headers, dont_filter=True)

        def parse(self, response: Any) -> None:
            self.crawler.stats.inc_value(f"floor/{response.status}")  # DOWNLOADER_STATS is off

    left_out: dict[str, Any] = {
        setting: dict.fromkeys(paths) for setting, paths in UNUSED_MIDDLEWARES.items()
    }
    left_out["EXTENSIONS_BASE"] = {
        path: order for path, order in EXTENSIONS_BASE.items() if path not in UNUSED_EXTENSIONS
    }
    stats = _run_spider(FloorSpider, concurrency, per_host, **SPIDER_DEFAULTS, **left_out)
    return {"pages": stats.get("floor/304" if conditional else "floor/200", 0)}


def _run_spider(spider: type, concurrency: int, per_host: int, **settings: Any) -> dict[str, Any]:
    """Run *spider* in this process with the benchmark's settings and *settings*; its stats."""
    from scrapy.crawler import CrawlerProcess

    process = CrawlerProcess(
        {
            "CONCURRENT_REQUESTS": concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": per_host,
            "DOWNLOAD_DELAY": 0,
            "ROBOTSTXT_OBEY": True,
            "LOG_LEVEL": "INFO",
            **settings,
        }
    )
    crawler = process.create_crawler(spider)
    process.crawl(crawler)
    process.start()
    return crawler.stats.get_stats()


# --- the nutchy variants -----------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """What a variant's commands need: the seed file, the crawl directory, the settings both
    crawls share, the most rounds of a first crawl, and the days generate adds to make every
    page due again for the re-crawl."""

    seeds: Path
    crawl_dir: Path
    settings: dict[str, str]
    max_rounds: int
    add_days: int = 31

    def s(self) -> list[str]:
        """The settings as ``-s`` options, the crawl directory's with them."""
        every = {**self.settings, "NUTCH_CRAWL_DIR": str(self.crawl_dir)}
        return [arg for name, value in every.items() for arg in ("-s", f"{name}={value}")]


@dataclass(frozen=True)
class Variant:
    """A way of running nutchy: the commands of a first crawl and of a re-crawl (each run in
    turn, timed together). Variants that are not *default* run only when ``--variant`` names
    them."""

    name: str
    first: Callable[[Context], list[list[str]]]
    recrawl: Callable[[Context], list[list[str]]]
    default: bool = True
    #: The re-crawl that reads the sitemaps and fetches what they say changed (no ``-adddays``);
    #: ``None``: the variant has none.
    sitemap_recrawl: Callable[[Context], list[list[str]]] | None = None
    #: Environment variables the commands need (``SCRAPY_SETTINGS_MODULE`` for ``scrapy crawl``).
    env: dict[str, str] = field(default_factory=dict)
    #: The processes it runs beside one like the plain spider's, by their imports
    #: (:data:`IMPORTS`), for the memory floor; empty: no floor given.
    beside: tuple[str, ...] = ()


def _nutchy(*args: str) -> list[str]:
    return [sys.executable, "-m", "nutchy", *args]


def _nutchy_crawl(
    *extra: str, name: str = "", default: bool = False, beside: tuple[str, ...] = ("crawl", "parse")
) -> Variant:
    name = name or " ".join(("nutchy crawl", *extra[1::2]))
    return Variant(
        name,
        lambda c: [_nutchy("crawl", str(c.seeds), "-rounds", str(c.max_rounds), *c.s(), *extra)],
        lambda c: [
            _nutchy(
                "crawl", str(c.seeds), "-rounds", "1", "-adddays", str(c.add_days), *c.s(), *extra
            )
        ],
        default=default or not extra,
        beside=beside,
        sitemap_recrawl=lambda c: [
            _nutchy(
                "crawl", str(c.seeds), "-rounds", "1", *c.s(), *extra, "-sitemapsFromHostdb", "once"
            )
        ],
    )


def _scrapy(*args: str) -> list[str]:
    return [sys.executable, "-m", "scrapy", *args]


#: What the processes of a crawl beside its fetch import: ``nutchy crawl``'s own process (the
#: command, generate, updatedb; Scrapy's settings) and the parse process (no Scrapy). An idle
#: process importing them is the least memory each can take (:func:`import_rss`).
IMPORTS = {
    "crawl": "nutchy.cli,nutchy.jobs.crawl",
    "parse": "nutchy._parsework,nutchy.store.embedded,nutchy.jobs._cycle",
}


def import_rss(modules: str, cwd: Path, log: Path) -> float:
    """The RSS (MB) of a Python process that has imported *modules* (comma-separated) and
    nothing else."""
    code = (
        "import gc, importlib, os, sys\n"
        "for name in sys.argv[1].split(','): importlib.import_module(name)\n"
        "gc.collect()\n"
        "print(int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE'))"
    )
    run = run_command([sys.executable, "-c", code, modules], cwd, log)
    return int(run.stdout.split()[-1]) / 2**20


#: The nutchy variants; each is a few lines.
VARIANTS = [
    # The fetch in the command's own process (NUTCH_CRAWL_FETCH_IN_PROCESS): beside one like the
    # plain spider's, the parse process only.
    _nutchy_crawl(beside=("parse",)),
    # The fetch in a long-lived child, as before NUTCH_CRAWL_FETCH_IN_PROCESS.
    _nutchy_crawl("-s", "NUTCH_CRAWL_FETCH_IN_PROCESS=False"),
    # The fetch in the command's process with updatedb's read-ahead beside it (off there unless
    # given), sharing the interpreter with the fetch.
    _nutchy_crawl("-s", "NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS=500000", beside=("parse",)),
    # Rounds in one Scrapy process, in this repository's Scrapy project (the add-on on), with
    # the seeds injected by the spider (-a seeds), one command as the README gives it; the
    # re-crawl is one round of it, with -a adddays.
    Variant(
        "scrapy crawl nutch",
        lambda c: [
            _scrapy(
                "crawl", "nutch", "-a", f"seeds={c.seeds}", "-a", f"rounds={c.max_rounds}", *c.s()
            ),
        ],
        lambda c: [
            _scrapy("crawl", "nutch", "-a", "rounds=1", "-a", f"adddays={c.add_days}", *c.s()),
        ],
        env={"SCRAPY_SETTINGS_MODULE": "settings"},
        beside=("parse",),
    ),
    # Two fetch processes a round, each with the hosts of one partition.
    _nutchy_crawl("-numFetchers", "2", name="nutchy crawl -numFetchers 2", default=True),
    # Scrapy's default CONCURRENT_ITEMS, which the nutch spider no longer uses (e11d199).
    _nutchy_crawl("-s", "CONCURRENT_ITEMS=100"),
    # The parse in a thread of the fetch process, as before the parse process.
    _nutchy_crawl("-s", "NUTCH_FETCHER_PARSE_PROCESS=False"),
    # A time limit no fetch reaches: a fetch process per round, as before the long-lived one.
    _nutchy_crawl("-s", "NUTCH_FETCHER_TIMELIMIT_MINS=1000"),
]


def table_counts(crawl_dir: str) -> dict[str, int]:
    """Rows of the table in *crawl_dir*, by status name (in a child, to read the table with the
    nutchy of this checkout)."""
    from nutchy.config import load_settings
    from nutchy.core.status import CrawlStatus
    from nutchy.store import open_table

    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir)}, project=False)
    with open_table(settings) as table:
        return dict(Counter(CrawlStatus(p.status).name for p in table.scan(["status"])))


# --- running and measuring a command -----------------------------------------------------------


def _children(pid: int) -> list[int]:
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError):
        return 0


def _pss(pid: int) -> int:
    """The proportional set size of process *pid* (bytes): its RSS with each page shared with
    other processes (the pages a forked child shares with its parent, the libraries' code)
    counted as that page's share, so the sum over a process tree counts every page once."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _hwm(pid: int) -> int:
    """The peak RSS of process *pid* so far (``VmHWM``, bytes), which the kernel keeps between
    samples."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _role(pid: int) -> str:
    """What process *pid* is, for the per-process peaks: the module of ``python -m MODULE``
    (``nutchy``, ``nutchy._fetchrun``, ``nutchy._parsework``, ``scrapy``...), else the name of
    the script or program; empty for a process gone or without a command line (a zombie)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except OSError:
        return ""  # gone
    if not argv[0]:
        return ""  # a zombie's, or a kernel thread's
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1]
    script = next((a for a in argv[1:] if not a.startswith("-")), argv[0])
    return Path(script).name


def _cpu(pid: int) -> float:
    """The CPU time (user + system, s) of process *pid* itself so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    """One command: its wall time, peak RSS (MB) of its process tree, the CPU time (user +
    system, s) of the whole tree (from ``wait4``: the command and every child it waited for)
    and of the command's own process (its last sample, every 0.1 s), and its stderr lines,
    each with the time (s since the start) it arrived."""

    seconds: float
    rss_mb: float
    stdout: str
    lines: list[tuple[float, str]] = field(default_factory=list)
    cpu: float = 0.0
    own_cpu: float = 0.0
    #: The largest sum of the PSS of the process tree (MB), sampled with the RSS.
    pss_mb: float = 0.0
    #: Each kind of process (:func:`_role`): the largest peak RSS (``VmHWM``, MB) of any process
    #: of that kind.
    peaks: dict[str, float] = field(default_factory=dict)
    #: Each kind of process: the CPU time (s) of the processes of that kind, each read at its
    #: last sample (a process that ends between two samples loses at most 0.1 s of it).
    cpus: dict[str, float] = field(default_factory=dict)
    #: Each kind of process: its RSS (MB) at the sample where the tree's RSS peaked, which
    #: says which processes make that peak.
    at_peak: dict[str, float] = field(default_factory=dict)


def run_command(
    command: list[str], cwd: Path, log: Path, extra_env: dict[str, str] | None = None
) -> Run:
    """Run *command*, sampling the RSS of its process tree every 0.1 s."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env.update(extra_env or {})
    started = time.monotonic()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[tuple[float, str]] = []
    out: list[str] = []
    peak = 0

    def read_err() -> None:
        assert process.stderr is not None
        with log.open("a") as f:
            f.write(f"$ {' '.join(command)}\n")
            for line in process.stderr:
                lines.append((time.monotonic() - started, line.rstrip("\n")))
                f.write(line)

    def read_out() -> None:
        assert process.stdout is not None
        out.append(process.stdout.read())

    readers = [threading.Thread(target=read_err), threading.Thread(target=read_out)]
    for reader in readers:
        reader.start()
    own = 0.0
    pss_peak = 0
    peaks: dict[str, float] = {}
    roles: dict[int, str] = {}
    cpus: dict[int, float] = {}
    at_peak: dict[str, float] = {}
    while True:
        # wait4, not poll: its rusage is the command's and its waited children's CPU time
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            break
        own = _cpu(process.pid) or own
        tree, total, pss = [process.pid], 0, 0
        by_role: Counter[str] = Counter()
        while tree:
            pid = tree.pop()
            rss = _rss(pid)
            total += rss
            pss += _pss(pid)
            role = roles.get(pid) or _role(pid)
            tree.extend(_children(pid))
            if not role:  # gone already (a zombie has no command line): nothing to tell
                continue
            roles[pid] = role
            by_role[role] += rss
            peaks[role] = max(peaks.get(role, 0.0), _hwm(pid) / 2**20)
            cpus[pid] = _cpu(pid) or cpus.get(pid, 0.0)
        if total > peak:
            at_peak = {role: rss / 2**20 for role, rss in by_role.items()}
        peak = max(peak, total)
        pss_peak = max(pss_peak, pss)
        time.sleep(0.1)
    seconds = time.monotonic() - started
    cpu = usage.ru_utime + usage.ru_stime
    for reader in readers:
        reader.join()
    if process.returncode != 0:
        tail = "\n".join(line for _, line in lines[-20:])
        raise RuntimeError(f"{command} exited with {process.returncode}:\n{tail}")
    role_cpu: dict[str, float] = {}
    for pid, seconds_of in cpus.items():
        role_cpu[roles[pid]] = role_cpu.get(roles[pid], 0.0) + seconds_of
    return Run(
        seconds,
        peak / 2**20,
        "".join(out),
        lines,
        cpu,
        min(own, cpu),
        pss_peak / 2**20,
        peaks,
        dict(role_cpu),
        at_peak,
    )


def run_commands(
    commands: list[list[str]], cwd: Path, log: Path, extra_env: dict[str, str] | None = None
) -> Run:
    total = Run(0.0, 0.0, "")
    for command in commands:
        run = run_command(command, cwd, log, extra_env)
        total.lines += [(total.seconds + t, line) for t, line in run.lines]
        total.seconds += run.seconds
        if run.rss_mb >= total.rss_mb:
            total.at_peak = run.at_peak
        total.rss_mb = max(total.rss_mb, run.rss_mb)
        total.pss_mb = max(total.pss_mb, run.pss_mb)
        for role, mb in run.peaks.items():
            total.peaks[role] = max(total.peaks.get(role, 0.0), mb)
        for role, spent in run.cpus.items():
            total.cpus[role] = total.cpus.get(role, 0.0) + spent
        total.cpu += run.cpu
        total.own_cpu += run.own_cpu
        total.stdout += run.stdout
    return total


_ROUND = re.compile(r"[Rr]ound (\d+)(?: of \d+)?: batch (\S+), (\d+) URLs")
_PHASE = re.compile(r"nutchy crawl: round \d+: (sitemaps|fetch|parse|updatedb): ")


def phases(lines: list[tuple[float, str]]) -> dict[str, float]:
    """Seconds in start + inject (Python, imports, the seeds), sitemaps (read before a generate,
    when asked), generate, fetch, parse (what the
    fetch left) and updatedb, summed over rounds, and the end (from the last updatedb to the
    crawl's last line: the last generate, which found nothing, when there is one, and the fetch
    processes' exit and the table's close), read from the times the ``nutchy crawl`` log lines
    arrived."""
    spent: Counter[str] = Counter()
    last = 0.0
    for t, line in lines:
        phase = _PHASE.search(line)
        if "nutchy crawl: inject: " in line:
            spent["start + inject"] += t - last
        elif _ROUND.search(line):
            spent["generate"] += t - last
        elif "stopped, " in line:
            spent["end"] += t - last
        elif phase:
            spent[phase.group(1)] += t - last
        else:
            continue
        last = t
    spent["other"] = (lines[-1][0] if lines else 0.0) - sum(spent.values())
    return dict(spent)


# --- the profiled crawls ----------------------------------------------------------------------

#: py-spy's samples a second (``--profile``); a sample is one thread seen running.
PROFILE_RATE = 200


def py_spy() -> str:
    """The py-spy executable (``pip install 'nutchy[bench]'``), beside this Python or on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if not found:
        raise SystemExit("--profile needs py-spy: pip install 'nutchy[bench]' (or py-spy)")
    return found


def profiled(command: list[str], out: Path) -> list[str]:
    """*command* under py-spy, sampling it and every process it starts (the fetch process, the
    parse process) into *out*, one line a distinct stack with its count (py-spy's raw format)."""
    return [
        *(py_spy(), "record", "--subprocesses", "--format", "raw", "--nolineno"),
        *("--rate", str(PROFILE_RATE), "--output", str(out), "--"),
        *command,
    ]


def process_kind(frame: str) -> str:
    """What the process of a py-spy ``process PID:"command line"`` frame is."""
    if "nutchy._fetchrun" in frame:
        return "fetch process"
    if "nutchy._parsework" in frame:
        return "parse process"
    return "the command's own process"


#: Where a sample's CPU goes: (label, a substring of a frame), the first in this order that a
#: frame of its stack matches (so the store's time inside generate is generate's). What matches
#: none is "other".
BUCKETS = [
    ("start-up: imports", "_find_and_load"),
    ("inject", "(nutchy/jobs/inject.py)"),
    ("generate", "(nutchy/jobs/generate.py)"),
    ("updatedb", "(nutchy/jobs/updatedb.py)"),
    ("parse (core)", "(nutchy/core/parse.py)"),
    ("parse work", "(nutchy/_parsework.py)"),
    ("signature", "(nutchy/core/signature.py)"),
    ("table: embedded store", "(nutchy/store/embedded.py)"),
    ("table: codec", "(nutchy/store/schema.py)"),
    ("outcomes", "(nutchy/outcomes.py)"),
    ("frontier", "(nutchy/frontier.py)"),
    ("scheduler", "(nutchy/scheduler.py)"),
    ("pipelines", "(nutchy/pipelines.py)"),
    ("nutchy middlewares", "(nutchy/middlewares.py)"),
    ("robots", "(nutchy/robots.py)"),
    ("Scrapy downloader (HTTP/1.1)", "(scrapy/core/downloader/"),
    ("Scrapy middlewares", "(scrapy/downloadermiddlewares/"),
    ("Scrapy scraper", "(scrapy/core/scraper.py)"),
    ("Scrapy engine", "(scrapy/core/engine.py)"),
    ("Scrapy other", "(scrapy/"),
    ("Twisted", "(twisted/"),
    ("nutchy other", "(nutchy/"),
]


#: Innermost frames of threads that wait (a thread pool's idle worker, the reactor's poll): py-spy
#: counts some of their samples as running (a thread it sees just woken); they are left out.
WAITING = (
    "Condition.wait (threading.py)",
    "_worker (concurrent/futures/thread.py)",
    "EpollSelector.select (selectors.py)",
    "untilConcludes (twisted/python/util.py)",
    "_wait_for_tstate_lock (threading.py)",
)


def read_samples(paths: list[Path]) -> dict[str, Counter[tuple[str, ...]]]:
    """The stacks sampled in py-spy's raw files *paths*, by process kind (outermost frame
    first, the process frames left out; the waits of :data:`WAITING` left out)."""
    by_kind: dict[str, Counter[tuple[str, ...]]] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            frames = stack.split(";")
            if frames[-1] in WAITING:
                continue
            processes = [f for f in frames if f.startswith("process ")]
            kind = process_kind(processes[-1]) if processes else "the command's own process"
            kept = tuple(f for f in frames if not f.startswith("process "))
            by_kind.setdefault(kind, Counter())[kept] += int(count)
    return by_kind


def profile_summary(title: str, paths: list[Path], limit: int = 12) -> str:
    """Each process's sampled CPU seconds, split into :data:`BUCKETS`, its functions with the
    most samples of their own, and nutchy's functions with the most samples in all."""
    lines = [f"## {title}"]
    for kind, stacks in sorted(read_samples(paths).items()):
        total = sum(stacks.values())
        buckets: Counter[str] = Counter()
        own: Counter[str] = Counter()
        within: Counter[str] = Counter()
        for stack, count in stacks.items():
            own[stack[-1] if stack else "?"] += count
            for name in {f for f in stack if "(nutchy/" in f}:
                within[name] += count
            label = next(
                (name for name, mark in BUCKETS if any(mark in f for f in reversed(stack))),
                "other",
            )
            buckets[label] += count
        lines.append(f"### {kind}: {total / PROFILE_RATE:.2f} s of samples")
        lines.append(
            "    by part: "
            + ", ".join(f"{name} {n / PROFILE_RATE:.2f}" for name, n in buckets.most_common())
        )
        lines.append("    most own time:")
        lines.extend(
            f"      {n / PROFILE_RATE:6.2f} s  {name}" for name, n in own.most_common(limit)
        )
        lines.append("    nutchy's, in all (with what they call):")
        lines.extend(
            f"      {n / PROFILE_RATE:6.2f} s  {name}" for name, n in within.most_common(limit)
        )
    return "\n".join(lines)


# --- the parent --------------------------------------------------------------------------------


def compile_nutchy() -> str:
    """Compile the bytecode of this checkout's nutchy, as an install does, and say so.

    The crawls import nutchy from the checkout (``PYTHONPATH``), where an editable install
    leaves no bytecode until a first import writes it, and none at all under
    ``PYTHONDONTWRITEBYTECODE``: each of their processes would compile nutchy's sources again,
    about 0.3 s of CPU a process that the plain spider, whose Scrapy pip compiled at install,
    does not pay. ``compileall`` writes the ``__pycache__`` files whatever that variable says."""
    compileall.compile_dir(REPO / "nutchy", quiet=1)
    unset = "" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "not "
    return f"nutchy's bytecode compiled before the runs (PYTHONDONTWRITEBYTECODE {unset}set)"


def _peaks(peaks: dict[str, float]) -> str:
    return ", ".join(f"{role} {mb:.0f}" for role, mb in sorted(peaks.items()))


def _cpus(cpus: dict[str, float]) -> str:
    return ", ".join(f"{role} {s:.1f}" for role, s in sorted(cpus.items()))


def child(name: str, *args: Any) -> list[str]:
    return [sys.executable, str(HERE), "--child", name, *map(str, args)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=5000, help="pages of the site")
    parser.add_argument("--links", type=int, default=40, help="links per page")
    parser.add_argument("--hosts", type=int, default=5)
    parser.add_argument(
        "--words", type=int, default=300, help="words of text a page (300: about 5 KB a page)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the site's link graph")
    parser.add_argument(
        "--shape",
        choices=["uniform", "docs"],
        default="uniform",
        help="uniform: --links random links a page, --words words; docs: a documentation site"
        " (doc_site: 5-80 KB pages, 10-50 links, depth 4-5, three hubs; --links and --words"
        " unused)",
    )
    parser.add_argument(
        "--changed",
        type=int,
        help="percent of the pages changed before each re-crawl (default: 10 for --shape docs,"
        " 0 for uniform)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="repetitions (the median is shown)")
    parser.add_argument("--max-rounds", type=int, default=50, help="nutchy crawl -rounds")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--per-host", type=int, default=8)
    parser.add_argument("--data", type=Path, default=DATA, help="working directory")
    parser.add_argument("--profile", type=Path, help="also run a profiled crawl, into this dir")
    parser.add_argument(
        "--variant",
        action="append",
        choices=[v.name for v in VARIANTS],
        help="a nutchy variant to run (may be repeated; default: "
        + ", ".join(v.name for v in VARIANTS if v.default)
        + ")",
    )
    parser.add_argument(
        "--sitemaps",
        action=argparse.BooleanOptionalAction,
        help="each host serves a robots.txt naming its sitemap, and the sitemap (lastmod = each"
        " page's Last-Modified), and the nutchy crawl variants also re-crawl with"
        " -sitemapsFromHostdb once (default: on for --shape docs; --no-sitemaps: robots.txt 404,"
        " as before)",
    )
    parser.add_argument("--quick", action="store_true", help="60 pages x 10 links, 1 round")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        name, *rest = args.child
        typed = [int(a) if a.isdigit() else a for a in rest]
        if name == "serve":
            serve(*typed)
            return 0
        work = {
            "plain": crawl_plain,
            "floor": crawl_floor,
            "count": table_counts,
        }[name]
        print(json.dumps(work(*typed)))
        return 0
    if args.quick:
        args.pages, args.links, args.rounds = 60, 10, 1
    if args.changed is None:
        args.changed = 10 if args.shape == "docs" else 0
    if args.sitemaps is None:
        args.sitemaps = args.shape == "docs"

    hosts = [f"127.0.0.{i + 2}" for i in range(args.hosts)]
    site = make_site(args.shape, args.pages, args.links, args.hosts, args.seed, args.words)
    args.data.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(
        child(
            "serve",
            *(args.shape, args.pages, args.links, args.hosts, args.seed, args.words),
            int(args.sitemaps),
        ),
        stdout=subprocess.PIPE,
        text=True,
    )
    work = args.data / f"run-{os.getpid()}"
    work.mkdir()
    log = args.data / f"crawl-{time.strftime('%Y%m%d-%H%M%S')}.log"
    try:
        assert server.stdout is not None
        ports = json.loads(server.stdout.readline())

        def url(i: int) -> str:
            host = hosts[site.host_of[i]]
            return f"http://{host}:{ports[host]}{page_path(i)}\n"

        seeds = work / "seeds.txt"
        seeds.write_text("".join(map(url, site.seeds)))
        urls = work / "urls.txt"
        urls.write_text("".join(map(url, range(args.pages))))
        settings = {
            "NUTCH_FETCHER_SERVER_DELAY": "0",
            "NUTCH_FETCHER_THREADS_PER_QUEUE": str(args.per_host),
            "CONCURRENT_REQUESTS": str(args.concurrency),
            # the limits lifted, as the plain spider has none: whole pages, every outlink
            "NUTCH_HTTP_CONTENT_LIMIT": "-1",
            "NUTCH_DB_MAX_OUTLINKS_PER_PAGE": "-1",
            "LOG_LEVEL": "INFO",
        }
        print(f"# {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
        print(f"# {compile_nutchy()}")
        print(f"# site ({args.shape}): {describe(site)}")
        print(
            f"# seed {args.seed},"
            f" CONCURRENT_REQUESTS={args.concurrency}, {args.per_host} per host, delay 0,"
            f" {args.rounds} rounds; robots.txt and sitemaps:"
            f" {'served' if args.sitemaps else 'none (404)'}; log: {log}",
            flush=True,
        )
        results: dict[str, list[dict[str, float]]] = {"plain": []}
        variants = [v for v in VARIANTS if (v.name in args.variant if args.variant else v.default)]
        for variant in variants:
            results[variant.name] = []
        for round_ in range(args.rounds):
            before = server_counts(ports)
            spent = _cpu(server.pid)
            plain = run_command(
                child("plain", seeds, ",".join(hosts), args.concurrency, args.per_host), work, log
            )
            plain_server = _cpu(server.pid) - spent
            got = json.loads(plain.stdout.strip().splitlines()[-1])
            served = server_counts(ports) - before
            assert got["pages"] == served[200] == args.pages, (got, served)
            assert not served["sitemap"], served
            plain_bytes = served["bytes"]
            before = server_counts(ports)
            floor = run_command(child("floor", urls, args.concurrency, args.per_host), work, log)
            served = server_counts(ports) - before
            asked = json.loads(floor.stdout.strip().splitlines()[-1])["pages"]
            assert asked == served[304] == args.pages and not served[200], (asked, served)
            floor_bytes = served["bytes"]
            before = server_counts(ports)
            download = run_command(
                child("floor", urls, args.concurrency, args.per_host, 0), work, log
            )
            served = server_counts(ports) - before
            asked = json.loads(download.stdout.strip().splitlines()[-1])["pages"]
            assert asked == served[200] == args.pages, (asked, served)
            floors = {kind: import_rss(modules, work, log) for kind, modules in IMPORTS.items()}
            results["plain"].append(
                {
                    **{f"imports:{kind}": mb for kind, mb in floors.items()},
                    "seconds": plain.seconds,
                    "pages": got["pages"],
                    "rss": plain.rss_mb,
                    "pss": plain.pss_mb,
                    "floor": floor.seconds,
                    "floor_cpu": floor.cpu,
                    "download": download.seconds,
                    "download_cpu": download.cpu,
                    "cpu": plain.cpu,
                    "own_cpu": plain.own_cpu,
                    "server_cpu": plain_server,
                    "bytes": plain_bytes,
                    "floor_bytes": floor_bytes,
                }
            )
            print(
                f"round {round_ + 1}: plain {got['pages']} pages in {plain.seconds:.1f} s"
                f" ({got['pages'] / plain.seconds:.0f}/s; Scrapy's elapsed {got['elapsed']:.1f} s),"
                f" peak RSS {plain.rss_mb:.0f} MB (PSS {plain.pss_mb:.0f} MB), CPU"
                f" {plain.cpu:.1f} s (server"
                f" {plain_server:.1f} s); every page downloaded, no parse, in {download.seconds:.1f} s"
                f" (CPU {download.cpu:.1f} s); every page asked again, 304s, in"
                f" {floor.seconds:.1f} s (CPU {floor.cpu:.1f} s)",
                flush=True,
            )
            for number, variant in enumerate(variants):
                crawl_dir = work / f"crawl-{round_}-{number}"
                context = Context(seeds, crawl_dir, settings, args.max_rounds)
                before = server_counts(ports)
                spent = _cpu(server.pid)
                first = run_commands(variant.first(context), work, log, variant.env)
                first_server = _cpu(server.pid) - spent
                served = server_counts(ports) - before
                counted = run_command(child("count", crawl_dir), work, log)
                statuses = Counter(json.loads(counted.stdout.strip().splitlines()[-1]))
                assert served[200] == statuses["FETCHED"] == args.pages, (served, statuses)
                assert not served["sitemap"], served  # the first crawl reads no sitemap
                crawl_rounds = sum(1 for _, line in first.lines if _ROUND.search(line))
                # The table after the first crawl, for the re-crawl with the sitemaps, which
                # must find the changed pages not fetched since their change.
                by_sitemaps = None
                if args.sitemaps and variant.sitemap_recrawl is not None:
                    by_sitemaps = dataclasses.replace(
                        context, crawl_dir=work / f"crawl-{round_}-{number}-sitemaps"
                    )
                    shutil.copytree(crawl_dir, by_sitemaps.crawl_dir)
                changed = int(server_get(ports, f"{CHANGE_PATH.decode()}{args.changed}"))
                before = server_counts(ports)
                again = run_commands(variant.recrawl(context), work, log, variant.env)
                served_again = server_counts(ports) - before
                assert served_again[304] == args.pages - changed, (served_again, changed)
                assert served_again[200] == changed, (served_again, changed)
                sitemap_run: dict[str, float] = {}
                if by_sitemaps is not None:
                    assert variant.sitemap_recrawl is not None
                    before = server_counts(ports)
                    sm = run_commands(variant.sitemap_recrawl(by_sitemaps), work, log, variant.env)
                    served_sm = server_counts(ports) - before
                    # exactly the changed pages, each once, and one sitemap a host
                    assert served_sm[200] == changed, (served_sm, changed)
                    assert not served_sm[304] and not served_sm[404], served_sm
                    assert served_sm["sitemap"] == args.hosts, served_sm
                    sitemap_run = {
                        "sm": sm.seconds,
                        "sm_cpu": sm.cpu,
                        "sm_rss": sm.rss_mb,
                        "sm_bytes": served_sm["bytes"],
                        "sm_200": served_sm[200],
                        "sm_sitemaps": served_sm["sitemap"],
                        "sm_robots": served_sm["robots"],
                        **{f"sm_cpu:{k}": v for k, v in sm.cpus.items()},
                        **{f"sm {k}": v for k, v in phases(sm.lines).items()},
                    }
                    shutil.rmtree(by_sitemaps.crawl_dir)
                server_get(ports, f"{CHANGE_PATH.decode()}0")
                results[variant.name].append(
                    {
                        "seconds": first.seconds,
                        "pages": served[200],
                        "rss": first.rss_mb,
                        "rounds": crawl_rounds,
                        "recrawl": again.seconds,
                        "recrawl_rss": again.rss_mb,
                        "pss": first.pss_mb,
                        "recrawl_pss": again.pss_mb,
                        # the floor: the plain spider's peak and idle processes importing what
                        # the crawl's other processes import
                        "rss_floor": plain.rss_mb + sum(floors[kind] for kind in variant.beside)
                        if variant.beside
                        else 0.0,
                        **{f"peak:{k}": v for k, v in first.peaks.items()},
                        **{f"recrawl_peak:{k}": v for k, v in again.peaks.items()},
                        **{f"cpu:{k}": v for k, v in first.cpus.items()},
                        **{f"recrawl_cpu:{k}": v for k, v in again.cpus.items()},
                        **{f"at_peak:{k}": v for k, v in first.at_peak.items()},
                        "cpu": first.cpu,
                        "own_cpu": first.own_cpu,
                        "server_cpu": first_server,
                        "recrawl_cpu": again.cpu,
                        **{f"first {k}": v for k, v in phases(first.lines).items()},
                        **{f"recrawl {k}": v for k, v in phases(again.lines).items()},
                        "bytes": served["bytes"],
                        "recrawl_bytes": served_again["bytes"],
                        **sitemap_run,
                    }
                )
                print(
                    f"round {round_ + 1}: {variant.name}: {served[200]} pages in {crawl_rounds}"
                    f" rounds, {first.seconds:.1f} s ({served[200] / first.seconds:.0f}/s,"
                    f" {served[200] / first.seconds / (got['pages'] / plain.seconds):.2f}x plain),"
                    f" peak RSS {first.rss_mb:.0f} MB, CPU {first.cpu:.1f} s (its own process"
                    f" {first.own_cpu:.1f} s, server {first_server:.1f} s);"
                    f" re-crawl ({changed} pages changed) {again.seconds:.1f} s"
                    f" ({first.seconds / again.seconds:.1f}x cheaper), peak RSS"
                    f" {again.rss_mb:.0f} MB; bytes sent: first crawl"
                    f" {served['bytes'] / 1e6:.1f} MB, re-crawl {served_again['bytes'] / 1e6:.2f} MB",
                    flush=True,
                )
                if sitemap_run:
                    print(
                        f"    re-crawl with the sitemaps: {sitemap_run['sm_200']:.0f} pages (200),"
                        f" {sitemap_run['sm_sitemaps']:.0f} sitemaps,"
                        f" {sitemap_run['sm_robots']:.0f} robots.txt, no 304;"
                        f" {sitemap_run['sm']:.1f} s ({first.seconds / sitemap_run['sm']:.1f}x"
                        f" cheaper), CPU {sitemap_run['sm_cpu']:.1f} s"
                        f" ({first.cpu / sitemap_run['sm_cpu']:.1f}x), bytes sent"
                        f" {sitemap_run['sm_bytes'] / 1e6:.2f} MB; phases: "
                        + ", ".join(
                            f"{k.removeprefix('sm ')} {v:.1f} s"
                            for k, v in sitemap_run.items()
                            if k.startswith("sm ")
                        ),
                        flush=True,
                    )
                floor = (
                    f"floor {results[variant.name][-1]['rss_floor']:.0f} MB (the plain spider's"
                    f" {plain.rss_mb:.0f} MB + idle imports of "
                    + ", ".join(f"{kind} {floors[kind]:.0f} MB" for kind in variant.beside)
                    + "); "
                    if variant.beside
                    else ""
                )
                print(
                    f"    {floor}peak PSS of the tree {first.pss_mb:.0f} MB, re-crawl"
                    f" {again.pss_mb:.0f} MB; each process's peak RSS (VmHWM, MB): first crawl "
                    + _peaks(first.peaks)
                    + "; re-crawl "
                    + _peaks(again.peaks)
                    + "; RSS at the tree's peak (MB): "
                    + _peaks(first.at_peak)
                    + "; each process's CPU (s): first crawl "
                    + _cpus(first.cpus)
                    + "; re-crawl "
                    + _cpus(again.cpus),
                    flush=True,
                )
                if variant.name.startswith("nutchy crawl"):  # phases from its log lines
                    print(
                        "    first crawl: "
                        + ", ".join(
                            f"{k.removeprefix('first ')} {v:.1f} s"
                            for k, v in results[variant.name][-1].items()
                            if k.startswith("first ")
                        )
                        + "; re-crawl: "
                        + ", ".join(
                            f"{k.removeprefix('recrawl ')} {v:.1f} s"
                            for k, v in results[variant.name][-1].items()
                            if k.startswith("recrawl ")
                        ),
                        flush=True,
                    )
                shutil.rmtree(crawl_dir)
        if args.rounds:
            print()
            print(table(results, args))
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            # The floor first: what Scrapy alone spends asking every page again.
            path = args.profile / "floor.txt"
            started = time.monotonic()
            run_command(
                profiled(child("floor", urls, args.concurrency, args.per_host), path), work, log
            )
            print(
                f"# profiled: the floor, {time.monotonic() - started:.1f} s (py-spy,"
                f" {PROFILE_RATE} samples/s; {path})",
                flush=True,
            )
            print(profile_summary("floor: a plain Spider asking every page again", [path]))
            for number, variant in enumerate(variants):
                crawl_dir = work / f"profiled-{number}"
                context = Context(seeds, crawl_dir, settings, args.max_rounds)
                slug = re.sub(r"[^a-z0-9]+", "-", variant.name.lower()).strip("-")
                written: dict[str, list[Path]] = {}
                for phase, commands in (
                    ("first", variant.first(context)),
                    ("recrawl", variant.recrawl(context)),
                ):
                    if phase == "recrawl":
                        server_get(ports, f"{CHANGE_PATH.decode()}{args.changed}")
                    paths = [args.profile / f"{slug}-{phase}-{i}.txt" for i in range(len(commands))]
                    started = time.monotonic()
                    for command, path in zip(commands, paths, strict=True):
                        run_command(profiled(command, path), work, log, variant.env)
                    written[phase] = paths
                    print(
                        f"# profiled: {variant.name}, {phase}, {time.monotonic() - started:.1f} s"
                        f" (py-spy, {PROFILE_RATE} samples/s; {', '.join(map(str, paths))})",
                        flush=True,
                    )
                server_get(ports, f"{CHANGE_PATH.decode()}0")
                for phase, paths in written.items():
                    print(profile_summary(f"{variant.name}: {phase}", paths))
                shutil.rmtree(crawl_dir)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def table(results: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> str:
    """The Markdown table: medians over the rounds, ratios with each round's value."""
    variants = [name for name in results if name != "plain"]
    plain_rate = [r["pages"] / r["seconds"] for r in results["plain"]]

    def med(name: str, key: str, digits: int) -> str:
        return f"{statistics.median(r.get(key, 0.0) for r in results[name]):.{digits}f}"

    def by_process(name: str, prefix: str, digits: int) -> str:
        """*name*'s values of the keys ``PREFIX:ROLE``, a process kind each (median of the
        rounds; 0 for a round where no process of that kind ran)."""
        kinds = sorted({k for r in results[name] for k in r if k.startswith(prefix)})
        return ", ".join(f"{k.removeprefix(prefix)} {med(name, k, digits)}" for k in kinds)

    def per_round(values: list[float], digits: int) -> str:
        each = " / ".join(f"{x:.{digits}f}" for x in values)
        return f"**{statistics.median(values):.{digits}f}x** ({each})"

    rows = [
        f"| measure ({args.shape}: {args.pages:,} pages"
        + (f" x {args.links} links, {args.words} words," if args.shape == "uniform" else ",")
        + f" {args.hosts} hosts;"
        f" median of {args.rounds}) | plain Scrapy CrawlSpider |"
        + "".join(f" {name} |" for name in variants),
        "|---|---:|" + "---:|" * len(variants),
    ]

    def row(label: str, plain_value: str, values: list[str]) -> None:
        rows.append(f"| {label} | {plain_value} |" + "".join(f" {v} |" for v in values))

    row("first crawl, s", med("plain", "seconds", 1), [med(n, "seconds", 1) for n in variants])
    row("rounds", "", [med(n, "rounds", 0) for n in variants])
    rates = {n: [r["pages"] / r["seconds"] for r in results[n]] for n in variants}
    row(
        "pages/s",
        f"{statistics.median(plain_rate):.0f}",
        [f"{statistics.median(rates[n]):.0f}" for n in variants],
    )
    row(
        "pages/s, ratio to plain (per round)",
        "1.00x",
        [
            per_round([x / p for x, p in zip(rates[n], plain_rate, strict=True)], 2)
            for n in variants
        ],
    )
    downloads = [r["pages"] / r["download"] for r in results["plain"]]
    row(
        "floor, a Spider downloading every page (no parse, no links, no table): its pages/s"
        " over plain's; each crawl's pages/s over the floor's (per round)",
        per_round([d / p for d, p in zip(downloads, plain_rate, strict=True)], 2),
        [per_round([x / d for x, d in zip(rates[n], downloads, strict=True)], 2) for n in variants],
    )
    row(
        "... its CPU time, s; the crawls' CPU time over it",
        med("plain", "download_cpu", 1),
        [
            per_round(
                [
                    r["cpu"] / p["download_cpu"]
                    for r, p in zip(results[n], results["plain"], strict=True)
                ],
                1,
            )
            for n in variants
        ],
    )
    row(
        "peak RSS of the process tree, MB",
        med("plain", "rss", 0),
        [med(n, "rss", 0) for n in variants],
    )

    def to_plain(key: str, plain_key: str) -> list[str]:
        """Each variant's *key* over the plain spider's *plain_key*, per round."""
        return [
            per_round(
                [r[key] / p[plain_key] for r, p in zip(results[n], results["plain"], strict=True)],
                2,
            )
            if all(r[key] for r in results[n])
            else ""
            for n in variants
        ]

    row("peak RSS, ratio to plain (per round)", "1.00x", to_plain("rss", "rss"))
    row(
        "memory floor, MB: plain's peak RSS + idle processes importing what the crawl's own"
        f" process ({med('plain', 'imports:crawl', 0)} MB) and the parse process"
        f" ({med('plain', 'imports:parse', 0)} MB) import",
        "",
        [
            med(n, "rss_floor", 0) if all(r["rss_floor"] for r in results[n]) else ""
            for n in variants
        ],
    )
    row("... the floor over plain's peak RSS (per round)", "", to_plain("rss_floor", "rss"))
    row(
        "peak PSS of the process tree, MB (shared pages counted once)",
        med("plain", "pss", 0),
        [med(n, "pss", 0) for n in variants],
    )
    row("peak PSS, ratio to plain's peak PSS (per round)", "1.00x", to_plain("pss", "pss"))
    row("each process's peak RSS (VmHWM), MB", "", [by_process(n, "peak:", 0) for n in variants])
    row(
        "RSS of each kind of process at the tree's peak, MB",
        "",
        [by_process(n, "at_peak:", 0) for n in variants],
    )
    row(
        "CPU time (user + sys) of the process tree, s",
        med("plain", "cpu", 1),
        [med(n, "cpu", 1) for n in variants],
    )
    row(
        "... of the command's own process, s (the rest: its children)",
        med("plain", "own_cpu", 1),
        [med(n, "own_cpu", 1) for n in variants],
    )
    row(
        "... of each kind of process, s (each read at its last sample, every 0.1 s)",
        "",
        [by_process(n, "cpu:", 1) for n in variants],
    )
    row(
        "cores busy (CPU time / wall time)",
        f"{statistics.median(r['cpu'] / r['seconds'] for r in results['plain']):.2f}",
        [f"{statistics.median(r['cpu'] / r['seconds'] for r in results[n]):.2f}" for n in variants],
    )
    row(
        "the server's CPU time meanwhile, s",
        med("plain", "server_cpu", 1),
        [med(n, "server_cpu", 1) for n in variants],
    )
    row(
        f"re-crawl ({args.changed}% changed, the rest 304), s; plain: a Spider asking every page"
        " again (all 304)",
        med("plain", "floor", 1),
        [med(n, "recrawl", 1) for n in variants],
    )
    row("re-crawl CPU time, s", "", [med(n, "recrawl_cpu", 1) for n in variants])
    row(
        "... of each kind of process, s",
        "",
        [by_process(n, "recrawl_cpu:", 1) for n in variants],
    )
    row(
        "first crawl CPU / re-crawl CPU (per round)",
        "",
        [per_round([r["cpu"] / r["recrawl_cpu"] for r in results[n]], 1) for n in variants],
    )
    row(
        "first crawl / re-crawl (per round)",
        "",
        [per_round([r["seconds"] / r["recrawl"] for r in results[n]], 1) for n in variants],
    )
    floors = [r["floor"] for r in results["plain"]]
    # The most a re-crawl can save when each of its requests costs what Scrapy alone spends.
    row(
        "first crawl / plain Spider asking every page again (per round)",
        "",
        [
            per_round([r["seconds"] / f for r, f in zip(results[n], floors, strict=True)], 1)
            for n in variants
        ],
    )
    row(
        "re-crawl / plain Spider asking every page again (per round)",
        "1.0x",
        [
            per_round([r["recrawl"] / f for r, f in zip(results[n], floors, strict=True)], 2)
            for n in variants
        ],
    )
    # The same in CPU time, which a loaded machine moves less.
    row(
        "first crawl CPU / the plain Spider's CPU asking every page again (per round)",
        med("plain", "floor_cpu", 1) + " s",
        [
            per_round(
                [
                    r["cpu"] / p["floor_cpu"]
                    for r, p in zip(results[n], results["plain"], strict=True)
                ],
                1,
            )
            for n in variants
        ],
    )
    row(
        "re-crawl CPU / the plain Spider's CPU asking every page again (per round)",
        "1.0x",
        [
            per_round(
                [
                    r["recrawl_cpu"] / p["floor_cpu"]
                    for r, p in zip(results[n], results["plain"], strict=True)
                ],
                2,
            )
            for n in variants
        ],
    )
    row("re-crawl peak RSS, MB", "", [med(n, "recrawl_rss", 0) for n in variants])
    row(
        "re-crawl peak RSS, ratio to plain's first crawl (per round)",
        "",
        to_plain("recrawl_rss", "rss"),
    )
    row("re-crawl peak PSS, MB", "", [med(n, "recrawl_pss", 0) for n in variants])

    # The re-crawl with the sitemaps: the same changes, on a copy of the table after the first
    # crawl, with nutchy crawl -rounds 1 -sitemapsFromHostdb once (no -adddays).
    def sm(n: str) -> bool:
        return all("sm" in r for r in results[n])

    def sm_ratio(key: str, sm_key: str, digits: int) -> list[str]:
        return [
            per_round([r[key] / r[sm_key] for r in results[n]], digits) if sm(n) else ""
            for n in variants
        ]

    def sm_med(key: str, digits: int) -> list[str]:
        return [med(n, key, digits) if sm(n) else "" for n in variants]

    if any(sm(n) for n in variants):
        row(
            "re-crawl with the sitemaps (-sitemapsFromHostdb once, no -adddays: the pages whose"
            " lastmod moved), s",
            "",
            sm_med("sm", 1),
        )
        row(
            "... requests the server answered: pages (200), 304s, sitemaps, robots.txt",
            "",
            [
                f"{med(n, 'sm_200', 0)}, 0, {med(n, 'sm_sitemaps', 0)}, {med(n, 'sm_robots', 0)}"
                if sm(n)
                else ""
                for n in variants
            ],
        )
        row("... its CPU time, s", "", sm_med("sm_cpu", 1))
        row(
            "... of each kind of process, s",
            "",
            [by_process(n, "sm_cpu:", 1) if sm(n) else "" for n in variants],
        )
        row(
            "... its phases, s (sitemaps: the fetch's start-up they wait for, robots.txt and the"
            " sitemaps read)",
            "",
            [
                ", ".join(
                    f"{k.removeprefix('sm ')} {med(n, k, 1)}"
                    for k in results[n][0]
                    if k.startswith("sm ")
                )
                if sm(n)
                else ""
                for n in variants
            ],
        )
        row(
            "first crawl / re-crawl with the sitemaps (per round)", "", sm_ratio("seconds", "sm", 1)
        )
        row(
            "first crawl CPU / re-crawl with the sitemaps CPU (per round)",
            "",
            sm_ratio("cpu", "sm_cpu", 1),
        )
        row("re-crawl with the sitemaps, peak RSS, MB", "", sm_med("sm_rss", 0))
    # Bandwidth: what the server sent (status lines, headers, bodies).
    row(
        "bytes the server sent, first crawl, MB",
        f"{statistics.median(r['bytes'] for r in results['plain']) / 1e6:.1f}",
        [f"{statistics.median(r['bytes'] for r in results[n]) / 1e6:.1f}" for n in variants],
    )
    row(
        "bytes the server sent, re-crawl asking every page, MB; plain: the Spider asking every"
        " page again",
        f"{statistics.median(r['floor_bytes'] for r in results['plain']) / 1e6:.2f}",
        [
            f"{statistics.median(r['recrawl_bytes'] for r in results[n]) / 1e6:.2f}"
            for n in variants
        ],
    )
    row(
        "first crawl bytes / re-crawl asking every page bytes (per round)",
        per_round([r["bytes"] / r["floor_bytes"] for r in results["plain"]], 1),
        [per_round([r["bytes"] / r["recrawl_bytes"] for r in results[n]], 1) for n in variants],
    )
    if any(sm(n) for n in variants):
        row(
            "bytes the server sent, re-crawl with the sitemaps, MB",
            "",
            [
                f"{statistics.median(r['sm_bytes'] for r in results[n]) / 1e6:.2f}" if sm(n) else ""
                for n in variants
            ],
        )
        row(
            "first crawl bytes / re-crawl with the sitemaps bytes (per round)",
            "",
            sm_ratio("bytes", "sm_bytes", 1),
        )
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())
