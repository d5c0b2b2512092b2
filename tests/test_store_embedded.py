"""What only the embedded store promises: one file, several processes, indexes, safety."""

from __future__ import annotations

import marshal
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading

import pytest

from nutchy.config import load_settings
from nutchy.exceptions import ConfigError, StoreError, StoreUnavailable, TableMissing
from nutchy.store import open_store
from nutchy.store.base import Scan
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.schema import RowUpdate, build_update


def test_settings_put_the_file_under_the_crawl_dir(tmp_path):
    settings = load_settings(
        {"NUTCH_CRAWL_DIR": str(tmp_path / "c"), "NUTCH_STORAGE_CRAWL_ID": "news"}, project=False
    )
    with open_store(settings) as store:
        assert store.table_name == "news_webpage"
        assert store.path == tmp_path / "c" / "news_webpage.sqlite"
        store.create()
    assert (tmp_path / "c" / "news_webpage.sqlite").exists()


def test_the_page_cache_of_each_connection_is_bounded_by_the_setting(tmp_path, monkeypatch):
    sizes = []
    set_cache = EmbeddedStore._set_cache

    def noted(self, conn):
        set_cache(self, conn)
        sizes.append(conn.execute("PRAGMA cache_size").fetchone()[0])

    monkeypatch.setattr(EmbeddedStore, "_set_cache", noted)

    def cache_kib(settings):
        sizes.clear()
        with open_store(load_settings(settings, project=False)) as store:
            store.create()
            list(store.scan_due_by_score(0))  # generate's walk has a connection of its own
        return sizes

    crawl = {"NUTCH_CRAWL_DIR": str(tmp_path)}
    assert cache_kib(crawl) == [-8 * 1024] * 2  # the default, 8 MiB
    assert cache_kib({**crawl, "NUTCH_STORE_EMBEDDED_CACHE_MB": "2.5"}) == [-2560] * 2
    for bad in ("0", "-1", "lots", "inf"):
        with pytest.raises(ConfigError, match=r"^NUTCH_STORE_EMBEDDED_CACHE_MB must be a number"):
            open_store(load_settings({**crawl, "NUTCH_STORE_EMBEDDED_CACHE_MB": bad}, project=False))
    with pytest.raises(ValueError, match="'cache_mb' must be > 0"):
        EmbeddedStore(tmp_path / "w.sqlite", cache_mb=0)


def test_bytes_and_none_are_bound_as_sqlite_binds_them_without_adapters(tmp_path):
    # nutchy registers an adapter for each (the value as it is) that spares sqlite3 its
    # search for one: a blob stays a blob, None stays NULL, a bytes subclass is adapted as before.
    class Raw(bytes):
        def __conform__(self, protocol):
            return b"conformed"

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a, b)")
    conn.executemany(
        "INSERT INTO t VALUES (?, ?)", [(b"\x00\xffkey", None), (b"", b"v"), (Raw(b"x"), None)]
    )
    assert conn.execute("SELECT a, typeof(a), b, typeof(b) FROM t").fetchall() == [
        (b"\x00\xffkey", "blob", None, "null"),
        (b"", "blob", b"v", "blob"),
        (b"conformed", "blob", None, "null"),
    ]
    with EmbeddedStore(tmp_path / "w.sqlite") as store:
        store.create()
        store.write([build_update("com.a:http/", {"status": 1}, {"markers": {"dist": "0"}})])
        assert store._conn.execute("PRAGMA secure_delete").fetchone() == (0,)
        types = store._conn.execute("SELECT typeof(key), typeof(fi), typeof(dist) FROM webpage")
        assert types.fetchall() == [("blob", "null", "blob")]


def test_reads_of_a_missing_table_say_how_to_create_it(tmp_path):
    with EmbeddedStore(tmp_path / "w.sqlite") as store:
        with pytest.raises(TableMissing, match="nutchy storage init"):
            store.get(b"k")
        with pytest.raises(TableMissing, match="nutchy storage init"):
            store.write([RowUpdate(b"k", {b"f:st": b"1"})])


def test_an_unopenable_path_is_reported(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StoreUnavailable, match="cannot open the embedded store"):
        EmbeddedStore(tmp_path / "file" / "w.sqlite").create()


def test_a_store_with_no_file_makes_none_until_create(tmp_path):
    path = tmp_path / "crawl" / "w.sqlite"
    with EmbeddedStore(path) as store:
        assert not store.exists()
        missing = f"table 'webpage' does not exist in {path}"
        with pytest.raises(TableMissing, match=re.escape(missing)):
            store.get(b"k")
        with pytest.raises(TableMissing, match=re.escape(missing)):
            list(store.scan(Scan()))
        with pytest.raises(TableMissing, match=re.escape(missing)):
            store.write([RowUpdate(b"k", {b"f:st": b"1"})])
        with pytest.raises(TableMissing, match=re.escape(missing)), store.exclusive("generate"):
            pass
        store.drop()
        store.checkpoint()
        assert not (tmp_path / "crawl").exists()
        assert store.create()
    assert path.exists()
    with EmbeddedStore(path) as again:
        assert again.exists()


def test_due_and_batch_scans_are_served_by_indexes(tmp_path):
    with EmbeddedStore(tmp_path / "w.sqlite") as store:
        store.create()
        conn = sqlite3.connect(tmp_path / "w.sqlite")
        plans = {}
        for name, query in (
            ("due", "SELECT key, ts, fi, sc, dist FROM webpage WHERE fetch_time <= 5"),
            ("batch", "SELECT key FROM webpage_batch WHERE gen_mark = 'b'"),
        ):
            rows = conn.execute(f"EXPLAIN QUERY PLAN {query}")
            plans[name] = " ".join(r[-1] for r in rows)
        conn.close()
    # generate's reads come from the due index alone, without the rows' records
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


def test_a_full_disk_fails_the_write_with_its_reason_and_changes_nothing(tmp_path):
    with EmbeddedStore(tmp_path / "full.sqlite") as store:
        store.create()
        store.write([RowUpdate(b"k%d" % i, {b"f:st": b"1"}) for i in range(10)])
        # the file may not grow: as a full disk, SQLite answers SQLITE_FULL and rolls back
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count = {pages}")
        big = [RowUpdate(b"big%d" % i, {b"f:cnt": bytes(100_000), b"f:st": b"2"}) for i in range(5)]
        with pytest.raises(StoreError, match="write failed: database or disk is full"):
            store.write(big)
        with pytest.raises(StoreError, match="database or disk is full"):
            store.modify([b"k1"], None, lambda key, cells: RowUpdate(key, {b"f:cnt": bytes(10**6)}))
        assert store.get(b"big0") is None
        assert store.get(b"k1") == {b"f:st": b"1"}
        store._conn.execute(f"PRAGMA max_page_count = {pages * 100}")  # room again
        store.write(big)
        assert store.get(b"big4") == {b"f:cnt": bytes(100_000), b"f:st": b"2"}


def _rows_in_the_file(path) -> int:
    """Rows of the table in the file itself, ignoring the write-ahead log (``immutable``, which
    reads without a lock: only while no checkpoint copies pages into the file)."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM webpage").fetchone()[0]
    except sqlite3.OperationalError:  # the table itself is still in the log only
        return 0
    finally:
        conn.close()


def test_a_checkpoint_copies_the_log_into_the_file_while_the_store_goes_on(tmp_path):
    path = tmp_path / "c.sqlite"
    with EmbeddedStore(path, checkpoint_interval=None) as store:
        store.create()
        store.write([RowUpdate(b"k%03d" % i, {b"f:st": b"1"}) for i in range(300)])
        assert _rows_in_the_file(path) == 0  # in the log only
        store.checkpoint()
        store.write([RowUpdate(b"later", {b"f:st": b"2"})])  # the store is not held up
        checkpointer = store._checkpointer
        assert checkpointer is not None
        checkpointer.join(30)
        assert not checkpointer.is_alive()
        assert _rows_in_the_file(path) >= 300
        store.checkpoint()  # again, while the first may still run: one at a time
        assert store.get(b"k299") == {b"f:st": b"1"}
    with EmbeddedStore(path) as store:
        assert sum(1 for _ in store.scan()) == 301
        assert store.get(b"later") == {b"f:st": b"2"}


@pytest.mark.parametrize("interval", [0.0, None])
def test_writes_copy_the_log_into_the_file_as_it_grows(tmp_path, interval):
    path = tmp_path / "g.sqlite"
    log = tmp_path / "g.sqlite-wal"
    content = bytes(range(256)) * 4096  # 1 MiB
    with EmbeddedStore(path, checkpoint_interval=interval) as store:
        store.create()
        for i in range(24):
            store.write([RowUpdate(b"page%02d" % i, {b"f:cnt": content})])
            if store._checkpointer is not None:
                store._checkpointer.join()  # as a crawl's writes, apart in time
        logged = log.stat().st_size
        assert store.get(b"page23", [b"f:cnt"]) == {b"f:cnt": content}
    if interval is None:
        assert logged > 24 * len(content)  # the log only grows: SQLite's checkpoint is at 256 MB
    else:
        assert logged < 4 * len(content)  # copied, then started over
    with EmbeddedStore(path) as store:
        assert sum(1 for _ in store.scan()) == 24


def test_a_checkpoint_of_a_file_moved_away_creates_no_file(tmp_path, caplog):
    path = tmp_path / "m.sqlite"
    store = EmbeddedStore(path, checkpoint_interval=None)
    store.create()
    store.write([RowUpdate(b"a", {b"f:st": b"1"})])
    path.rename(tmp_path / "elsewhere.sqlite")
    store.checkpoint()
    store.close()  # waits for the checkpoint
    assert not path.exists()
    assert "Could not checkpoint" in caplog.text


def test_a_file_of_an_older_layout_is_refused_with_a_message(tmp_path):
    path = tmp_path / "w.sqlite"
    with EmbeddedStore(path) as store:
        store.create()
        store.write([RowUpdate(b"k", {b"f:st": b"1"})])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE nutchy_meta SET value = '2' WHERE name = 'layout'")
    conn.commit()
    conn.close()
    with EmbeddedStore(path) as store:
        for call in (
            lambda: store.get(b"k"),
            lambda: list(store.scan()),
            lambda: store.write([RowUpdate(b"k", {b"f:st": b"2"})]),
            store.create,
        ):
            with pytest.raises(StoreError, match=r"layout 2, written by an older nutchy.*layout 4"):
                call()
    # nothing was changed by the refused write
    conn = sqlite3.connect(path)
    assert marshal.loads(conn.execute("SELECT f FROM webpage").fetchone()[0]) == {b"f:st": b"1"}
    conn.close()


def _back_to_layout_3(path):
    """Rewrite a layout 4 file as layout 3 laid it out: the ``p`` family in the links records,
    no parse records, no ``has_parse`` flag."""
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        ALTER TABLE webpage_links ADD COLUMN p BLOB;
        INSERT INTO webpage_links (key, p) SELECT key, p FROM webpage_parse WHERE true
            ON CONFLICT (key) DO UPDATE SET p = excluded.p;
        UPDATE webpage SET has_links = 1 WHERE key IN (SELECT key FROM webpage_links);
        DROP TABLE webpage_parse;
        ALTER TABLE webpage DROP COLUMN has_parse;
        UPDATE nutchy_meta SET value = '3' WHERE name = 'layout';
        """
    )
    conn.close()


def test_a_file_of_layout_3_is_upgraded_in_place(tmp_path):
    path = tmp_path / "w.sqlite"
    rows = {
        b"both": {b"f:st": b"1", b"p:t": b"title", b"p:c": b"text " * 1000, b"ol:x": b"a"},
        b"parse": {b"f:st": b"2", b"p:t": b"only parse"},
        b"links": {b"il:y": b"b", b"h:ETag": b"e"},
        b"plain": {b"s:s": b"\0\0\0\0"},
    }
    with EmbeddedStore(path) as store:
        store.create()
        store.write([RowUpdate(key, dict(cells)) for key, cells in rows.items()])
        store.write([RowUpdate(b"both", {b"mk:_gnmrk_": b"b1"})])
    _back_to_layout_3(path)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM webpage_links WHERE p IS NOT NULL").fetchone() == (2,)
    conn.close()

    with EmbeddedStore(path) as store:
        assert dict(store.scan()) == {**rows, b"both": {**rows[b"both"], b"mk:_gnmrk_": b"b1"}}
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT value FROM nutchy_meta").fetchone() == ("4",)
        columns = [row[1] for row in conn.execute("PRAGMA table_info(webpage_links)")]
        assert columns == ["key", "il", "ol", "h", "stm"]
        # a links record that held only p is gone, and its flag with it
        links = [row[0] for row in conn.execute("SELECT key FROM webpage_links ORDER BY key")]
        assert links == [b"both", b"links"]
        flags = {
            k: (a, b) for k, a, b in conn.execute("SELECT key, has_links, has_parse FROM webpage")
        }
        assert flags == {b"both": (1, 1), b"parse": (0, 1), b"links": (1, 0), b"plain": (0, 0)}
        parse = dict(conn.execute("SELECT key, p FROM webpage_parse"))
        assert {key: marshal.loads(blob) for key, blob in parse.items()} == {
            b"both": {b"p:t": b"title", b"p:c": b"text " * 1000},
            b"parse": {b"p:t": b"only parse"},
        }
        conn.close()
        # and it is written as a layout 4 file is
        store.write([RowUpdate(b"both", {b"h:ETag": b"new"}), RowUpdate(b"parse", {b"ol:z": b""})])
        assert store.get(b"both", [b"h", b"p:t"]) == {b"h:ETag": b"new", b"p:t": b"title"}
        assert store.get(b"parse") == {**rows[b"parse"], b"ol:z": b""}
        store.delete_rows([b"both"])
        assert store.get(b"both") is None
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM webpage_parse").fetchone() == (1,)
    conn.close()


GEN = {b"mk:_gnmrk_": b"1700000000-1", b"f:bid": b"1700000000-1", b"mtdt:_npt_": b"\0\0\0\1"}


def _records(path):
    conn = sqlite3.connect(path)
    main = conn.execute("SELECT * FROM webpage ORDER BY key").fetchall()
    batch = conn.execute("SELECT * FROM webpage_batch ORDER BY key").fetchall()
    conn.close()
    return main, batch


def test_generate_marks_live_in_the_batch_record_alone(tmp_path):
    path = tmp_path / "w.sqlite"
    row = {b"f:st": b"\0\0\0\2", b"f:ts": bytes(8), b"mk:dist": b"1", b"mtdt:_csh_": b"x"}
    with EmbeddedStore(path) as store:
        store.create()
        store.write([RowUpdate(b"a", dict(row)), RowUpdate(b"b", dict(row))])
        main_before, _ = _records(path)
        store.write([RowUpdate(b"a", dict(GEN))])
        main_after, batch = _records(path)
        # marking a row rewrites its batch record and nothing of its main record
        assert main_after == main_before
        assert batch == [(b"a", GEN[b"mk:_gnmrk_"], GEN[b"f:bid"], GEN[b"mtdt:_npt_"], None)]
        # ...whose family records never hold the batch cells
        conn = sqlite3.connect(path)
        for blob in conn.execute("SELECT f, mk, mtdt FROM webpage").fetchall()[0]:
            assert not set(marshal.loads(blob)) & set(GEN)
        conn.close()
        # reads give the cells back among their families, byte for byte
        assert store.get(b"a") == {**row, **GEN}
        assert store.get(b"a", [b"mk"]) == {b"mk:dist": b"1", b"mk:_gnmrk_": GEN[b"mk:_gnmrk_"]}
        assert store.get(b"a", [b"f:bid", b"s"]) == {b"f:bid": GEN[b"f:bid"]}
        assert store.get(b"b", [b"mk:_gnmrk_"]) is None
        marked = list(store.scan(Scan(marker=(b"_gnmrk_", b"1700000000-1"), columns=[b"mtdt"])))
        assert marked == [(b"a", {b"mtdt:_csh_": b"x", b"mtdt:_npt_": GEN[b"mtdt:_npt_"]})]
        # a write of the whole mk family replaces the mark too; a delete removes a batch cell
        store.write([RowUpdate(b"a", {b"mk:dist": b"2"}, {b"mtdt:_npt_"}, {b"mk"})])
        assert store.get(b"a", [b"mk", b"mtdt"]) == {b"mk:dist": b"2", b"mtdt:_csh_": b"x"}
        assert _records(path)[1] == [(b"a", None, GEN[b"f:bid"], None, None)]
        store.write([RowUpdate(b"a", deletes={b"f:bid"})])
        assert _records(path)[1] == []


def test_a_row_with_batch_cells_only_exists_until_they_go(tmp_path):
    with EmbeddedStore(tmp_path / "w.sqlite") as store:
        store.create()
        store.write([RowUpdate(b"new", dict(GEN))])
        assert store.get(b"new") == GEN
        assert [k for k, _ in store.scan()] == [b"new"]
        store.write([RowUpdate(b"new", deletes=set(GEN))])
        assert store.get(b"new") is None
        assert _records(tmp_path / "w.sqlite") == ([], [])


def test_due_scans_of_generate_columns_read_the_index_and_agree_with_the_records(tmp_path):
    from nutchy.jobs.generate import GENERATE_COLUMNS

    rows = {
        b"a": {b"f:ts": (5).to_bytes(8, "big"), b"f:fi": b"\0\0\0\7", b"s:s": b"?\0\0\0"},
        b"b": {b"f:ts": (3).to_bytes(8, "big"), b"mk:dist": b"2", b"h:X": b"y", **GEN},
        b"c": {b"f:ts": (9).to_bytes(8, "big"), b"s:s": b"?\0\0\0"},  # not due
        b"d": {b"f:st": b"\0\0\0\1", b"mtdt:_ngt_": bytes(8)},  # no fetch time: due
        b"e": {b"f:ts": b"bad", b"mk:_updmrk_": b"u"},  # an undecodable time reads as 0
        b"f": {b"p:t": b"title only"},  # none of the columns asked
    }
    with EmbeddedStore(tmp_path / "w.sqlite") as store:
        store.create()
        store.write([RowUpdate(k, dict(v)) for k, v in rows.items()])
        store.write([RowUpdate(b"a", {b"f:fi": b"\0\0\0\x08"}, {b"s:s"})])  # copies follow
        expected = {
            key: {c: v for c, v in cells.items() if c in GENERATE_COLUMNS}
            for key, cells in store.get_many(list(rows)).items()
            if key != b"c"
        }
        expected = {key: cells for key, cells in expected.items() if cells}
        found = list(store.scan(Scan(columns=GENERATE_COLUMNS, due_before=5), page_size=2))
    assert dict(found) == expected
    assert [k for k, _ in found] == [b"d", b"e", b"b", b"a"]  # by fetch time
    assert expected[b"a"] == {b"f:ts": (5).to_bytes(8, "big"), b"f:fi": b"\0\0\0\x08"}


LOCK_HOLDER = textwrap.dedent(
    """
    import sys, time
    from nutchy.store.embedded import EmbeddedStore

    with EmbeddedStore(sys.argv[1]).exclusive("generate"):
        print("held", flush=True)
        time.sleep(60)
    """
)


def test_exclusive_waits_for_a_live_holder_and_not_for_a_killed_one(tmp_path):
    path = tmp_path / "webpage.sqlite"
    store = EmbeddedStore(path)
    store.create()
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    )
    got: list[str] = []
    try:
        assert holder.stdout.readline() == "held\n"

        def take() -> None:
            with store.exclusive("generate") as still_held:
                still_held()
                got.append("taken")

        waiter = threading.Thread(target=take)
        waiter.start()
        waiter.join(0.5)
        assert got == []  # the holder lives: the lock is its
    finally:
        holder.kill()  # SIGKILL: the system releases its lock
        holder.wait()
        holder.stdout.close()
    waiter.join(10)
    assert got == ["taken"]
    assert (tmp_path / "webpage.sqlite.generate.lock").exists()
    store.close()


def test_opening_the_table_again_keeps_the_locks_sqlite_holds_on_it(tmp_path):
    # Closing any descriptor of the file drops the POSIX locks SQLite holds on it, for the whole
    # process: a second store of the same file must not open it outside SQLite while the first
    # holds it, or another process can take it over (here: leave WAL mode, which needs every
    # other connection gone) under a connection still reading it.
    path = tmp_path / "webpage.sqlite"
    first = EmbeddedStore(path)
    first.create()
    first.write([build_update("com.a:http/", {"score": 1.0})])
    second = EmbeddedStore(path)
    try:
        assert second.exists()  # connects
        leave_wal = (
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], timeout=0);"
            " print(c.execute('PRAGMA journal_mode = DELETE').fetchone()[0])"
        )
        other = subprocess.run(
            [sys.executable, "-c", leave_wal, str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert "database is locked" in other.stderr, other.stdout + other.stderr
    finally:
        second.close()
        first.close()
