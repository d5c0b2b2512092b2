"""``nutchy dedup`` after real crawls of a loopback site with the same page at three URLs: two
become duplicates of the shortest URL and stay out of the index (Elasticsearch, on the
wire-level test server); a duplicate whose content changes stops being one at its next
updatedb and is indexed, one fetched again unchanged stays one; ``nutchy clean`` deletes the
page that went 404."""

from __future__ import annotations

import json

import pytest
from sites import graph_site

from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.core.status import CrawlStatus, Metadata
from nutchy.store import open_table
from nutchy.testing.search_server import SearchServer

GRAPH = {
    "/": ("Home", ["/a", "/copy-1", "/copy-22"]),
    "/a": ("Same", []),
    "/copy-1": ("Same", []),
    "/copy-22": ("Same", []),
}


#: Each command's settings: the crawl under the test's folder, no politeness delay, quiet.
SETTINGS = (
    "NUTCH_FETCHER_SERVER_DELAY=0",
    "TELNETCONSOLE_ENABLED=False",
    "LOG_LEVEL=WARNING",
)


def nutchy(crawl_dir, *args):
    settings = [f"NUTCH_CRAWL_DIR={crawl_dir / 'crawl'}", *SETTINGS]
    return main([*args, *(part for item in settings for part in ("-s", item))])


def states(crawl_dir, site):
    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")}, project=False)
    out = {}
    with open_table(settings) as table:
        for path in GRAPH:
            page = table.get(site + path, ["status", "metadata"])
            dup = page.metadata.get(Metadata.DUPLICATE_OF)
            out[path] = (CrawlStatus(page.status).name, dup and dup.decode().removeprefix(site))
    return out


@pytest.mark.slow
def test_duplicates_after_a_crawl_and_after_their_content_changes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    graph = dict(GRAPH)
    with graph_site(graph) as server, SearchServer("elasticsearch") as es:
        site = f"http://127.0.0.1:{server.server_address[1]}"

        def indexed():
            return sorted(url.removeprefix(site) for url in es.documents("nutch", visible=True))

        writers = json.dumps({"nutchy.index.servers.ElasticsearchIndexWriter": 100})
        into_es = ("-s", f"NUTCH_INDEX_WRITERS={writers}", "-s", f"NUTCH_ELASTIC_URL={es.url}")
        seeds = "".join(f"{site}{path}\n" for path in GRAPH)
        (tmp_path / "seeds.txt").write_text(seeds, encoding="utf-8")
        assert nutchy(tmp_path, "crawl", str(tmp_path / "seeds.txt"), "-rounds", "1") == 0
        assert nutchy(tmp_path, "dedup") == 0
        assert "2 marked duplicate" in capsys.readouterr().err
        assert states(tmp_path, site) == {
            "/": ("FETCHED", None),
            "/a": ("FETCHED", None),
            "/copy-1": ("DUPLICATE", "/a"),
            "/copy-22": ("DUPLICATE", "/a"),
        }
        assert nutchy(tmp_path, "index", "-all", *into_es) == 0
        assert indexed() == ["/", "/a"]
        # A month later every page is fetched again: /copy-1 has changed, / is gone.
        graph["/copy-1"] = ("Changed", [])
        del graph["/"]
        crawl_again = ("crawl", str(tmp_path / "seeds.txt"), "-rounds", "1", "-adddays", "31")
        assert nutchy(tmp_path, *crawl_again) == 0
        pages = [path for path in server.hits if path != "/robots.txt"]
        assert sorted(pages) == sorted([*GRAPH, *GRAPH])
        assert states(tmp_path, site) == {
            "/": ("GONE", None),
            "/a": ("FETCHED", None),
            "/copy-1": ("FETCHED", None),
            "/copy-22": ("DUPLICATE", "/a"),
        }
        capsys.readouterr()
        assert nutchy(tmp_path, "clean", *into_es) == 0
        assert "deleted 2 URLs (1 gone, 0 redirected, 1 duplicates)" in capsys.readouterr().err
        assert indexed() == ["/a"]
        assert nutchy(tmp_path, "index", "-all", *into_es) == 0
        assert indexed() == ["/a", "/copy-1"]
    assert nutchy(tmp_path, "dedup") == 0
    assert "0 marked duplicate, 1 were already" in capsys.readouterr().err
