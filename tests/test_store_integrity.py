"""A damaged embedded store file is refused in one line that names it and the fix: empty (and
not new), not SQLite, cut short, or with garbage over pages of the table; the ``nutchy`` verbs
exit non-zero on it, with no traceback; ``nutchy storage check`` reads every page."""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from nutchy.cli import main
from nutchy.exceptions import StoreCorrupt
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.schema import RowUpdate

PAGE = 65536


@pytest.fixture
def crawl(tmp_path, monkeypatch):
    """A crawl folder with a table of three rows, its writes all in the file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    (tmp_path / "seeds.txt").write_text(
        "http://127.0.0.1:9/\nhttp://127.0.0.1:9/a\nhttp://127.0.0.1:9/b\n", encoding="utf-8"
    )
    assert nutchy(tmp_path, "inject", "seeds.txt") == 0
    return tmp_path


def nutchy(crawl_dir, *args):
    return main([*args, "-s", f"NUTCH_CRAWL_DIR={crawl_dir / 'crawl'}"])


def overwrite_page(path, name):
    """Write garbage over the root page of the table or index *name*."""
    with sqlite3.connect(path) as conn:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    conn.close()
    with path.open("r+b") as handle:
        handle.seek((root - 1) * PAGE)
        handle.write(b"\xde\xad\xbe\xef" * (PAGE // 4))


def test_an_empty_file_that_is_not_new_is_refused(tmp_path):
    path = tmp_path / "w.sqlite"
    path.write_bytes(b"")
    with EmbeddedStore(path) as store:  # just made: a store being created looks so
        assert store.create()
    path.write_bytes(b"")
    old = time.time() - 60
    os.utime(path, (old, old))
    with pytest.raises(StoreCorrupt) as refused:
        EmbeddedStore(path)
    message = str(refused.value)
    assert message.startswith(f"{path} is damaged: the file is empty (0 bytes)")
    assert "\n" not in message and ".recover" in message
    assert path.stat().st_size == 0  # left as it was


@pytest.mark.parametrize(
    "damage",
    ["not sqlite", "cut short", "table root overwritten"],
)
def test_a_damaged_file_is_refused_in_one_line_by_every_verb(crawl, capsys, damage):
    path = crawl / "crawl" / "webpage.sqlite"
    if damage == "not sqlite":
        path.write_bytes(b"GIF89a" + bytes(200))
        why = "file is not a database"
    elif damage == "cut short":
        with path.open("r+b") as handle:
            handle.truncate(path.stat().st_size // 2)
        why = ("the file is cut short", "database disk image is malformed")  # as it is cut
    else:
        overwrite_page(path, "webpage")
        why = "database disk image is malformed"
    capsys.readouterr()
    for args in (
        ["readdb", "-stats"],
        ["readdb", "-url", "http://127.0.0.1:9/"],
        ["inject", "seeds.txt"],
        ["generate", "-topN", "5"],
        ["crawl", "seeds.txt"],
    ):
        assert nutchy(crawl, *args) != 0, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1, (args, err)
        reasons = why if isinstance(why, tuple) else (why,)
        prefix = f"nutchy {args[0]}: {path} is damaged: "
        assert any(err.startswith(prefix + reason) for reason in reasons), (args, err)
        assert "Traceback" not in err


def test_storage_check_reads_every_page(crawl, capsys):
    path = crawl / "crawl" / "webpage.sqlite"
    assert nutchy(crawl, "storage", "check") == 0
    assert "the file is whole" in capsys.readouterr().out
    # An index no open reads: only the whole check finds it.
    overwrite_page(path, "webpage_due")
    assert nutchy(crawl, "readdb", "-stats") == 0
    capsys.readouterr()
    assert nutchy(crawl, "storage", "check") == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) >= 2
    assert out[-1].startswith(f"{path} is damaged: ")


def test_a_whole_file_opens_as_before(tmp_path):
    path = tmp_path / "w.sqlite"
    with EmbeddedStore(path) as store:
        store.create()
        store.write([RowUpdate(b"k", {b"f:st": b"\x01"})])
    with EmbeddedStore(path) as store:
        assert store.check() == []
        assert store.get(b"k") == {b"f:st": b"\x01"}
