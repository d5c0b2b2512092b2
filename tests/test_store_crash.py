"""A writer killed with SIGKILL in the middle of a batch leaves the embedded store consistent."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from nutchy.store.embedded import EmbeddedStore

ROWS = 1000

WRITER = textwrap.dedent(
    """
    import sys
    from nutchy.store.embedded import EmbeddedStore
    from nutchy.store.schema import RowUpdate

    store = EmbeddedStore(sys.argv[1])
    store.create()
    n = 0
    while True:
        n += 1
        tag = str(n).encode()
        store.write([
            RowUpdate(
                b"com.example:http/%d" % i,
                {b"f:st": tag, b"mk:_gnmrk_": tag, b"f:cnt": tag * 2000, b"ol:http://x/" + tag: tag},
                replace={b"ol"},
            )
            for i in range(ROWS)
        ])
        print(n, flush=True)
    """
).replace("ROWS", str(ROWS))


@pytest.mark.parametrize("attempt", range(3))
def test_sigkill_mid_batch_leaves_whole_batches(tmp_path, attempt):
    path = tmp_path / "webpage.sqlite"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        # let it commit a few batches, then kill it at a random moment of the next ones
        for _ in range(2 + attempt):
            assert writer.stdout.readline(), "the writer died before committing a batch"
        time.sleep(random.uniform(0.0, 0.3))
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
    assert writer.returncode == -signal.SIGKILL

    with EmbeddedStore(path) as store:
        rows = dict(store.scan())
        assert len(rows) == ROWS
        tags = set()
        for cells in rows.values():
            tag = cells[b"f:st"]
            # every cell of the row comes from the same batch...
            assert cells == {
                b"f:st": tag,
                b"mk:_gnmrk_": tag,
                b"f:cnt": tag * 2000,
                b"ol:http://x/" + tag: tag,
            }
            tags.add(tag)
        # ...and every row from the same batch: the last one committed
        assert len(tags) == 1
        assert int(tags.pop()) >= 2 + attempt
        # the marker index agrees with the cells
        assert len(list(store.scan(store_scan(tag)))) == ROWS


def store_scan(tag: bytes):
    from nutchy.store.base import Scan

    return Scan(marker=(b"_gnmrk_", tag), columns=[b"f:st"])
