"""Fetch throughput against a plain Scrapy spider, and peak memory against the batch size.

    python benchmarks/bench_fetch.py                      # 5 hosts x 1000 pages, 3 rounds, 1k/100k RSS
    python benchmarks/bench_fetch.py --rounds 1 --big 20000   # a quick look
    python benchmarks/bench_fetch.py --variants warc,metrics --no-memory   # what each costs

Everything runs on loopback addresses (127.0.0.2, 127.0.0.3...), one per host, served by a small
asyncio HTTP/1.1 server in a process of its own (keep-alive, a 2 KB page for any path, 404 for
robots.txt), so that neither crawler shares its process with the server.

Phases, each crawl in a child process of its own:

- ``throughput``: the same ``--hosts`` x ``--pages`` URL list fetched by a plain Scrapy spider
  (start requests, a callback that does nothing) and by ``scrapy crawl nutch`` on one generated
  batch with parsing off, with the same ``CONCURRENT_REQUESTS`` (``--concurrency``) and the same
  per-host concurrency (Scrapy's ``CONCURRENT_REQUESTS_PER_DOMAIN`` and nutchy's
  ``fetcher.threads.per.queue``, ``--per-host``), no politeness delay, no robots.txt for the plain
  spider. The two alternate for ``--rounds`` rounds; pages/s is pages over the crawl's
  ``elapsed_time_seconds`` (spider opened to closed: nutchy's first read and last write
  included), and the table prints the median of each and their ratio;
- ``memory``: nutchy's fetch of a ``--small`` and a ``--big`` row batch (the same hosts), and the
  peak RSS of each child.

With ``--variants``, each round also fetches the batch with WARC files written
(``NUTCH_WARC_ENABLED``, into a folder removed after the run) and/or with the Prometheus exporter
on (``NUTCH_METRICS_PORT=0``), right after the plain nutchy fetch, and the table gives each
variant's pages/s and the median of its per-round ratio to nutchy's.

Each variant's CPU per page is that of the crawl's process (all its threads); what its child
processes took (the WARC process, ``nutchy._warcwork``) is printed beside it.

The issue's targets: nutchy at least 0.9x the plain spider's pages/s; the big batch's peak RSS at
most 100 MB above the small one's; WARC writing at least 0.9x and the metrics at least 0.97x of
nutchy's pages/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
BODY = b"<html><head><title>page</title></head><body>" + b"x" * 2000 + b"</body></html>"
#: What the site serves for every page: BODY, or the --page-file's bytes.
_BODY = [BODY]


# --- the site ----------------------------------------------------------------------------------


class _Page(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            path = head.split(b" ", 2)[1]
            if path == b"/robots.txt":
                status, body = b"404 Not Found", b"none"
            else:
                status, body = b"200 OK", _BODY[0]
            self.transport.write(  # type: ignore[attr-defined]
                b"HTTP/1.1 %s\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s"
                % (status, len(body), body)
            )


def serve(hosts: list[str]) -> None:
    """Serve every host on a port of its own; print ``{host: port}`` once listening."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        ports = {}
        for host in hosts:
            server = await loop.create_server(_Page, host, 0, backlog=1024)
            ports[host] = server.sockets[0].getsockname()[1]
        print(json.dumps(ports), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# --- children ----------------------------------------------------------------------------------


def load_average() -> str:
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(process: Any, crawler: Any, **kwargs: Any) -> tuple[dict[str, Any], float]:
    """Run one crawl; return its stats and the CPU seconds (all threads) it took from the
    spider's opening to its closing."""
    from scrapy import signals

    cpu: list[float] = []

    def mark() -> None:
        cpu.append(time.process_time())

    crawler.signals.connect(mark, signal=signals.spider_opened, weak=False)
    crawler.signals.connect(mark, signal=signals.spider_closed, weak=False)
    process.crawl(crawler, **kwargs)
    process.start()
    return crawler.stats.get_stats(), cpu[1] - cpu[0]


def crawl_plain(urls_file: str, concurrency: int, per_host: int) -> dict[str, Any]:
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess

    urls = Path(urls_file).read_text().split()

    class PlainSpider(Spider):
        name = "plain"

        async def start(self) -> Any:
            for url in urls:
                yield Request(url, dont_filter=True)

        def parse(self, response: Any) -> None:
            return None

    process = CrawlerProcess(
        {
            "CONCURRENT_REQUESTS": concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": per_host,
            "DOWNLOAD_DELAY": 0,
            "ROBOTSTXT_OBEY": False,
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
        }
    )
    stats, cpu = run(process, process.create_crawler(PlainSpider))
    return {
        "pages": stats.get("downloader/response_status_count/200", 0),
        "seconds": stats["elapsed_time_seconds"],
        "cpu": cpu,
        "rss_mb": peak_rss_mb(),
    }


#: The settings of each ``--variants`` name.
VARIANTS: dict[str, dict[str, Any]] = {
    "warc": {"NUTCH_WARC_ENABLED": True},  # at the default NUTCH_WARC_GZIP_LEVEL
    **{
        f"warc{level}": {"NUTCH_WARC_ENABLED": True, "NUTCH_WARC_GZIP_LEVEL": level}
        for level in range(10)
    },
    "metrics": {"NUTCH_METRICS_PORT": 0},
}


def crawl_nutch(
    crawl_dir: str, concurrency: int, per_host: int, extra: str = "{}"
) -> dict[str, Any]:
    from scrapy.crawler import CrawlerProcess

    from nutchy.spiders import NutchSpider

    process = CrawlerProcess(
        {
            **json.loads(extra),
            "ADDONS": {"nutchy.NutchAddon": 0},
            "NUTCH_CRAWL_DIR": crawl_dir,
            "NUTCH_FETCHER_SERVER_DELAY": 0,
            "NUTCH_FETCHER_PARSE": False,  # fetch only: the measure
            # and no updatedb, which would take the batch's marks off for the next round's fetch
            "NUTCH_FETCHER_UPDATEDB": False,
            "NUTCH_FETCHER_THREADS_PER_QUEUE": per_host,
            "CONCURRENT_REQUESTS": concurrency,
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
        }
    )
    crawler = process.create_crawler(NutchSpider)
    stats, cpu = run(process, crawler, batch="b1")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the WARC process, ended
    return {
        "snapshot_us": snapshot_cost(crawler),
        "pages": stats.get("nutch/fetch/status/SUCCESS", 0),
        "written": stats.get("nutch/fetch/written", 0),
        "seconds": stats["elapsed_time_seconds"],
        "cpu": cpu,
        "children_cpu": children.ru_utime + children.ru_stime,
        "rss_mb": peak_rss_mb(),
    }


def snapshot_cost(crawler: Any) -> float | None:
    """The microseconds of one metrics snapshot (what the exporter does on the reactor once a
    second, NUTCH_METRICS_INTERVAL) on the ended crawl's real stats and scheduler, or None with
    the metrics off."""
    from nutchy.metrics import NutchMetricsExtension

    assert crawler.extensions is not None
    for extension in crawler.extensions.middlewares:
        if isinstance(extension, NutchMetricsExtension):
            started = time.process_time()
            for _ in range(1000):
                extension.take()
            return (time.process_time() - started) * 1000
    return None


def prepare(crawl_dir: str, urls_file: str) -> dict[str, Any]:
    """Inject the URLs into a new table and generate them all into batch ``b1``."""
    from nutchy.core.generate import GenerateConfig
    from nutchy.jobs.generate import GenerateOptions, generate
    from nutchy.jobs.inject import InjectOptions, inject
    from nutchy.store.embedded import EmbeddedStore
    from nutchy.store.table import WebTable

    now = int(time.time() * 1000)
    with WebTable(EmbeddedStore(Path(crawl_dir) / "webpage.sqlite")) as table:
        injected = inject(table, [Path(urls_file)], InjectOptions(2592000, 1.0, None), now=now)
        result = generate(table, GenerateOptions(GenerateConfig()), now=now, batch_id="b1")
    return {"injected": injected.injected, "generated": result.selected}


def child(name: str, *args: Any) -> dict[str, Any]:
    output = subprocess.run(
        [sys.executable, str(HERE), "--child", name, *map(str, args)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return json.loads(output.stdout.strip().splitlines()[-1])


# --- the parent --------------------------------------------------------------------------------


def write_urls(path: Path, ports: dict[str, int], per_host: int) -> None:
    with path.open("w") as out:
        for i in range(per_host):
            for host, port in ports.items():
                out.write(f"http://{host}:{port}/p/{i:06d}.html\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=5)
    parser.add_argument("--pages", type=int, default=1000, help="pages per host (throughput)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--per-host", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", type=int, default=1000, help="rows of the small batch")
    parser.add_argument("--big", type=int, default=100_000, help="rows of the big batch")
    parser.add_argument(
        "--variants",
        default="",
        help="also fetch with these on, comma-separated: warc (at the default gzip level),"
        " warc0 ... warc9 (at that level), metrics",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the memory phase")
    parser.add_argument(
        "--page-file",
        default="",
        help="serve this file's bytes as every page (default: a 2 KB page, mostly 'x')",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; known: {sorted(VARIANTS)}")
    if args.child:
        name, *rest = args.child
        if name == "serve":
            page, *hosts = rest
            if page:
                _BODY[0] = Path(page).read_bytes()
            serve(hosts)
            return 0
        work = {"plain": crawl_plain, "nutch": crawl_nutch, "prepare": prepare}[name]
        typed = [int(a) if a.isdigit() else a for a in rest]
        print(json.dumps(work(*typed)))
        return 0

    hosts = [f"127.0.0.{i + 2}" for i in range(args.hosts)]
    server = subprocess.Popen(
        [sys.executable, str(HERE), "--child", "serve", args.page_file, *hosts],
        stdout=subprocess.PIPE,
        text=True,
    )
    work = Path(tempfile.mkdtemp(prefix="bench-fetch-"))
    try:
        assert server.stdout is not None
        ports = json.loads(server.stdout.readline())
        print(f"# {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
        print(
            f"# {len(hosts)} hosts x {args.pages} pages, CONCURRENT_REQUESTS={args.concurrency},"
            f" {args.per_host} per host, {args.rounds} rounds"
        )
        urls = work / "urls.txt"
        write_urls(urls, ports, args.pages)
        crawl_dir = work / "throughput"
        prepared = child("prepare", crawl_dir, urls)
        assert prepared["generated"] == args.hosts * args.pages, prepared
        plain: list[float] = []
        nutch: list[float] = []
        plain_cpu: list[float] = []
        nutch_cpu: list[float] = []
        extra: dict[str, list[float]] = {v: [] for v in variants}
        ratios: dict[str, list[float]] = {v: [] for v in variants}
        extra_cpu: dict[str, list[float]] = {v: [] for v in variants}
        children_cpu: dict[str, list[float]] = {v: [] for v in variants}
        written: dict[str, int] = {}  # bytes of WARC files
        snapshot_share: list[float] = []
        for round_ in range(args.rounds):
            p = child("plain", urls, args.concurrency, args.per_host)
            n = child("nutch", crawl_dir, args.concurrency, args.per_host)
            assert p["pages"] == n["pages"] == args.hosts * args.pages, (p, n)
            for variant in variants:
                settings = dict(VARIANTS[variant])
                if variant.startswith("warc"):
                    settings["NUTCH_WARC_DIR"] = str(work / "warc")
                v = child("nutch", crawl_dir, args.concurrency, args.per_host, json.dumps(settings))
                assert v["pages"] == args.hosts * args.pages, v
                if variant.startswith("warc"):
                    written[variant] = sum(f.stat().st_size for f in (work / "warc").iterdir())
                shutil.rmtree(work / "warc", ignore_errors=True)
                extra[variant].append(v["pages"] / v["seconds"])
                ratios[variant].append(extra[variant][-1] / (n["pages"] / n["seconds"]))
                extra_cpu[variant].append(v["cpu"] * 1000 / v["pages"])
                if v["snapshot_us"] is not None:
                    # the exporter's own work a second, of the fetch's CPU a second
                    snapshot_share.append(v["snapshot_us"] / 1e6 / (v["cpu"] / v["seconds"]))
                children_cpu[variant].append(v["children_cpu"] * 1000 / v["pages"])
                print(
                    f"round {round_ + 1}: nutchy + {variant} {extra[variant][-1]:7.0f} pages/s,"
                    f" {ratios[variant][-1]:.3f}x nutchy's ({extra_cpu[variant][-1]:.2f} ms CPU"
                    f" per page, + {children_cpu[variant][-1]:.2f} ms in its child processes)",
                    flush=True,
                )
            assert n["written"] == n["pages"], n
            plain.append(p["pages"] / p["seconds"])
            nutch.append(n["pages"] / n["seconds"])
            plain_cpu.append(p["cpu"] * 1000 / p["pages"])
            nutch_cpu.append(n["cpu"] * 1000 / n["pages"])
            print(
                f"round {round_ + 1}: plain {plain[-1]:7.0f} pages/s ({plain_cpu[-1]:.2f} ms CPU"
                f" per page), nutchy {nutch[-1]:7.0f} pages/s ({nutch_cpu[-1]:.2f} ms),"
                f" ratio {nutch[-1] / plain[-1]:.2f} (load average {load_average()})",
                flush=True,
            )
        rss: dict[int, float] = {}
        for rows in () if args.no_memory else (args.small, args.big):
            urls_rows = work / f"urls-{rows}.txt"
            write_urls(urls_rows, ports, -(-rows // len(hosts)))
            lines = urls_rows.read_text().splitlines()[:rows]
            urls_rows.write_text("\n".join(lines) + "\n")
            directory = work / f"memory-{rows}"
            child("prepare", directory, urls_rows)
            started = time.monotonic()
            result = child("nutch", directory, args.concurrency, args.per_host)
            assert result["pages"] == rows, result
            rss[rows] = result["rss_mb"]
            print(
                f"memory: {rows} rows fetched in {time.monotonic() - started:.1f} s,"
                f" peak RSS {rss[rows]:.0f} MB",
                flush=True,
            )
            shutil.rmtree(directory)

        p_med, n_med = statistics.median(plain), statistics.median(nutch)
        print()
        print("| measure | plain Scrapy | nutchy fetch | ratio / difference |")
        print("|---|---:|---:|---:|")
        print(
            f"| pages/s, {len(hosts)} hosts x {args.pages} pages (median of {args.rounds}) |"
            f" {p_med:.0f} | {n_med:.0f} | {n_med / p_med:.2f}x |"
        )
        pc_med, nc_med = statistics.median(plain_cpu), statistics.median(nutch_cpu)
        print(
            f"| CPU ms per page, all threads (median) | {pc_med:.2f} | {nc_med:.2f} |"
            f" {nc_med / pc_med:.2f}x |"
        )
        for variant in variants:
            print(
                f"| pages/s with {variant} on (median of {args.rounds}; ratio: median of the"
                f" rounds' ratios to nutchy's) | | {statistics.median(extra[variant]):.0f} |"
                f" {statistics.median(ratios[variant]):.3f}x |"
            )
            cpu_med = statistics.median(extra_cpu[variant])
            print(
                f"| CPU ms per page with {variant} on (median) | | {cpu_med:.2f} |"
                f" {cpu_med / nc_med:.2f}x nutchy's |"
            )
            children_med = statistics.median(children_cpu[variant])
            if variant.startswith("warc"):  # the WARC process, its start included
                print(
                    f"| CPU ms per page of its child processes with {variant} on (median) | |"
                    f" {children_med:.2f} | |"
                )
            if variant in written:
                print(f"| MB of WARC files with {variant} on | | {written[variant] / 1e6:.1f} | |")
            if variant == "metrics" and snapshot_share:
                print(
                    "| the exporter's own work: one snapshot a second, of the fetch's CPU"
                    f" (median) | | {statistics.median(snapshot_share):.4%} | |"
                )
        if rss:
            print(
                f"| peak RSS, {args.small:,} vs {args.big:,}-row batch | |"
                f" {rss[args.small]:.0f} MB / {rss[args.big]:.0f} MB |"
                f" +{rss[args.big] - rss[args.small]:.0f} MB |"
            )
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
