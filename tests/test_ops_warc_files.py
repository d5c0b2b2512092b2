"""WARC files as nutchy writes them, without a crawl: every record a gzip member of its own at
NUTCH_WARC_GZIP_LEVEL, checked by ``warcio check`` and ``warcio index`` and read back with
warcio; records written in batches (a file on disk ends after a whole record); the writer
thread of the fetch, fed real Scrapy requests and responses, leaves every record in the file."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.settings import Settings
from warcio.archiveiterator import ArchiveIterator

from nutchy import default_settings
from nutchy._warcwork import NICENESS, WarcProcess
from nutchy.cli import main
from nutchy.exceptions import ConfigError
from nutchy.warc import (
    FLUSH_BYTES,
    MAX_BATCH,
    Capture,
    WarcFiles,
    _Writer,
    gzip_level,
    payload_digest,
)

WARCIO = str(Path(sys.executable).with_name("warcio"))
BODY = b"<html><head><title>t</title></head><body>" + b"<p>a page of text</p>" * 200 + b"</body>"


def capture(i: int, **kwargs: object) -> Capture:
    values: dict[str, object] = {
        "url": f"http://127.0.0.2:8000/p/{i}.html",
        "date": "2026-11-26T07:00:00Z",
        "status": 200,
        "headers": [("Content-Type", "text/html"), ("Content-Length", "1")],
        "payload": BODY + str(i).encode(),
        "request_headers": [("Accept", "text/html"), ("User-Agent", "nutchy-test")],
        "ip": "127.0.0.2",
    }
    values.update(kwargs)
    return Capture(**values)  # type: ignore[arg-type]


def members(path: Path) -> list[bytes]:
    """The gzip members of *path*, each decompressed on its own."""
    data = path.read_bytes()
    found = []
    while data:
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        found.append(inflate.decompress(data) + inflate.flush())
        assert inflate.eof, "a member cut short"
        data = inflate.unused_data
    return found


def read(path: Path) -> list[tuple[str, dict[str, str], bytes]]:
    with open(path, "rb") as handle:
        return [
            (r.rec_type, dict(r.rec_headers.headers), r.content_stream().read())
            for r in ArchiveIterator(handle)
        ]


def warcio_accepts(*paths: Path) -> list[str]:
    names = [str(p) for p in paths]
    check = subprocess.run([WARCIO, "check", *names], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    index = subprocess.run(
        [WARCIO, "index", "-f", "warc-type", *names], capture_output=True, text=True, check=True
    )
    return index.stdout.splitlines()


@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_each_record_is_a_gzip_member_of_its_own_at_the_level(tmp_path, level):
    files = WarcFiles(tmp_path, max_size=10**9, gzip_level=level)
    files.write(capture(1))
    files.write(capture(2, status=304, payload=b""))
    files.write(capture(3, prev_signature=zlib.crc32(b"").to_bytes(4, "big")))  # not the MD5
    files.write(capture(4, payload=BODY[:100], truncated=True, request_headers=None))
    md5 = hashlib.md5(BODY + b"5").digest()
    files.write(capture(5, prev_signature=md5))  # the content seen before
    files.close()
    (path,) = files.files
    assert path.name.endswith(".warc.gz") and not list(tmp_path.glob("*.open"))
    index = warcio_accepts(path)
    assert len(index) == 1 + 9 == files.records + 1
    parts = members(path)
    assert len(parts) == len(index)
    assert all(part.startswith(b"WARC/1.0\r\n") for part in parts)
    records = read(path)
    assert [kind for kind, _, _ in records] == [
        "warcinfo",
        *("response", "request", "revisit", "request", "response", "request"),
        *("response", "revisit", "request"),
    ]
    payloads = [(h, body) for kind, h, body in records if kind == "response"]
    assert [body for _, body in payloads] == [BODY + b"1", BODY + b"3", BODY[:100]]
    for headers, body in payloads:
        assert headers["WARC-Payload-Digest"] == payload_digest(body)
        assert headers["WARC-Block-Digest"].startswith("sha1:")
    assert payloads[2][0]["WARC-Truncated"] == "length"
    identical = records[-2][1]
    assert identical["WARC-Payload-Digest"] == payload_digest(BODY + b"5")
    assert files.revisits == 2
    stored = sum(len(p) for p in parts)
    if level == 0:
        assert path.stat().st_size > stored  # stored: bigger than what it holds
    else:
        assert path.stat().st_size < stored / 2


def test_a_higher_level_writes_fewer_bytes(tmp_path):
    text = Path(__file__).read_bytes()  # compresses better at 6 than at 1 by some 8%
    sizes = {}
    for level in (0, 1, 6):
        files = WarcFiles(tmp_path / str(level), max_size=10**9, gzip_level=level)
        files.directory.mkdir()
        for i in range(20):
            files.write(capture(i, payload=text))
        files.close()
        sizes[level] = files.files[0].stat().st_size
    assert sizes[0] > 2 * sizes[1] and sizes[1] > 1.03 * sizes[6]


def test_records_reach_the_file_at_a_flush_and_end_whole(tmp_path):
    files = WarcFiles(tmp_path, max_size=10**9)
    files.write(capture(1))
    files.write(capture(2))
    (open_file,) = tmp_path.glob("*.warc.gz.open")
    assert open_file.stat().st_size == 0  # waiting for the batch's end
    files.flush()
    assert len(read(open_file)) == 1 + 4  # a killed crawl leaves a readable file
    files.write(capture(3))
    assert len(read(open_file)) == 5
    big = capture(4, payload=os.urandom(FLUSH_BYTES))  # does not compress
    files.write(big)  # FLUSH_BYTES wait: written without a flush
    assert [kind for kind, _, _ in read(open_file)][5:] == ["response", "request"] * 2
    files.close()
    assert not list(tmp_path.glob("*.open"))
    assert len(read(files.files[0])) == 1 + 8


def test_a_full_file_is_closed_and_the_next_opened(tmp_path):
    files = WarcFiles(tmp_path, max_size=3000, gzip_level=1)
    for i in range(6):
        files.write(capture(i))
    files.close()
    assert len(files.files) >= 2
    index = warcio_accepts(*files.files)
    assert index.count('{"warc-type": "response"}') == 6
    assert index.count('{"warc-type": "warcinfo"}') == len(files.files)


def test_the_gzip_level_setting():
    settings = Settings({"NUTCH_WARC_GZIP_LEVEL": default_settings.NUTCH_WARC_GZIP_LEVEL})
    assert gzip_level(settings) == 5
    for bad in (-1, 10):
        with pytest.raises(ConfigError, match=f"NUTCH_WARC_GZIP_LEVEL must be 0 to 9, got {bad}"):
            gzip_level(Settings({"NUTCH_WARC_GZIP_LEVEL": bad}))
    with pytest.raises(ConfigError, match="must be an integer"):
        gzip_level(Settings({"NUTCH_WARC_GZIP_LEVEL": "fast"}))


def test_nutchy_warc_refuses_a_bad_level(tmp_path, capsys):
    args = ["-s", f"NUTCH_CRAWL_DIR={tmp_path}", "-s", "NUTCH_WARC_GZIP_LEVEL=12"]
    assert main(["warc", "-all", "-out", str(tmp_path / "out"), *args]) == 2
    assert "NUTCH_WARC_GZIP_LEVEL must be 0 to 9, got 12" in capsys.readouterr().err


class _Extension:
    """What the writer thread asks of the fetch's extension."""

    paused = False
    queue_size = 1000

    def __init__(self) -> None:
        self.failed: list[OSError] = []

    def _resume(self) -> None:
        raise AssertionError("never paused")

    def _write_failed(self, error: OSError) -> None:
        self.failed.append(error)


class _Batches(WarcFiles):
    """WarcFiles, counting the answers of each batch."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.batches: list[int] = []

    def write_batch(self, captures: list[Capture]) -> None:
        self.batches.append(len(captures))
        super().write_batch(captures)


@pytest.mark.parametrize("started_first", [True, False])
def test_the_writer_thread_leaves_every_answer_in_the_file(tmp_path, started_first):
    """Answers as the reactor hands them over (a Scrapy request, its response, the body...),
    more of them than the thread takes at once: after the end, the file holds all of them."""
    extension = _Extension()
    files = _Batches(tmp_path, max_size=10**9, gzip_level=1)
    writer = _Writer(
        lambda: files,
        extension,  # type: ignore[arg-type]
        call_in_reactor=lambda f, *a: f(*a),
        linger=0.01,
    )
    if started_first:
        writer.start()
    urls = [f"http://127.0.0.2:8000/p/{i}.html" for i in range(300)]
    for i, url in enumerate(urls):
        request = Request(url, headers={"Accept": "text/html"})
        body = BODY + str(i).encode()
        response = HtmlResponse(
            url, status=200, headers={"Content-Type": "text/html"}, body=body, request=request
        )
        writer.answers.put((request, response, body, False, None, 1_764_140_400_000.0 + i))
    writer.answers.put(None)
    if not started_first:
        writer.start()
    writer.join(30)
    assert not writer.is_alive() and writer.error is None and not extension.failed
    (path,) = files.files
    records = read(path)
    responses = [(h["WARC-Target-URI"], body) for kind, h, body in records if kind == "response"]
    assert responses == [(url, BODY + str(i).encode()) for i, url in enumerate(urls)]
    requests = [h for kind, h, _ in records if kind == "request"]
    assert len(requests) == len(urls) and files.records == 2 * len(urls)
    assert records[1][1]["WARC-Date"] == "2025-11-26T07:00:00Z"  # the time handed over
    assert len(members(path)) == 1 + 2 * len(urls)
    assert sum(files.batches) == 300 and max(files.batches) <= MAX_BATCH
    if not started_first:  # all waiting: taken MAX_BATCH at a time
        assert files.batches == [100, 100, 100]


def test_the_warc_process_writes_each_batch_and_says_what_it_wrote(tmp_path):
    process = WarcProcess.start(tmp_path, prefix="p", max_size=10**9, gzip_level=1)
    process.write_batch([capture(1), capture(2, status=304, payload=b"")])
    (open_file,) = tmp_path.glob("p-*.warc.gz.open")
    assert len(read(open_file)) == 1 + 4  # in the file once the batch is answered
    process.write_batch([capture(3)])
    process.close()
    assert process.process.returncode == 0
    assert (process.captures, process.records, process.revisits) == (3, 6, 1)
    (path,) = process.files
    assert path.parent == tmp_path and path.name.startswith("p-")
    assert len(warcio_accepts(path)) == 1 + 6 == len(members(path))
    assert [body for kind, _, body in read(path) if kind == "response"] == [
        BODY + b"1",
        BODY + b"3",
    ]


def test_the_warc_process_runs_nicer_than_the_fetch(tmp_path):
    process = WarcProcess.start(tmp_path, prefix="p", max_size=10**9, gzip_level=1)
    try:
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, process.process.pid) == min(ours + NICENESS, 19)
    finally:
        process.close()


def test_the_warc_process_keeps_what_it_got_when_the_fetch_dies(tmp_path):
    process = WarcProcess.start(tmp_path, prefix="p", max_size=10**9, gzip_level=6)
    process.write_batch([capture(i) for i in range(50)])
    process._send(("write", [capture(50)]))  # no answer read: the fetch is killed here
    process._end()  # its end of the pipe closed
    assert process.process.returncode == 0
    (open_file,) = tmp_path.glob("*.warc.gz.open")  # not renamed: the fetch did not end
    kinds = [kind for kind, _, _ in read(open_file)]
    assert kinds == ["warcinfo", *["response", "request"] * 51]


def test_the_warc_process_says_why_it_cannot_write(tmp_path):
    process = WarcProcess.start(tmp_path / "gone", prefix="p", max_size=10**9, gzip_level=6)
    with pytest.raises(FileNotFoundError):  # the OSError of the disk, as in a thread
        process.write_batch([capture(1)])
    with pytest.raises(FileNotFoundError):  # and every later batch is refused
        process.write_batch([capture(2)])
    process.close()
    assert process.captures == 0 and process.files == []
    assert not (tmp_path / "gone").exists()


def test_the_warc_process_does_without_scrapy():
    """What it imports is what it costs in memory beside the fetch."""
    code = (
        "import sys, nutchy._warcwork, nutchy.warc, warcio.warcwriter;"
        " print(sorted(m for m in ('scrapy', 'twisted') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
