"""End to end: ``nutchy crawl`` to completion on a site with a known link graph over three
loopback hosts; a re-crawl of a site that changed; the adaptive schedule on pages unchanged for
years; a page's declared charset, whether it is parsed during the fetch or after it.

The expectations are computed from the site (:mod:`graph_site`), never written down: a small
model of the Nutch 2.x cycle (:class:`Model`) walks the link graph round by round as
generate → fetch → parse → updatedb do, and gives the URLs each round fetches, what each row's
status must end as (reference §6.5, §8), and each row's OPIC score, cash, distance and inlinks
(reference §10). The servers record every request, so "fetched exactly once, and nothing else"
is measured where it happens.
"""

from __future__ import annotations

import email.utils
import functools
import math
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from graph_site import (
    Binary,
    GraphSite,
    Huge,
    Page,
    Redirect,
    Refresh,
    Resource,
    Slow,
    Status,
)
from sites import store_settings

from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.core.scoring import read_cash
from nutchy.core.status import CrawlStatus, ParseStatusMajor, ParseStatusMinor
from nutchy.core.status import ProtocolStatusCode as P
from nutchy.core.webpage import WebPage
from nutchy.jobs.crawl import fetch_in_child
from nutchy.store import open_table

H2, H3, H4 = "127.0.0.2", "127.0.0.3", "127.0.0.4"
DAY_MS = 86_400_000
CONTENT_LIMIT = 4096  # bytes: every Page is smaller, every Huge larger
TIMEOUT_MS = 1000  # a Slow page takes longer
#: Settings of every command: no politeness delay, short timeouts, a small content limit.
FAST = {
    "NUTCH_FETCHER_SERVER_DELAY": "0",
    "NUTCH_HTTP_TIMEOUT": str(TIMEOUT_MS),
    "NUTCH_HTTP_CONTENT_LIMIT": str(CONTENT_LIMIT),
    # The model's parse skips a page cut at the content limit (Nutch's parser.skip.truncated).
    "NUTCH_PARSER_SKIP_TRUNCATED": "True",
    "NUTCH_FETCHER_FLUSH_INTERVAL": "0.5",
    "TELNETCONSOLE_ENABLED": "False",
}
#: 4-byte floats: scores and cash are stored as Java floats after every addition.
TOLERANCE = 1e-5


# --- the model of the crawl cycle ---------------------------------------------------------------


def robots_denied(url: str, robots: dict[str, str]) -> bool:
    """Whether *url* is disallowed for every agent by its host's robots.txt (only the
    ``Disallow: /prefix`` lines these tests write)."""
    parts = urlsplit(url)
    for line in robots.get(parts.hostname or "", "").splitlines():
        name, _, prefix = line.partition(":")
        prefix = prefix.strip()
        if name.strip().lower() == "disallow" and prefix and parts.path.startswith(prefix):
            return True
    return False


def outlinks(url: str, resource: Resource | None) -> tuple[str, ...]:
    """The outlinks a fetch and parse of *resource* leave on its row (``ol``): a page's links
    (duplicates dropped), a redirect's or meta refresh's target; nothing for a page that is cut
    at the content limit (parse skips it), not HTML, or not fetched."""
    if isinstance(resource, Page):
        return tuple(dict.fromkeys(resource.links))
    if isinstance(resource, Redirect):
        return (urljoin(url, resource.to),)
    if isinstance(resource, Refresh):
        return (resource.to,)
    return ()


def expected_status(resource: Resource | None, denied: bool) -> tuple[CrawlStatus, P]:
    """The crawl status a row ends with after its fetch and updatedb, and its protocol status
    (reference §6.5 for the fetch, §8 for updatedb: a RETRY becomes UNFETCHED)."""
    if denied:
        return CrawlStatus.GONE, P.ROBOTS_DENIED
    if isinstance(resource, (Page, Refresh, Huge, Binary)):
        return CrawlStatus.FETCHED, P.SUCCESS
    if isinstance(resource, Redirect):
        if resource.code in (302, 303, 307):
            return CrawlStatus.REDIR_TEMP, P.TEMP_MOVED
        return CrawlStatus.REDIR_PERM, P.MOVED
    if isinstance(resource, Slow):  # beyond the timeout: an exception
        return CrawlStatus.UNFETCHED, P.EXCEPTION
    code = 404 if resource is None else resource.code
    if code == 404:
        return CrawlStatus.GONE, P.NOTFOUND
    if code in (400, 410):
        return CrawlStatus.GONE, P.GONE
    return CrawlStatus.UNFETCHED, P.EXCEPTION  # 403, 5xx, a timeout: RETRY, then UNFETCHED


@dataclass
class Model:
    """The crawl of *resources* from *seeds* (URL → injected score), round after round until
    no new URL is found: what each round fetches, and every row's OPIC score and cash,
    distance and inlink sources. Every URL must pass the default URL filter (no ``.gz`` or
    image suffixes) and be normalized already, and no page may link to itself."""

    resources: dict[str, Resource]
    robots: dict[str, str]
    seeds: dict[str, float]
    rounds: list[list[str]] = field(default_factory=list)
    score: dict[str, float] = field(default_factory=dict)
    cash: dict[str, float] = field(default_factory=dict)
    distance: dict[str, int] = field(default_factory=dict)
    inlinks: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def __post_init__(self) -> None:
        self.score = dict(self.seeds)
        self.cash = dict(self.seeds)
        self.distance = dict.fromkeys(self.seeds, 0)
        batch = sorted(self.seeds)
        while batch:
            self.rounds.append(batch)
            batch = self._round(batch)

    def _round(self, batch: list[str]) -> list[str]:
        received: dict[str, float] = defaultdict(float)
        for url in batch:
            links = () if self.denied(url) else outlinks(url, self.resources.get(url))
            share = self.cash[url] / len(links) if links else 0.0
            if links:
                self.cash[url] = 0.0  # OPIC: a page gives all its cash to its outlinks
            for target in links:
                received[target] += share
                self.inlinks[target].add(url)
                self.distance[target] = min(
                    self.distance.get(target, math.inf), self.distance[url] + 1
                )
        new = sorted(t for t in received if t not in self.score)
        for target, amount in received.items():
            self.score[target] = self.score.get(target, 0.0) + amount
            self.cash[target] = self.cash.get(target, 0.0) + amount
        return new

    def denied(self, url: str) -> bool:
        return robots_denied(url, self.robots)

    @property
    def requested(self) -> set[str]:
        """The URLs the crawl sends a request for: every row but the robots.txt denials."""
        return {url for url in self.score if not self.denied(url)}

    def robots_fetches(self, host: str) -> int:
        """robots.txt is fetched once per host for the crawl: the first round's fetch keeps the
        answer beside the table, for the next rounds' processes (NUTCH_HTTP_ROBOTS_EXPIRY)."""
        return int(any(urlsplit(u).hostname == host for batch in self.rounds for u in batch))


# --- running the CLI ------------------------------------------------------------------------------


def nutchy(settings: dict[str, object], *args: str) -> int:
    options = [f"{name}={value}" for name, value in {**FAST, **settings}.items()]
    return main([*args, *(x for option in options for x in ("-s", option))])


def rows(settings: dict[str, object]) -> dict[str, WebPage]:
    loaded = load_settings({k: str(v) for k, v in settings.items()}, project=False)
    with open_table(loaded) as table:
        return {page.url: page for page in table.scan()}


def write_seeds(path: Path, seeds: dict[str, float | None]) -> Path:
    """A seed file; a seed whose score is ``None`` gives none (``db.score.injected`` applies)."""
    lines = (url if s is None else f"{url}\tnutch.score={s}" for url, s in seeds.items())
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def close(value: float, expected: float) -> bool:
    return math.isclose(value, expected, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


@pytest.fixture
def crawl_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no Scrapy project: the CLI's and the fetch's settings only
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    return tmp_path


# --- 1. a crawl to completion -------------------------------------------------------------------

ROBOTS = {H2: "User-agent: *\nDisallow: /secret/\n", H3: "User-agent: *\nDisallow: /private/\n"}


def build_site(site: GraphSite) -> dict[str, float | None]:
    """Put the link graph on *site*; return the seeds (URL → score given in the seed file).
    Host 127.0.0.4 has no robots.txt."""
    a = functools.partial(site.url, H2)
    b = functools.partial(site.url, H3)
    c = functools.partial(site.url, H4)
    home = (
        *(a(p) for p in ("/about", "/news", "/missing", "/gone", "/error", "/forbidden")),
        *(a(p) for p in ("/temp", "/perm", "/chain/2", "/team", "/secret/plans")),
        *(a(p) for p in ("/huge", "/binary")),
        b("/"),
        a("/news"),  # twice: one outlink
        # Spelled otherwise again below: still one outlink each.
        *(a(p) for p in ("/caf%C3%A9", "/a%20b", "/search?q=caf%C3%A9&page=2", "/~user")),
    )
    spellings = (
        *(
            "/about#team",
            "./about",
            "/chain/../about",
            a("/about").upper().replace("ABOUT", "about"),
        ),
        *("/café", "/a b#x", "/search?q=café&page=2", "/%7Euser"),
    )
    resources: dict[str, Resource] = {
        a("/"): Page(home, title="home", hrefs=spellings),
        a("/caf%C3%A9"): Page(),
        a("/a%20b"): Page(),
        a("/search?q=caf%C3%A9&page=2"): Page(),
        a("/~user"): Page(),
        a("/about"): Page((a("/"), a("/refresh"))),
        a("/refresh"): Refresh(a("/refreshed")),
        a("/refreshed"): Page((c("/deep"),)),
        a("/news"): Page((a("/latin"), a("/slow"), b("/private/doc"), a("/temp"))),
        # Declared UTF-8, but Latin-1 and stray bytes: still parsed, its link still followed.
        a("/latin"): Page((a("/from-latin"),), encoding="latin-1", garbage=b"\xff\xfe\x80\xc3("),
        a("/from-latin"): Page(),
        a("/huge"): Huge(8 * CONTENT_LIMIT, (a("/only-in-huge"),)),
        # Small on the wire, huge once decoded: cut after decoding.
        b("/huge-gzip"): Huge(64 * CONTENT_LIMIT, (b("/only-in-huge"),), gzip=True),
        b("/only-in-huge"): Page(),
        a("/only-in-huge"): Page(),
        a("/binary"): Binary(),
        a("/slow"): Slow(TIMEOUT_MS / 1000 + 1),
        a("/never"): Page(),
        a("/missing"): Status(404),
        a("/gone"): Status(410),
        a("/error"): Status(500),
        a("/forbidden"): Status(403),
        a("/temp"): Redirect(302, a("/temp-target")),
        a("/temp-target"): Page(),
        a("/perm"): Redirect(301, b("/landing")),  # to another host
        a("/chain/2"): Redirect(301, "/chain/1"),  # relative Location
        a("/chain/1"): Redirect(308, a("/chain/0")),
        a("/chain/0"): Page(),
        a("/team"): Page((a("/loop/a"), a("/to-secret"))),
        a("/loop/a"): Redirect(307, a("/loop/b")),
        a("/loop/b"): Redirect(302, a("/loop/a")),
        a("/to-secret"): Redirect(302, a("/secret/y")),  # a redirect into robots.txt's no
        a("/secret/plans"): Page(),
        a("/secret/y"): Page(),
        b("/"): Page((b("/private/x"), b("/landing"), c("/"), b("/huge-gzip"))),
        b("/landing"): Page((a("/"),)),
        b("/private/x"): Page(),
        b("/private/doc"): Page(),
        c("/"): Page((c("/deep"), a("/news"), c("/unknown-charset"), c("/stalled"))),
        c("/stalled"): Slow(TIMEOUT_MS / 1000 + 1, stall=True),
        c("/deep"): Page((c("/deeper"),)),
        c("/deeper"): Page(),  # a dead end: keeps its cash
        c("/unknown-charset"): Page((c("/charset-ok"),), charset="x-no-such-charset"),
        c("/charset-ok"): Page(),
    }
    for url, resource in resources.items():
        site.put(url, resource)
    return {a("/"): None, c("/"): 2.0}


@pytest.fixture
def graph_site():
    with GraphSite((H2, H3, H4), robots=ROBOTS) as site:
        yield site


@pytest.mark.parametrize("fetchers", [1, 2])
def test_crawl_to_completion(store, crawl_dir, graph_site, capfd, fetchers):
    site = graph_site
    seeds = build_site(site)
    injected = load_settings(project=False).getfloat("NUTCH_DB_SCORE_INJECTED")
    scores = {url: injected if score is None else score for url, score in seeds.items()}
    model = Model(dict(site.resources), ROBOTS, scores)
    a = functools.partial(site.url, H2)
    # The model is about this site: what must not be fetched is not expected to be.
    for url in (a("/only-in-huge"), site.url(H3, "/only-in-huge"), a("/secret/plans")):
        assert url not in model.requested
    assert {a("/secret/plans"), a("/secret/y"), site.url(H3, "/private/doc")} <= set(model.score)
    for url, resource in site.resources.items():
        if isinstance(resource, Page):
            assert len(resource.body(url)) <= CONTENT_LIMIT

    settings = store_settings(store)
    seed_file = write_seeds(crawl_dir / "seeds.txt", seeds)
    started = int(time.time() * 1000)
    clock = time.monotonic()
    code = nutchy(
        {**settings, "LOG_LEVEL": "INFO"},  # the children's own lines, checked below
        "crawl",
        str(seed_file),
        "-rounds",
        str(len(model.rounds) + 3),
        "-numFetchers",
        str(fetchers),
    )
    seconds = time.monotonic() - clock
    ended = int(time.time() * 1000)
    log = capfd.readouterr().err  # the fetches' logs too: they run in child processes
    assert code == 0, log
    assert "Traceback" not in log and "] ERROR:" not in log, log

    # Rounds: one per level of the graph, each the size the model says, then nothing is due.
    sizes = [int(n) for n in re.findall(r"round \d+: batch \S+, (\d+) URLs", log)]
    assert sizes == [len(batch) for batch in model.rounds], (sizes, model.rounds)
    assert "stopped, nothing left to fetch" in log
    # each round's fetch line counts what its children fetched, from their stats
    fetched = [int(n) for n in re.findall(r"round \d+: fetch: (\d+) URLs fetched", log)]
    assert fetched == sizes, (fetched, sizes)
    if fetchers > 1:
        # Each round in two partitions; the hosts of each fetched by one child (which the
        # robots.txt counts below check: each host's robots.txt is asked for once).
        split = re.findall(r"URLs in 2 partitions \((\d+), (\d+)\)", log)
        assert [int(x) + int(y) for x, y in split] == sizes, split
        assert any(int(x) and int(y) for x, y in split), split  # two children at once
    # nutchy crawl updates each batch after its fetch: no child tells the user to (the fetch
    # children log at INFO, as asked with -s LOG_LEVEL=INFO)
    assert "] INFO: Fetched batch" in log and "was not fetched whole" not in log, log

    # The servers saw every reachable, allowed URL exactly once, and nothing else.
    exchanges = site.exchanges()
    assert Counter(e.url for e in exchanges) == Counter(model.requested)
    for e in exchanges:  # nothing was known of any page: no conditional request
        assert "If-None-Match" not in e.headers and "If-Modified-Since" not in e.headers
    for host in site.hosts:
        assert site.robots_requests(host) == model.robots_fetches(host), host

    table = rows(settings)
    assert set(table) == set(model.score)
    counts = Counter(CrawlStatus(p.status).name for p in table.values())
    print(f"crawl: {len(model.rounds)} rounds in {seconds:.1f} s, {len(table)} rows: {counts}")
    interval = load_settings(project=False).getint("NUTCH_DB_FETCH_INTERVAL_DEFAULT")
    gone_interval = int(interval * 1.5)
    assert gone_interval < load_settings(project=False).getint("NUTCH_DB_FETCH_INTERVAL_MAX")
    for url, page in table.items():
        resource = site.resources.get(url)
        status, protocol = expected_status(resource, model.denied(url))
        assert (page.status, page.protocol_status.code) == (status, protocol), url
        assert not {"_gnmrk_", "_ftcmrk_", "__prsmrk__"} & set(page.markers), url
        assert page.markers["dist"] == str(model.distance[url]), url
        assert set(page.inlinks) == model.inlinks.get(url, set()), url
        assert set(page.outlinks) == set(outlinks(url, resource)) or model.denied(url), url
        assert close(page.score, model.score[url]), (url, page.score, model.score[url])
        assert close(read_cash(page.metadata), model.cash[url]), url
        # The next fetch: the interval after the fetch (some time during the crawl).
        if status == CrawlStatus.UNFETCHED:  # a retry: again in a day
            assert page.retries_since_fetch == 1, url
            assert started + DAY_MS <= page.fetch_time <= ended + DAY_MS, url
        elif status == CrawlStatus.GONE:
            assert page.fetch_interval == gone_interval, url
            assert started + gone_interval * 1000 <= page.fetch_time, url
            assert page.fetch_time <= ended + gone_interval * 1000, url
        else:
            assert page.fetch_interval == interval, url
            assert started + interval * 1000 <= page.fetch_time <= ended + interval * 1000, url
    assert close(sum(p.score for p in table.values()), sum(model.score.values()))
    # OPIC moves cash and creates none: what the seeds got is all there is.
    assert close(sum(read_cash(p.metadata) for p in table.values()), sum(scores.values()))

    # What each kind of answer left on its row.
    for url, resource in site.resources.items():
        if isinstance(resource, Page) and url in model.requested:
            page = table[url]
            assert page.content == resource.body(url), url  # the bytes served, untouched
            assert page.content_type == "text/html", url
            assert f"version {resource.version}" in page.text, url
    for url in (a("/slow"), site.url(H4, "/stalled")):
        status = table[url].protocol_status
        assert status.args[0].startswith("timeout"), (url, status)
    for url in (a("/huge"), site.url(H3, "/huge-gzip")):
        huge = table[url]
        assert len(huge.content) == CONTENT_LIMIT, url
        assert huge.metadata["truncated-content"] == b"true", url
        assert huge.parse_status is None and not huge.outlinks, url
    assert table[a("/binary")].parse_status.major == ParseStatusMajor.NOTPARSED
    latin = table[a("/latin")]
    assert latin.parse_status.major == ParseStatusMajor.SUCCESS and latin.title == "page"
    refresh = table[a("/refresh")]
    assert refresh.parse_status.minor == ParseStatusMinor.SUCCESS_REDIRECT
    assert table[a("/chain/2")].protocol_status.args == (a("/chain/1"),)


# --- 2. a re-crawl of a changed site ------------------------------------------------------------

ADAPTIVE = {
    "NUTCH_DB_FETCH_SCHEDULE_CLASS": "nutchy.core.schedule.AdaptiveFetchSchedule",
    "NUTCH_DB_FETCH_INTERVAL_DEFAULT": str(DAY_MS // 1000),  # due again with generate -adddays 1
}


def validators(page: Page) -> dict[str, str]:
    """The conditional headers a re-fetch of *page* must send: what its answer said."""
    sent = {}
    if page.last_modified is not None:
        sent["If-Modified-Since"] = email.utils.formatdate(page.last_modified, usegmt=True)
    if page.etag is not None:
        sent["If-None-Match"] = page.etag
    return sent


def test_recrawl_of_a_changed_site(crawl_dir, capfd):
    settings = {
        "NUTCH_CRAWL_DIR": str(crawl_dir / "crawl"),  # the embedded store
        # robots.txt changes between the crawls, which stand for crawls days apart: the answers
        # kept beside the table would hold for 24 hours; here each fetch asks again.
        "NUTCH_HTTP_ROBOTS_EXPIRY": 0,
        **ADAPTIVE,
    }
    with GraphSite((H2, H3)) as site:
        x = functools.partial(site.url, H2)
        y = functools.partial(site.url, H3)
        before = float(int(time.time()) - 3600)  # an hour ago: far less than the interval
        paths = (
            *("/stable", "/etag-only", "/date-only", "/redated", "/changing", "/hub"),
            *("/404", "/410", "/moved-later", "/now-private", "/recovering"),
        )
        first: dict[str, Resource] = {
            x("/"): Page(tuple(map(x, paths)), last_modified=before),
            **{x(p): Page(title=p, last_modified=before) for p in paths},
            x("/etag-only"): Page(title="/etag-only", last_modified=None),
            x("/date-only"): Page(title="/date-only", etag=None, last_modified=before),
            x("/hub"): Page((x("/stable"),), title="hub", last_modified=before),
            x("/recovering"): Status(500),
        }
        site.resources.update(first)
        seeds = write_seeds(crawl_dir / "seeds.txt", {x("/"): 1.0})
        assert nutchy(settings, "crawl", str(seeds), "-rounds", "5") == 0
        log = capfd.readouterr().err
        assert "stopped, nothing left to fetch" in log
        crawled = rows(settings)
        assert set(crawled) == set(first)
        for url, page in crawled.items():
            resource = first[url]
            if isinstance(resource, Page):
                assert page.status == CrawlStatus.FETCHED, url
                expected_mod = 0 if resource.last_modified is None else int(before) * 1000
                assert page.modified_time == expected_mod, url  # from Last-Modified
        assert crawled[x("/recovering")].status == CrawlStatus.UNFETCHED  # a retry, in a day

        # The site changes: new content, new validators only, pages gone, moved, forbidden,
        # back, new pages.
        now = float(int(time.time()) - 60)
        second: dict[str, Resource] = {
            **first,
            x("/redated"): Page(title="/redated", etag='"v2"', last_modified=now),  # same body
            x("/changing"): Page(title="/changing", version=2, etag='"v2"', last_modified=now),
            x("/hub"): Page(
                (x("/stable"), x("/new"), y("/new")),
                title="hub",
                version=2,
                etag='"v2"',
                last_modified=now,
            ),
            x("/404"): Status(404),
            x("/410"): Status(410),
            x("/moved-later"): Redirect(301, x("/moved-target")),
            x("/recovering"): Page(title="/recovering", last_modified=now),
            x("/new"): Page(title="new", last_modified=now),
            y("/new"): Page(title="new", last_modified=now),
            x("/moved-target"): Page(title="moved", last_modified=now),
        }
        site.resources.update(second)
        site.robots[H2] = "User-agent: *\nDisallow: /now-private\n"
        unchanged = {url for url in first if second[url] == first[url]} - {x("/now-private")}
        assert unchanged == {x("/"), x("/stable"), x("/etag-only"), x("/date-only")}
        site.clear()

        # Round 1 of the re-crawl: everything fetched before is due within a day, the retry too.
        # nutchy crawl reads updatedb's shares during the fetch, and keeps those of the 304s
        # that have outlinks (here the home page).
        assert nutchy(settings, "crawl", str(seeds), "-rounds", "1", "-adddays", "1") == 0
        last = capfd.readouterr().err
        log += last
        kept = sorted(url for url in unchanged if crawled[url].outlinks)
        assert kept == [x("/")]
        assert "(1 page updated from what was read during the fetch)" in last
        exchanges = site.exchanges()
        assert sorted(e.url for e in exchanges) == sorted(set(first) - {x("/now-private")})
        for e in exchanges:  # conditional requests, with the validators the last answer gave
            resource = first[e.url]
            sent = {k: v for k, v in e.headers.items() if k.startswith("If-")}
            assert sent == (validators(resource) if isinstance(resource, Page) else {}), e.url
            assert (e.status == 304) == (e.url in unchanged), (e.url, e.status)

        # Then the crawl finds the new pages, and nothing else is due.
        site.clear()
        assert nutchy(settings, "crawl", str(seeds), "-rounds", "5") == 0
        last = capfd.readouterr().err
        log += last
        assert "Traceback" not in log and "] ERROR:" not in log, log
        assert re.findall(r"round \d+: batch \S+, (\d+) URLs", last) == ["3"], last
        assert "stopped, nothing left to fetch" in last
        new = {x("/new"), y("/new"), x("/moved-target")}
        assert Counter(e.url for e in site.exchanges()) == Counter(new)

        recrawled = rows(settings)
        assert set(recrawled) == set(second)
        for url in unchanged:  # 304: not modified, the stored content kept, the interval grows
            page, old = recrawled[url], crawled[url]
            assert page.status == CrawlStatus.NOTMODIFIED, url
            assert page.protocol_status.code == P.NOTMODIFIED, url
            assert (page.content, page.signature) == (old.content, old.signature), url
            assert page.fetch_interval > old.fetch_interval, url
        redated, old = recrawled[x("/redated")], crawled[x("/redated")]
        assert redated.status == CrawlStatus.FETCHED
        assert redated.signature == redated.prev_signature  # the same body: not modified either
        assert redated.fetch_interval > old.fetch_interval
        assert (redated.prev_modified_time, redated.modified_time) == (
            int(before) * 1000,
            int(now) * 1000,
        )
        for url in (x("/changing"), x("/hub")):  # modified: refetched, and due sooner
            page, old = recrawled[url], crawled[url]
            assert page.status == CrawlStatus.FETCHED, url
            assert page.signature != page.prev_signature and "version 2" in page.text, url
            assert page.fetch_interval < old.fetch_interval, url
        for url in (x("/404"), x("/410"), x("/now-private")):
            page, old = recrawled[url], crawled[url]
            assert page.status == CrawlStatus.GONE, url
            assert page.fetch_interval > old.fetch_interval, url
        assert recrawled[x("/now-private")].protocol_status.code == P.ROBOTS_DENIED
        moved = recrawled[x("/moved-later")]
        assert (moved.status, moved.outlinks) == (CrawlStatus.REDIR_PERM, {x("/moved-target"): ""})
        recovering = recrawled[x("/recovering")]
        assert (recovering.status, recovering.retries_since_fetch) == (CrawlStatus.FETCHED, 0)
        assert set(recrawled[x("/hub")].outlinks) == {x("/stable"), x("/new"), y("/new")}
        for url in new:
            assert recrawled[url].status == CrawlStatus.FETCHED, url
        for url in (x("/new"), y("/new")):
            assert recrawled[url].inlinks == {x("/hub"): f"to {url}"}
        # OPIC moves cash and creates none, round after round.
        assert close(sum(read_cash(p.metadata) for p in recrawled.values()), 1.0)

        # A third pass, everything due within two days (every row): what answered 304 is asked
        # with the same validators again (a 304 keeps the stored ones), and so is what changed,
        # with its new ones. A gone page is back, and robots.txt allows the denied one again.
        site.clear()
        site.put(x("/404"), Page(title="back", version=3, etag='"v3"', last_modified=now))
        del site.robots[H2]
        assert nutchy(settings, "generate", "-adddays", "2") == 0
        batch = capfd.readouterr().out.strip().splitlines()[-1]
        assert fetch_in_child(batch, {**FAST, **settings}) == 0
        assert nutchy(settings, "parse", batch, "-resume") == 0
        assert nutchy(settings, "updatedb", batch) == 0
        exchanges = {e.url: e for e in site.exchanges()}
        assert Counter(e.url for e in site.exchanges()) == Counter(list(second))
        pages = {u: r for u, r in second.items() if isinstance(r, Page) and u != x("/404")}
        for url, page in pages.items():
            e = exchanges[url]
            sent = {k: v for k, v in e.headers.items() if k.startswith("If-")}
            assert sent == validators(page), url
            assert e.status == 304, (url, e.status)
        third = rows(settings)
        for url in pages:
            assert third[url].status == CrawlStatus.NOTMODIFIED, url
            assert third[url].content == recrawled[url].content or url == x("/now-private"), url
            if url != x("/now-private"):
                assert third[url].fetch_interval > recrawled[url].fetch_interval, url
        assert third[x("/now-private")].content == crawled[x("/now-private")].content
        back = third[x("/404")]
        assert (back.status, back.title) == (CrawlStatus.FETCHED, "back")
        assert back.signature != back.prev_signature


# --- 3. the adaptive schedule on pages that have not changed for years ---------------------------


def test_adaptive_schedule_never_reschedules_into_the_past(crawl_dir, capfd):
    # Most pages of a real site were last modified long ago. The adaptive schedule moves the next
    # fetch back towards the last change (sync_delta), by a share of the time since then, but
    # never before the fetch itself: a crawl must not fetch such pages again round after round.
    settings = {
        "NUTCH_CRAWL_DIR": str(crawl_dir / "crawl"),
        "NUTCH_DB_FETCH_SCHEDULE_CLASS": ADAPTIVE["NUTCH_DB_FETCH_SCHEDULE_CLASS"],
    }
    years_ago = float(int(time.time()) - 10 * 365 * 86400)
    with GraphSite((H2,)) as site:
        x = functools.partial(site.url, H2)
        site.put(x("/"), Page((x("/old"),), last_modified=years_ago))
        site.put(x("/old"), Page(last_modified=years_ago))
        seeds = write_seeds(crawl_dir / "seeds.txt", {x("/"): 1.0})
        started = int(time.time() * 1000)
        assert nutchy(settings, "crawl", str(seeds), "-rounds", "4") == 0
        log = capfd.readouterr().err
        assert "stopped, nothing left to fetch" in log, log
        assert Counter(e.url for e in site.exchanges()) == Counter([x("/"), x("/old")])
    # A year at most (the adaptive maximum), moved back by 30 % of it; beyond
    # db.fetch.interval.max, so UNFETCHED with 90 % of that maximum (reference §8, §9).
    defaults = load_settings(project=False)
    longest = defaults.getint("NUTCH_DB_FETCH_SCHEDULE_ADAPTIVE_MAX_INTERVAL")
    rate = defaults.getfloat("NUTCH_DB_FETCH_SCHEDULE_ADAPTIVE_SYNC_DELTA_RATE")
    maximum = defaults.getint("NUTCH_DB_FETCH_INTERVAL_MAX")
    assert longest > maximum
    for url, page in rows(settings).items():
        assert page.status == CrawlStatus.UNFETCHED, url
        assert page.fetch_interval == round(maximum * 0.9), url
        assert page.fetch_time >= started + (1 - rate) * longest * 1000, url


# --- 4. parsing during the fetch, or after it: the same pages ------------------------------------


@pytest.mark.parametrize(
    "parse_in_fetch",
    [
        True,
        False,
    ],
)
def test_pages_are_decoded_by_their_declared_charset(crawl_dir, capfd, parse_in_fetch):
    settings = {
        "NUTCH_CRAWL_DIR": str(crawl_dir / "crawl"),
        "NUTCH_FETCHER_PARSE": str(parse_in_fetch),
    }
    with GraphSite((H2,)) as site:
        x = functools.partial(site.url, H2)
        # The charset only in the Content-Type header, as most servers send it.
        latin = Page((x("/next"),), title="Café", charset="iso-8859-1", encoding="latin-1")
        site.put(x("/"), latin)
        site.put(x("/next"), Page())
        seeds = write_seeds(crawl_dir / "seeds.txt", {x("/"): 1.0})
        assert nutchy(settings, "crawl", str(seeds), "-rounds", "3") == 0
        assert "stopped, nothing left to fetch" in capfd.readouterr().err
    table = rows(settings)
    assert set(table) == {x("/"), x("/next")}
    page = table[x("/")]
    assert page.content == latin.body(x("/"))
    assert (page.title, page.text) == ("Café", "Café, version 1: café to " + x("/next"))
