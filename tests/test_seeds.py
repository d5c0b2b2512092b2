"""``scrapy crawl nutch -a seeds=...``: seeds injected before the crawl's first generate."""

from __future__ import annotations

from pathlib import Path

import pytest
from sites import FetchProject, Site

from nutchy._fetch import FetchJob
from nutchy.core.status import CrawlStatus
from nutchy.exceptions import ConfigError
from nutchy.seeds import Seeds
from nutchy.store.table import WebTable

H2, H3 = "127.0.0.2", "127.0.0.3"


def test_seed_lines_are_split_on_newlines_or_else_on_commas():
    assert Seeds.from_arg(" http://a.example/ ,http://b.example/,, ").lines == (
        "http://a.example/",
        "http://b.example/",
    )
    assert Seeds.from_arg("http://a.example/?x=1,2\nhttp://b.example/\n").lines == (
        "http://a.example/?x=1,2",
        "http://b.example/",
    )


def test_a_seed_path_is_a_file_or_a_directory_of_seed_files(tmp_path):
    (tmp_path / "seeds.txt").write_text("http://a.example/\n")
    assert Seeds.from_arg(str(tmp_path / "seeds.txt")).path == tmp_path / "seeds.txt"
    assert Seeds.from_arg(str(tmp_path)).path == tmp_path
    with pytest.raises(ConfigError, match=r"-a seeds: seed path .* does not exist"):
        Seeds.from_arg(str(tmp_path / "missing.txt"))
    with pytest.raises(ConfigError, match="-a seeds is empty"):
        Seeds.from_arg("  ")


def test_seeds_go_with_a_crawl_that_generates():
    with pytest.raises(ConfigError, match="-a seeds injects seeds before the crawl generates"):
        FetchJob.from_args("b1", seeds="http://a.example/")
    job = FetchJob.from_args(None, seeds="http://a.example/", rounds="2")
    assert job.generates and job.seeds == Seeds(lines=("http://a.example/",))


@pytest.fixture
def store_factory(embedded_store_factory):
    return embedded_store_factory


def test_a_crawl_injects_its_seeds_into_a_new_table_then_fetches_them(store, tmp_path: Path):
    store.drop()  # the crawl makes the table
    with Site((H2, H3)) as site:
        urls = [site.url(H2, "/page/a"), site.url(H3, "/page/b"), site.url(H3, "/page/c")]
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(f"{url}\n" for url in urls) + "not a url\n", encoding="utf-8")
        project = FetchProject(tmp_path, store, NUTCH_FETCHER_QUEUE_MODE="byIP")
        result = project.crawl(None, seeds=str(seeds), rounds="1")
        assert result.returncode == 0, result.log[-3000:]
        assert f"Injected 3 URLs into webpage from {seeds} (1 malformed)" in result.log
        assert "Malformed seed line" in result.log
        assert "Round 1 of 1: batch" in result.log
        table = WebTable(store)
        for url in urls:
            assert table.get(url, ["status"]).status == CrawlStatus.FETCHED, url
        assert sorted(site.paths(H3)) == ["/page/b", "/page/c", "/robots.txt"]
