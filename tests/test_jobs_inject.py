"""The inject job on both stores: rows written as Nutch writes them, and merge rules that never
damage what the table holds."""

from __future__ import annotations

import struct

import pytest

from nutchy.core.inject import InjectMode
from nutchy.core.status import CrawlStatus
from nutchy.core.urlfilter import DEFAULT_RULES_PATH, RegexURLFilter
from nutchy.core.webpage import ALL_FIELDS, WebPage
from nutchy.jobs.inject import InjectOptions, SeedPathError, inject, seed_files
from nutchy.store.table import WebTable

NOW = 1_700_000_000_000
KEEP = InjectOptions(fetch_interval=2592000, score=1.0, url_filter=None)


@pytest.fixture
def table(store):
    return WebTable(store, read_limit=7, write_limit=5)


def seeds(tmp_path, text: str | bytes, name: str = "seeds.txt"):
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return [path]


def run(table, files, options=KEEP, **kwargs):
    return inject(table, files, options, now=NOW, **kwargs)


def f32(value: float) -> bytes:
    return struct.pack(">f", value)


def existing_page() -> WebPage:
    """A crawled row, in a batch, with links, content and metadata inject must not touch."""
    return WebPage(
        "com.example.www:http/",
        status=CrawlStatus.FETCHED,
        fetch_time=NOW + 5,
        fetch_interval=777,
        score=0.25,
        content=b"<html>old</html>",
        title="Old",
        inlinks={"http://a.org/": "home"},
        outlinks={"http://b.org/": "b"},
        metadata={"_csh_": f32(0.0), "_rs_": b"\x00\x00\x00\x07", "_ngt_": bytes(8), "k": b"old"},
        markers={
            "_gnmrk_": "nightly",
            "_ftcmrk_": "nightly",
            "_updmrk_": "1600000000-1",
            "dist": "2",
            "_injmrk_": "y",
        },
    )


def test_new_rows_have_nutchs_cells(table, tmp_path):
    files = seeds(
        tmp_path,
        "http://www.example.com/\nhttp://www.example.org/a\tnutch.score=2.5\t"
        "nutch.fetchInterval=60\tlang=en\n",
    )
    result = run(table, files)
    assert (result.lines, result.injected, result.malformed) == (2, 2, 0)
    cells = table.store.get(b"com.example.www:http/")
    assert cells == {
        b"f:ts": NOW.to_bytes(8, "big"),
        b"f:fi": (2592000).to_bytes(4, "big"),
        b"s:s": f32(1.0),
        b"mtdt:_csh_": f32(1.0),
        b"mk:dist": b"0",
        b"mk:_injmrk_": b"y",
    }
    page = table.get("http://www.example.org/a")
    assert page is not None
    assert (page.status, page.score, page.fetch_interval) == (0, 2.5, 60)
    assert page.metadata == {"_csh_": f32(2.5), "lang": b"en"}


def test_known_rows_keep_everything(table, tmp_path):
    table.put(existing_page(), ALL_FIELDS)
    before = table.get_key("com.example.www:http/")
    result = run(table, seeds(tmp_path, "http://www.example.com/\tnutch.score=9\tk=new\n"))
    assert (result.known, result.injected) == (1, 0)
    assert table.get_key("com.example.www:http/") == before


def test_overwrite_resets_the_schedule_but_keeps_links_content_and_history(table, tmp_path):
    table.put(existing_page(), ALL_FIELDS)
    options = InjectOptions(2592000, 1.0, None, InjectMode.OVERWRITE)
    result = run(table, seeds(tmp_path, "http://www.example.com/\tk=new\n"), options)
    assert result.overwritten == 1
    page = table.get_key("com.example.www:http/")
    assert page is not None
    assert (page.fetch_time, page.fetch_interval, page.score) == (NOW, 2592000, 1.0)
    assert page.markers == {"_updmrk_": "1600000000-1", "dist": "0", "_injmrk_": "y"}
    assert page.metadata == {"_csh_": f32(1.0), "_rs_": b"\x00\x00\x00\x07", "k": b"new"}
    old = existing_page()
    assert (page.status, page.content, page.title) == (old.status, old.content, old.title)
    assert (page.inlinks, page.outlinks) == (old.inlinks, old.outlinks)


def test_update_applies_only_the_lines_own_values(table, tmp_path):
    table.put(existing_page(), ALL_FIELDS)
    options = InjectOptions(2592000, 1.0, None, InjectMode.UPDATE)
    result = run(table, seeds(tmp_path, "http://www.example.com/\tnutch.score=4\tk=new\n"), options)
    assert result.updated == 1
    page = table.get_key("com.example.www:http/")
    expected = existing_page()
    expected.score = 4.0
    expected.metadata["k"] = b"new"
    assert page == expected


def test_duplicates_are_collapsed_first_wins_across_chunks(table, tmp_path):
    lines = [f"http://h{i % 7}.example.com/\tnutch.score={i}" for i in range(30)]
    lines.append("HTTP://H0.EXAMPLE.COM:80/#x")  # the same URL once normalized
    result = run(table, seeds(tmp_path, "\n".join(lines)), chunk_size=3)
    assert (result.injected, result.duplicates) == (7, 24)
    assert [table.get(f"http://h{i}.example.com/").score for i in range(7)] == list(
        map(float, range(7))
    )


def test_filter_rejects_urls(table, tmp_path):
    options = InjectOptions(2592000, 1.0, RegexURLFilter.from_file(DEFAULT_RULES_PATH))
    text = "http://a.com/\nftp://a.com/file\nhttp://a.com/logo.png\nhttps://a.com/ok\n"
    result = run(table, seeds(tmp_path, text), options)
    assert (result.injected, result.filtered) == (2, 2)
    assert table.get("ftp://a.com/file") is None


def test_bad_input_is_reported_and_damages_nothing(table, tmp_path):
    table.put(existing_page(), ALL_FIELDS)
    before = table.get_key("com.example.www:http/")
    bad = b"\n".join(
        [
            b"# seeds",
            b"www.example.com",  # 2: no scheme
            b"http://www.example.com/ nutch.score=3",  # 3: space instead of tab
            b"http://www.example.com/a\x01b",  # 4: control character
            b"http://www.example.com/\xe9t\xe9",  # 5: Latin-1, not UTF-8
            b"http://www.example.com/" + b"a" * 100_000,  # 6: a 100 KB line
            b"http://www.example.com/\tscore:3",  # 7: unknown metadata syntax
            b"http://www.example.com/\tnutch.score=lots",  # 8
            b"",
            b"http://good.example.com/",  # 10
        ]
    )
    result = run(table, seeds(tmp_path, bad))
    assert result.lines == 10
    assert (result.malformed, result.injected) == (7, 1)
    quoted = [(m.line_number, m.reason.split(" ")[0]) for m in result.malformed_lines]
    assert quoted == [(2, "no"), (3, "the"), (4, "contains"), (5, "not"), (6, "line")]
    assert all(len(m.excerpt) < 100 for m in result.malformed_lines)
    assert str(result.malformed_lines[0]).startswith(f"{tmp_path / 'seeds.txt'}:2: no scheme")
    assert table.get_key("com.example.www:http/") == before
    assert table.get("http://good.example.com/") is not None


def test_a_directory_of_seed_files(table, tmp_path):
    (tmp_path / "b.txt").write_text("http://b.com/\n")
    (tmp_path / "a.txt").write_text("http://a.com/\nhttp://b.com/\n")
    (tmp_path / ".hidden").write_text("http://hidden.com/\n")
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.txt").write_text("http://c.com/\n")
    files = seed_files(tmp_path)
    assert [f.name for f in files] == ["a.txt", "b.txt"]
    result = run(table, files)
    assert (result.files, result.lines, result.injected, result.duplicates) == (2, 3, 2, 1)


def test_seed_paths_with_nothing_to_read(tmp_path):
    with pytest.raises(SeedPathError, match="does not exist"):
        seed_files(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SeedPathError, match="holds no seed file"):
        seed_files(tmp_path / "empty")


def test_empty_and_unreadable_files(table, tmp_path):
    empty = seeds(tmp_path, "")
    result = run(table, [*empty, tmp_path / "gone.txt"])
    assert (result.files, result.lines) == (1, 0)
    assert result.unreadable and "gone.txt" in result.unreadable[0]


def test_inject_creates_the_table(store_factory, tmp_path):
    table = WebTable(store_factory())
    assert not table.exists()
    result = run(table, seeds(tmp_path, "http://a.com/\n"))
    assert result.injected == 1
    assert table.get("http://a.com/") is not None


def test_crlf_and_bom(table, tmp_path):
    result = run(table, seeds(tmp_path, b"\xef\xbb\xbfhttp://a.com/\r\nhttp://b.com/\r\n"))
    assert (result.injected, result.malformed) == (2, 0)


def _mixed_seed_lines() -> list[str]:
    """Every kind of line, in an order where repeats and malformed lines cross batches."""
    lines = ["# a comment", ""]
    for i in range(5000):
        if i % 97 == 0:
            lines.append(f"http://h{i}.example.com/ nutch.score=1")  # malformed: a space
        elif i % 89 == 0:
            lines.append(f"ftp://h{i}.example.com/")  # filtered
        elif i % 83 == 0:
            lines.append(f"http://h{i % 50}.example.com/a/a/a/")  # filtered: a trap
        elif i % 7 == 0:
            lines.append(f"HTTP://H{i - 1}.EXAMPLE.COM:80/p#x")  # a repeat, once normalized
        elif i % 11 == 0:
            lines.append(f"http://h{i}.example.com/p\tnutch.score={i % 5}\tsource=s{i}")
        else:
            lines.append(f"http://h{i}.example.com/p")
    lines.append("http://www.example.com/")  # the row already in the table
    return lines


@pytest.mark.parametrize("workers", [1, 2])
def test_worker_processes_give_the_result_of_one_process(store_factory, tmp_path, workers):
    files = seeds(tmp_path, "\n".join(_mixed_seed_lines()))
    options = InjectOptions(2592000, 1.0, RegexURLFilter.from_file(DEFAULT_RULES_PATH))
    outcomes = []
    for run_workers in (0, workers):
        store = store_factory()
        store.drop()
        store.create()
        table = WebTable(store)
        table.put(existing_page(), ALL_FIELDS)
        result = run(table, files, options, chunk_size=700, workers=run_workers)
        rows = dict(store.scan())
        outcomes.append((result, rows))
    (alone, alone_rows), (parallel, parallel_rows) = outcomes
    assert parallel == alone
    assert parallel_rows == alone_rows
    assert (alone.malformed, alone.known, alone.filtered) == (52, 1, 116)
    assert alone.duplicates > 0 and len(alone.malformed_lines) == 5


def test_workers_must_not_be_negative(table, tmp_path):
    with pytest.raises(ValueError, match="workers"):
        run(table, seeds(tmp_path, "http://a.com/\n"), workers=-1)
