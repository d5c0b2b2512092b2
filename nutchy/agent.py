"""The User-Agent the fetch sends, and the name robots.txt groups are matched on.

Nutch refuses to fetch until ``http.agent.name`` is set, so that no crawler goes out under
somebody else's name. nutchy sends its own by default, built as Nutch's ``HttpBase`` builds it
from the ``http.agent.*`` properties, ``name/version (description; +url; email)``, for example
``nutchy/0.1.0 (+https://example.org/crawler; crawler@example.org)``; it warns at start while no
contact (``NUTCH_HTTP_AGENT_URL`` or ``NUTCH_HTTP_AGENT_EMAIL``) is set, rather than refusing, so
that a first crawl of a test site works as it is. robots.txt groups are matched on the agent's
name (its product token, RFC 9309 §2.2.1). A project's own ``USER_AGENT`` (and
``ROBOTSTXT_USER_AGENT``) is kept as it is.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nutchy.exceptions import ConfigError

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["agent_name", "agent_string", "apply_agent", "contact_missing", "contact_warning"]

logger = logging.getLogger(__name__)

#: Scrapy's own defaults, and what an add-on (this one, before the crawler existed) set.
_NOT_OWN = (0, 15)


def agent_string(name: str, version: str, description: str, url: str, email: str) -> str:
    """The User-Agent of the ``http.agent.*`` parts (the empty ones left out).

    >>> agent_string("nutchy", "0.1.0", "", "https://example.org/bot", "bot@example.org")
    'nutchy/0.1.0 (+https://example.org/bot; bot@example.org)'
    >>> agent_string("mybot", "", "a test", "", "")
    'mybot (a test)'
    """
    agent = f"{name}/{version}" if version else name
    details = [part for part in (description, f"+{url}" if url else "", email) if part]
    return f"{agent} ({'; '.join(details)})" if details else agent


def _own(settings: BaseSettings, name: str) -> bool:
    """Whether the project, the spider or the command line set *name* (not Scrapy's default,
    nor this add-on, which applies once before the crawler exists and once for it)."""
    priority = settings.getpriority(name)
    return priority is not None and priority not in _NOT_OWN


def apply_agent(settings: BaseSettings) -> None:
    """Set ``USER_AGENT`` to nutchy's agent and ``ROBOTSTXT_USER_AGENT`` to its name, at the
    add-on's priority, unless the project set them;
    :exc:`~nutchy.exceptions.ConfigError` when the agent would have no name."""
    from nutchy import __version__

    name = agent_name(settings)
    if name is None:
        return
    agent = agent_string(
        name,
        str(settings.get("NUTCH_HTTP_AGENT_VERSION") or __version__).strip(),
        str(settings.get("NUTCH_HTTP_AGENT_DESCRIPTION") or "").strip(),
        str(settings.get("NUTCH_HTTP_AGENT_URL") or "").strip(),
        str(settings.get("NUTCH_HTTP_AGENT_EMAIL") or "").strip(),
    )
    settings.set("USER_AGENT", agent, priority="addon")
    if not _own(settings, "ROBOTSTXT_USER_AGENT"):
        settings.set("ROBOTSTXT_USER_AGENT", name, priority="addon")


def agent_name(settings: BaseSettings) -> str | None:
    """The agent's name (``None`` when the project sets its own ``USER_AGENT``);
    :exc:`~nutchy.exceptions.ConfigError` when it is empty, as Nutch refuses to fetch then."""
    if _own(settings, "USER_AGENT"):
        return None
    name = str(settings.get("NUTCH_HTTP_AGENT_NAME") or "").strip()
    if not name:
        raise ConfigError(
            "NUTCH_HTTP_AGENT_NAME is empty: name the crawler (Nutch's http.agent.name), or set"
            " USER_AGENT"
        )
    return name


def contact_missing(settings: BaseSettings) -> bool:
    """Whether the fetch sends nutchy's agent without a way to reach whoever runs the crawl."""
    if _own(settings, "USER_AGENT"):
        return False
    return not (settings.get("NUTCH_HTTP_AGENT_URL") or settings.get("NUTCH_HTTP_AGENT_EMAIL"))


def contact_warning(settings: BaseSettings) -> str | None:
    """The start-up warning when :func:`contact_missing` (``None`` when the agent has one)."""
    if not contact_missing(settings):
        return None
    name = str(settings.get("NUTCH_HTTP_AGENT_NAME") or "").strip()
    return (
        f"Fetching as {name}/… with no contact: set NUTCH_HTTP_AGENT_URL (a page about the"
        " crawl) or NUTCH_HTTP_AGENT_EMAIL, so that the sites crawled can reach whoever runs it"
    )
