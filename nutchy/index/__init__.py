"""Indexing: the documents of the crawl's pages, the filters that build them, the writers that
store them, and search over the embedded index (docs/index.md).

- :class:`~nutchy.index.document.Document`: one page as index fields;
- :mod:`nutchy.index.filters`: :class:`IndexingFilter` and the default filters
  (``NUTCH_INDEXING_FILTERS``);
- :mod:`nutchy.index.writers`: :class:`IndexWriter`, its contract, and the file writers
  (``NUTCH_INDEX_WRITERS``);
- :mod:`nutchy.index.embedded`: the embedded full-text index (tantivy) and :func:`search`;
- :mod:`nutchy.jobs.index`: the job of ``nutchy index``.

>>> from nutchy.index import search
>>> search("crawl", "apples OR pears", limit=5)  # doctest: +SKIP
[Hit(score=1.2, url='http://example.com/apples', title='Apples', snippet='Apples grow …', ...)]
"""

from __future__ import annotations

from nutchy.index.document import Document
from nutchy.index.embedded import EmbeddedIndex, Hit, search
from nutchy.index.filters import IndexingFilter
from nutchy.index.writers import BaseIndexWriter, IndexWriter

__all__ = [
    "BaseIndexWriter",
    "Document",
    "EmbeddedIndex",
    "Hit",
    "IndexWriter",
    "IndexingFilter",
    "search",
]
