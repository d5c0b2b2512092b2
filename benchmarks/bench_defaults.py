"""Do the defaults crawl a documentation site whole? nutchy's defaults against Nutch 2.x's limits.

    python benchmarks/bench_defaults.py                 # 10 sections of 20 pages, an index of 300
    python benchmarks/bench_defaults.py --sections 4 --index 150

The site (tests/graph_site.py's servers, one loopback host) has the shape that lost pages in
issue 19's crawl of the SciPy documentation: a home page links to *sections* long pages (80 KB
of text, then their links: over 64 KiB, the only route to their pages), to an index of
``--index`` links (the only route to those pages), and to a page of 1.5 MB whose one link comes
first. Each section links to ``--pages`` pages of 5 to 30 KB, each of which links to a leaf.
The deepest page is 3 links from the seed.

Each configuration is one ``scrapy crawl nutch -a seeds=... -a rounds=R`` (no politeness delay)
on a new table, with ``R`` = depth + 2: the pages the server sent out of those on the site,
the rounds that fetched something (its ``Updated batch`` lines), the crawl's peak RSS (its
``ru_maxrss``, from ``os.wait4``) and its wall time.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from graph_site import GraphSite, Huge, Page
from sites import FetchProject

from nutchy.store.embedded import EmbeddedStore

HOST = "127.0.0.2"
DEPTH = 3
CONFIGURATIONS = {
    "nutchy defaults": {},
    "Nutch 2.x limits": {
        "NUTCH_HTTP_CONTENT_LIMIT": 65536,
        "NUTCH_DB_MAX_OUTLINKS_PER_PAGE": 100,
        "NUTCH_PARSER_SKIP_TRUNCATED": True,
    },
    "64 KiB, truncated pages parsed": {"NUTCH_HTTP_CONTENT_LIMIT": 65536},
    "100 outlinks a page": {"NUTCH_DB_MAX_OUTLINKS_PER_PAGE": 100},
}


def build_site(site: GraphSite, sections: int, pages: int, index: int) -> str:
    """Put the documentation-shaped site on *site*; return its seed."""
    a = functools.partial(site.url, HOST)
    home = [a(f"/section/{s}") for s in range(sections)]
    api = [a(f"/api/{i}") for i in range(index)]
    site.put(a("/"), Page((*home, a("/genindex"), a("/huge")), title="home"))
    site.put(a("/genindex"), Page(tuple(api), title="index"))
    for url in api:
        site.put(url, Page((), title=url, filler=5_000))
    for s, section in enumerate(home):
        children = [a(f"/section/{s}/{p}") for p in range(pages)]
        site.put(section, Page(tuple(children), title=section, filler=80_000))
        for p, child in enumerate(children):
            leaf = f"{child}/leaf"
            site.put(child, Page((leaf,), title=child, filler=5_000 + 1_000 * (p % 26)))
            site.put(leaf, Page((), title=leaf))
    site.put(a("/huge"), Huge(1_500_000, (a("/huge/child"),)))
    site.put(a("/huge/child"), Page((), title="child"))
    return a("/")


def crawl(name: str, settings: dict[str, object], args: argparse.Namespace) -> str:
    root = Path(tempfile.mkdtemp(prefix="bench-defaults-"))
    store = EmbeddedStore(root / "crawl" / "webpage.sqlite")
    with GraphSite((HOST,)) as site:
        seed = build_site(site, args.sections, args.pages, args.index)
        project = FetchProject(root, store, NUTCH_FETCHER_UPDATEDB=True, **settings)
        command = project.command(None, {"rounds": str(DEPTH + 2), "seeds": seed}, {})
        started = time.monotonic()
        with (root / "crawl.log").open("wb") as log_file:
            process = subprocess.Popen(
                command, cwd=root, env=project.env(), stdout=subprocess.DEVNULL, stderr=log_file
            )
            # the crawl's own peak RSS, from its exit status (Popen has not reaped it)
            _, _, usage = os.wait4(process.pid, 0)
            process.returncode = 0
        seconds = time.monotonic() - started
        log = (root / "crawl.log").read_bytes()
        rss = usage.ru_maxrss
        fetched = len({e.url for e in site.exchanges()})
        total = len(site.resources)
        rounds = len(re.findall(rb"Updated batch", log))
    return f"| {name} | {fetched} / {total} | {rounds} | {rss / 1024:.0f} | {seconds:.1f} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", type=int, default=10)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--index", type=int, default=300)
    args = parser.parse_args(argv)
    print(f"depth {DEPTH}: {DEPTH + 2} rounds at most")
    print("| configuration | pages fetched | rounds | peak RSS (MB) | seconds |")
    print("|---|---|---|---|---|")
    for name, settings in CONFIGURATIONS.items():
        print(crawl(name, settings, args), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
