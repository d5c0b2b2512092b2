"""The HTML parse alone: nutchy's parse beside Scrapy's LinkExtractor, on the same pages.

    python benchmarks/bench_parse.py                    # 2,000 doc-shaped pages + 300 others
    python benchmarks/bench_parse.py --pages 500 --repeat 5
    python benchmarks/bench_parse.py --html DIR         # also up to --files *.html under DIR

Pages, built in memory (nothing is served):

- ``docs``: the documentation-shaped site of ``bench_crawl.py --shape docs`` (its generator,
  same ``--seed``): 5 to 80 KB of text a page, 10 to 50 links, a few hubs of hundreds;
- ``reference``: API reference pages as documentation generators write them: a sidebar of a
  few hundred relative links (``../``), code blocks of highlighted tokens (a ``<span>`` a
  token), a search script, entities;
- ``news``: article pages as news sites serve them: a ``<head>`` of many ``<meta>`` and
  ``<link>``, JSON-LD and advertising scripts, menus of absolute links to the site and to
  other hosts, a few KB of article text, comments, images with ``srcset``;
- ``forum``: sloppy table pages: a table of a few hundred rows whose cells and paragraphs are
  never closed, links with query strings (``&amp;``), ``<font>`` and ``<br>``;
- ``html``: with ``--html DIR``, real pages from disk (their path under DIR is their URL's).

For each set, in the same process, one after the other, ``--repeat`` times (the median is
shown):

- ``nutchy``: :func:`nutchy.core.parse.parse_content` of every page with the parse settings of
  a crawl with the defaults (outlinks normalized and filtered by the regex URL filter), as the
  parse process of the fetch and ``nutchy parse`` run it: the content is decoded, parsed, and
  title, text and outlinks with anchors come out;
- ``LinkExtractor``: ``LinkExtractor().extract_links(response)`` of an ``HtmlResponse`` of every
  page, as the plain ``CrawlSpider`` of ``bench_crawl.py`` extracts its links (the responses
  are built before the clock starts, as the downloader builds them in a crawl).

Both are timed in CPU time of the process (``time.process_time``, what a loaded machine moves
least) and wall time; MB/s is the pages' bytes over the CPU time. The last column is nutchy's
pages/s over LinkExtractor's: above 1, nutchy's parse (which also gives text, title, anchors)
costs less than the plain spider's link extraction. The header says which nutchy (its path and
commit) ran, so that a run against another checkout (``PYTHONPATH=/path/to/checkout``) compares
two versions of the parse.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_crawl  # the doc-shaped site's generator

HOST = "docs.example.org"
WORDS = bench_crawl.WORDS

Page = tuple[str, bytes]


# --- the pages ---------------------------------------------------------------------------------


def doc_pages(n: int, seed: int) -> list[Page]:
    """The pages of ``bench_crawl.py``'s documentation-shaped site of *n* pages on one host."""
    site = bench_crawl.doc_site(n, 1, seed)
    bodies = bench_crawl.render_site(site, [HOST], {HOST: 80}, seed)
    return [(f"http://{HOST}{path.decode()}", body) for (_, path), body in bodies.items()]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def reference_page(rng: random.Random, i: int) -> Page:
    """An API reference page: sidebar, highlighted code, a search script."""
    sidebar = "".join(
        f'<li><a href="../{rng.choice(WORDS)}/struct.{rng.choice(WORDS).title()}{j}.html"'
        f' title="{_words(rng, 3)}">{rng.choice(WORDS)}::{rng.choice(WORDS)}{j}</a></li>'
        for j in range(rng.randint(150, 450))
    )
    sections = []
    for s in range(rng.randint(5, 25)):
        tokens = "".join(
            f'<span class="{rng.choice(("kw", "fn", "ty", "op", "lit"))}">'
            f"{rng.choice(WORDS)}</span>{rng.choice((' ', '&lt;', '&gt;', '&amp;', '(', ')'))}"
            for _ in range(rng.randint(20, 120))
        )
        sections.append(
            f'<section id="m{s}"><h3><a class="anchor" href="#m{s}">&sect;</a>'
            f'<code>pub fn {rng.choice(WORDS)}_{s}</code></h3><div class="docblock"><p>'
            f'{_words(rng, rng.randint(40, 200))} <a href="../{rng.choice(WORDS)}/index.html">'
            f"{rng.choice(WORDS)}</a> {_words(rng, 30)}</p>"
            f'<pre class="rust"><code>{tokens}</code></pre></div></section>'
        )
    html = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1.0">'
        f"<title>{rng.choice(WORDS)}::{rng.choice(WORDS)} - Rust</title>"
        '<link rel="stylesheet" href="../static.files/rustdoc.css">'
        "<style>.sidebar{width:200px}pre{overflow:auto}</style>"
        '<script defer src="../search-index.js"></script>'
        f'<script>window.searchState = {{"loaded": false, "crate": "c{i}"}};</script></head>'
        f'<body class="rustdoc"><nav class="sidebar"><ul>{sidebar}</ul></nav>'
        f'<main><h1>Struct <a href="index.html">{rng.choice(WORDS)}</a></h1>'
        f"{''.join(sections)}</main>"
        '<noscript><a href="../settings.html">Settings</a></noscript></body></html>'
    )
    return f"http://{HOST}/std/{rng.choice(WORDS)}/struct.Page{i}.html", html.encode()


def news_page(rng: random.Random, i: int) -> Page:
    """A news article: a heavy head, scripts, menus of absolute links, some text."""
    metas = "".join(
        f'<meta property="og:{rng.choice(WORDS)}{j}" content="{_words(rng, 6)}">'
        f'<link rel="preload" href="https://cdn{j % 3}.example.net/{rng.choice(WORDS)}.js">'
        for j in range(rng.randint(20, 60))
    )
    scripts = "".join(
        f"<script>(function(){{var a{j}=[{','.join(str(rng.randrange(999)) for _ in range(200))}];"
        f'if(a{j}.length<3){{document.write("<div>x</div>")}}}})();</script>'
        for j in range(rng.randint(3, 12))
    )
    menu = "".join(
        f'<li class="menu-item"><a href="https://{rng.choice(("www", "sport", "shop"))}'
        f'.news.example/{rng.choice(WORDS)}/{j}">{_words(rng, 2)}</a></li>'
        for j in range(rng.randint(60, 200))
    )
    article = "".join(
        f"<p>{_words(rng, rng.randint(30, 120))} <em>{rng.choice(WORDS)}</em> "
        f'<a href="/{rng.choice(WORDS)}/{rng.randrange(10**6)}.html">{_words(rng, 3)}</a>'
        f" &mdash; &quot;{_words(rng, 8)}&quot;</p><!-- ad slot {j} -->"
        f'<img src="/img/{j}.jpg" srcset="/img/{j}-2x.jpg 2x" alt="{_words(rng, 4)}">'
        for j in range(rng.randint(5, 25))
    )
    html = (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{_words(rng, 8)}</title>'
        f'{metas}<script type="application/ld+json">{{"@type": "NewsArticle", "headline":'
        f' "{_words(rng, 8)}"}}</script>{scripts}</head><body><header><nav><ul>{menu}</ul></nav>'
        f"</header><article><h1>{_words(rng, 8)}</h1>{article}</article><footer><ul>{menu}</ul>"
        "</footer></body></html>"
    )
    return f"https://www.news.example/{rng.choice(WORDS)}/{i}.html", html.encode()


def forum_page(rng: random.Random, i: int) -> Page:
    """A forum's table of threads, written carelessly: cells, rows and paragraphs never closed."""
    rows = "".join(
        f'<tr class="row{r % 2}"><td><img src="/i/{r % 7}.gif"><td><font size=2>'
        f'<a href="viewtopic.php?t={rng.randrange(10**5)}&amp;sid={rng.randrange(10**8):x}">'
        f"<b>{_words(rng, rng.randint(3, 9))}</b></a><br>{_words(rng, 6)}"
        f'<td align=center>{rng.randrange(500)}<td><a href="profile.php?u={rng.randrange(10**4)}">'
        f"{rng.choice(WORDS)}</a><p>{_words(rng, 5)}"
        for r in range(rng.randint(50, 300))
    )
    html = (
        f"<html><head><title>{_words(rng, 4)} :: Forum</title>"
        '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">'
        f"</head><body bgcolor=#ffffff><center><table width=100%>{rows}</table>"
        f"<p>Pages: {' '.join(f'<a href=viewforum.php?f={i}&start={p * 50}>{p}</a>' for p in range(20))}"
        "</body></html>"
    )
    return f"http://forum.example.com/viewforum.php?f={i}", html.encode("latin-1")


def shaped_pages(n: int, seed: int) -> dict[str, list[Page]]:
    """*n* pages of each real-world shape."""
    rng = random.Random(seed)
    return {
        "reference": [reference_page(rng, i) for i in range(n)],
        "news": [news_page(rng, i) for i in range(n)],
        "forum": [forum_page(rng, i) for i in range(n)],
    }


def disk_pages(folder: Path, limit: int, seed: int) -> list[Page]:
    """Up to *limit* ``*.html`` files under *folder* (a sample when there are more)."""
    files = sorted(folder.rglob("*.htm*"))
    if len(files) > limit:
        files = sorted(random.Random(seed).sample(files, limit))
    return [(f"http://{HOST}/{f.relative_to(folder).as_posix()}", f.read_bytes()) for f in files]


# --- the two parses ----------------------------------------------------------------------------


Runner = tuple[Callable[[list[Page]], Any], Callable[[Any], int]]


def nutchy_parse() -> Runner:
    """The parse as nutchy's parse process runs it: nothing to prepare, then
    :func:`~nutchy.core.parse.parse_content` of each page."""
    from nutchy.config import load_settings
    from nutchy.core.parse import parse_content
    from nutchy.jobs._cycle import parse_config

    config = parse_config(load_settings({}, project=False))

    def run(pages: list[Page]) -> int:
        links = 0
        for url, body in pages:
            links += len(parse_content(url, body, "text/html", config).outlinks)
        return links

    return (lambda pages: pages), run


def scrapy_links() -> Runner:
    """The plain CrawlSpider's link extraction: responses built first (the downloader builds
    them; a response caches its text and selector, so each run gets new ones), then
    ``extract_links`` of each."""
    from scrapy.http import HtmlResponse
    from scrapy.linkextractors import LinkExtractor

    extractor = LinkExtractor()

    def prepare(pages: list[Page]) -> list[HtmlResponse]:
        return [
            HtmlResponse(url, body=body, headers={"Content-Type": "text/html"})
            for url, body in pages
        ]

    def run(responses: list[HtmlResponse]) -> int:
        return sum(len(extractor.extract_links(response)) for response in responses)

    return prepare, run


def timed(runner: Runner, pages: list[Page]) -> tuple[float, float, int]:
    """CPU seconds, wall seconds and links of one run of *runner* over *pages*."""
    prepare, run = runner
    prepared = prepare(pages)
    cpu, wall = time.process_time(), time.perf_counter()
    links = run(prepared)
    return time.process_time() - cpu, time.perf_counter() - wall, links


# --- main --------------------------------------------------------------------------------------


def which_nutchy() -> str:
    import nutchy

    folder = Path(nutchy.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--", "nutchy"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(folder)
    return f"{folder} at {commit}{' (with changes)' if dirty else ''}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000, help="doc-shaped pages")
    parser.add_argument("--shaped", type=int, default=100, help="pages of each other shape")
    parser.add_argument("--html", type=Path, help="a folder of real pages (*.html)")
    parser.add_argument("--files", type=int, default=1000, help="at most this many from --html")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    sets: dict[str, list[Page]] = {}
    if args.pages:
        sets["docs"] = doc_pages(args.pages, args.seed)
    if args.shaped:
        sets.update(shaped_pages(args.shaped, args.seed))
    if args.html:
        sets["html"] = disk_pages(args.html, args.files, args.seed)
    runners = {"nutchy": nutchy_parse(), "LinkExtractor": scrapy_links()}

    print(
        f"# bench_parse {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.platform()},"
        f" Python {platform.python_version()}, {os.cpu_count()} CPUs,"
        f" load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    from lxml import etree

    print(
        f"# nutchy: {which_nutchy()}; lxml {'.'.join(map(str, etree.LXML_VERSION[:3]))},"
        f" libxml2 {'.'.join(map(str, etree.LIBXML_VERSION))}; median of {args.repeat}"
    )
    rows = []
    for name, pages in sets.items():
        size = sum(len(body) for _, body in pages)
        results: dict[str, list[tuple[float, float, int]]] = {r: [] for r in runners}
        for _ in range(args.repeat):
            for runner, run in runners.items():
                results[runner].append(timed(run, pages))
        cpu = {r: statistics.median(x[0] for x in v) for r, v in results.items()}
        wall = {r: statistics.median(x[1] for x in v) for r, v in results.items()}
        links = {r: v[0][2] for r, v in results.items()}
        n = len(pages)
        rows.append(
            f"| {name} | {n:,} | {size / 1e6:.1f} | {links['nutchy'] / n:.0f} |"
            f" {cpu['nutchy']:.2f} | {size / 1e6 / cpu['nutchy']:.1f} | {n / cpu['nutchy']:,.0f} |"
            f" {links['LinkExtractor'] / n:.0f} | {cpu['LinkExtractor']:.2f} |"
            f" {size / 1e6 / cpu['LinkExtractor']:.1f} | {n / cpu['LinkExtractor']:,.0f} |"
            f" **{cpu['LinkExtractor'] / cpu['nutchy']:.2f}x**"
            f" ({wall['LinkExtractor'] / wall['nutchy']:.2f}x) |"
        )
    print()
    print(
        "| pages | n | MB | nutchy: outlinks a page | CPU s | MB/s | pages/s"
        " | LinkExtractor: links a page | CPU s | MB/s | pages/s"
        " | nutchy's pages/s over LinkExtractor's, CPU (wall) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(f"\n# load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
