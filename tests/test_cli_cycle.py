"""``nutchy parse ID`` and ``nutchy updatedb ID`` on a batch fetched without parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.core.status import CrawlStatus
from nutchy.core.urls import reverse_url
from nutchy.store import open_table


@pytest.fixture
def crawl(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "seeds.txt").write_text("http://www.example.com/\n", encoding="utf-8")
    return tmp_path


def nutchy(crawl: Path, *args: str) -> int:
    return main([*args, "-s", f"NUTCH_CRAWL_DIR={crawl / 'crawl'}"])


def fake_fetch(crawl: Path, batch: str) -> None:
    """Write what the fetcher writes for a successful fetch of the seed."""
    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl / "crawl")}, project=False)
    with open_table(settings) as table:
        table.update(
            reverse_url("http://www.example.com/"),
            {
                "status": CrawlStatus.FETCHED,
                "content": b'<title>Hi</title><a href="/next">next</a>',
                "content_type": "text/html",
                "base_url": "http://www.example.com/",
            },
            {"markers": {"_ftcmrk_": batch}},
        )


def read(crawl: Path, url: str):
    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl / "crawl")}, project=False)
    with open_table(settings) as table:
        return table.get(url)


def test_parse_and_updatedb_commands(crawl, capsys):
    assert nutchy(crawl, "inject", str(crawl / "seeds")) == 0
    assert nutchy(crawl, "generate", "-topN", "10", "-batchId", "b1") == 0
    fake_fetch(crawl, "b1")
    capsys.readouterr()
    assert nutchy(crawl, "parse", "b1") == 0
    assert "1 parsed" in capsys.readouterr().err
    assert read(crawl, "http://www.example.com/").title == "Hi"
    assert nutchy(crawl, "updatedb", "b1") == 0
    assert "1 new outlink targets" in capsys.readouterr().err.replace("0 known and ", "")
    new = read(crawl, "http://www.example.com/next")
    assert new.status == CrawlStatus.UNFETCHED
    assert new.inlinks == {"http://www.example.com/": "next"}
    seed = read(crawl, "http://www.example.com/")
    assert seed.markers.get("_updmrk_") == "b1"
    # Both again: nothing left to do.
    assert nutchy(crawl, "parse", "b1", "-resume") == 0
    assert nutchy(crawl, "updatedb", "-all") == 0
    assert "0 pages of the batch updated" in capsys.readouterr().err
    assert read(crawl, "http://www.example.com/") == seed


def test_parse_needs_a_batch_or_all(crawl, capsys):
    assert nutchy(crawl, "parse") == 2
    assert nutchy(crawl, "updatedb", "b1", "-all") == 2
    assert nutchy(crawl, "updatedb", "-all", "-s", "NUTCH_DB_FETCH_SCHEDULE_CLASS=nope") == 2
    assert "NUTCH_DB_FETCH_SCHEDULE_CLASS must be one of" in capsys.readouterr().err
