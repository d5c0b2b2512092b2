"""The web table: a store and the schema together, speaking WebPages."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nutchy.core.urls import reverse_url
from nutchy.core.webpage import WebPage
from nutchy.exceptions import CellDecodeError
from nutchy.store.base import Scan, Store
from nutchy.store.schema import (
    Cells,
    RowUpdate,
    build_update,
    columns_for,
    decode_page,
    page_update,
)

if TYPE_CHECKING:
    from typing import Self

logger = logging.getLogger(__name__)


class WebTable:
    """WebPages over a :class:`~nutchy.store.base.Store`.

    *read_limit* is the number of rows a scan reads per page (``gora.buffer.read.limit``) and
    *write_limit* the number of row updates a :meth:`writer` buffers before it writes them
    (``gora.buffer.write.limit``).
    """

    def __init__(self, store: Store, *, read_limit: int = 1000, write_limit: int = 1000) -> None:
        if read_limit < 1:
            raise ValueError(f"'read_limit' must be >= 1, got {read_limit!r}")
        if write_limit < 1:
            raise ValueError(f"'write_limit' must be >= 1, got {write_limit!r}")
        self.store = store
        self.read_limit = read_limit
        self.write_limit = write_limit
        #: Rows a scan with ``skip_errors=True`` skipped because a cell did not decode.
        self.skipped = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def name(self) -> str:
        return self.store.table_name

    def close(self) -> None:
        self.store.close()

    def checkpoint(self) -> None:
        """After a burst of writes (a fetch): see :meth:`nutchy.store.base.Store.checkpoint`."""
        self.store.checkpoint()

    def create(self) -> bool:
        """Create the table if it is missing; return whether it was created."""
        return self.store.create()

    def exists(self) -> bool:
        return self.store.exists()

    # --- reads ---------------------------------------------------------------------------------

    def get(self, url: str, fields: Collection[str] | None = None) -> WebPage | None:
        """The page of *url* (a URL, not a key), reading only *fields* when given."""
        return self.get_key(reverse_url(url), fields)

    def get_key(self, key: str, fields: Collection[str] | None = None) -> WebPage | None:
        raw = key.encode("utf-8")
        cells = self.store.get(raw, columns_for(fields))
        return None if cells is None else decode_page(raw, cells, fields)

    def get_many(
        self,
        keys: Iterable[str],
        fields: Collection[str] | None = None,
        *,
        skip_errors: bool = False,
    ) -> dict[str, WebPage]:
        """The pages of *keys* that exist, by key; *skip_errors* as :meth:`scan`'s."""
        raw = [k.encode("utf-8") for k in keys]
        found = self.store.get_many(raw, columns_for(fields))
        pages = ((k, self._decode(k, cells, fields, skip_errors)) for k, cells in found.items())
        return {k.decode("utf-8"): page for k, page in pages if page is not None}

    def scan(
        self,
        fields: Collection[str] | None = None,
        *,
        start: str | bytes = "",
        stop: str | bytes | None = None,
        prefix: str = "",
        marker: tuple[str, str] | None = None,
        due_before: int | None = None,
        limit: int | None = None,
        skip_errors: bool = False,
    ) -> Iterator[WebPage]:
        """Stream the pages of a key range, reading only *fields* when given.

        *marker* = ``("_gnmrk_", batch_id)`` keeps the rows of one batch; *due_before* keeps rows
        whose fetch time is at or before that time (ms). *start* and *stop* may be keys as bytes
        (a region's bounds need not be UTF-8). With *skip_errors*, a row with a cell
        that does not decode is logged, counted in :attr:`skipped` and left out; otherwise its
        :exc:`~nutchy.exceptions.CellDecodeError` ends the scan.
        """
        scan = Scan(
            start=_raw(start),
            stop=None if stop is None else _raw(stop),
            prefix=prefix.encode("utf-8"),
            columns=columns_for(fields),
            marker=None if marker is None else (marker[0].encode(), marker[1].encode()),
            due_before=due_before,
            limit=limit,
        )
        for key, cells in self.store.scan(scan, self.read_limit):
            page = self._decode(key, cells, fields, skip_errors)
            if page is not None:
                yield page

    def _decode(
        self, key: bytes, cells: Cells, fields: Collection[str] | None, skip_errors: bool
    ) -> WebPage | None:
        """The page of *cells*; with *skip_errors*, ``None`` (logged and counted in
        :attr:`skipped`) for one with a cell that does not decode."""
        try:
            return decode_page(key, cells, fields)
        except CellDecodeError as exc:
            if not skip_errors:
                raise
            self.skipped += 1
            logger.warning("Skipped row %r: %s", key, exc)
            return None

    # --- writes --------------------------------------------------------------------------------

    def put(self, page: WebPage, fields: Collection[str]) -> None:
        """Write *fields* of *page* now (see :func:`~nutchy.store.schema.page_update`)."""
        self.store.write([page_update(page, fields)])

    def update(
        self,
        key: str,
        fields: Mapping[str, Any] | None = None,
        entries: Mapping[str, Mapping[str, Any]] | None = None,
        replace: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Change one row now (see :func:`~nutchy.store.schema.build_update`)."""
        self.store.write([build_update(key, fields, entries, replace)])

    def write(self, updates: Iterable[RowUpdate]) -> None:
        """Write *updates* in chunks of :attr:`write_limit`."""
        chunk: list[RowUpdate] = []
        for update in updates:
            chunk.append(update)
            if len(chunk) >= self.write_limit:
                self.store.write(chunk)
                chunk = []
        if chunk:
            self.store.write(chunk)

    def modify(
        self,
        keys: Sequence[str],
        fields: Collection[str] | None,
        change: Callable[[str, WebPage | None], RowUpdate | None],
    ) -> int:
        """Read *fields* of the rows *keys*, and write what ``change(key, page)`` returns for
        each (*page* is ``None`` for a missing row), with no other ``modify`` of those rows in
        between, from any process (see :meth:`nutchy.store.base.Store.modify`). Keys are read and
        written :attr:`read_limit` at a time; return how many rows were written."""
        columns = columns_for(fields)

        def on_cells(raw: bytes, cells: Cells | None) -> RowUpdate | None:
            key = raw.decode("utf-8")
            return change(key, None if cells is None else decode_page(raw, cells, fields))

        encoded = [k.encode("utf-8") for k in keys]
        return self.store.modify(encoded, columns, on_cells, chunk_size=self.read_limit)

    def writer(self) -> TableWriter:
        """A buffer of updates that writes every :attr:`write_limit` rows and on exit."""
        return TableWriter(self)


def _raw(key: str | bytes) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else key


class TableWriter:
    """Collects row updates and writes them in batches; use it as a context manager."""

    def __init__(self, table: WebTable) -> None:
        self.table = table
        self.pending: list[RowUpdate] = []
        self.written = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        self.flush()

    def add(self, update: RowUpdate) -> None:
        self.pending.append(update)
        if len(self.pending) >= self.table.write_limit:
            self.flush()

    def put(self, page: WebPage, fields: Collection[str]) -> None:
        self.add(page_update(page, fields))

    def flush(self) -> None:
        if self.pending:
            self.table.store.write(self.pending)
            self.written += len(self.pending)
            self.pending = []
