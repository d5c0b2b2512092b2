"""nutchy in a Scrapy project, as Scrapy's own commands show it: one ``ADDONS`` line makes
``scrapy list`` list the ``nutch`` spider and ``scrapy settings`` show nutchy's settings, and a
project whose settings would leave the spider crawling nothing is refused at start."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

from nutchy._checks import check_components
from nutchy.addon import NutchAddon
from nutchy.exceptions import ConfigError
from nutchy.scheduler import NutchScheduler
from nutchy.spiders import NutchSpider

REPO = Path(__file__).parent.parent
ADDON_LINE = 'ADDONS = {"nutchy.NutchAddon": 0}\n'


def scrapy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def new_project(tmp_path_factory) -> Path:
    """A project made by ``scrapy startproject``, with the one line nutchy asks for added."""
    root = tmp_path_factory.mktemp("startproject")
    made = scrapy("startproject", "proj", cwd=root)
    assert made.returncode == 0, made.stderr
    settings = root / "proj" / "proj" / "settings.py"
    settings.write_text(settings.read_text(encoding="utf-8") + ADDON_LINE, encoding="utf-8")
    return root / "proj"


@pytest.mark.slow
def test_a_new_project_lists_the_spider_and_shows_nutchys_settings(new_project):
    listed = scrapy("list", cwd=new_project)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["nutch", "nutch_sitemap"]
    delay = scrapy("settings", "--get", "NUTCH_FETCHER_SERVER_DELAY", cwd=new_project)
    assert delay.stdout.strip() == "5.0", delay.stderr
    scheduler = scrapy("settings", "--get", "SCHEDULER", cwd=new_project)
    assert scheduler.stdout.strip() == "nutchy.scheduler.NutchScheduler", scheduler.stderr


@pytest.mark.slow
def test_this_repository_lists_the_spider_and_shows_its_settings():
    listed = scrapy("list", cwd=REPO)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["nutch", "nutch_sitemap"]
    # the project lists only its own spiders: the add-on adds nutchy's
    assert 'SPIDER_MODULES = ["spiders"]\n' in (REPO / "settings" / "__init__.py").read_text()
    crawl_dir = scrapy("settings", "--get", "NUTCH_CRAWL_DIR", cwd=REPO)
    assert crawl_dir.stdout.strip() == "crawl", crawl_dir.stderr


def test_a_project_with_scrapy_redis_scheduler_is_refused_at_start_in_one_line(new_project):
    settings = new_project / "proj" / "settings.py"
    text = settings.read_text(encoding="utf-8")
    settings.write_text(text + 'SCHEDULER = "scrapy_redis.scheduler.Scheduler"\n', "utf-8")
    try:
        crawl = scrapy("crawl", "nutch", "-s", "LOG_LEVEL=WARNING", cwd=new_project)
    finally:
        settings.write_text(text, encoding="utf-8")
    assert crawl.returncode == 1
    (line,) = crawl.stderr.strip().splitlines()
    assert "ERROR: The nutch spider cannot start: SCHEDULER is scrapy_redis.scheduler" in line
    assert "(set at priority 'project')" in line
    assert "needs nutchy.scheduler.NutchScheduler" in line
    assert 'NUTCH_FRONTIER = "redis"' in line
    assert not (new_project / "crawl").exists()  # no table was opened


@pytest.mark.slow
def test_bad_spider_arguments_are_one_line_and_exit_code_1(new_project):
    def refused(*args: str) -> str:
        crawl = scrapy("crawl", "nutch", *args, "-s", "LOG_LEVEL=WARNING", cwd=new_project)
        assert crawl.returncode == 1, crawl.stderr
        (line,) = crawl.stderr.strip().splitlines()
        assert "ERROR: The nutch spider cannot start: " in line
        return line

    # Before any inject: no table, and none made.
    assert "table 'webpage' does not exist" in refused()
    assert not (new_project / "crawl").exists()
    (new_project / "seeds.txt").write_text("http://127.0.0.2:9/\n", encoding="utf-8")
    inject = [sys.executable, "-m", "nutchy.cli", "inject", "seeds.txt"]
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    subprocess.run(inject, cwd=new_project, env=env, check=True, capture_output=True, timeout=60)
    try:
        line = refused("-a", "topn=3")
        assert "unknown spider argument -a topn=3 (did you mean topN?)" in line
        assert "takes -a batch, -a resume, -a partition, -a timelimit, -a rounds, -a topN" in line
        assert "topN must be a whole number, got 'abc'" in refused("-a", "topN=abc")
        assert "no batch 'NOSUCH' in table webpage" in refused("-a", "batch=NOSUCH")
        assert "batch is empty ('')" in refused("-a", "batch=")  # not a new round
    finally:
        shutil.rmtree(new_project / "crawl")


def test_the_nutch_spider_without_the_add_on_is_refused(tmp_path):
    (tmp_path / "proj.py").write_text('SPIDER_MODULES = ["nutchy.spiders"]\n')
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = proj\n")
    crawl = scrapy("crawl", "nutch", "-s", "LOG_LEVEL=WARNING", cwd=tmp_path)
    assert crawl.returncode == 1
    assert "the nutch spider needs nutchy's add-on: ADDONS" in crawl.stderr
    assert "Traceback" not in crawl.stderr


def final_settings(spidercls: type[Spider], **project: object):
    """The settings a crawl of *spidercls* ends with: the project's, the spider's, the add-ons'."""
    crawler = get_crawler(spidercls, {"ADDONS": {NutchAddon: 0}, **project})
    crawler._apply_settings()
    return crawler.settings


@pytest.mark.parametrize(
    ("project", "message"),
    [
        (
            {"SCHEDULER": "scrapy.core.scheduler.Scheduler"},
            "SCHEDULER is scrapy.core.scheduler.Scheduler (set at priority 'project')",
        ),
        (
            {"DOWNLOADER_MIDDLEWARES": {"nutchy.middlewares.NutchFetchMiddleware": None}},
            "DOWNLOADER_MIDDLEWARES turns off nutchy.middlewares.NutchFetchMiddleware",
        ),
        (
            {"DOWNLOADER_MIDDLEWARES": {"nutchy.middlewares.NutchFetchMiddleware": 595}},
            (
                "puts nutchy.middlewares.NutchFetchMiddleware at 595, after Scrapy's"
                " scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware at 100"
            ),
        ),
        (
            {
                "DOWNLOADER_MIDDLEWARES": {
                    "nutchy.middlewares.NutchFetchMiddleware": 595,
                    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
                    "scrapy.downloadermiddlewares.httpauth.HttpAuthMiddleware": None,
                    "scrapy.downloadermiddlewares.defaultheaders.DefaultHeadersMiddleware": None,
                    "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware": None,
                }
            },
            (
                "after Scrapy's scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware"
                " at 590"
            ),
        ),
        (
            {"ITEM_PIPELINES": {"nutchy.pipelines.NutchParsePipeline": None}},
            (
                "turns off nutchy.pipelines.NutchParsePipeline (set at priority 'project'), which"
                " parses the pages as they are fetched when NUTCH_FETCHER_PARSE is True"
            ),
        ),
        (
            {"ITEM_PIPELINES": {"nutchy.pipelines.NutchDbUpdatePipeline": None}},
            "which updates each batch fetched whole when NUTCH_FETCHER_UPDATEDB is True",
        ),
    ],
)
def test_components_that_break_the_spider_are_refused_naming_both(project, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        final_settings(NutchSpider, **project)


@pytest.mark.parametrize(
    "project",
    [
        {},
        # the project's own middleware anywhere, nutchy's where the project puts it first
        {"DOWNLOADER_MIDDLEWARES": {"nutchy.middlewares.NutchFetchMiddleware": 10}},
        {"DOWNLOADER_MIDDLEWARES": {"nutchy.robots.NutchRobotsMiddleware": 5}},
        # a pipeline off with the setting that uses it
        {
            "ITEM_PIPELINES": {"nutchy.pipelines.NutchParsePipeline": None},
            "NUTCH_FETCHER_PARSE": False,
        },
        # a subclass of nutchy's scheduler
        {"SCHEDULER": type("MyScheduler", (NutchScheduler,), {})},
    ],
)
def test_settings_that_keep_the_spider_working_are_accepted(project):
    settings = final_settings(NutchSpider, **project)
    check_components(settings)


def test_other_spiders_keep_their_own_scheduler():
    class OtherSpider(Spider):
        name = "other"

    settings = final_settings(OtherSpider, SCHEDULER="scrapy_redis.scheduler.Scheduler")
    assert settings["SCHEDULER"] == "scrapy_redis.scheduler.Scheduler"
