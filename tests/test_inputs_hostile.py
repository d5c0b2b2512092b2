"""Hostile inputs that used to crash, mislead or leak: a seed file that fails to read (EIO),
control characters in what readdb prints, a ``<meta charset="utf-16">`` on an ASCII page,
credentials in quoted seed lines, an empty ``-a batch=``."""

from __future__ import annotations

import os

import pytest

from nutchy._fetch import FetchJob
from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.core.parse import parse_content
from nutchy.core.urls import reverse_url
from nutchy.exceptions import ConfigError
from nutchy.store import open_table

EVIL = "Title\x1b[2J\x1b]0;owned\x07\r\nX-Forged: yes\u202e\x85"


@pytest.fixture
def crawl_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    return tmp_path


def nutchy(crawl_dir, *args):
    return main([*args, "-s", f"NUTCH_CRAWL_DIR={crawl_dir / 'crawl'}"])


def urls(crawl_dir):
    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")}, project=False)
    with open_table(settings) as table:
        return sorted(p.url for p in table.scan())


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux's /proc")
def test_a_seed_file_that_fails_to_read_is_named_and_the_others_are_injected(crawl_dir, capsys):
    seeds = crawl_dir / "seeds"
    seeds.mkdir()
    (seeds / "a.txt").write_text("http://127.0.0.1:9/a\n", encoding="utf-8")
    # Reading /proc/self/mem from offset 0 fails with EIO (nothing is mapped there): a real
    # read error, as a bad sector or a network file system gone gives.
    (seeds / "b.txt").symlink_to("/proc/self/mem")
    (seeds / "c.txt").write_text("http://127.0.0.1:9/c\n", encoding="utf-8")
    assert nutchy(crawl_dir, "inject", "seeds") == 0
    err = capsys.readouterr().err
    assert "cannot read seeds/b.txt: line 1: Input/output error" in err
    assert "Traceback" not in err
    assert urls(crawl_dir) == ["http://127.0.0.1:9/a", "http://127.0.0.1:9/c"]


def test_readdb_escapes_control_characters_of_the_page_and_the_server(crawl_dir, capsys):
    (crawl_dir / "seeds.txt").write_text("http://127.0.0.1:9/\n", encoding="utf-8")
    assert nutchy(crawl_dir, "inject", "seeds.txt") == 0
    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")}, project=False)
    with open_table(settings) as table:
        table.update(
            reverse_url("http://127.0.0.1:9/"),
            fields={"title": EVIL},
            entries={"headers": {"X-Evil\x1b[1m": EVIL}},
        )
    capsys.readouterr()
    assert nutchy(crawl_dir, "readdb", "-url", "http://127.0.0.1:9/") == 0
    out = capsys.readouterr().out
    escaped = r"Title\x1b[2J\x1b]0;owned\x07\r\nX-Forged: yes\u202e\x85"
    assert f"title:\t{escaped}\n" in out
    assert f"\tX-Evil\\x1b[1m:\t{escaped}\n" in out
    assert not {"\x1b", "\x07", "\r", "\u202e", "\x85"} & set(out)
    assert nutchy(crawl_dir, "readdb", "-dump", "out", "-format", "csv") == 0
    dumped = (crawl_dir / "out" / "webpage.csv").read_text(encoding="utf-8")
    assert escaped in dumped and not {"\x1b", "\x07", "\r", "\u202e", "\x85"} & set(dumped)


@pytest.mark.parametrize("label", ["utf-16", "UTF-16LE", "utf-16be", "utf-32"])
def test_a_meta_declared_utf16_on_an_ascii_page_is_read_as_utf8(label):
    html = f'<html><head><meta charset="{label}"><title>Caf\u00e9</title></head><body>ok</body>'
    result = parse_content("http://a/", html.encode("utf-8"), "text/html")
    assert (result.title, result.text) == ("Caf\u00e9", "ok")


def test_utf16_from_the_http_header_or_a_bom_is_still_utf16():
    html = "<html><head><title>Caf\u00e9</title></head><body>ok</body>"
    by_header = parse_content("http://a/", html.encode("utf-16-le"), "text/html; charset=utf-16le")
    by_bom = parse_content("http://a/", html.encode("utf-16"), "text/html")
    assert by_header.title == by_bom.title == "Caf\u00e9"


def test_quoted_seed_lines_do_not_show_credentials(crawl_dir, capsys):
    (crawl_dir / "seeds.txt").write_text(
        "http://user:s3cret@exa mple.com/\nhttps://bob:hunter2@example.com/\tnutch.score=x\n",
        encoding="utf-8",
    )
    assert nutchy(crawl_dir, "inject", "seeds.txt") == 0
    said = capsys.readouterr()
    err = said.out + said.err
    assert "seeds.txt:1: " in err and "'http://***@exa mple.com/'" in err
    assert "seeds.txt:2: " in err and "'https://***@example.com/\\tnutch.score=x'" in err
    assert "s3cret" not in err and "hunter2" not in err


@pytest.mark.parametrize("batch", ["", "  "])
def test_an_empty_batch_argument_is_refused(batch):
    with pytest.raises(ConfigError, match="batch is empty"):
        FetchJob.from_args(batch)
