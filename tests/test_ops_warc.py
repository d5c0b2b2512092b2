"""WARC files: written during real ``scrapy crawl nutch`` fetches of loopback hosts
(NUTCH_WARC_ENABLED), checked by warcio's own ``warcio check`` and ``warcio index`` and read back
with warcio; ``nutchy warc`` exports; a disk that fills stops the fetch."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from sites import NOW_MS, FetchProject, Site, parse_stats, prepare_batch
from test_ops_warc_files import members
from warcio.archiveiterator import ArchiveIterator

from nutchy.cli import main
from nutchy.core.generate import GenerateConfig
from nutchy.jobs.generate import GenerateOptions, generate
from nutchy.store.embedded import EmbeddedStore
from nutchy.store.hbase import HBaseStore
from nutchy.store.table import WebTable

pytestmark = pytest.mark.slow

HOST = "127.0.0.2"
PATHS = ("/page/a", "/page/b", "/cond", "/status/404", "/gzip?n=5000", "/huge?n=200000")
WARCIO = str(Path(sys.executable).with_name("warcio"))
DAY_MS = 86_400_000


def records(folder):
    """Every record of the closed WARC files in *folder*: (type, headers, http status, payload)."""
    found = []
    for path in sorted(folder.glob("*.warc.gz")):
        with open(path, "rb") as handle:
            for record in ArchiveIterator(handle):
                status = record.http_headers.get_statuscode() if record.http_headers else None
                found.append(
                    (
                        record.rec_type,
                        dict(record.rec_headers.headers),
                        status,
                        record.content_stream().read(),
                    )
                )
    return found


def warcio_accepts(folder):
    files = sorted(str(p) for p in folder.glob("*.warc.gz"))
    assert files
    check = subprocess.run(
        [WARCIO, "check", "-v", *files], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    index = subprocess.run(
        [WARCIO, "index", "-f", "warc-type,warc-target-uri,http:status", *files],
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in index.stdout.splitlines()]


def by_url(found, kind):
    return {
        h["WARC-Target-URI"]: (h, status, payload) for t, h, status, payload in found if t == kind
    }


@pytest.fixture(scope="module")
def fetched(tmp_path_factory):
    """Two fetches of the same URLs, 200 days apart (the 404, GONE, waits longest): the second gets a 304 for /cond and the same
    content for the rest."""
    root = tmp_path_factory.mktemp("warc")
    with Site(hosts=(HOST,)) as site:
        store = EmbeddedStore(root / "crawl" / "webpage.sqlite")
        urls = [site.url(HOST, path) for path in PATHS]
        table = prepare_batch(store, urls, "b1")
        project = FetchProject(
            root,
            store,
            NUTCH_WARC_ENABLED=True,
            NUTCH_WARC_DIR=str(root / "w1"),
            # /huge is cut, and a cut page is not parsed: it has no signature
            NUTCH_HTTP_CONTENT_LIMIT=65536,
            NUTCH_PARSER_SKIP_TRUNCATED=True,
        )
        # a queue of one answer: the engine pauses at each answer until the thread wrote it
        first = project.crawl(
            "b1", settings={"NUTCH_WARC_QUEUE_SIZE": 1, "NUTCH_WARC_GZIP_LEVEL": 1}
        )
        assert first.returncode == 0, first.log
        assert main(["updatedb", "b1", "-s", f"NUTCH_CRAWL_DIR={root / 'crawl'}"]) == 0
        result = generate(
            table, GenerateOptions(GenerateConfig()), now=NOW_MS + 200 * DAY_MS, batch_id="b2"
        )
        assert result.selected == len(PATHS)
        second = project.crawl("b2", settings={"NUTCH_WARC_DIR": str(root / "w2")})
        assert second.returncode == 0, second.log
        table.close()
    return root, urls, first, second


def test_the_fetch_writes_a_response_and_a_request_per_answer(fetched):
    root, _, first, _ = fetched
    index = warcio_accepts(root / "w1")
    kinds = [line["warc-type"] for line in index]
    assert kinds[0] == "warcinfo"
    assert sorted(kinds[1:]) == ["request"] * len(PATHS) + ["response"] * len(PATHS)
    assert {line["http:status"] for line in index if line["warc-type"] == "response"} == {
        "200",
        "404",
    }
    assert first.stats["nutch/warc/records"] == 2 * len(PATHS)  # and a warcinfo
    assert first.stats["nutch/warc/files"] == 1
    assert first.stats["nutch/warc/paused"] >= 1  # and resumed: every answer is written
    assert "Wrote 6 answers (12 WARC records, 0 revisits) to 1 files" in first.log
    assert not list((root / "w1").glob("*.open"))
    (path,) = (root / "w1").glob("*.warc.gz")
    assert len(members(path)) == 1 + 2 * len(PATHS)  # a gzip member per record


def test_a_record_read_back_has_the_stored_content(fetched):
    root, urls, _, _ = fetched
    found = records(root / "w1")
    responses = by_url(found, "response")
    with WebTable(EmbeddedStore(root / "crawl" / "webpage.sqlite")) as table:
        for url in urls:
            headers, status, payload = responses[url]
            assert headers["WARC-IP-Address"] == HOST
            digest = "sha1:" + base64.b32encode(hashlib.sha1(payload).digest()).decode()
            assert headers["WARC-Payload-Digest"] == digest
            page = table.get(url, ["content"])
            if status == "200":
                assert payload == page.content, url
            else:
                assert payload == b"status 404"  # kept in the WARC, not in the table
    huge = responses[urls[-1]]
    assert huge[0]["WARC-Truncated"] == "length" and len(huge[2]) == 65536
    gzip_body = responses[urls[4]][2]
    assert gzip_body == b"z" * 5000  # the decoded body, as stored
    requests = by_url(found, "request")
    cond_request = requests[urls[2]]
    assert cond_request[0]["WARC-Concurrent-To"] == responses[urls[2]][0]["WARC-Record-ID"]


def test_a_304_and_unchanged_content_are_revisits(fetched):
    root, urls, _, second = fetched
    warcio_accepts(root / "w2")
    found = records(root / "w2")
    revisits = by_url(found, "revisit")
    responses = by_url(found, "response")
    cond = revisits[urls[2]][0]
    assert cond["WARC-Profile"].endswith("/revisit/server-not-modified")
    assert revisits[urls[2]][1] == "304"
    for url in (urls[0], urls[1], urls[4]):  # the same content as the first fetch
        headers = revisits[url][0]
        assert headers["WARC-Profile"].endswith("/revisit/identical-payload-digest")
        assert headers["WARC-Refers-To-Target-URI"] == url
        first = by_url(records(root / "w1"), "response")[url][0]
        assert headers["WARC-Payload-Digest"] == first["WARC-Payload-Digest"]
    # a 404 has no signature, and truncated content is not parsed: both written again
    assert set(responses) == {urls[3], urls[5]}
    assert second.stats["nutch/warc/revisits"] == 4


def test_nutchy_warc_exports_the_stored_pages(fetched, tmp_path, capsys):
    root, urls, _, _ = fetched
    crawl = ["-s", f"NUTCH_CRAWL_DIR={root / 'crawl'}", "-s", "NUTCH_WARC_MAX_SIZE=1"]
    assert main(["warc", "b2", "-out", str(tmp_path / "b2"), *crawl]) == 0
    out = capsys.readouterr().out
    # the pages fetched with 200 in b2 (/cond answered 304: its row keeps b1's answer, and
    # status NOTMODIFIED); a file for each, at a size limit of 1 byte
    assert out.startswith("Wrote 4 pages to ")
    warcio_accepts(tmp_path / "b2")
    assert len(list((tmp_path / "b2").glob("*.warc.gz"))) == 4
    responses = by_url(records(tmp_path / "b2"), "response")
    assert set(responses) == {urls[0], urls[1], urls[4], urls[5]}
    with WebTable(EmbeddedStore(root / "crawl" / "webpage.sqlite")) as table:
        for url, (_, status, payload) in responses.items():
            assert status == "200"
            assert payload == table.get(url, ["content"]).content
    assert main(["warc", "-all", "-out", str(tmp_path / "all"), *crawl]) == 0
    assert capsys.readouterr().out.startswith("Wrote 4 pages")
    assert main(["warc", "nosuch", "-out", str(tmp_path / "none"), *crawl]) == 1
    assert "no batch 'nosuch'" in capsys.readouterr().err


def _limit_file_size(size):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return apply


def test_a_warc_folder_that_fills_stops_the_fetch(tmp_path, hbase_address, hbase_options):
    """Files may grow to 1 MB only (RLIMIT_FSIZE: EFBIG, where a full disk gives ENOSPC; both
    are the OSError the writer meets): the WARC file hits it. The table is on the HBase test
    server, so the crawl's processes write no other file."""
    pages = 120
    store = HBaseStore(*hbase_address, crawl_id=f"warcfull{os.getpid()}", **hbase_options)
    try:
        with Site(hosts=(HOST,)) as site:
            urls = [site.url(HOST, f"/random?n=60000&i={i}") for i in range(pages)]
            prepare_batch(store, urls, "b1")
            # one request at a time, 50 ms apart: the batch that fails (written some 16 pages
            # in, at 60 KB of random bytes a page, once the WARC process has started) is met
            # well before the last page
            project = FetchProject(
                tmp_path,
                store,
                NUTCH_WARC_ENABLED=True,
                NUTCH_HTTP_CONTENT_LIMIT=-1,
                NUTCH_FETCHER_SERVER_DELAY=0.05,
            )
            done = subprocess.run(
                [sys.executable, "-m", "nutchy", "fetch", "b1"],
                cwd=tmp_path,
                env=project.env(),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                preexec_fn=_limit_file_size(1_000_000),
            )
        log = done.stderr
        stats = parse_stats(log)
        assert done.returncode == 1, log
        assert "Cannot write the WARC file in" in log and "File too large" in log
        assert stats["nutch/warc/write_error"] == 1
        assert stats["finish_reason"] == "nutch_store_error"
        fetched = stats["nutch/fetch/status/SUCCESS"]
        assert 10 < fetched < pages  # it stopped taking URLs
        assert stats["nutch/fetch/written"] == fetched  # what it fetched is in the table
        assert "the rest is left for -a resume=true" in log
        assert list((tmp_path / "crawl" / "warc").glob("*.warc.gz.open"))
        assert not list((tmp_path / "crawl" / "warc").glob("*.warc.gz"))
    finally:
        store.drop()
        store.close()
