"""Every setting a round needs is checked before anything is written: a bad fetch setting stops
``nutchy generate`` and ``nutchy crawl`` in one line naming it, with no batch marked (the fetch
child used to fail after generate, with "Unhandled error in Deferred" and the rows locked), and
the ``nutch`` spider refuses to start in one line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nutchy._checks import check_settings
from nutchy.cli import main
from nutchy.config import load_settings
from nutchy.exceptions import ConfigError
from nutchy.store import open_table

#: Values the fetch, parse or updatedb of a round cannot use, one per setting.
BAD = [
    ("NUTCH_HTTP_TIMEOUT", "ten"),
    ("NUTCH_HTTP_TIMEOUT", "0"),
    ("NUTCH_FETCHER_SERVER_DELAY", "-1"),
    ("NUTCH_FETCHER_SERVER_MIN_DELAY", "-0.5"),
    ("NUTCH_FETCHER_MAX_CRAWL_DELAY", "nan"),
    ("NUTCH_HTTP_CONTENT_LIMIT", "1e3"),
    ("NUTCH_FETCHER_THREADS_PER_QUEUE", "0"),
    ("NUTCH_FETCHER_QUEUE_DEPTH_MULTIPLIER", "0"),
    ("NUTCH_FETCHER_QUEUE_MODE", "byPort"),
    ("CONCURRENT_REQUESTS", "0"),
    ("NUTCH_HTTP_REDIRECT_MAX", "-1"),
    ("NUTCH_HTTP_ROBOTS_503_DEFER_VISITS_DELAY", "-1"),
    ("NUTCH_FETCHER_FLUSH_SIZE", "0"),
    ("NUTCH_FETCHER_FLUSH_INTERVAL", "0"),
    ("NUTCH_FETCHER_TIMELIMIT_MINS", "soon"),
    ("NUTCH_FETCHER_PROGRESS_LOG_INTERVAL", "-1"),
    ("NUTCH_FETCHER_STORE_CONTENT", "maybe"),
    ("NUTCH_PARSER_TIMEOUT", "inf"),
    ("NUTCH_DB_FETCH_SCHEDULE_CLASS", "Weekly"),
    ("NUTCH_HTTP_ROBOTS_EXPIRY", "90000"),  # more than RFC 9309's 24 hours
    ("NUTCH_HTTP_AGENT_NAME", " "),
]


@pytest.mark.parametrize(("name", "value"), BAD)
def test_each_bad_value_is_named(name, value):
    with pytest.raises(ConfigError, match=f"^{name}"):
        check_settings(load_settings({name: value}, project=False))


def test_the_defaults_pass():
    check_settings(load_settings(project=False))


@pytest.fixture
def crawl_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    (tmp_path / "seeds.txt").write_text("http://127.0.0.1:9/\n", encoding="utf-8")
    return tmp_path


def nutchy(crawl_dir, *args):
    return main([*args, "-s", f"NUTCH_CRAWL_DIR={crawl_dir / 'crawl'}"])


def marks(crawl_dir):
    settings = load_settings({"NUTCH_CRAWL_DIR": str(crawl_dir / "crawl")}, project=False)
    with open_table(settings) as table:
        return [p.markers.get("_gnmrk_") for p in table.scan(["markers"])]


@pytest.mark.parametrize(("name", "value"), BAD[::3])
def test_generate_and_crawl_refuse_before_writing(crawl_dir, capsys, name, value):
    assert nutchy(crawl_dir, "crawl", "seeds.txt", "-s", f"{name}={value}") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nutchy crawl: {name} must be") and err.count("\n") == 1, err
    assert not (crawl_dir / "crawl" / "webpage.sqlite").exists()  # not even injected
    assert nutchy(crawl_dir, "inject", "seeds.txt") == 0
    capsys.readouterr()
    assert nutchy(crawl_dir, "generate", "-s", f"{name}={value}") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nutchy generate: {name} must be") and err.count("\n") == 1, err
    assert marks(crawl_dir) == [None]


@pytest.mark.slow
def test_the_nutch_spider_refuses_a_bad_fetch_setting_in_one_line(crawl_dir):
    assert nutchy(crawl_dir, "inject", "seeds.txt") == 0
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nutchy._fetchrun",
            "-all",
            '{"NUTCH_CRAWL_DIR": "crawl", "NUTCH_FETCHER_THREADS_PER_QUEUE": "0"}',
        ],
        cwd=crawl_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "ERROR" in line or "CRITICAL" in line]
    assert len(lines) == 1, done.stderr
    assert lines[0].endswith(
        "The nutch spider cannot start: NUTCH_FETCHER_THREADS_PER_QUEUE must be >= 1, got 0"
    )
    assert "Unhandled error" not in done.stderr and "Traceback" not in done.stderr
