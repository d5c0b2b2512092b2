"""The fetch's Scrapy components one by one: the add-on, the spider's arguments, and the
middleware's outcomes for hand-made requests and responses."""

from __future__ import annotations

import subprocess
import sys

import pytest
from scrapy import Request
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware, RedirectMiddleware
from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
)
from scrapy.http import HtmlResponse, Response
from scrapy.settings import Settings
from scrapy.spidermiddlewares.depth import DepthMiddleware
from scrapy.spidermiddlewares.referer import RefererMiddleware
from scrapy.spidermiddlewares.start import StartSpiderMiddleware
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.test import get_crawler
from twisted.internet.error import ConnectionLost
from twisted.python.failure import Failure
from twisted.web.client import ResponseFailed

from nutchy._fetch import (
    META_CHAIN,
    META_ENTRY,
    META_FOLLOW,
    META_OUTCOME,
    FetchJob,
    FetchSettings,
    fetch_finished,
)
from nutchy.addon import NutchAddon
from nutchy.compression import NutchHttpCompressionMiddleware
from nutchy.core.fetch import FetchEntry
from nutchy.core.status import ProtocolStatusCode
from nutchy.exceptions import ConfigError
from nutchy.index.pipeline import NutchIndexPipeline
from nutchy.middlewares import (
    AnswerRecorded,
    FetchFailed,
    NutchFetchMiddleware,
    describe_exception,
)
from nutchy.pipelines import NutchDbUpdatePipeline, NutchParsePipeline
from nutchy.robots import NutchRobotsMiddleware, RobotsDenied
from nutchy.spiders import NutchSpider

P = ProtocolStatusCode
URL = "http://www.example.com/a"
ENTRY = FetchEntry("com.example.www:http/a", URL, "b1", fetch_time=5, etag='"e"')


def test_addon_turns_nutchy_on_and_keeps_project_settings():
    settings = Settings({"NUTCH_FETCHER_SERVER_DELAY": 1.5}, priority="project")
    NutchAddon.update_pre_crawler_settings(settings)
    NutchAddon().update_settings(settings)
    assert settings["SCHEDULER"] == "nutchy.scheduler.NutchScheduler"
    middlewares = settings.getdict("DOWNLOADER_MIDDLEWARES")
    assert middlewares[NutchFetchMiddleware] == 40
    assert middlewares == {
        NutchFetchMiddleware: 40,
        NutchRobotsMiddleware: 90,
        HttpCompressionMiddleware: None,
        NutchHttpCompressionMiddleware: 590,
    }
    # http and https only
    assert settings.getdict("DOWNLOAD_HANDLERS") == dict.fromkeys(("data", "file", "ftp", "s3"))
    pipelines = settings.getdict("ITEM_PIPELINES")
    assert pipelines == {
        NutchParsePipeline: 100,
        NutchDbUpdatePipeline: 900,
        NutchIndexPipeline: 950,  # off unless NUTCH_FETCHER_INDEX
    }
    assert "nutchy.spiders" in settings.getlist("SPIDER_MODULES")
    assert settings.getfloat("NUTCH_FETCHER_SERVER_DELAY") == 1.5  # the project's value wins
    assert settings.getint("NUTCH_HTTP_CONTENT_LIMIT") == 1048576  # a registered default


def test_the_spider_handles_one_item_at_a_time_unless_the_project_says_otherwise():
    settings = Settings()
    NutchSpider.update_settings(settings)
    assert settings.getint("CONCURRENT_ITEMS") == 1
    settings = Settings({"CONCURRENT_ITEMS": 7}, priority="project")
    NutchSpider.update_settings(settings)
    assert settings.getint("CONCURRENT_ITEMS") == 7


def test_the_spider_leaves_out_components_it_does_not_need_unless_the_project_lists_them():
    crawler = get_crawler(NutchSpider, {"ADDONS": {"nutchy.NutchAddon": 0}})
    crawler._apply_settings()
    settings = crawler.settings
    downloader = build_component_list(settings.getwithbase("DOWNLOADER_MIDDLEWARES"))
    spider = build_component_list(settings.getwithbase("SPIDER_MIDDLEWARES"))
    assert not {RetryMiddleware, OffsiteMiddleware, MetaRefreshMiddleware} & set(
        map(load, downloader)
    )
    assert NutchFetchMiddleware in downloader and RedirectMiddleware in map(load, downloader)
    assert list(map(load, spider)) == [StartSpiderMiddleware, RefererMiddleware]
    assert not settings.getbool("COOKIES_ENABLED") and not settings.getbool("DOWNLOADER_STATS")

    project = {
        "ADDONS": {"nutchy.NutchAddon": 0},
        "DOWNLOADER_MIDDLEWARES": {"scrapy.downloadermiddlewares.retry.RetryMiddleware": 550},
        "SPIDER_MIDDLEWARES": {"scrapy.spidermiddlewares.depth.DepthMiddleware": 900},
        "COOKIES_ENABLED": True,
    }
    crawler = get_crawler(NutchSpider, project)
    crawler._apply_settings()
    settings = crawler.settings
    downloader = build_component_list(settings.getwithbase("DOWNLOADER_MIDDLEWARES"))
    spider = build_component_list(settings.getwithbase("SPIDER_MIDDLEWARES"))
    assert RetryMiddleware in map(load, downloader) and OffsiteMiddleware not in downloader
    assert list(map(load, spider)) == [StartSpiderMiddleware, RefererMiddleware, DepthMiddleware]
    assert settings.getbool("COOKIES_ENABLED")


def run_program(code: str) -> None:
    """Run *code* in a Python process of its own (what it imports is the point), which prints
    ``ok`` once its assertions pass."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_the_spider_leaves_out_scrapys_remote_control_without_importing_it():
    # In a process of its own: whether the module was imported is the point, and this process
    # may have imported it already.
    code = """
import sys
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler
from nutchy.spiders import NutchSpider

PATH = "scrapy.extensions.remote_control.RemoteControl"
crawler = get_crawler(NutchSpider, {"ADDONS": {"nutchy.NutchAddon": 0}})
crawler._apply_settings()
extensions = build_component_list(crawler.settings.getwithbase("EXTENSIONS"))
assert not [e for e in extensions if "remote_control" in str(e)], extensions
assert "scrapy.extensions.remote_control" not in sys.modules
assert "scrapy.extensions.corestats.CoreStats" in extensions
project = {"ADDONS": {"nutchy.NutchAddon": 0}, "EXTENSIONS": {PATH: 10}}
crawler = get_crawler(NutchSpider, project)
crawler._apply_settings()
extensions = build_component_list(crawler.settings.getwithbase("EXTENSIONS"))
assert load_object(PATH) in [load_object(e) for e in extensions], extensions
print("ok")
"""
    run_program(code)


def test_the_spider_leaves_out_scrapys_cookies_middleware_while_cookies_are_off():
    # In a process of its own, as above: the middleware's module imports tldextract.
    code = """
import sys
from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
from scrapy.utils.conf import build_component_list
from scrapy.utils.test import get_crawler
from nutchy.spiders import COOKIES_MIDDLEWARE, NutchSpider

def middlewares(project):
    crawler = get_crawler(NutchSpider, {"ADDONS": {"nutchy.NutchAddon": 0}, **project})
    crawler._apply_settings()
    manager = DownloaderMiddlewareManager.from_crawler(crawler)
    return [type(m).__name__ for m in manager.middlewares]

assert "CookiesMiddleware" not in middlewares({}), middlewares({})
assert "scrapy.downloadermiddlewares.cookies" not in sys.modules
assert "tldextract" not in sys.modules
# Cookies turned on by the project, or the middleware listed by it: Scrapy's middleware is on.
assert "CookiesMiddleware" in middlewares({"COOKIES_ENABLED": True})
listed = {"DOWNLOADER_MIDDLEWARES": {COOKIES_MIDDLEWARE: 700}, "COOKIES_ENABLED": True}
assert "CookiesMiddleware" in middlewares(listed)
print("ok")
"""
    run_program(code)


def test_scrapys_download_handler_imported_by_nutchy_makes_the_same_deprecated_aliases():
    # In processes of their own: the import is the point. Scrapy's own import, then nutchy's,
    # which gives inspect.stack and inspect.getmodule back as they were.
    code = """
import inspect, sys, warnings
stack, getmodule = inspect.stack, inspect.getmodule
if sys.argv[1] == "nutchy":
    from nutchy._imports import import_download_handler
    import_download_handler()
else:
    import scrapy.core.downloader.handlers.http11
assert (inspect.stack, inspect.getmodule) == (stack, getmodule)
from scrapy.core.downloader import contextfactory, tls
from scrapy.exceptions import ScrapyDeprecationWarning
aliases = (
    contextfactory.ScrapyClientContextFactory,
    contextfactory.AcceptableProtocolsContextFactory,
    tls.ScrapyClientTLSOptions,
)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    type("Sub", (contextfactory.ScrapyClientContextFactory,), {})
assert [w.category for w in caught] == [ScrapyDeprecationWarning], caught
print(*(f"{a.__module__}.{a.__name__}" for a in aliases))
"""
    made = [
        subprocess.run(
            [sys.executable, "-c", code, way],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        for way in ("scrapy", "nutchy")
    ]
    assert made[0].returncode == 0, made[0].stderr
    assert made[1].returncode == 0, made[1].stderr
    assert "scrapy.core.downloader.tls.ScrapyClientTLSOptions" in made[0].stdout
    assert made[1].stdout == made[0].stdout


def load(component: object) -> object:
    return load_object(component) if isinstance(component, str) else component


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"partition": "0/2"}, "give -a batch=ID too"),
        ({"batch": "b", "rounds": "2"}, "leave out -a batch"),
        ({"rounds": "0"}, "rounds must be >= 1"),
        ({"top_n": "ten"}, "topN must be a whole number"),
        ({"add_days": "-1"}, "adddays must be >= 0"),
        ({"batch": "b", "add_days": "3"}, "leave out -a batch"),
        ({"batch": "b", "partition": "2/2"}, "0 <= k < K"),
        ({"batch": "b", "partition": "x"}, "partition must be k/K"),
        ({"batch": "b", "resume": "maybe"}, "resume must be true or false"),
        ({"batch": "b", "timelimit": "soon"}, "timelimit must be minutes"),
    ],
)
def test_bad_spider_arguments_are_explained(args, message):
    batch = args.pop("batch", None)
    with pytest.raises(ConfigError, match=message):
        FetchJob.from_args(batch, **args)


def test_fetch_settings_refuse_bad_values():
    settings = Settings()
    settings.setmodule("nutchy.default_settings")
    assert FetchSettings.from_settings(settings).queue_delay == 5.0
    assert FetchSettings.from_settings(settings).min_crawl_delay == 5.0  # -1: the server delay
    settings.set("NUTCH_FETCHER_QUEUE_MODE", "byPlanet")
    with pytest.raises(ConfigError, match="NUTCH_FETCHER_QUEUE_MODE"):
        FetchSettings.from_settings(settings)


@pytest.mark.parametrize(
    ("exception", "reason"),
    [
        (DownloadTimeoutError("took longer than 10 s"), "timeout"),
        (CannotResolveHostError("no such host"), "dns"),
        (DownloadConnectionRefusedError("refused"), "refused"),
        (DownloadFailedError("lost"), "reset"),
        (ResponseFailed([Failure(ConnectionLost("gone"))]), "reset"),
        (ValueError("odd"), "ValueError"),
    ],
)
def test_exceptions_are_described(exception, reason):
    assert describe_exception(exception)[0] == reason


def test_tls_errors_are_found_inside_twisted_failures():
    tls_error = type("Error", (Exception,), {"__module__": "OpenSSL.SSL"})
    wrapped = ResponseFailed([Failure(tls_error("certificate verify failed"))])
    assert describe_exception(wrapped)[0] == "tls"


@pytest.fixture
def middleware():
    crawler = get_crawler(
        settings_dict={
            "ADDONS": {NutchAddon: 0},
            "NUTCH_HTTP_CONTENT_LIMIT": 4,
            "NUTCH_HTTP_REDIRECT_MAX": 2,
        }
    )
    mw = build_from_crawler(NutchFetchMiddleware, crawler)
    finished: list[dict] = []

    def record(**kwargs):
        finished.append(kwargs)

    crawler.signals.connect(record, signal=fetch_finished, weak=False)
    mw.finished = finished
    return mw


def nutch_request(**meta) -> Request:
    return Request(URL, meta={META_ENTRY: ENTRY, **meta})


def test_request_is_made_conditional_and_nutch_like(middleware):
    request = nutch_request()
    assert middleware.process_request(request) is None
    assert request.headers[b"If-None-Match"] == b'"e"'
    assert b"If-Modified-Since" not in request.headers
    meta = request.meta
    assert meta["dont_redirect"] and meta["dont_retry"] and meta["handle_httpstatus_all"]
    assert meta["download_timeout"] == 10.0
    other = Request(URL)
    middleware.process_request(other)
    assert not other.headers and "dont_redirect" not in other.meta  # not a row: untouched


def test_response_outcome_is_sent_and_attached(middleware):
    request = nutch_request()
    response = HtmlResponse(URL, body=b"<html>", headers={"Retry-After": "3"}, request=request)
    result = middleware.process_response(request, response)
    assert result is response
    outcome = request.meta[META_OUTCOME]
    assert outcome.status.code == P.SUCCESS
    assert outcome.content == b"<htm" and outcome.truncated
    (event,) = middleware.finished
    assert event["outcome"] is outcome
    assert event["update"].puts[b"mk:_ftcmrk_"] == b"b1"
    assert event["retry_after"] is None  # only read on 429 and 503


def test_answers_other_than_fetched_pages_are_dropped_once_recorded_unless_asked_for():
    crawler = get_crawler(settings_dict={"ADDONS": {NutchAddon: 0}})
    finished: list[dict] = []
    crawler.signals.connect(lambda **kw: finished.append(kw), signal=fetch_finished, weak=False)
    for every in (False, True):
        middleware = NutchFetchMiddleware(
            FetchSettings(),
            signals=crawler.signals,
            stats=crawler.stats,
            url_filter=None,
            every_response=every,
        )
        page = nutch_request()
        response = HtmlResponse(URL, body=b"<html>", request=page)
        assert middleware.process_response(page, response) is response
        request = nutch_request()
        not_modified = Response(URL, status=304, request=request)
        if every:
            assert middleware.process_response(request, not_modified) is not_modified
        else:
            with pytest.raises(AnswerRecorded) as raised:
                middleware.process_response(request, not_modified)
            assert raised.value.outcome.status.code == P.NOTMODIFIED
        assert request.meta[META_OUTCOME].status.code == P.NOTMODIFIED
        assert finished[-1]["outcome"] is request.meta[META_OUTCOME]  # recorded either way
        assert finished[-1]["update"].puts[b"mk:_ftcmrk_"] == b"b1"
    assert NutchSpider.nutch_every_response is False


def test_throttling_answers_carry_retry_after(middleware):
    request = nutch_request()
    response = Response(URL, status=429, headers={"Retry-After": "7"}, request=request)
    middleware.process_response(request, response)
    (event,) = middleware.finished
    assert event["retry_after"] == 7.0 and event["throttled"]
    assert event["outcome"].status.code == P.EXCEPTION


def test_redirects_are_followed_up_to_the_limit_and_loops_stopped(middleware):
    request = nutch_request()
    response = Response(URL, status=301, headers={"Location": "/b"}, request=request)
    follow = middleware.process_response(request, response)
    assert isinstance(follow, Request)
    assert follow.meta[META_FOLLOW] == ("http://www.example.com/b", "b1")
    assert follow.meta[META_CHAIN] == [URL, "http://www.example.com/b"]
    assert middleware.finished[0]["outcome"].status.code == P.MOVED

    looping = nutch_request(**{META_CHAIN: [URL, "http://www.example.com/b"]})
    back = Response(URL, status=302, headers={"Location": "/b"}, request=looping)
    assert middleware.process_response(looping, back) is back  # recorded, not followed

    too_long = nutch_request(**{META_CHAIN: ["http://x/1", "http://x/2", URL]})
    moved = Response(URL, status=301, headers={"Location": "/c"}, request=too_long)
    assert middleware.process_response(too_long, moved) is moved


def test_exceptions_are_recorded_then_dropped_quietly(middleware):
    request = nutch_request()
    with pytest.raises(FetchFailed) as raised:
        middleware.process_exception(request, DownloadTimeoutError("slow"))
    assert isinstance(raised.value, IgnoreRequest)
    assert raised.value.outcome.status.args == ("timeout: slow",)
    with pytest.raises(FetchFailed):
        middleware.process_exception(nutch_request(), RobotsDenied(URL, "disallowed"))
    denied = middleware.finished[-1]
    assert denied["outcome"].status.code == P.ROBOTS_DENIED and not denied["requested"]
    # Dropped by another component: nothing recorded, the row stays unfetched.
    assert middleware.process_exception(nutch_request(), IgnoreRequest("offsite")) is None
    assert middleware.finished[-1]["outcome"] is None
