"""Sitemaps into the web table: ``nutchy sitemap``, on a loopback site, on both stores."""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from nutchy.cli import main
from nutchy.core.sitemap import SitemapEntry, make_entry, may_list, sitemap_change
from nutchy.core.status import CrawlStatus, Mark
from nutchy.core.urls import reverse_url
from nutchy.core.webpage import WebPage
from nutchy.sitemaps import NutchSitemapPipeline, table_roots
from nutchy.store.hosts import RobotsRecord, open_host_memory
from nutchy.store.schema import build_update
from nutchy.store.table import WebTable
from tests.sites import ServedPages, store_settings

NOW = 1_800_000_000_000
DAY = 86_400
BOUNDS = {"default_interval": 30 * DAY, "default_score": 1.0, "min_interval": 60}


def _urlset(
    *urls: str, extra: str = "", namespace: str = "http://www.sitemaps.org/schemas/sitemap/0.9"
) -> bytes:
    body = "".join(f"<url><loc>{url}</loc>{extra}</url>" for url in urls)
    return f'<?xml version="1.0"?><urlset xmlns="{namespace}">{body}</urlset>'.encode()


@pytest.fixture
def site() -> Iterator[ServedPages]:
    with ServedPages() as served:
        yield served


def _run(store, *args: str, **settings: object) -> int:
    options = {**store_settings(store), "NUTCH_FETCHER_SERVER_DELAY": 0, **settings}
    flags = [item for name, value in options.items() for item in ("-s", f"{name}={value}")]
    return main(["sitemap", *args, *flags])


# --- what one entry does ---------------------------------------------------------------------


def test_an_entry_reads_the_w3c_forms_and_ignores_what_it_cannot_read():
    entry = make_entry(
        {"loc": " http://a.com/x ", "lastmod": "soon", "changefreq": "often", "priority": "2"},
        now=NOW,
    )
    assert entry == SitemapEntry("http://a.com/x")
    ahead = make_entry({"loc": "http://a.com/", "lastmod": "2099-01-01"}, now=NOW)
    assert ahead.lastmod is None and ahead.future
    full = make_entry(
        {"loc": "http://a.com/", "lastmod": "2024-02-03T04:05:06.5+02:00", "changefreq": "Weekly"},
        now=NOW,
    )
    assert (full.lastmod, full.interval) == (1706925906500, 7 * DAY)


def test_a_sitemap_lists_its_own_folder_or_what_robots_txt_entitles_it_to():
    assert may_list("http://a.com/d/e/f", "http://a.com/d/sitemap.xml")
    assert not may_list("http://a.com/other", "http://a.com/d/sitemap.xml")
    assert not may_list("https://a.com/d/x", "http://a.com/d/sitemap.xml")
    assert not may_list("http://a.com:81/x", "http://a.com/sitemap.xml")
    assert not may_list("http://b.com/x", "http://a.com/sitemap.xml")
    assert may_list("http://b.com/x", "http://a.com/sitemap.xml", robots_host="b.com")
    assert not may_list("http://c.com/x", "http://a.com/sitemap.xml", robots_host="b.com")


def test_a_new_url_gets_the_hints_and_a_known_one_keeps_its_score():
    entry = SitemapEntry("http://a.com/", lastmod=NOW - 5, interval=1, priority=0.25)
    fields, entries = sitemap_change(entry, None, now=NOW, max_interval=90 * DAY, **BOUNDS)
    assert fields == {
        "fetch_time": NOW,
        "fetch_interval": 60,  # an interval of 1 s is raised to the minimum
        "score": 0.25,
        "modified_time": NOW - 5,
        "stm_priority": 0.25,
    }
    assert entries["markers"] == {Mark.DISTANCE: "0", Mark.INJECT: Mark.INJECT_SEED}
    known = WebPage("com.a:http/", score=7.0, fetch_interval=60, fetch_time=NOW + 10)
    change = sitemap_change(entry, known, now=NOW, max_interval=90 * DAY, **BOUNDS)
    assert change == ({"stm_priority": 0.25}, {})
    same = WebPage("com.a:http/", fetch_interval=60, stm_priority=0.25)
    assert sitemap_change(entry, same, now=NOW, max_interval=90 * DAY, **BOUNDS) is None


@pytest.mark.parametrize(
    ("status", "lastmod", "marked", "due"),
    [
        (CrawlStatus.FETCHED, NOW - 1_000, False, True),  # changed after the fetch
        (CrawlStatus.NOTMODIFIED, NOW - 1_000, False, True),
        (CrawlStatus.FETCHED, NOW - 9_000, False, False),  # changed before the fetch
        (CrawlStatus.FETCHED, NOW - 1_000, True, False),  # in a batch: the batch fetches it
        (CrawlStatus.UNFETCHED, NOW - 1_000, False, False),  # never fetched: due anyway
    ],
)
def test_a_changed_lastmod_makes_a_fetched_page_due(status, lastmod, marked, due):
    page = WebPage(
        "com.a:http/",
        status=status,
        prev_fetch_time=NOW - 5_000,
        modified_time=NOW - 6_000,
        fetch_time=NOW + 10 * DAY * 1000,
        fetch_interval=30 * DAY,
        markers={Mark.GENERATE: "b1"} if marked else {},
    )
    entry = SitemapEntry("http://a.com/", lastmod=lastmod)
    change = sitemap_change(entry, page, now=NOW, max_interval=90 * DAY, **BOUNDS)
    assert (change is not None and change[0].get("fetch_time") == NOW) is due


class _RacingStore:
    """A store where another writer makes the row *key* just before the first ``insert_new``,
    and which counts the reads made through ``get_many``."""

    def __init__(self, store, key: str) -> None:
        self.store = store
        self.key: str | None = key
        self.get_many_calls = 0

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    def get_many(self, keys, columns=None):
        self.get_many_calls += 1
        return self.store.get_many(keys, columns)

    def insert_new(self, updates):
        if self.key is not None:
            WebTable(self.store).update(self.key, {"fetch_time": NOW, "score": 3.0})
            self.key = None
        return self.store.insert_new(updates)


def test_the_pipeline_reads_each_row_once_and_gives_a_row_made_meanwhile_the_hints(store):
    racing = _RacingStore(store, reverse_url("http://a.com/b"))
    table = WebTable(racing)
    pipeline = NutchSitemapPipeline(
        table, url_filter=None, normalize=True, max_interval=90 * DAY, **BOUNDS
    )
    hints = {"changefreq": "daily", "priority": "0.5"}
    entries = [{"loc": f"http://a.com/{name}", **hints} for name in "abc"]
    counts = pipeline.write(entries, now=NOW)
    assert (counts.injected, counts.updated) == (2, 1)
    a, b = table.get("http://a.com/a"), table.get("http://a.com/b")
    assert a is not None and b is not None
    assert (a.score, a.fetch_interval, a.stm_priority) == (0.5, DAY, 0.5)
    assert a.markers[Mark.INJECT] == Mark.INJECT_SEED
    # Made by the other writer: the hints, its own score.
    assert (b.score, b.fetch_interval, b.stm_priority) == (3.0, DAY, 0.5)
    # Known rows now, read once each, under modify: no other read.
    counts = pipeline.write([*entries, {"loc": "http://a.com/d"}], now=NOW)
    assert (counts.known, counts.injected, counts.updated) == (3, 1, 0)
    assert racing.get_many_calls == 0
    assert table.get("http://a.com/d") is not None


class _CountingStore:
    """A store's scans, counting the rows they give."""

    def __init__(self, store) -> None:
        self.store = store
        self.rows = 0

    def scan(self, scan, page_size=1000):
        for row in self.store.scan(scan, page_size):
            self.rows += 1
            yield row


def test_the_hosts_of_a_table_are_found_without_reading_every_row(store):
    urls = [f"http://big.example/p{i:03d}" for i in range(100)]
    urls += [f"https://big.example/s{i}" for i in range(3)]
    # Port 8's keys, then port 80's (com.example.big:http:8/... < com.example.big:http:80/...).
    urls += [f"http://big.example:8/p{i:03d}" for i in range(100)]
    urls += ["http://big.example:80/", "http://big.example:800/x"]
    urls += [f"http://h{n:02d}.test/" for n in range(40)]  # one row each
    urls += ["http://foo.com/a", "http://foo-bar.com/", "http://www.foo.com/", "http://foo.com:80/"]
    keys = [reverse_url(url) for url in urls] + ["com.example.bare:http"]  # a key with no path
    table = WebTable(store)
    table.write(build_update(key, {"fetch_time": NOW, "score": 1.0}) for key in keys)
    # What a scan of every row finds, in key order.
    expected: list[str] = []
    for page in table.scan(("score",)):
        parts = urlsplit(page.url)
        if f"{parts.scheme}://{parts.netloc}/" not in expected:
            expected.append(f"{parts.scheme}://{parts.netloc}/")
    assert len(expected) == 5 + 40 + 4 + 1
    counting = _CountingStore(store)
    assert table_roots(counting) == expected
    assert counting.rows < len(keys) / 2  # the big host's rows are stepped over


# --- nutchy sitemap ----------------------------------------------------------------------------


@pytest.mark.slow
def test_robots_txt_leads_to_an_index_of_plain_and_gzipped_sitemaps(site, store, capsys):
    root = site.root
    site.add(
        "/robots.txt",
        f"User-agent: *\nDisallow: /private/\nSitemap: {root}/index.xml\n".encode(),
        "text/plain",
    )
    site.add(
        "/index.xml",
        (
            '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<sitemap><loc>{root}/docs/a.xml</loc></sitemap>"
            f"<sitemap><loc>{root}/b.xml.gz</loc></sitemap>"
            f"<sitemap><loc>{root}/private/c.xml</loc></sitemap>"
            "</sitemapindex>"
        ).encode(),
    )
    site.add(
        "/docs/a.xml",
        _urlset(
            f"{root}/docs/one",
            extra="<lastmod>2024-05-01</lastmod><changefreq>daily</changefreq><priority>0.8</priority>",
        )
        + b"",
    )
    site.add(
        "/b.xml.gz",
        gzip.compress(_urlset(f"{root}/two", f"{root}/three", "http://other.example/x")),
        "application/octet-stream",
    )
    site.add("/private/c.xml", _urlset(f"{root}/private/secret"))
    table = WebTable(store)
    # A row of another host, where nothing listens: its robots.txt fails.
    table.update(reverse_url("http://127.0.0.2:9/"), {"fetch_time": NOW, "score": 1.0})
    table.update(reverse_url(f"{root}/"), {"fetch_time": NOW, "score": 1.0, "status": 2})

    assert _run(store, "-robots") == 0
    out = capsys.readouterr().out
    # The index and two sitemaps; /private/ is disallowed, 127.0.0.2:9 does not answer.
    assert "Read 3 sitemaps: 3 new URLs" in out
    assert _count(out, "sitemaps failed") == 2
    one = table.get(f"{root}/docs/one")
    assert one is not None
    assert (one.fetch_interval, one.modified_time) == (DAY, 1714521600000)
    assert one.score == pytest.approx(0.8) and one.stm_priority == pytest.approx(0.8)
    assert one.markers[Mark.INJECT] == Mark.INJECT_SEED
    assert table.get(f"{root}/two") is not None and table.get(f"{root}/three") is not None
    assert table.get("http://other.example/x") is None  # not this sitemap's to list
    assert table.get(f"{root}/private/secret") is None
    assert "/private/c.xml" not in site.asked
    assert "other sites:" in out and _count(out, "other sites") == 1
    # robots.txt asked once, for its Sitemap lines: its rules are obeyed from that answer.
    assert site.asked.count("/robots.txt") == 1


def _count(out: str, label: str) -> int:
    line = next(line for line in out.splitlines() if line.strip().startswith(label + ":"))
    return int(line.rsplit(None, 1)[1])


@pytest.mark.slow
def test_bad_sitemaps_are_counted_and_the_good_ones_read(
    site, embedded_store_factory, tmp_path, capsys
):
    store = embedded_store_factory()
    root = site.root
    bomb = gzip.compress(b"<urlset>" + b" " * (8 << 20) + b"</urlset>")
    site.add("/bomb.xml.gz", bomb, "application/octet-stream")
    site.add("/broken.xml", _urlset(f"{root}/ok1", f"{root}/ok2")[:-30])  # cut mid-document
    site.add("/odd-ns.xml", _urlset(f"{root}/ns", namespace="http://example.com/not-sitemaps"))
    site.add("/future.xml", _urlset(f"{root}/f", extra="<lastmod>2999-01-01</lastmod>"))
    site.add("/many.xml", _urlset(*(f"{root}/m{i}" for i in range(5))))
    site.add("/html.xml", b"<html><body>not a sitemap</body></html>", "text/html")
    site.add("/gone.xml", b"", status=410)
    listing = tmp_path / "sitemaps.txt"
    listing.write_text(
        "# sitemaps\n"
        + "".join(
            f"{root}/{name}\n"
            for name in (
                "bomb.xml.gz",
                "broken.xml",
                "odd-ns.xml",
                "future.xml",
                "many.xml",
                "html.xml",
                "gone.xml",
            )
        ),
        encoding="utf-8",
    )
    assert (
        _run(
            store,
            "-sitemapUrls",
            str(listing),
            NUTCH_SITEMAP_SIZE_MAX=1 << 20,
            NUTCH_SITEMAP_URLS_MAX=3,
        )
        == 0
    )
    out = capsys.readouterr().out
    table = WebTable(store)
    urls = {page.url for page in table.scan(("fetch_time",))}
    assert f"{root}/ok1" in urls  # what came before the break
    assert f"{root}/ns" in urls  # the namespace is not checked
    assert {f"{root}/m{i}" for i in range(3)} <= urls and f"{root}/m3" not in urls
    future = table.get(f"{root}/f")
    assert future is not None and future.modified_time == 0
    assert _count(out, "over the limit") == 2
    assert _count(out, "lastmod ahead") == 1
    assert _count(out, "not sitemaps") == 2  # the bomb (over the size bound) and the HTML page
    assert _count(out, "sitemaps failed") == 1  # 410
    assert _count(out, "sitemaps read") == 4  # broken, odd-ns, future, many: not the HTML page


@pytest.mark.slow
def test_a_sitemap_saying_a_fetched_page_changed_makes_it_due(site, embedded_store_factory, capsys):
    store = embedded_store_factory()
    root = site.root
    table = WebTable(store)
    table.create()
    fetched_at = int(time.time() * 1000) - 10 * DAY * 1000
    later = fetched_at + 30 * DAY * 1000
    for name in ("changed", "same"):
        table.update(
            reverse_url(f"{root}/{name}"),
            {
                "status": int(CrawlStatus.FETCHED),
                "prev_fetch_time": fetched_at,
                "fetch_time": later,
                "fetch_interval": 30 * DAY,
                "score": 3.0,
            },
        )
    site.add(
        "/sitemap.xml",
        (
            '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<url><loc>{root}/changed</loc><lastmod>{_iso(fetched_at + 3600_000)}</lastmod></url>"
            f"<url><loc>{root}/same</loc><lastmod>{_iso(fetched_at - 3600_000)}</lastmod>"
            "<changefreq>weekly</changefreq></url></urlset>"
        ).encode(),
    )
    before = int(time.time() * 1000)
    assert _run(store, "-sitemapUrls", f"{root}/sitemap.xml") == 0
    changed, same = table.get(f"{root}/changed"), table.get(f"{root}/same")
    assert changed is not None and same is not None
    assert before <= changed.fetch_time <= int(time.time() * 1000)
    assert changed.score == 3.0  # OPIC's score is kept
    assert (same.fetch_time, same.fetch_interval) == (later, 7 * DAY)
    assert _count(capsys.readouterr().out, "made due") == 1


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def test_nothing_to_read_is_a_usage_error(embedded_store_factory, capsys):
    store = embedded_store_factory()
    assert _run(store) == 2
    assert "nothing to read" in capsys.readouterr().err


@pytest.mark.slow
def test_no_sitemap_read_is_exit_code_1(site, embedded_store_factory, capsys):
    store = embedded_store_factory()
    assert _run(store, "-sitemapUrls", f"{site.root}/missing.xml") == 1
    assert "no sitemap could be read" in capsys.readouterr().err


@pytest.mark.slow
def test_the_address_guard_keeps_sitemaps_off_refused_addresses(
    site, embedded_store_factory, capsys
):
    store = embedded_store_factory()
    site.add("/sitemap.xml", _urlset(f"{site.root}/x"))
    url = f"{site.root}/sitemap.xml"
    refused = {"NUTCH_ADDRESS_GUARD_ENABLED": True, "NUTCH_ADDRESS_GUARD_ALLOW": "192.0.2.1"}
    assert _run(store, "-sitemapUrls", url, **refused) == 1
    assert _count(capsys.readouterr().out, "sitemaps failed") == 1
    assert site.asked == []  # refused before anything was sent
    allowed = {"NUTCH_ADDRESS_GUARD_ENABLED": True, "NUTCH_ADDRESS_GUARD_ALLOW": "127.0.0.1"}
    assert _run(store, "-sitemapUrls", url, **allowed) == 0
    assert "/sitemap.xml" in site.asked


@pytest.mark.slow
def test_robots_txt_the_fetch_read_lately_names_the_sitemaps(site, embedded_store_factory, capsys):
    store = embedded_store_factory()
    root = site.root
    site.add("/robots.txt", b"User-agent: *\nSitemap: /never-read.xml\n", "text/plain")
    site.add("/remembered.xml", _urlset(f"{root}/r"))
    table = WebTable(store)
    table.create()
    table.update(reverse_url(f"{root}/"), {"fetch_time": NOW, "score": 1.0})
    site.add("/private/hidden.xml", _urlset(f"{root}/private/h"))
    memory = open_host_memory(store)
    fresh = int(time.time() * 1000)
    remembered = b"User-agent: *\nDisallow: /private/\nSitemap: /remembered.xml\nSitemap: /private/hidden.xml\n"
    memory.keep_robots({root: RobotsRecord(fresh, 200, remembered)})
    memory.close()
    assert _run(store, "-robots") == 0
    out = capsys.readouterr().out
    assert _count(out, "new URLs") == 1
    assert table.get(f"{root}/r") is not None
    # The Sitemap lines and the rules of the crawl's answer, not of the server's robots.txt now,
    # which is not asked for: the sitemap its rules disallow is not read (a failure).
    assert "/remembered.xml" in site.asked and "/never-read.xml" not in site.asked
    assert "/robots.txt" not in site.asked and "/private/hidden.xml" not in site.asked
    assert _count(out, "sitemaps failed") == 1 and table.get(f"{root}/private/h") is None
    # An answer older than NUTCH_HTTP_ROBOTS_EXPIRY is asked again.
    memory = open_host_memory(store)
    memory.keep_robots({root: RobotsRecord(fresh - 2_000_000, 200, b"")})
    memory.close()
    site.asked.clear()
    assert _run(store, "-robots", NUTCH_HTTP_ROBOTS_EXPIRY=1000) == 1  # it names no real one
    assert "/never-read.xml" in site.asked


def test_the_sitemap_spider_leaves_out_remote_control_and_cookies_without_importing_them():
    # In a process of its own, as the nutch spider's tests: whether the modules (and aiohttp,
    # tldextract, which they import) were imported is the point.
    code = """
import sys
from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
from scrapy.crawler import AsyncCrawlerRunner
from scrapy.settings import Settings
from scrapy.utils.conf import build_component_list
from scrapy.utils.test import get_crawler, get_reactor_settings
from nutchy.sitemaps import NutchSitemapSpider

def crawler_of(project):
    crawler = get_crawler(NutchSitemapSpider, {"ADDONS": {"nutchy.NutchAddon": 0}, **project})
    crawler._apply_settings()
    return crawler

def middlewares(crawler):
    manager = DownloaderMiddlewareManager.from_crawler(crawler)
    return [type(m).__name__ for m in manager.middlewares]

crawler = crawler_of({})
extensions = build_component_list(crawler.settings.getwithbase("EXTENSIONS"))
assert not [e for e in extensions if "remote_control" in str(e)], extensions
assert "scrapy.extensions.corestats.CoreStats" in extensions
assert "CookiesMiddleware" not in middlewares(crawler), middlewares(crawler)
assert "NutchSitemapRobotsMiddleware" in middlewares(crawler), middlewares(crawler)
for module in ("scrapy.extensions.remote_control", "scrapy.downloadermiddlewares.cookies"):
    assert module not in sys.modules, module
assert "tldextract" not in sys.modules
# Cookies turned on on the command line (over the spider's own setting): the middleware is on.
settings = Settings({"ADDONS": {"nutchy.NutchAddon": 0}, **get_reactor_settings()})
settings.set("COOKIES_ENABLED", True, "cmdline")
crawler = AsyncCrawlerRunner(settings).create_crawler(NutchSitemapSpider)
crawler._apply_settings()
assert "CookiesMiddleware" in middlewares(crawler), middlewares(crawler)
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr
