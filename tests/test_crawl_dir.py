"""Where the web table is: NUTCH_CRAWL_DIR, relative to the Scrapy project's folder."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest
from scrapy.settings import Settings

import nutchy.default_settings
from nutchy.config import crawl_dir
from nutchy.exceptions import ConfigError
from nutchy.store import describe_table, open_table


def settings(**values: object) -> Settings:
    result = Settings()
    result.setmodule(nutchy.default_settings, priority="default")
    result.setdict(values, priority="cmdline")
    return result


@pytest.fixture
def no_project(tmp_path, monkeypatch) -> Path:
    """A current folder outside any Scrapy project."""
    monkeypatch.chdir(tmp_path)
    # Set, then deleted: monkeypatch then takes away at teardown the SCRAPY_SETTINGS_MODULE that
    # Scrapy's get_project_settings sets in os.environ when it finds a test's scrapy.cfg, which
    # the fetch and sitemap children of later tests would otherwise inherit.
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "")
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE")
    return tmp_path


def test_an_absolute_crawl_dir_is_kept(no_project):
    assert crawl_dir(settings(NUTCH_CRAWL_DIR=str(no_project / "x"))) == no_project / "x"


def test_a_relative_crawl_dir_outside_a_project_is_in_the_current_folder(no_project):
    assert crawl_dir(settings()) == no_project / "crawl"


def test_a_relative_crawl_dir_is_in_the_projects_folder_from_any_subfolder(no_project, monkeypatch):
    (no_project / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    deep = no_project / "proj" / "spiders"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert crawl_dir(settings()) == no_project.resolve() / "crawl"
    with open_table(settings()) as table:
        table.create()
    assert (no_project / "crawl" / "webpage.sqlite").exists()
    assert not (deep / "crawl").exists()
    assert describe_table(settings(NUTCH_STORAGE_CRAWL_ID="news")) == (
        f"table news_webpage in {no_project.resolve() / 'crawl' / 'news_webpage.sqlite'}"
        " (nutchy.store.embedded.EmbeddedStore)"
    )


def test_a_project_run_from_an_egg_refuses_a_relative_crawl_dir(no_project, monkeypatch):
    egg = no_project / "proj.egg"
    with zipfile.ZipFile(egg, "w") as archive:
        archive.writestr("eggproj_settings/__init__.py", "BOT_NAME = 'p'\n")
    monkeypatch.syspath_prepend(str(egg))
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "eggproj_settings")
    try:
        with pytest.raises(ConfigError) as raised:
            crawl_dir(settings())
        message = str(raised.value)
        assert f"NUTCH_CRAWL_DIR 'crawl' is relative, and the project runs from an egg ({egg})" in (
            message
        )
        assert f"would land in {no_project}" in message
        assert crawl_dir(settings(NUTCH_CRAWL_DIR="/srv/crawl")) == Path("/srv/crawl")
        # The HBase store has no use for the folder: its table is placed without it.
        hbase = settings(NUTCH_STORAGE_DATA_STORE_CLASS="nutchy.store.hbase.HBaseStore")
        assert describe_table(hbase) == (
            "table webpage on the HBase Thrift server localhost:9090"
            " (nutchy.store.hbase.HBaseStore)"
        )
    finally:
        sys.modules.pop("eggproj_settings", None)


@pytest.mark.parametrize("value", ["", None, 3])
def test_a_crawl_dir_that_is_no_path_is_refused(no_project, value):
    with pytest.raises(ConfigError, match="NUTCH_CRAWL_DIR must be a folder path"):
        crawl_dir(settings(NUTCH_CRAWL_DIR=value))


@pytest.mark.parametrize(
    "args",
    [
        ["readdb", "-stats"],
        ["generate", "-topN", "5"],
        ["parse", "999-999"],
        ["updatedb", "999-999"],
    ],
)
def test_read_only_verbs_before_inject_create_nothing_and_name_the_file(
    args, no_project, monkeypatch, capsys
):
    from nutchy.cli import main

    (no_project / "scrapy.cfg").write_text("[settings]\ndefault = projsettings\n")
    (no_project / "projsettings.py").write_text("BOT_NAME = 'p'\n")
    monkeypatch.syspath_prepend(str(no_project))
    sub = no_project / "proj" / "sub"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert main(args) == 2
    path = no_project.resolve() / "crawl" / "webpage.sqlite"
    assert f"table 'webpage' does not exist in {path}" in capsys.readouterr().err
    made = [p for p in no_project.rglob("*") if p.name == "crawl" or ".sqlite" in p.name]
    assert made == []
