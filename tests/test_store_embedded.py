"""What only the embedded store promises: one file, several processes, indexes, safety."""

from __future__ import annotations

import marshal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from nutchy.config import load_settings
from nutchy.exceptions import StoreError, StoreUnavailable, TableMissing
from nutchy.store import open_store
from nutchy.store.base import Scan
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.schema import RowUpdate


def test_settings_put_the_file_under_the_crawl_dir(tmp_path):
    settings = load_settings(
        {"NUTCH_CRAWL_DIR": str(tmp_path / "c"), "NUTCH_STORAGE_CRAWL_ID": "news"}, project=False
    )
    with open_store(settings) as store:
        assert store.table_name == "news_webpage"
        assert store.path == tmp_path / "c" / "news_webpage.sqlite"
        store.create()
    assert (tmp_path / "c" / "news_webpage.sqlite").exists()


def test_reads_of_a_missing_table_say_how_to_create_it(tmp_path):
    with EmbeddedStore(tmp_path / "w.sqlite") as store:
        with pytest.raises(TableMissing, match="nutchy storage init"):
            store.get(b"k")
        with pytest.raises(TableMissing, match="nutchy storage init"):
            store.write([RowUpdate(b"k", {b"f:st": b"1"})])


def test_an_unopenable_path_is_reported(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StoreUnavailable, match="cannot open the embedded store"):
        EmbeddedStore(tmp_path / "file" / "w.sqlite")


def test_due_and_batch_scans_are_served_by_indexes(tmp_path):
    with EmbeddedStore(tmp_path / "w.sqlite") as store:
        store.create()
        conn = sqlite3.connect(tmp_path / "w.sqlite")
        plans = {}
        for name, where in (
            ("due", "fetch_time <= 5"),
            ("batch", "gen_mark = 'b'"),
        ):
            rows = conn.execute(f"EXPLAIN QUERY PLAN SELECT key FROM webpage WHERE {where}")
            plans[name] = " ".join(r[-1] for r in rows)
        conn.close()
    assert "USING COVERING INDEX webpage_due" in plans["due"]
    assert "INDEX webpage_gen_mark" in plans["batch"]


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (marshal.dumps(compile("print('pwned')", "x", "exec")), "holds a code, not cells"),
        (marshal.dumps([1, 2]), "holds a list, not cells"),
        (b"\x00garbage", "does not decode"),
    ],
)
def test_a_family_record_that_is_not_cells_is_refused(tmp_path, blob, message, capsys):
    with EmbeddedStore(tmp_path / "w.sqlite") as store:
        store.create()
        store.write([RowUpdate(b"k", {b"f:st": b"1"})])
        conn = sqlite3.connect(tmp_path / "w.sqlite")
        conn.execute("UPDATE webpage SET f = ?", (blob,))
        conn.commit()
        conn.close()
        with pytest.raises(StoreError, match=f"row b'k': a family record {message}"):
            store.get(b"k")
    assert "pwned" not in capsys.readouterr().out


WRITER = textwrap.dedent(
    """
    import sys
    from nutchy.store.embedded import EmbeddedStore
    from nutchy.store.schema import build_update

    store = EmbeddedStore(sys.argv[1], busy_timeout=30)
    name = sys.argv[2]
    for i in range(200):
        store.write([
            build_update(b"com.example:http/%d" % (i % 10), entries={"inlinks": {f"http://{name}/{i}": name}})
        ])
    store.close()
    """
)


def test_processes_writing_the_same_rows_lose_no_entry(tmp_path):
    path = tmp_path / "w.sqlite"
    with EmbeddedStore(path) as store:
        store.create()
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{n}"]) for n in range(3)
    ]
    # a reader in this process sees progress while they write
    with EmbeddedStore(path) as store:
        seen = [sum(len(c) for _, c in store.scan(Scan(columns=[b"il"]))) for _ in range(3)]
        for w in writers:
            assert w.wait(timeout=120) == 0
        rows = dict(store.scan())
    assert len(rows) == 10
    assert sum(len(cells) for cells in rows.values()) == 600
    assert all(n <= 600 for n in seen)


def test_a_write_that_fails_changes_nothing(tmp_path):
    with EmbeddedStore(tmp_path / "w.sqlite") as store:
        store.create()
        store.write([RowUpdate(b"a", {b"f:st": b"1"})])
        with pytest.raises(TypeError, match=r"row b'c': the value of column b'f:cnt' must be"):
            store.write([RowUpdate(b"a", {b"f:st": b"2"}), RowUpdate(b"c", {b"f:cnt": "text"})])
        # a failure in the middle of the transaction rolls every row of the write back
        conn = sqlite3.connect(tmp_path / "w.sqlite")
        conn.execute(
            "CREATE TRIGGER fail BEFORE INSERT ON webpage WHEN NEW.key = x'64'"
            " BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
        )
        conn.commit()
        conn.close()
        with pytest.raises(StoreError, match="write failed: disk on fire"):
            store.write([RowUpdate(b"a", {b"f:st": b"3"}), RowUpdate(b"d", {b"f:st": b"4"})])
        assert store.get(b"a") == {b"f:st": b"1"}
        assert store.get(b"c") is None
        assert store.get(b"d") is None
