"""The web table's storage: the schema codec, the store interface and its backends."""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from nutchy.core.hostdb import FAMILIES as HOST_FAMILIES
from nutchy.exceptions import ConfigError
from nutchy.store.base import Scan, Store
from nutchy.store.schema import FAMILIES
from nutchy.store.table import WebTable

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.settings import BaseSettings

__all__ = [
    "Scan",
    "Store",
    "WebTable",
    "describe_table",
    "open_host_store",
    "open_store",
    "open_table",
    "store_opener",
    "table_opener",
]

EMBEDDED = "nutchy.store.embedded.EmbeddedStore"
HBASE = "nutchy.store.hbase.HBaseStore"
_ALIASES = {"org.apache.gora.hbase.store.HBaseStore": HBASE}
#: The values happybase (and ``hbase thrift start``) know for the Thrift transport and protocol.
_HBASE_CHOICES = {
    "NUTCH_HBASE_TRANSPORT": ("buffered", "framed"),
    "NUTCH_HBASE_PROTOCOL": ("binary", "compact"),
}
_HBASE_POSITIVE = (
    "NUTCH_HBASE_BATCH_BYTES",
    "NUTCH_HBASE_SCANNER_CACHING",
    "NUTCH_HBASE_SCANNER_TIMEOUT",
)


def table_name(settings: BaseSettings, table: str = "webpage") -> str:
    crawl_id = settings.get("NUTCH_STORAGE_CRAWL_ID") or ""
    return f"{crawl_id}_{table}" if crawl_id else table


def open_store(settings: BaseSettings, table: str = "webpage") -> Store:
    """Open the store the settings name (``NUTCH_STORAGE_DATA_STORE_CLASS``).

    *table* is the web table's name or ``host``, the host database's (Nutch 2.x's two tables;
    prefixed with ``NUTCH_STORAGE_CRAWL_ID`` and an underscore when one is set). On the embedded
    store each table is a file of its own in the crawl directory. The table is not created here:
    see :meth:`Store.create` (``nutchy storage init``).
    """
    return store_opener(settings, table)()


def store_opener(settings: BaseSettings, table: str = "webpage") -> Callable[[], Store]:
    """What :func:`open_store` calls to open the store: the store's class with its arguments
    (a :func:`functools.partial`, which pickles), read and checked from *settings* now. A
    process started without the settings (the parse process) opens the store with it."""
    backend = settings.get("NUTCH_STORAGE_DATA_STORE_CLASS")
    backend = _ALIASES.get(backend, backend)
    crawl_id = settings.get("NUTCH_STORAGE_CRAWL_ID") or ""
    if backend == EMBEDDED:
        from nutchy.config import crawl_dir
        from nutchy.store.embedded import EmbeddedStore

        name = table_name(settings, table)
        try:
            cache_mb = settings.getfloat("NUTCH_STORE_EMBEDDED_CACHE_MB")
        except (TypeError, ValueError):
            cache_mb = math.nan
        if not 0 < cache_mb < math.inf:
            raise ConfigError(
                "NUTCH_STORE_EMBEDDED_CACHE_MB must be a number > 0 (MiB),"
                f" got {settings.get('NUTCH_STORE_EMBEDDED_CACHE_MB')!r}"
            )
        return functools.partial(
            EmbeddedStore, crawl_dir(settings) / f"{name}.sqlite", name, cache_mb=cache_mb
        )
    if backend == HBASE:
        from nutchy.store.hbase import HBaseStore

        for name, known in _HBASE_CHOICES.items():
            if settings.get(name) not in known:
                raise ConfigError(
                    f"{name} must be one of {', '.join(known)}, got {settings.get(name)!r}"
                )
        for name in _HBASE_POSITIVE:
            if settings.getint(name) < 1:
                raise ConfigError(f"{name} must be > 0, got {settings.getint(name)!r}")
        timeout = settings.getint("NUTCH_HBASE_TIMEOUT")
        lease = settings.getint("NUTCH_HBASE_LOCK_LEASE")
        if lease < 3 * timeout:
            raise ConfigError(
                f"NUTCH_HBASE_LOCK_LEASE must be at least 3 times NUTCH_HBASE_TIMEOUT"
                f" ({3 * timeout} ms), got {lease!r}: a lease must outlive the call that renews it"
            )
        if settings.getint("NUTCH_HBASE_LOCK_TIMEOUT") < 0:
            raise ConfigError(
                "NUTCH_HBASE_LOCK_TIMEOUT must be >= 0 (0: no limit),"
                f" got {settings.getint('NUTCH_HBASE_LOCK_TIMEOUT')!r}"
            )

        return functools.partial(
            HBaseStore,
            settings.get("NUTCH_HBASE_HOST"),
            settings.getint("NUTCH_HBASE_PORT"),
            crawl_id=crawl_id,
            table=table,
            families=HOST_FAMILIES if table == "host" else FAMILIES,
            timeout=timeout,
            pool_size=settings.getint("NUTCH_HBASE_POOL_SIZE"),
            batch_size=settings.getint("NUTCH_GORA_BUFFER_WRITE_LIMIT"),
            batch_bytes=settings.getint("NUTCH_HBASE_BATCH_BYTES"),
            scanner_caching=settings.getint("NUTCH_HBASE_SCANNER_CACHING"),
            scanner_timeout=settings.getint("NUTCH_HBASE_SCANNER_TIMEOUT"),
            transport=settings.get("NUTCH_HBASE_TRANSPORT"),
            protocol=settings.get("NUTCH_HBASE_PROTOCOL"),
            lock_timeout=settings.getint("NUTCH_HBASE_LOCK_TIMEOUT"),
            lock_lease=lease,
        )
    raise ConfigError(
        f"NUTCH_STORAGE_DATA_STORE_CLASS must be {EMBEDDED} or {HBASE}, got {backend!r}"
    )


def open_host_store(settings: BaseSettings) -> Store:
    """The store of the host database (:mod:`nutchy.core.hostdb`): Nutch 2.x's ``host`` table
    beside the web table (``<crawlId>_host`` on HBase, families ``mtdt il ol``;
    ``<crawl dir>/<crawlId>_host.sqlite`` on the embedded store)."""
    return open_store(settings, "host")


def describe_table(settings: BaseSettings) -> str:
    """Where the web table of the settings is, in one phrase: the table, its file or its HBase
    Thrift server, and the store class, as :func:`open_store` would open it. Opens nothing.

    A relative ``NUTCH_CRAWL_DIR`` the embedded store cannot place raises
    :exc:`~nutchy.exceptions.ConfigError` (:func:`nutchy.config.crawl_dir`).
    """
    backend = settings.get("NUTCH_STORAGE_DATA_STORE_CLASS")
    backend = _ALIASES.get(backend, backend)
    name = table_name(settings)
    if backend == EMBEDDED:
        from nutchy.config import crawl_dir

        return f"table {name} in {crawl_dir(settings) / f'{name}.sqlite'} ({EMBEDDED})"
    if backend == HBASE:
        host, port = settings.get("NUTCH_HBASE_HOST"), settings.get("NUTCH_HBASE_PORT")
        return f"table {name} on the HBase Thrift server {host}:{port} ({HBASE})"
    raise ConfigError(
        f"NUTCH_STORAGE_DATA_STORE_CLASS must be {EMBEDDED} or {HBASE}, got {backend!r}"
    )


def open_table(settings: BaseSettings) -> WebTable:
    """The web table of the settings, over :func:`open_store`."""
    return table_opener(settings)()


def table_opener(settings: BaseSettings) -> Callable[[], WebTable]:
    """What :func:`open_table` calls to open the web table, as :func:`store_opener`: it
    pickles, and opens the table of *settings* in a process that has no settings."""
    return functools.partial(
        _web_table,
        store_opener(settings),
        settings.getint("NUTCH_GORA_BUFFER_READ_LIMIT"),
        settings.getint("NUTCH_GORA_BUFFER_WRITE_LIMIT"),
    )


def _web_table(open_store: Callable[[], Store], read_limit: int, write_limit: int) -> WebTable:
    return WebTable(open_store(), read_limit=read_limit, write_limit=write_limit)
