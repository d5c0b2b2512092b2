"""Read a large sitemap into the web table, beside a plain Scrapy SitemapSpider reading it.

    python benchmarks/bench_sitemap.py                      # 5,000, 50,000 and 200,000 URLs
    python benchmarks/bench_sitemap.py --urls 50000         # one size

A loopback server (a child process) serves one sitemap of N URLs (lastmod, changefreq and
priority on each, 100 hosts' worth of paths on one host), gzipped. For each size, in the same
invocation:

- ``plain``: a Scrapy ``SitemapSpider`` that reads the sitemap and yields each entry to no
  pipeline (Scrapy's reader alone: the floor);
- ``nutchy``: ``nutchy sitemap -sitemapUrls URL`` into an empty embedded table (entries
  normalized, filtered, written through ``WebTable.modify``).

Both run as their own processes; the rate is URLs over Scrapy's ``elapsed_time_seconds`` (the
crawl, without the interpreter's start), and the peak RSS is Scrapy's ``memusage/max`` of that
process. The issue's targets: at least 10,000 URLs/s at 50,000 URLs, and peak RSS flat in the
sitemap's size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PLAIN_SPIDER = '''
import json, os, sys
from scrapy.crawler import CrawlerProcess
from scrapy.spiders import SitemapSpider

class Plain(SitemapSpider):
    name = "plain"
    sitemap_urls = [sys.argv[1]]

    def _parse_sitemap(self, response):
        from scrapy.utils.sitemap import Sitemap
        body = self._get_sitemap_body(response)
        n = 0
        for entry in Sitemap(body):
            n += 1
            yield {"loc": entry["loc"]}

process = CrawlerProcess({"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False,
                          "DOWNLOAD_MAXSIZE": 1 << 30, "DOWNLOAD_WARNSIZE": 0})
crawler = process.create_crawler(Plain)
process.crawl(crawler)
process.start()
stats = crawler.stats.get_stats()
print(json.dumps({k: v for k, v in stats.items() if isinstance(v, (int, float))}))
'''


def sitemap(urls: int) -> bytes:
    lines = ['<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">']
    for i in range(urls):
        lines.append(
            f"<url><loc>http://127.0.0.1/{i % 100}/section/page-{i}.html</loc>"
            f"<lastmod>2024-{1 + i % 12:02d}-{1 + i % 28:02d}</lastmod>"
            f"<changefreq>{('daily', 'weekly', 'monthly')[i % 3]}</changefreq>"
            f"<priority>0.{1 + i % 9}</priority></url>"
        )
    lines.append("</urlset>")
    return "\n".join(lines).encode()


def serve(directory: str) -> None:
    """Serve ``/<n>.xml.gz`` from *directory* on 127.0.0.1 (port printed on stdout)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = Path(directory) / self.path.lstrip("/")
            body = path.read_bytes() if path.is_file() else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def run_plain(url: str, work: Path) -> dict[str, float]:
    script = work / "plain_spider.py"  # a file: Scrapy reads a callback's source
    script.write_text(PLAIN_SPIDER, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), url], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_nutchy(url: str, crawl_dir: Path) -> dict[str, float]:
    report = crawl_dir / "report.json"
    settings = {
        "NUTCH_CRAWL_DIR": str(crawl_dir),
        "NUTCH_FETCHER_SERVER_DELAY": 0,
        "NUTCH_SITEMAP_URLS_MAX": 10_000_000,
        "NUTCH_SITEMAP_SIZE_MAX": 1 << 30,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "nutchy._sitemaprun",
            json.dumps({"sitemaps": url, "strict": False}),
            json.dumps(settings),
        ],
        check=True,
        env={**os.environ, "NUTCHY_FETCH_REPORT": str(report)},
    )
    return json.loads(report.read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, action="append", help="sitemap size (repeatable)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    sizes = args.urls or [5_000, 50_000, 200_000]
    work = Path(tempfile.mkdtemp(prefix="bench-sitemap-"))
    for n in sizes:
        (work / f"{n}.xml.gz").write_bytes(gzip.compress(sitemap(n), 6))
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(work)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        print(
            f"# bench_sitemap {time.strftime('%Y-%m-%d %H:%M')} {platform.node()}"
            f" {os.cpu_count()} CPUs, Python {platform.python_version()}"
        )
        print(
            "| URLs | plain Scrapy URLs/s | nutchy URLs/s | nutchy / plain"
            " | plain peak RSS MB | nutchy peak RSS MB | plain entries | rows written |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in sizes:
            url = f"http://127.0.0.1:{port}/{n}.xml.gz"
            plain = run_plain(url, work)
            crawl_dir = work / f"crawl-{n}"
            crawl_dir.mkdir()
            nutchy = run_nutchy(url, crawl_dir)
            plain_rate = n / plain["elapsed_time_seconds"]
            nutchy_rate = n / nutchy["elapsed_time_seconds"]
            print(
                f"| {n:,} | {plain_rate:,.0f} | {nutchy_rate:,.0f}"
                f" | {nutchy_rate / plain_rate:.2f}x"
                f" | {plain.get('memusage/max', 0) / 2**20:.0f}"
                f" | {nutchy.get('memusage/max', 0) / 2**20:.0f}"
                f" | {int(plain.get('item_scraped_count', 0)):,}"
                f" | {int(nutchy.get('nutch/sitemap/injected', 0)):,} |"
            )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
