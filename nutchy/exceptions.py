"""The errors nutchy raises.

Every error nutchy raises on purpose derives from :class:`NutchError`, so a caller can catch
"anything nutchy refused" in one place. Errors of the libraries underneath (sqlite3, happybase,
thriftpy2) are wrapped and chained, never leaked bare.
"""

from __future__ import annotations


class NutchError(Exception):
    """Base class of every error nutchy raises on purpose."""


class ConfigError(NutchError, ValueError):
    """A setting has a value nutchy cannot use. The message names the setting."""


class StoreError(NutchError):
    """A storage backend failed to carry out a call. The message names the backend and the table."""


class StoreUnavailable(StoreError):
    """The store cannot be reached: an HBase Thrift server that is down, or a file that cannot be
    opened. The message names the host and port, or the path."""


class StoreCorrupt(StoreError):
    """The store's file is damaged: not a whole SQLite database (empty, cut short, overwritten).
    The message names the file and what to do."""


class TableMissing(StoreError):
    """The web table does not exist yet. ``nutchy storage init`` (or ``nutchy inject``) creates it."""


class CellDecodeError(NutchError, ValueError):
    """The bytes of one cell do not decode as the type the schema declares for its column.

    The message names the row key, the column and the expected type; the same facts are kept as the
    attributes :attr:`key`, :attr:`column` and :attr:`expected`.
    """

    def __init__(self, key: bytes, column: bytes, expected: str, reason: str) -> None:
        self.key = key
        self.column = column
        self.expected = expected
        self.reason = reason
        super().__init__(
            f"row {key!r}: column {column.decode('utf-8', 'replace')!r} does not decode as "
            f"{expected}: {reason}"
        )


class UnsafeWrite(NutchError, ValueError):
    """A write would drop map entries its caller never read (the NUTCH-2222 bug).

    Replacing a map family (``mtdt``, ``mk``, ``il``, ``ol``, ``h``, ``stm``) is only allowed for a
    page that was read with that field, or when the caller asks for the replacement explicitly.
    """


class FrontierError(NutchError):
    """The shared frontier (Redis, see :mod:`nutchy.redis_frontier`) failed a call. The message
    names the server."""


class FrontierUnavailable(FrontierError):
    """Redis cannot be reached: down, restarting, or a network cut. The message names its host
    and port. What was acknowledged is safe; a worker waits and tries again."""


class LeaseLost(FrontierError):
    """A worker used a queue lease it no longer holds: it expired and another worker reclaimed
    it, or the batch's keys are gone. The queue's rows not acknowledged go to its next holder."""


class UnknownBatch(ConfigError):
    """A batch id that no row of the web table holds a mark of (generate, fetch, parse or
    updatedb): a typing error, or a batch of another table. The message names the batch and the
    table."""


class IndexWriterError(NutchError):
    """An index writer (:mod:`nutchy.index.writers`) failed to open, write, delete or commit:
    a file that cannot be written, a server that refused the documents. The message names the
    writer and where it writes."""


class IndexUnavailable(IndexWriterError):
    """The index cannot be opened: its folder is missing (nothing indexed yet, or deleted) or
    does not read as an index (corrupted). The message says how to build it again
    (``nutchy index -all -rebuild``)."""


class QuerySyntaxError(NutchError, ValueError):
    """A search query that does not parse. The message names the query and the reason."""
