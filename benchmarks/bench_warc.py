"""WARC writing alone, without a fetch: CPU and bytes per page at each NUTCH_WARC_GZIP_LEVEL.

    python benchmarks/bench_warc.py                       # 300 doc-shaped pages, levels 0-9
    python benchmarks/bench_warc.py --levels 1,6,9 --pages 1000

What the WARC process (``nutchy._warcwork``) does for each answer of a fetch, timed alone in
this process: :class:`nutchy.warc.WarcFiles` writes a ``response`` and a ``request`` record per
page (warcio builds them, nutchy gzips each as a member of its own) in batches of 25, as the
fetch's writer thread sends them. Two sets of pages:

- ``doc``: the pages of bench_crawl.py's doc-shaped site (5 to 80 KB of text, log-uniform, and
  10 to 50 links a page), the same seed every run;
- ``2k``: bench_fetch.py's 2 KB page (mostly one repeated letter), for every page.

For each set and level: CPU ms per page (``time.process_time``, the median of ``--rounds``),
bytes of WARC written per page, and their ratio to the level-0 file (stored, not compressed).
The row ``warcio`` writes the same records with warcio's own ``WARCWriter(gzip=True)`` (zlib
level 9 for every record, a flush per record), what nutchy did before its gzip level setting.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from bench_crawl import doc_site, render_site
from bench_fetch import BODY

from nutchy.warc import Capture, WarcFiles, warc_date

BATCH = 25
REQUEST_HEADERS = [
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("Accept-Language", "en"),
    ("User-Agent", "Scrapy/2.13.3 (+https://scrapy.org)"),
    ("Accept-Encoding", "gzip, deflate, br, zstd"),
]


def captures(bodies: list[bytes]) -> list[Capture]:
    date = warc_date(time.time() * 1000)
    return [
        Capture(
            url=f"http://127.0.0.2:8000/p/{i:06d}.html",
            date=date,
            status=200,
            headers=[
                ("Content-Type", "text/html; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Date", "Thu, 26 Nov 2026 07:00:00 GMT"),
                ("Server", "bench"),
            ],
            payload=body,
            request_headers=REQUEST_HEADERS,
            ip="127.0.0.2",
        )
        for i, body in enumerate(bodies)
    ]


def write_nutchy(folder: Path, pages: list[Capture], level: int) -> tuple[float, int]:
    """CPU seconds and bytes of writing *pages* with WarcFiles at *level*."""
    files = WarcFiles(folder, max_size=10**12, gzip_level=level)
    started = time.process_time()
    for i in range(0, len(pages), BATCH):
        files.write_batch(pages[i : i + BATCH])
    files.close()
    cpu = time.process_time() - started
    size = sum(path.stat().st_size for path in files.files)
    for path in files.files:
        path.unlink()
    return cpu, size


def write_warcio(folder: Path, pages: list[Capture]) -> tuple[float, int]:
    """The same records with warcio's own gzipping writer (level 9, a flush per record)."""
    from warcio.warcwriter import WARCWriter

    records = WarcFiles(folder, max_size=10**12)  # builds the records, writes nothing
    path = folder / "warcio.warc.gz"
    started = time.process_time()
    with open(path, "wb") as handle:
        writer = WARCWriter(handle, gzip=True, warc_version="1.0")
        for capture in pages:
            for record in records._records(capture):
                writer.write_record(record)
    cpu = time.process_time() - started
    size = path.stat().st_size
    path.unlink()
    return cpu, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=300, help="pages of each set")
    parser.add_argument("--levels", default="0,1,2,3,4,5,6,7,8,9")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    levels = [int(level) for level in args.levels.split(",")]
    site = doc_site(args.pages, 1, seed=7)
    html = render_site(site, ["127.0.0.2"], {"127.0.0.2": 8000}, seed=7)
    sets = {"doc": captures(list(html.values())), "2k": captures([BODY] * args.pages)}
    print(f"# {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
    for name, pages in sets.items():
        mean_kb = sum(len(c.payload) for c in pages) / len(pages) / 1000
        print(f"# {name}: {len(pages)} pages, {mean_kb:.1f} KB of content a page on average")
    print()
    print("| pages | level | CPU ms per page | KB written per page | of level 0 |")
    print("|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="bench-warc-") as tmp:
        folder = Path(tmp)
        for name, pages in sets.items():
            stored = None
            for level in [*levels, "warcio"]:
                cpus, size = [], 0
                for _ in range(args.rounds):
                    if level == "warcio":
                        cpu, size = write_warcio(folder, pages)
                    else:
                        cpu, size = write_nutchy(folder, pages, int(level))
                    cpus.append(cpu)
                if level == 0:
                    stored = size
                share = f"{size / stored:.3f}" if stored else ""
                print(
                    f"| {name} | {level} | {statistics.median(cpus) * 1000 / len(pages):.3f} |"
                    f" {size / len(pages) / 1000:.2f} | {share} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
