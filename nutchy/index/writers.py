"""Index writers: where the documents of ``nutchy index`` go.

``NUTCH_INDEX_WRITERS`` names the writers as a dict of class path to order number (as Scrapy's
``ITEM_PIPELINES``; ``None`` turns one off); every document and every deletion goes to each of
them, as Nutch's ``IndexWriters`` does. A writer is built by its ``from_settings(settings)``
classmethod (or called with no argument when it has none).

The contract every writer keeps (:class:`IndexWriter`):

- :meth:`~IndexWriter.open` is called once before anything else; with *rebuild*, the index
  starts empty (the embedded writer removes its folder, a file writer truncates its file, a
  server writer deletes every document of its index).
- :meth:`~IndexWriter.write` is idempotent by URL: writing a document whose URL the index holds
  replaces it (``update`` is the same call, for Nutch's name of it).
- :meth:`~IndexWriter.delete` of a URL the index does not hold is not an error.
- Writes and deletes are visible to searches once :meth:`~IndexWriter.commit` returns; a writer
  may make them visible sooner. The job commits at the end of a run, and a writer may commit on
  its own while it works (the embedded one does not).
- :meth:`~IndexWriter.close` is called once, also after an error; it does not commit.
- Every failure is raised as :exc:`~nutchy.exceptions.IndexWriterError` (or a subclass), its
  message naming the writer and where it writes, chained to the library's error.

This module has the interface, its no-op base class, and the file writers (JSON lines and CSV).
The embedded full-text index is :class:`nutchy.index.embedded.EmbeddedIndexWriter`.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from nutchy.exceptions import ConfigError, IndexWriterError
from nutchy.index.document import STANDARD_FIELDS

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from scrapy.settings import BaseSettings

    from nutchy.index.document import Document

__all__ = [
    "BaseIndexWriter",
    "CSVIndexWriter",
    "IndexWriter",
    "JSONLinesIndexWriter",
    "crawl_path",
]


class IndexWriter(Protocol):
    """What the index job asks of an index writer (see the module docstring for the contract)."""

    def open(self, *, rebuild: bool = False) -> None:
        """Get ready to write; with *rebuild*, start from an empty index."""

    def write(self, docs: Sequence[Document]) -> None:
        """Add *docs*, each replacing the document of its URL."""

    def update(self, docs: Sequence[Document]) -> None:
        """The same as :meth:`write`."""

    def delete(self, urls: Sequence[str]) -> None:
        """Remove the documents of *urls*; unknown URLs are not an error."""

    def commit(self) -> None:
        """Make what was written and deleted visible."""

    def close(self) -> None:
        """Release the writer's files or connections (without committing)."""

    def describe(self) -> str:
        """Where the writer writes, in a few words, for the job's summary."""


class BaseIndexWriter:
    """An index writer that does nothing: subclass it and override what the index needs."""

    def open(self, *, rebuild: bool = False) -> None:
        return None

    def write(self, docs: Sequence[Document]) -> None:
        return None

    def update(self, docs: Sequence[Document]) -> None:
        self.write(docs)

    def delete(self, urls: Sequence[str]) -> None:
        return None

    def commit(self) -> None:
        return None

    def close(self) -> None:
        return None

    def describe(self) -> str:
        return type(self).__name__


def crawl_path(settings: BaseSettings, name: str) -> Path:
    """The path of setting *name*: as given when absolute, else under ``NUTCH_CRAWL_DIR``."""
    value = settings.get(name)
    if not value or not isinstance(value, (str, Path)):
        raise ConfigError(f"{name} must be a file or folder path, got {value!r}")
    path = Path(value)
    return path if path.is_absolute() else Path(settings.get("NUTCH_CRAWL_DIR") or ".") / path


class _FileIndexWriter(BaseIndexWriter):
    """A writer that appends one record per write and per delete to a text file: the last
    record of a URL says whether it is in the index, and what it holds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: TextIO | None = None

    def describe(self) -> str:
        return f"{type(self).__name__} ({self.path})"

    def _open(self, rebuild: bool, newline: str | None) -> TextIO:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return self.path.open("w" if rebuild else "a", encoding="utf-8", newline=newline)
        except OSError as exc:
            raise IndexWriterError(f"{self.describe()}: cannot open: {exc}") from exc

    def _text(self) -> TextIO:
        if self._file is None:
            raise IndexWriterError(f"{self.describe()}: not open")
        return self._file

    def commit(self) -> None:
        try:
            self._text().flush()
        except OSError as exc:
            raise IndexWriterError(f"{self.describe()}: cannot write: {exc}") from exc

    def close(self) -> None:
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as exc:
                raise IndexWriterError(f"{self.describe()}: cannot write: {exc}") from exc


class JSONLinesIndexWriter(_FileIndexWriter):
    """Writes the index as JSON lines (``NUTCH_INDEXER_JSONL_PATH``, under the crawl directory
    when relative): a written document is a line of its fields (:meth:`Document.fields`) with
    ``"action": "write"``, a deletion a line ``{"action": "delete", "id": URL}``. Each run
    appends; ``nutchy index -all -rebuild`` starts the file again."""

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        return cls(crawl_path(settings, "NUTCH_INDEXER_JSONL_PATH"))

    def open(self, *, rebuild: bool = False) -> None:
        self._file = self._open(rebuild, None)

    def write(self, docs: Sequence[Document]) -> None:
        self._lines({"action": "write", **doc.fields()} for doc in docs)

    def delete(self, urls: Sequence[str]) -> None:
        self._lines({"action": "delete", "id": url} for url in urls)

    def _lines(self, records: Any) -> None:
        file = self._text()
        try:
            file.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
        except OSError as exc:
            raise IndexWriterError(f"{self.describe()}: cannot write: {exc}") from exc


class CSVIndexWriter(_FileIndexWriter):
    """Writes the index as CSV (``NUTCH_INDEXER_CSV_PATH``, under the crawl directory when
    relative): a header row, then one row per written document (its ``action`` column
    ``write``) and per deletion (``delete``, with only the ``id``). The columns are ``action``,
    Nutch's standard fields and the ``NUTCH_INDEX_METADATA`` keys; a field with several values
    (``anchor``) joins them with ``|``, as Nutch's ``indexer-csv`` does. A file that exists is
    appended to without a second header."""

    def __init__(self, path: Path, metadata: Sequence[str] = ()) -> None:
        super().__init__(path)
        self.columns = (
            "action",
            *STANDARD_FIELDS,
            *(m for m in metadata if m not in STANDARD_FIELDS),
        )
        self._csv: Any = None

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        return cls(
            crawl_path(settings, "NUTCH_INDEXER_CSV_PATH"),
            [str(key) for key in settings.getlist("NUTCH_INDEX_METADATA")],
        )

    def open(self, *, rebuild: bool = False) -> None:
        header = rebuild or not self.path.exists() or self.path.stat().st_size == 0
        self._file = self._open(rebuild, "")
        self._csv = csv.writer(self._file)
        if header:
            self._rows([self.columns])

    def write(self, docs: Sequence[Document]) -> None:
        rows = []
        for doc in docs:
            fields = doc.fields()
            fields["action"] = "write"
            fields["anchor"] = "|".join(doc.anchor)
            rows.append(["" if fields.get(c) is None else fields[c] for c in self.columns])
        self._rows(rows)

    def delete(self, urls: Sequence[str]) -> None:
        self._rows([["delete", url] + [""] * (len(self.columns) - 2) for url in urls])

    def _rows(self, rows: Sequence[Sequence[Any]]) -> None:
        self._text()
        try:
            self._csv.writerows(rows)
        except OSError as exc:
            raise IndexWriterError(f"{self.describe()}: cannot write: {exc}") from exc
