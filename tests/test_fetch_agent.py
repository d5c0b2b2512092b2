"""The User-Agent of the fetch: nutchy's own by default, with a contact when one is set and a
warning when none is, robots.txt groups matched on its name; a project's USER_AGENT kept."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings
from sites import FetchProject, Site, prepare_batch

from nutchy import __version__
from nutchy.agent import apply_agent, contact_missing
from nutchy.core.status import ProtocolStatusCode
from nutchy.exceptions import ConfigError

H2 = "127.0.0.2"
ROBOTS = "User-agent: nutchy\nDisallow: /page/1\n\nUser-agent: *\nDisallow: /page/2\n"
WARNING = "WARNING: Fetching as nutchy/… with no contact: set NUTCH_HTTP_AGENT_URL"


def nutchy_settings(**values: object) -> Settings:
    settings = Settings()
    settings.setmodule("nutchy.default_settings", priority="default")
    settings.update(values, priority="project")
    return settings


def test_the_agent_is_nutchys_unless_the_project_names_its_own():
    settings = nutchy_settings()
    apply_agent(settings)
    assert settings["USER_AGENT"] == f"nutchy/{__version__}"
    assert settings["ROBOTSTXT_USER_AGENT"] == "nutchy"
    assert contact_missing(settings)

    settings = nutchy_settings(
        NUTCH_HTTP_AGENT_NAME="acme",
        NUTCH_HTTP_AGENT_VERSION="2",
        NUTCH_HTTP_AGENT_URL="https://acme.example/bot",
        NUTCH_HTTP_AGENT_EMAIL="bot@acme.example",
    )
    apply_agent(settings)
    apply_agent(settings)  # the add-on applies before the crawler exists, then for it
    assert settings["USER_AGENT"] == "acme/2 (+https://acme.example/bot; bot@acme.example)"
    assert settings["ROBOTSTXT_USER_AGENT"] == "acme"
    assert not contact_missing(settings)

    settings = nutchy_settings(USER_AGENT="MyBot/1.0 (+https://my.example)")
    apply_agent(settings)
    assert settings["USER_AGENT"] == "MyBot/1.0 (+https://my.example)"
    assert settings["ROBOTSTXT_USER_AGENT"] is None  # robots.txt is read for USER_AGENT
    assert not contact_missing(settings)

    with pytest.raises(ConfigError, match="NUTCH_HTTP_AGENT_NAME"):
        apply_agent(nutchy_settings(NUTCH_HTTP_AGENT_NAME=" "))


def test_the_fetch_sends_nutchys_agent_and_obeys_its_robots_group(embedded_store_factory, tmp_path):
    store = embedded_store_factory()
    store.create()
    with Site((H2,), robots={H2: (200, ROBOTS)}) as site:
        urls = [site.url(H2, f"/page/{i}") for i in (1, 2)]
        table = prepare_batch(store, urls)
        result = FetchProject(tmp_path, store, NUTCH_HTTP_AGENT_URL="").crawl()
        assert result.returncode == 0, result.log[-3000:]
        assert WARNING in result.log
        agents = {h.path: h.headers.get("User-Agent") for h in site.hits[H2]}
        assert agents == dict.fromkeys(("/robots.txt", "/page/2"), f"nutchy/{__version__}")
        # the group of the agent's name, not the one for every other crawler
        denied = table.get(urls[0], ["protocol_status"]).protocol_status.code
        assert denied == ProtocolStatusCode.ROBOTS_DENIED
