"""The embedded index writer keeps the writer contract, and its search answers as documented."""

from __future__ import annotations

import sys

import pytest

from nutchy.exceptions import IndexUnavailable, IndexWriterError, QuerySyntaxError
from nutchy.index import Document, EmbeddedIndex
from nutchy.index.embedded import EmbeddedIndexWriter


def doc(n, text, **fields):
    return Document(
        f"http://a.example/{n}", host="a.example", title=f"Page {n}", content=text, **fields
    )


def urls(index, query):
    index.reload()
    return sorted(hit.url.rsplit("/", 1)[1] for hit in index.search(query, 50).hits)


def test_writes_replace_by_url_deletes_of_unknown_urls_pass_commits_make_visible(tmp_path):
    writer = EmbeddedIndexWriter(tmp_path / "index")
    writer.open()
    writer.write([doc(1, "alpha beta"), doc(2, "alpha gamma")])
    writer.commit()
    index = EmbeddedIndex(tmp_path / "index")
    assert urls(index, "alpha") == ["1", "2"]

    writer.update([doc(1, "delta")])  # update is write
    writer.delete(["http://a.example/2", "http://a.example/never-indexed"])
    assert urls(index, "alpha") == ["1", "2"]  # not committed: not visible
    writer.commit()
    assert urls(index, "alpha") == []
    assert urls(index, "delta") == ["1"]
    assert index.documents == 1

    writer.write([doc(3, "epsilon")])
    writer.close()  # without a commit: dropped
    assert urls(index, "epsilon") == []


def test_one_writer_at_a_time_and_rebuild_removes_only_an_index(tmp_path):
    first = EmbeddedIndexWriter(tmp_path / "index")
    first.open()
    second = EmbeddedIndexWriter(tmp_path / "index")
    with pytest.raises(IndexWriterError, match="is another nutchy index running"):
        second.open()
    first.close()

    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(IndexWriterError, match="is not an index; not removing it"):
        EmbeddedIndexWriter(other).open(rebuild=True)
    assert (other / "notes.txt").read_text() == "keep me"
    with pytest.raises(IndexUnavailable, match="holds files that are not an index"):
        EmbeddedIndexWriter(other).open()


def test_search_fields_ranking_and_errors(tmp_path):
    writer = EmbeddedIndexWriter(tmp_path / "index")
    writer.open()
    writer.write(
        [
            doc(1, "common words", anchor=["rare anchor"], metadata={"lang": "fr"}, boost=0.1),
            doc(2, "common words rare", type="text/plain", boost=4.0),
        ]
    )
    writer.commit()
    writer.close()
    index = EmbeddedIndex(tmp_path / "index")
    assert urls(index, "anchor:rare") == ["1"]
    assert urls(index, "metadata.lang:fr") == ["1"]
    assert urls(index, 'type:"text/plain"') == ["2"]
    assert urls(index, "host:a.example") == ["1", "2"]
    assert urls(index, "common -rare") == []
    best = index.search("common", 1)
    assert (best.total, best.hits[0].url) == (2, "http://a.example/2")  # longer, but boosted
    assert "<b>common</b>" in best.hits[0].snippet_html
    for bad in ("common AND (", "title:", "nofield:x", "   "):
        with pytest.raises(QuerySyntaxError):
            index.search(bad)
    with pytest.raises(IndexUnavailable, match="no index in"):
        EmbeddedIndex(tmp_path / "nothing")


def test_without_tantivy_the_commands_say_which_extra_to_install(tmp_path, monkeypatch, capsys):
    from nutchy.cli import main

    monkeypatch.setitem(sys.modules, "tantivy", None)  # import tantivy now raises ImportError
    where = ["-s", f"NUTCH_CRAWL_DIR={tmp_path}"]
    assert main(["search", "apples", *where]) == 2
    assert main(["storage", "init", *where]) == 0
    assert main(["index", "-all", *where]) == 2
    lines = capsys.readouterr().err.splitlines()
    extra = "the embedded index needs the tantivy library: pip install 'nutchy[index]'"
    assert lines[0] == f"nutchy search: {extra}"
    assert lines[-1] == f"nutchy index: {extra}"
    # Writers that need no tantivy work without it.
    jsonl = ["-s", 'NUTCH_INDEX_WRITERS={"nutchy.index.writers.JSONLinesIndexWriter": 1}']
    assert main(["index", "-all", *where, *jsonl]) == 0
