"""Every setting is NUTCH_ + a Nutch-style property name, has one default, and is documented."""

from __future__ import annotations

from pathlib import Path

import pytest

import nutchy.default_settings
from nutchy.config import load_settings, nutch_property

DOCS = Path(__file__).parent.parent / "docs" / "settings.md"
NAMES = sorted(n for n in vars(nutchy.default_settings) if n.isupper())


def test_there_are_settings():
    assert "NUTCH_STORAGE_DATA_STORE_CLASS" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_setting_is_named_and_documented(name):
    assert name.startswith("NUTCH_")
    assert nutch_property(name) == name[6:].lower().replace("_", ".")
    assert f"`{name}`" in DOCS.read_text(encoding="utf-8"), f"{name} is not in docs/settings.md"


def test_project_and_command_line_override_the_defaults(tmp_path, monkeypatch):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "__init__.py").write_text("")
    (tmp_path / "proj" / "settings.py").write_text(
        "NUTCH_CRAWL_DIR = 'from-project'\nNUTCH_HBASE_PORT = 1234\n"
    )
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    # Scrapy sets SCRAPY_SETTINGS_MODULE when it finds scrapy.cfg: make sure it is undone.
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "")
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE")
    settings = load_settings({"NUTCH_HBASE_PORT": "4321"})
    assert settings.get("NUTCH_CRAWL_DIR") == "from-project"
    assert settings.getint("NUTCH_HBASE_PORT") == 4321
    assert settings.get("NUTCH_STORAGE_CRAWL_ID") == ""
    assert load_settings(project=False).get("NUTCH_CRAWL_DIR") == "crawl"


def test_nutch_property_refuses_other_names():
    with pytest.raises(ValueError, match="not a nutchy setting"):
        nutch_property("DOWNLOAD_DELAY")
