"""Building the indexing filters and index writers that settings name, and running the filters.

Both settings are dicts of class path (or class) to order number, as Scrapy's component
settings are: components run in increasing order, and ``None`` turns one off.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from scrapy.utils.misc import load_object

from nutchy.exceptions import ConfigError, IndexWriterError
from nutchy.index.document import Document

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from scrapy.settings import BaseSettings

    from nutchy.core.webpage import WebPage
    from nutchy.index.filters import IndexingFilter
    from nutchy.index.writers import IndexWriter

__all__ = ["IndexingFilters", "build_components", "load_filters", "load_writers", "opened"]


def build_components(settings: BaseSettings, name: str) -> list[Any]:
    """The components of setting *name*, built in order (see the module docstring)."""
    try:
        value = settings.getdict(name)  # a dict, or its JSON text (-s NAME='{...}')
    except (TypeError, ValueError):
        raise ConfigError(
            f"{name} must be a dict of class path to order, got {settings.get(name)!r}"
        ) from None
    ordered = []
    for path, order in value.items():
        if order is None:
            continue
        if isinstance(order, bool) or not isinstance(order, (int, float)):
            raise ConfigError(f"{name}: the order of {path!r} must be a number, got {order!r}")
        ordered.append((order, path))
    built = []
    for _, path in sorted(ordered, key=lambda item: item[0]):
        try:
            cls = load_object(path)
        except (ImportError, NameError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{name}: cannot load {path!r}: {exc}") from None
        factory = getattr(cls, "from_settings", None)
        built.append(factory(settings) if factory is not None else cls())
    return built


def load_filters(settings: BaseSettings) -> IndexingFilters:
    """The filter chain of ``NUTCH_INDEXING_FILTERS``."""
    return IndexingFilters(build_components(settings, "NUTCH_INDEXING_FILTERS"))


def load_writers(settings: BaseSettings) -> list[IndexWriter]:
    """The writers of ``NUTCH_INDEX_WRITERS``; at least one."""
    writers: list[IndexWriter] = build_components(settings, "NUTCH_INDEX_WRITERS")
    if not writers:
        raise ConfigError("NUTCH_INDEX_WRITERS names no index writer")
    return writers


class IndexingFilters:
    """Indexing filters run in order (:mod:`nutchy.index.filters`)."""

    def __init__(self, filters: Sequence[IndexingFilter]) -> None:
        self.filters = list(filters)
        #: The page fields the filters read.
        self.fields: frozenset[str] = frozenset().union(*(f.fields for f in self.filters))

    def document(
        self, page: WebPage, load: Callable[[WebPage, frozenset[str]], None] | None = None
    ) -> Document | None:
        """The document of *page*, or ``None`` when a filter keeps it out of the index.

        *load(page, fields)* reads more *fields* of the page's row into *page*, for a filter
        whose ``more_fields(page)`` asks for fields not read yet.
        """
        doc: Document | None = Document(page.url)
        for step in self.filters:
            assert doc is not None
            more = getattr(step, "more_fields", None)
            if more is not None and load is not None:
                missing = more(page) - page.loaded
                if missing:
                    load(page, missing)
            doc = step.filter(doc, page)
            if doc is None:
                return None
        return doc


@contextlib.contextmanager
def opened(writers: Sequence[IndexWriter], *, rebuild: bool = False) -> Iterator[None]:
    """Open every one of *writers* (with *rebuild*) for the ``with`` block, and close every one
    that opened at its end, also after an error; the first
    :exc:`~nutchy.exceptions.IndexWriterError` of a close is raised once all are closed."""
    done: list[IndexWriter] = []
    try:
        for writer in writers:
            writer.open(rebuild=rebuild)
            done.append(writer)
        yield
    finally:
        errors = []
        for writer in done:
            try:
                writer.close()
            except IndexWriterError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
