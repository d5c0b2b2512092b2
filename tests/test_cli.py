"""The ``nutchy`` command (inject, generate, readdb, storage) and ``scrapy inject``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nutchy.cli import main

SEEDS = textwrap.dedent(
    """\
    # seeds for the CLI tests
    http://www.example.com/\tnutch.score=3\tlang=en
    http://www.example.com/
    http://www.example.org/a
    https://shop.example.net/item?id=7
    www.no-scheme.com
    http://img.example.com/logo.png
    """
)


@pytest.fixture
def crawl(tmp_path, monkeypatch):
    """Run in an empty directory (no Scrapy project), with the crawl files in tmp_path/crawl."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "seeds.txt").write_text(SEEDS, encoding="utf-8")
    return tmp_path


def nutchy(crawl: Path, *args: str) -> int:
    return main([*args, "-s", f"NUTCH_CRAWL_DIR={crawl / 'crawl'}"])


def test_inject_prints_counts(crawl, capsys):
    assert nutchy(crawl, "inject", str(crawl / "seeds")) == 0
    out = capsys.readouterr().out
    assert "Injected 3 new URLs into table webpage" in out
    for label, value in [
        ("lines read", 7),
        ("injected", 3),
        ("duplicates", 1),
        ("filtered", 1),
        ("malformed", 1),
        ("already known", 0),
    ]:
        assert f"{label + ':':<15}{value:>10}" in out
    assert "seeds.txt:6: no scheme" in out
    assert "Created table webpage: it did not exist yet" in out
    assert nutchy(crawl, "inject", str(crawl / "seeds" / "seeds.txt")) == 0
    out = capsys.readouterr().out
    assert f"{'already known:':<15}{3:>10}" in out
    assert "Created table" not in out


def test_inject_exit_code_when_nothing_can_be_read(crawl, capsys):
    assert nutchy(crawl, "inject", str(crawl / "missing")) == 1
    assert "does not exist" in capsys.readouterr().err
    (crawl / "empty").mkdir()
    assert nutchy(crawl, "inject", str(crawl / "empty")) == 1
    assert "holds no seed file" in capsys.readouterr().err
    (crawl / "empty" / "none.txt").write_text("")
    assert nutchy(crawl, "inject", str(crawl / "empty")) == 1
    assert "nothing could be read" in capsys.readouterr().err
    # all lines bad still counts as read
    (crawl / "bad.txt").write_bytes(b"\xff\xfe\n")
    assert nutchy(crawl, "inject", str(crawl / "bad.txt")) == 0
    assert "not UTF-8" in capsys.readouterr().out


def test_inject_options(crawl, capsys):
    assert nutchy(crawl, "inject", "-overwrite", "-update", str(crawl / "seeds")) == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert nutchy(crawl, "inject", "-noFilter", str(crawl / "seeds")) == 0
    assert f"{'injected:':<15}{4:>10}" in capsys.readouterr().out
    (crawl / "more.txt").write_text("http://www.example.com/\tnutch.score=7\n")
    assert nutchy(crawl, "inject", "-update", str(crawl / "more.txt")) == 0
    assert f"{'updated:':<15}{1:>10}" in capsys.readouterr().out
    assert nutchy(crawl, "readdb", "-topN", "1") == 0
    assert capsys.readouterr().out == "7\thttp://www.example.com/\n"


def test_generate_prints_the_batch_id_and_exits_1_when_empty(crawl, capsys):
    nutchy(crawl, "inject", str(crawl / "seeds"))
    capsys.readouterr()
    assert nutchy(crawl, "generate", "-topN", "2") == 0
    captured = capsys.readouterr()
    batch = captured.out.strip()
    assert batch.split("-")[0].isdigit() and batch.split("-")[1].isdigit()
    assert f"batch {batch}: 2 URLs selected" in captured.err
    assert nutchy(crawl, "generate", "-batchId", "second", "-numFetchers", "2") == 0
    captured = capsys.readouterr()
    assert captured.out == "second\n"
    assert "1 URLs selected in 2 partitions" in captured.err
    assert "2 in unfinished batches" in captured.err
    assert nutchy(crawl, "generate") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "0 URLs selected" in captured.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-topN", "0"], "argument -topN: must be at least 1, got 0"),
        (["-topN", "-3"], "argument -topN: must be at least 1, got -3"),
        (["-topN", "ten"], "argument -topN: expected a whole number, got 'ten'"),
        (["-numFetchers", "0"], "argument -numFetchers: must be at least 1"),
        (["-batchId", "has space"], "argument -batchId: a batch id is"),
        (["-s", "NUTCH_GENERATE_COUNT_MODE=ip"], "NUTCH_GENERATE_COUNT_MODE must be one of"),
        (["-s", "NUTCH_GENERATE_MAX_COUNT=-7"], "NUTCH_GENERATE_MAX_COUNT must be >= -1"),
    ],
)
def test_generate_bad_arguments_change_nothing(crawl, capsys, args, message):
    nutchy(crawl, "inject", str(crawl / "seeds"))
    capsys.readouterr()
    assert nutchy(crawl, "generate", *args) == 2
    assert message in capsys.readouterr().err
    assert nutchy(crawl, "readdb", "-stats") == 0
    assert "generated, batch" not in capsys.readouterr().out


def test_generate_without_a_table(crawl, capsys):
    assert nutchy(crawl, "generate", "-topN", "5") == 2
    assert "does not exist" in capsys.readouterr().err


def test_readdb(crawl, capsys):
    nutchy(crawl, "inject", str(crawl / "seeds"))
    capsys.readouterr()
    assert nutchy(crawl, "readdb", "-stats") == 0
    out = capsys.readouterr().out
    assert "TOTAL urls:\t3" in out
    assert "status 0 (status_injected):\t3" in out
    assert nutchy(crawl, "readdb", "-url", "http://WWW.example.com:80/") == 0
    out = capsys.readouterr().out
    assert "url:\thttp://www.example.com/" in out
    assert "\tlang:\ten" in out
    assert nutchy(crawl, "readdb", "-url", "http://nowhere.example/") == 1
    assert "is not in table webpage" in capsys.readouterr().err
    assert nutchy(crawl, "readdb", "-dump", "out", "-regex", "example\\.(com|org)") == 0
    assert "Dumped 2 rows to out/webpage.jsonl" in capsys.readouterr().out
    urls = [json.loads(line)["url"] for line in Path("out/webpage.jsonl").read_text().splitlines()]
    assert urls == ["http://www.example.com/", "http://www.example.org/a"]
    assert nutchy(crawl, "readdb", "-dump", "csv", "-format", "csv", "-status", "injected") == 0
    assert Path("csv/webpage.csv").read_text().count("\n") == 4
    assert nutchy(crawl, "readdb", "-dump", "x", "-status", "done") == 2
    assert "unknown status 'done'" in capsys.readouterr().err
    assert nutchy(crawl, "readdb", "-stats", "-topN", "3") == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert nutchy(crawl, "readdb", "-stats", "-regex", "x") == 2
    assert "-regex only applies to -dump" in capsys.readouterr().err


def test_storage_subcommand_still_works(crawl, capsys):
    assert nutchy(crawl, "storage", "info") == 0
    assert "does not exist" in capsys.readouterr().out
    assert nutchy(crawl, "storage", "init") == 0
    assert "Created table webpage" in capsys.readouterr().out
    assert nutchy(crawl, "storage", "drop") == 2
    assert nutchy(crawl, "storage", "drop", "--confirm") == 0


def test_help_exits_0(capsys):
    assert main(["generate", "--help"]) == 0
    assert "-topN N" in capsys.readouterr().out


def test_scrapy_inject_in_a_project(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "__init__.py").write_text("")
    (project / "settings.py").write_text(
        'BOT_NAME = "proj"\nCOMMANDS_MODULE = "nutchy.commands"\nNUTCH_CRAWL_DIR = "crawl"\n'
    )
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (tmp_path / "seeds.txt").write_text("http://www.example.com/\nnot a url\n")
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "inject", "seeds.txt", "-s", "NUTCH_STORAGE_CRAWL_ID=x"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Injected 1 new URLs into table x_webpage" in result.stdout
    assert (tmp_path / "crawl" / "x_webpage.sqlite").exists()
    assert "reactor" not in result.stderr.lower()
    missing = subprocess.run(
        [sys.executable, "-m", "scrapy", "inject", "nothing-here"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert missing.returncode == 1
    assert "does not exist" in missing.stderr
