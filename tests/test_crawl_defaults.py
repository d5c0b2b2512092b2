"""Defaults that crawl a real site completely: a documentation-shaped site (a long page, over the
old 64 KiB content limit, that is the only route to another; an index of 220 links; a page over
1 MiB whose links come first) is crawled whole in depth + 2 rounds with the defaults. With the
old limits it is not, and every page cut short is said in the round lines and in
``readdb -stats``."""

from __future__ import annotations

import functools
import re

import pytest
from graph_site import GraphSite, Huge, Page
from sites import FetchProject, store_settings

from nutchy.cli import main
from nutchy.core.status import CrawlStatus
from nutchy.store.table import WebTable

H2 = "127.0.0.2"
DEPTH = 2  # links from the seed to the deepest page


def build_site(site: GraphSite) -> str:
    """The site; return its seed."""
    a = functools.partial(site.url, H2)
    index = tuple(a(f"/api/{i}") for i in range(220))
    site.put(a("/"), Page((a("/guide"), a("/genindex"), a("/huge")), title="home"))
    # 90 KB of text, then the only link to /guide/deep
    site.put(a("/guide"), Page((a("/guide/deep"),), title="guide", filler=90_000))
    site.put(a("/guide/deep"), Page((), title="deep"))
    site.put(a("/genindex"), Page(index, title="index"))
    for url in index:
        site.put(url, Page((), title=url))
    # over 1 MiB: cut at the content limit, its link before the cut
    site.put(a("/huge"), Huge(1_200_000, (a("/huge/child"),)))
    site.put(a("/huge/child"), Page((), title="child"))
    return a("/")


@pytest.mark.slow
def test_the_defaults_crawl_a_documentation_site_whole(embedded_store_factory, tmp_path):
    store = embedded_store_factory()
    with GraphSite((H2,)) as site:
        seed = build_site(site)
        project = FetchProject(tmp_path, store, NUTCH_FETCHER_UPDATEDB=True)
        result = project.crawl(None, rounds=str(DEPTH + 2), seeds=seed)
        assert result.returncode == 0, result.log[-3000:]
        requested = [e.url for e in site.exchanges()]
        assert sorted(requested) == sorted(site.resources)  # every page, once
        table = WebTable(embedded_store_factory())
        statuses = {page.url: page.status for page in table.scan(["status"])}
        assert statuses == dict.fromkeys(site.resources, CrawlStatus.FETCHED)
        # The page over 1 MiB was cut, parsed up to the cut, and said so in its round's line.
        updated = re.findall(r"Updated batch \S+ in [\d.]+ s: (.*)", result.log)
        assert len(updated) == DEPTH + 1, result.log[-3000:]
        assert updated[1].endswith("; 1 truncated (1 parsed up to the cut)"), updated
        assert "truncated" not in updated[0] + updated[2]
        assert result.stats["nutch/parse/truncated"] == 1


@pytest.mark.slow
def test_the_old_limits_lose_pages_and_say_so(embedded_store_factory, tmp_path, monkeypatch, capfd):
    """Nutch 2.x's limits (content 64 KiB, 100 outlinks, truncated pages not parsed): pages are
    lost, and ``nutchy crawl``'s round line and ``readdb -stats`` say which were cut."""
    store = embedded_store_factory()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    with GraphSite((H2,)) as site:
        (tmp_path / "seeds.txt").write_text(build_site(site) + "\n")
        settings = {
            **store_settings(store),
            "NUTCH_FETCHER_SERVER_DELAY": 0,
            "NUTCH_HTTP_CONTENT_LIMIT": 65536,
            "NUTCH_DB_MAX_OUTLINKS_PER_PAGE": 100,
            "NUTCH_PARSER_SKIP_TRUNCATED": True,
            "TELNETCONSOLE_ENABLED": False,
        }
        options = [x for name, value in settings.items() for x in ("-s", f"{name}={value}")]
        assert main(["crawl", str(tmp_path / "seeds.txt"), "-rounds", "2", *options]) == 0
        log = capfd.readouterr().err
        parse_lines = re.findall(r"round (\d): parse: (.*); [\d.]+ s", log)
        assert parse_lines[0] == ("1", "1 pages parsed (1 during the fetch)"), log
        assert parse_lines[1][1].endswith("; 2 truncated (2 not parsed), 1 with outlinks cut"), log
        updated = re.search(r"round 2: updatedb: \d+ pages updated, (\d+) new URLs", log)
        assert updated is not None and updated.group(1) == "100", log  # of the index's 220

        assert main(["readdb", "-stats", *options]) == 0
        stats = capfd.readouterr().out.splitlines()
        assert "truncated at the content limit:\t2" in stats
        assert "outlinks cut (db.max.outlinks.per.page):\t1" in stats
