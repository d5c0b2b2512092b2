"""The embedded full-text index: a tantivy index in a folder under the crawl directory.

`tantivy <https://github.com/quickwit-oss/tantivy-py>`_ is a Lucene-class search engine library
written in Rust; its Python wheel is the optional extra ``nutchy[index]``. The index needs no
server: :class:`EmbeddedIndexWriter` writes it (``nutchy index``), :class:`EmbeddedIndex` searches
it (``nutchy search``, :func:`search`), and several processes may search it while one writes
(tantivy allows one writer at a time, with a lock file; a second one fails naming the folder).

Its fields are Nutch's (:data:`~nutchy.index.document.STANDARD_FIELDS`): ``id`` (the URL, kept
whole, the key a write replaces by), ``url``, ``title``, ``content`` and ``anchor`` (words,
searched by default), ``host`` and ``type`` (kept whole: ``host:docs.example.com``),
``tstamp`` and ``lastModified`` (ms since the epoch), ``digest``, ``boost`` and ``metadata`` (a
JSON field of the ``NUTCH_INDEX_METADATA`` keys: ``metadata.lang:fr``). A search ranks by BM25
over title (weight 2), anchor (1.5), content and URL words, multiplied by ``log2(2 + boost)``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from nutchy.exceptions import IndexUnavailable, IndexWriterError, NutchError, QuerySyntaxError
from nutchy.index.writers import BaseIndexWriter, crawl_path

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from scrapy.settings import BaseSettings

    from nutchy.index.document import Document

__all__ = ["EmbeddedIndex", "EmbeddedIndexWriter", "Hit", "search"]

#: Fields searched when a query names none, and their weights.
SEARCH_FIELDS: Final = ("title", "anchor", "content", "url")
FIELD_BOOSTS: Final = {"title": 2.0, "anchor": 1.5}
#: Characters of a snippet at most.
SNIPPET_CHARS: Final = 200
#: Memory (bytes) the writer's indexing threads may use before they write a segment, and threads.
_WRITER_HEAP: Final = 64_000_000
_WRITER_THREADS: Final = 2
#: Deletions (a replaced document is one) after which the writer commits on its own: tantivy
#: holds them in memory until a commit (docs/index.md).
_DELETES_PER_COMMIT: Final = 10_000
_REBUILD = "nutchy index -all -rebuild"


def _tantivy() -> Any:
    try:
        import tantivy
    except ImportError:
        raise NutchError(
            "the embedded index needs the tantivy library: pip install 'nutchy[index]'"
        ) from None
    return tantivy


def _schema() -> Any:
    tantivy = _tantivy()
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("url", stored=False)
    builder.add_text_field("host", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True)
    builder.add_text_field("content", stored=True)
    builder.add_text_field("anchor", stored=True)
    builder.add_text_field("type", stored=True, tokenizer_name="raw")
    builder.add_integer_field("tstamp", stored=True, indexed=True, fast=True)
    builder.add_integer_field("lastModified", stored=True, indexed=True, fast=True)
    builder.add_text_field("digest", stored=True, tokenizer_name="raw")
    builder.add_float_field("boost", stored=True, fast=True)
    builder.add_json_field("metadata", stored=True)
    return builder.build()


def _open_index(path: Path, *, create: bool) -> Any:
    """The tantivy index in *path*; with *create*, a new one when the folder has none."""
    tantivy = _tantivy()
    try:
        found = path.is_dir() and tantivy.Index.exists(str(path))
    except OSError as exc:
        raise IndexUnavailable(f"the index folder {path} cannot be read: {exc}") from exc
    if not found:
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise IndexUnavailable(
                f"{path} holds files that are not an index (a corrupted index?): run"
                f" {_REBUILD}, or move them away"
            )
        if not create:
            raise IndexUnavailable(
                f"no index in {path}: run nutchy index -all (or nutchy index ID) first"
            )
        try:
            path.mkdir(parents=True, exist_ok=True)
            return tantivy.Index(_schema(), path=str(path), reuse=False)
        except (OSError, ValueError) as exc:
            raise IndexWriterError(f"cannot create an index in {path}: {exc}") from exc
    try:
        index = tantivy.Index.open(str(path))
    except (OSError, ValueError) as exc:
        raise IndexUnavailable(
            f"the index in {path} cannot be opened (corrupted?): {exc}; run {_REBUILD}"
        ) from exc
    try:  # a query on nutchy's fields parses only in an index with them
        index.parse_query("x", ["id", *SEARCH_FIELDS])
    except ValueError:
        raise IndexUnavailable(f"{path} is not an index nutchy wrote; run {_REBUILD}") from None
    return index


class EmbeddedIndexWriter(BaseIndexWriter):
    """Writes the embedded index in *path* (``NUTCH_INDEXER_EMBEDDED_PATH``, under the crawl
    directory when relative). A missing folder is a new, empty index. With *rebuild*, the folder
    is removed first, if it holds an index or nothing (a folder of other files is refused).
    A write first deletes the documents of the same URLs; deletes and writes become visible to
    searches at :meth:`commit`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._index: Any = None
        self._writer: Any = None
        self._searcher: Any = None
        #: URLs written since the last commit, which the searcher does not see yet.
        self._pending: set[str] = set()
        self._deletes = 0

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        return cls(crawl_path(settings, "NUTCH_INDEXER_EMBEDDED_PATH"))

    def describe(self) -> str:
        return f"embedded index ({self.path})"

    def open(self, *, rebuild: bool = False) -> None:
        tantivy = _tantivy()
        if rebuild and self.path.exists():
            self._remove()
        self._index = _open_index(self.path, create=True)
        try:
            self._writer = self._index.writer(_WRITER_HEAP, _WRITER_THREADS)
        except (OSError, ValueError) as exc:
            # tantivy's lock file: another process writes this index now.
            raise IndexWriterError(
                f"{self.describe()}: cannot write: {exc} (is another nutchy index running?)"
            ) from exc
        self._document = tantivy.Document
        self._searcher = self._index.searcher()
        self._pending = set()
        self._deletes = 0

    def _remove(self) -> None:
        tantivy = _tantivy()
        try:
            is_index = self.path.is_dir() and tantivy.Index.exists(str(self.path))
        except (OSError, ValueError):
            is_index = False
        looks_like_one = self.path.is_dir() and (
            is_index or (self.path / "meta.json").exists() or not any(self.path.iterdir())
        )
        if not looks_like_one:
            raise IndexWriterError(
                f"{self.describe()}: {self.path} is not an index; not removing it (move it away)"
            )
        try:
            shutil.rmtree(self.path)
        except OSError as exc:
            raise IndexWriterError(f"{self.describe()}: cannot remove: {exc}") from exc

    def _live(self) -> Any:
        if self._writer is None:
            raise IndexWriterError(f"{self.describe()}: not open")
        return self._writer

    def _held(self, url: str) -> bool:
        """Whether the index may hold a document of *url*: one committed (deleted ones may
        still count until their segment is merged) or written since the last commit.

        Deleting only those keeps tantivy's queue of deletions, which it holds in memory until
        a commit, to the documents replaced: a first index of 100,000 pages peaked at 257 MB
        with a deletion per document, at 154 MB without.
        """
        return url in self._pending or self._searcher.doc_freq("id", url) > 0

    def write(self, docs: Sequence[Document]) -> None:
        writer = self._live()
        make = self._document
        try:
            for doc in docs:
                if self._held(doc.url):
                    writer.delete_documents_by_term("id", doc.url)
                    self._deletes += 1
                self._pending.add(doc.url)
                writer.add_document(
                    make(
                        id=doc.url,
                        url=doc.url,
                        host=doc.host,
                        title=doc.title,
                        content=doc.content,
                        anchor=list(doc.anchor),
                        type=doc.type,
                        tstamp=doc.tstamp,
                        lastModified=doc.last_modified,
                        digest=doc.digest,
                        boost=float(doc.boost),
                        metadata=dict(doc.metadata),
                    )
                )
        except (OSError, ValueError) as exc:
            raise IndexWriterError(f"{self.describe()}: cannot write: {exc}") from exc
        if self._deletes >= _DELETES_PER_COMMIT:
            self.commit()

    def delete(self, urls: Sequence[str]) -> None:
        writer = self._live()
        try:
            for url in urls:
                if self._held(url):
                    writer.delete_documents_by_term("id", url)
                    self._pending.discard(url)
                    self._deletes += 1
        except (OSError, ValueError) as exc:
            raise IndexWriterError(f"{self.describe()}: cannot delete: {exc}") from exc
        if self._deletes >= _DELETES_PER_COMMIT:
            self.commit()

    def commit(self) -> None:
        try:
            self._live().commit()
            self._index.reload()
        except (OSError, ValueError) as exc:
            raise IndexWriterError(f"{self.describe()}: cannot commit: {exc}") from exc
        self._searcher = self._index.searcher()
        self._pending = set()
        self._deletes = 0

    def close(self) -> None:
        writer, self._writer, self._index = self._writer, None, None
        self._searcher, self._pending = None, set()
        if writer is not None:
            try:
                # What was not committed is dropped; merges under way are finished.
                writer.rollback()
                writer.wait_merging_threads()
            except (OSError, ValueError) as exc:
                raise IndexWriterError(f"{self.describe()}: cannot close: {exc}") from exc


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: *score* (BM25 times the boost's weight), the page's *url* and
    *title*, and a *snippet* of its text around the words searched (*snippet_html* marks them
    with ``<b>``)."""

    score: float
    url: str
    title: str
    snippet: str
    snippet_html: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "url": self.url,
            "title": self.title,
            "snippet": self.snippet,
        }


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The hits of a search, best first, and *total*: how many documents match."""

    hits: list[Hit]
    total: int


class EmbeddedIndex:
    """The embedded index in *path*, for searching: the index as last committed when it was
    opened (:meth:`reload` sees later commits)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._index = _open_index(self.path, create=False)

    @property
    def documents(self) -> int:
        """How many documents the index holds."""
        return int(self._index.searcher().num_docs)

    def reload(self) -> None:
        self._index.reload()

    def search(self, query: str, limit: int = 10) -> SearchResult:
        """The *limit* best hits of *query*, in tantivy's query language: words (any of them
        matches; ``+word`` must match), ``"a phrase"``, ``title:word``, ``host:docs.example.com``,
        ``-word``, ``AND``/``OR`` and parentheses. A query that does not parse raises
        :exc:`~nutchy.exceptions.QuerySyntaxError`."""
        tantivy = _tantivy()
        if not query.strip():
            raise QuerySyntaxError("the query is empty")
        try:
            parsed = self._index.parse_query(
                query, list(SEARCH_FIELDS), field_boosts=dict(FIELD_BOOSTS)
            )
        except ValueError as exc:
            raise QuerySyntaxError(f"cannot parse the query {query!r}: {_reason(exc)}") from None
        searcher = self._index.searcher()
        found = searcher.search(parsed, limit, count=True, weight_by_field="boost")
        snippets = tantivy.SnippetGenerator.create(searcher, parsed, self._index.schema, "content")
        snippets.set_max_num_chars(SNIPPET_CHARS)
        hits = []
        for score, address in found.hits:
            doc = searcher.doc(address)
            snippet = snippets.snippet_from_doc(doc)
            text, html = snippet.fragment(), snippet.to_html()
            if not text:  # the words are in the title, anchors or URL: the text's start
                text = _first(doc, "content")[:SNIPPET_CHARS]
                html = _escape(text)
            hits.append(
                Hit(float(score), _first(doc, "id"), _first(doc, "title"), text.strip(), html)
            )
        return SearchResult(hits, int(found.count or 0))


def _first(doc: Any, name: str) -> str:
    values = doc.get_all(name)
    return str(values[0]) if values else ""


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _reason(exc: Exception) -> str:
    """tantivy's reason for refusing a query, on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


def search(crawl_dir: Path | str, query: str, limit: int = 10, *, path: str = "index") -> list[Hit]:
    """The *limit* best hits of *query* in the embedded index of the crawl in *crawl_dir*
    (its folder *path*, ``NUTCH_INDEXER_EMBEDDED_PATH``), best first.

    Raises :exc:`~nutchy.exceptions.IndexUnavailable` when there is no index, and
    :exc:`~nutchy.exceptions.QuerySyntaxError` for a query that does not parse.
    """
    folder = Path(path) if Path(path).is_absolute() else Path(crawl_dir) / path
    return EmbeddedIndex(folder).search(query, limit).hits
