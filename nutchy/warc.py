"""WARC files: every fetch written during the crawl (``NUTCH_WARC_ENABLED``), and ``nutchy warc``,
which exports what the web table holds.

During a fetch, :class:`NutchWarcExtension` takes each answer from
:data:`~nutchy._fetch.fetch_finished` and has it written as a ``request`` and a ``response``
record (a ``revisit`` for a 304, or for content whose MD5 is the row's stored signature) to a
gzipped WARC file with warcio, the standard WARC library. The reactor only queues references to
the request, the response and the body. A writer thread takes whatever waits in that queue as
one batch, copies what it needs of each answer into a :class:`Capture`, and hands the batch to
the :mod:`WARC process <nutchy._warcwork>`, which builds, digests and gzips the records and
writes the batch with one system call; the thread then rests :data:`LINGER` seconds while the
next batch gathers. warcio's record building is Python that would otherwise hold the GIL the
reactor needs; in the WARC process it runs on the other core. When the disk is slower than the
fetch and ``NUTCH_WARC_QUEUE_SIZE`` answers wait, the extension pauses Scrapy's engine (no
request starts) until half of them are written. When a write fails (the disk full:
``ENOSPC``), the extension sends :data:`~nutchy._fetch.fetch_halted` and the scheduler stops
taking URLs, as it does when the table cannot be written: the rows not fetched keep their batch
for ``-a resume=true``.

Files are named ``<prefix>-<UTC time>-<serial>-<pid>.warc.gz`` (the pid of the process that
writes them) and carry an ``.open`` suffix while written; once a file holds
``NUTCH_WARC_MAX_SIZE`` bytes it is synced to the disk (``fsync``), renamed, and the next
answer opens a new one. Each starts with a ``warcinfo`` record. Every record is a gzip member of
its own (WARC 1.0, annex D: a reader can seek to any record), compressed at
``NUTCH_WARC_GZIP_LEVEL``: warcio builds each record uncompressed and nutchy gzips it, since
warcio's own writer always compresses at zlib's level 9. Records reach the file in batches,
each ending after a whole record (:meth:`WarcFiles.flush`, and every :data:`FLUSH_BYTES`).

Scrapy hands nutchy the body as it was decoded (gzip or brotli taken off) and without its
chunked framing: the ``response`` record holds that body, its ``Content-Length`` is the body's
length and ``Transfer-Encoding`` is left out, as other archivers built on a high-level HTTP
client do. A body cut at ``http.content.limit`` is marked ``WARC-Truncated: length``.

warcio is an optional dependency (``pip install 'nutchy[warc]'``), imported only when used.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http
import io
import itertools
import logging
import os
import queue
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias
from urllib.parse import urlsplit

from nutchy import __version__
from nutchy.exceptions import ConfigError, NutchError

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from nutchy.core.fetch import FetchOutcome
    from nutchy.core.webpage import WebPage
    from nutchy.store.table import WebTable

__all__ = ["Capture", "NutchWarcExtension", "WarcFiles", "export_warc", "gzip_level", "warc_dir"]

logger = logging.getLogger(__name__)

#: The revisit profiles of WARC 1.0: a 304, and content identical to an earlier capture.
NOT_MODIFIED_PROFILE: Final = "http://netpreserve.org/warc/1.0/revisit/server-not-modified"
IDENTICAL_PROFILE: Final = "http://netpreserve.org/warc/1.0/revisit/identical-payload-digest"

#: Response headers that describe the bytes on the wire, which the record does not hold.
_WIRE_HEADERS: Final = frozenset({"transfer-encoding", "content-length"})

#: ``NUTCH_WARC_GZIP_LEVEL``'s default (see docs/benchmarks.md for what each level costs).
DEFAULT_GZIP_LEVEL: Final = 5

#: Bytes of gzipped records after which :class:`WarcFiles` writes them to the file even though
#: more are to come.
FLUSH_BYTES: Final = 1 << 20

#: Seconds the writer thread rests after writing a batch, while the next one gathers.
LINGER: Final = 0.05

#: Answers the writer thread hands over at most at once (what it pickles for the WARC process).
MAX_BATCH: Final = 100

#: zlib's window bits for a gzip member (a header and a trailer around the deflate stream).
_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS

#: The WARC-Payload-Digest of no payload (a ``request`` record).
EMPTY_DIGEST: Final = "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"


def _warcio() -> Any:
    try:
        from warcio.statusandheaders import StatusAndHeaders
        from warcio.warcwriter import WARCWriter
    except ImportError as exc:
        raise ConfigError(f"WARC files need warcio ({exc}): pip install 'nutchy[warc]'") from exc
    return WARCWriter, StatusAndHeaders


def warc_dir(settings: BaseSettings) -> Path:
    """``NUTCH_WARC_DIR``, or ``<crawl dir>/warc`` when it is empty."""
    from nutchy.config import crawl_dir  # and Scrapy, which the WARC process does without

    value = settings.get("NUTCH_WARC_DIR") or ""
    return Path(value) if value else crawl_dir(settings) / "warc"


def gzip_level(settings: BaseSettings) -> int:
    """``NUTCH_WARC_GZIP_LEVEL``, checked."""
    from nutchy.jobs._settings import get_int

    level = get_int(settings, "NUTCH_WARC_GZIP_LEVEL")
    if not 0 <= level <= 9:
        raise ConfigError(f"NUTCH_WARC_GZIP_LEVEL must be 0 to 9, got {level!r}")
    return level


def warc_date(ms: float) -> str:
    """A WARC-Date (WARC 1.0: seconds, UTC) of *ms* since the epoch.

    >>> warc_date(1_700_000_000_123)
    '2023-11-14T22:13:20Z'
    """
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def payload_digest(payload: bytes) -> str:
    """The WARC-Payload-Digest of *payload*, as warcio writes it (SHA-1, base 32).

    >>> payload_digest(b"")
    'sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ'
    """
    return "sha1:" + base64.b32encode(hashlib.sha1(payload).digest()).decode("ascii")


@dataclass(frozen=True, slots=True)
class Capture:
    """One answer, as a WARC file keeps it: *url*, when (*date*, a WARC-Date), the answer's
    *status*, *headers* and *payload* (the body, decoded), the request's *method* and
    *request_headers* (``None``: no ``request`` record, as for an export), the server's *ip*,
    whether the body was *truncated*, and *prev_signature*, the row's MD5 signature before this
    fetch (an equal MD5 of the payload makes it a ``revisit``)."""

    url: str
    date: str
    status: int
    headers: list[tuple[str, str]]
    payload: bytes
    method: str = "GET"
    request_headers: list[tuple[str, str]] | None = None
    ip: str | None = None
    truncated: bool = False
    prev_signature: bytes | None = None


class WarcFiles:
    """Writes :class:`Capture` records into gzipped WARC files in *directory*, a new file every
    *max_size* bytes, each record a gzip member compressed at *gzip_level* (zlib's 0, stored, to
    9). Records wait in memory until :meth:`flush` (or :data:`FLUSH_BYTES` of them) and are
    then written with one call, so a file ends after a whole record whenever the process dies
    (see the module docstring). Blocking, for one thread at a time."""

    def __init__(
        self,
        directory: Path,
        *,
        prefix: str = "nutchy",
        max_size: int,
        gzip_level: int = DEFAULT_GZIP_LEVEL,
    ) -> None:
        if not 0 <= gzip_level <= 9:
            raise ConfigError(f"NUTCH_WARC_GZIP_LEVEL must be 0 to 9, got {gzip_level!r}")
        writer_class, self._headers_class = _warcio()
        self.directory = directory
        self.prefix = prefix
        self.max_size = max_size
        self.gzip_level = gzip_level
        # warcio writes each record uncompressed here; nutchy gzips it as a member of its own
        self._raw = io.BytesIO()
        self._writer = writer_class(self._raw, gzip=False, warc_version="1.0")
        self._serial = 0
        self._handle: io.BufferedWriter | None = None
        self._path: Path | None = None
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._size = 0  # of the file being written, the records pending included
        #: the files closed so far, and the captures and records written
        self.files: list[Path] = []
        self.captures = 0
        self.records = 0
        self.revisits = 0

    def write(self, capture: Capture) -> None:
        """Add the records of *capture* to the file (written at the next :meth:`flush`, or now
        when :data:`FLUSH_BYTES` wait or the file is full; an :exc:`OSError` of the disk is
        raised)."""
        if self._handle is None:
            self._open()
        for record in self._records(capture):
            self._add(record)
            self.records += 1
        self.captures += 1
        if self._size >= self.max_size:
            self._close_file()
        elif self._pending_bytes >= FLUSH_BYTES:
            self.flush()

    def write_batch(self, captures: list[Capture]) -> None:
        """Write the records of *captures* and flush."""
        for capture in captures:
            self.write(capture)
        self.flush()

    def flush(self) -> None:
        """Write the records that wait to the file, in one call."""
        if self._pending and self._handle is not None:
            data = b"".join(self._pending)
            self._pending.clear()
            self._pending_bytes = 0
            self._handle.write(data)
            self._handle.flush()

    def close(self) -> None:
        """Write what waits and close the file (synced, renamed without its ``.open`` suffix)."""
        self._close_file()

    def _add(self, record: Any) -> None:
        raw = self._raw
        self._writer.write_record(record)
        member = zlib.compress(raw.getvalue(), self.gzip_level, wbits=_GZIP_WBITS)
        raw.seek(0)
        raw.truncate()
        self._pending.append(member)
        self._pending_bytes += len(member)
        self._size += len(member)

    def _open(self) -> None:
        self._serial += 1
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        name = f"{self.prefix}-{stamp}-{self._serial:05d}-{os.getpid()}.warc.gz"
        self._path = self.directory / name
        self._handle = open(self._path.with_name(name + ".open"), "xb")  # noqa: SIM115
        self._size = 0
        info = self._writer.create_warcinfo_record(
            name,
            {
                "software": f"nutchy/{__version__} (Scrapy, warcio)",
                "format": "WARC File Format 1.0",
                "conformsTo": "http://bibnum.bnf.fr/WARC/WARC_ISO_28500_version1_latestdraft.pdf",
            },
        )
        self._add(info)

    def _close_file(self) -> None:
        handle, path = self._handle, self._path
        if handle is None or path is None:
            return
        self.flush()
        os.fsync(handle.fileno())
        self._handle = self._path = None
        handle.close()
        os.replace(path.with_name(path.name + ".open"), path)
        _sync_folder(path.parent)
        self.files.append(path)

    def _records(self, capture: Capture) -> Iterator[Any]:
        writer = self._writer
        status_and_headers = self._headers_class
        phrase = _phrase(capture.status)
        headers = [(k, v) for k, v in capture.headers if k.lower() not in _WIRE_HEADERS]
        common: dict[str, str] = {"WARC-Date": capture.date}
        if capture.ip:
            common["WARC-IP-Address"] = capture.ip
        payload: bytes | None = None
        if capture.status == 304:
            kind = "revisit"
            extra = {"WARC-Profile": NOT_MODIFIED_PROFILE, "WARC-Refers-To-Target-URI": capture.url}
        elif (
            capture.prev_signature is not None
            and capture.status == 200
            and hashlib.md5(capture.payload, usedforsecurity=False).digest()
            == capture.prev_signature
        ):
            kind = "revisit"
            extra = {
                "WARC-Profile": IDENTICAL_PROFILE,
                "WARC-Refers-To-Target-URI": capture.url,
                "WARC-Payload-Digest": payload_digest(capture.payload),
            }
            headers.append(("Content-Length", str(len(capture.payload))))
        else:
            kind, payload = "response", capture.payload
            # the payload's digest once, here: warcio does not compute one it is given
            extra = {"WARC-Payload-Digest": payload_digest(payload)}
            if capture.truncated:
                extra["WARC-Truncated"] = "length"
            headers.append(("Content-Length", str(len(payload))))
        if kind == "revisit":
            self.revisits += 1
        record = writer.create_warc_record(
            capture.url,
            kind,
            payload=None if payload is None else io.BytesIO(payload),
            length=None if payload is None else len(payload),
            http_headers=status_and_headers(
                f"{capture.status} {phrase}", headers, protocol="HTTP/1.1"
            ),
            warc_headers_dict={**common, **extra},
        )
        yield record
        if capture.request_headers is not None:
            parts = urlsplit(capture.url)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            request_headers = [("Host", parts.netloc), *capture.request_headers]
            yield writer.create_warc_record(
                capture.url,
                "request",
                http_headers=status_and_headers(
                    f"{capture.method} {target}",
                    request_headers,
                    protocol="HTTP/1.1",
                    is_http_request=True,
                ),
                warc_headers_dict={
                    **common,
                    "WARC-Payload-Digest": EMPTY_DIGEST,  # a request has no payload
                    "WARC-Concurrent-To": record.rec_headers.get_header("WARC-Record-ID"),
                },
            )


def _sync_folder(folder: Path) -> None:
    """Make a rename in *folder* durable (``fsync`` of the folder, where the system allows it)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass  # some file systems do not sync folders; the file itself is synced
    finally:
        os.close(descriptor)


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _text(value: bytes) -> str:
    return value.decode("latin-1")


# --- during the fetch ----------------------------------------------------------------------------


#: What the reactor hands the writer thread for one answer: the request, the response, the body
#: (the fetch's content, cut at the content limit), whether it was cut, the row's signature
#: before the fetch (or ``None``), and when the answer ended (ms since the epoch).
_Answer: TypeAlias = "tuple[Request, Response, bytes, bool, bytes | None, float]"


def capture_of(answer: _Answer) -> Capture:
    """The :class:`Capture` of an *answer* the reactor handed over (in the writer thread)."""
    request, response, payload, truncated, prev_signature, when = answer
    return Capture(
        url=response.url,
        date=warc_date(when),
        status=response.status,
        headers=[
            (_text(name), _text(value))
            for name, values in response.headers.items()
            for value in values
        ],
        payload=payload,
        method=request.method,
        request_headers=[
            (_text(name), _text(value))
            for name, values in request.headers.items()
            for value in values
        ],
        ip=str(response.ip_address) if response.ip_address else None,
        truncated=truncated,
        prev_signature=prev_signature,
    )


class _Sink(Protocol):
    """Where the writer thread's batches go: a :class:`~nutchy._warcwork.WarcProcess` in a
    fetch, or :class:`WarcFiles` itself; after :meth:`close`, the totals written."""

    files: list[Path]
    captures: int
    records: int
    revisits: int

    def write_batch(self, captures: list[Capture]) -> None: ...

    def close(self) -> None: ...


class _Writer(threading.Thread):
    """The thread that hands the answers the reactor queues to the sink *open_sink* opens, a
    batch at a time (see the module docstring); *linger* is the rest after each batch, in
    seconds; *call_in_reactor* runs a function on the reactor thread."""

    def __init__(
        self,
        open_sink: Callable[[], _Sink],
        extension: NutchWarcExtension,
        *,
        call_in_reactor: Callable[..., object],
        linger: float = LINGER,
    ) -> None:
        super().__init__(name="nutchy-warc", daemon=True)
        self.open_sink = open_sink
        self.sink: _Sink | None = None
        self.extension = extension
        self.call_in_reactor = call_in_reactor
        self.linger = linger
        self.answers: queue.SimpleQueue[_Answer | None] = queue.SimpleQueue()
        self.error: OSError | None = None
        self.lost = 0

    def run(self) -> None:
        extension, answers = self.extension, self.answers
        try:
            self.sink = self.open_sink()
        except OSError as exc:
            self._failed(exc)
        ended = False
        while not ended:
            answer = answers.get()
            batch: list[_Answer] = []
            while True:  # the answer, and whatever else waits (up to MAX_BATCH)
                if answer is None:  # the last thing ever queued
                    ended = True
                    break
                batch.append(answer)
                if len(batch) == MAX_BATCH:
                    break
                try:
                    answer = answers.get_nowait()
                except queue.Empty:
                    break
            self._write(batch)
            if extension.paused and answers.qsize() <= extension.queue_size // 2:
                self.call_in_reactor(extension._resume)
            if not ended and self.linger and not extension.paused and len(batch) < MAX_BATCH:
                time.sleep(self.linger)  # while the next batch gathers
        if self.sink is not None:
            try:
                self.sink.close()
            except OSError as exc:
                if self.error is None:
                    self.error = exc
                    logger.error(
                        "Cannot close the WARC file in %(dir)s: %(error)s",
                        {"dir": extension.directory, "error": exc},
                    )

    def _write(self, batch: list[_Answer]) -> None:
        if not batch:
            return
        if self.error is not None or self.sink is None:
            self.lost += len(batch)
            return
        try:
            self.sink.write_batch([capture_of(answer) for answer in batch])
        except OSError as exc:
            self.lost += len(batch)
            self._failed(exc)

    def _failed(self, error: OSError) -> None:
        self.error = error
        self.call_in_reactor(self.extension._write_failed, error)


class NutchWarcExtension:
    """Writes every answer of the fetch to WARC files (see the module docstring).

    *open_sink* opens what writes the records into *directory* (called in the writer thread:
    in a fetch, it starts the :mod:`WARC process <nutchy._warcwork>`); *queue_size* answers may
    wait before the engine is paused (*pause*, *resume*); *halt* tells the fetch to stop taking
    URLs; *stats* is the crawler's. *content_signatures*: the rows' signatures are MD5 digests of
    their content (``db.signature.class`` is ``MD5Signature``), so an unchanged one can be told.
    """

    def __init__(
        self,
        open_sink: Callable[[], _Sink],
        directory: Path,
        *,
        queue_size: int,
        stats: StatsCollector,
        pause: Callable[[], None],
        resume: Callable[[], None],
        halt: Callable[[str], None],
        content_signatures: bool = True,
    ) -> None:
        self.open_sink = open_sink
        self.directory = directory
        self.content_signatures = content_signatures
        self.queue_size = queue_size
        self.stats = stats
        self._pause = pause
        self._resume_engine = resume
        self._halt = halt
        self.paused = False
        self._thread: _Writer | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        from scrapy import signals
        from scrapy.exceptions import NotConfigured

        from nutchy._checks import refuse_to_start
        from nutchy._fetch import fetch_finished, fetch_halted
        from nutchy.core.signature import MD5Signature
        from nutchy.jobs._cycle import signature
        from nutchy.jobs._settings import get_bool, get_int

        settings = crawler.settings
        if not get_bool(settings, "NUTCH_WARC_ENABLED"):
            raise NotConfigured  # quietly: an argument would be logged as a warning
        try:
            directory = warc_dir(settings)
            max_size = get_int(settings, "NUTCH_WARC_MAX_SIZE", 1)
            queue_size = get_int(settings, "NUTCH_WARC_QUEUE_SIZE", 1)
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot make the WARC folder {directory}: {exc}") from exc
            level = gzip_level(settings)
            _warcio()  # missing: the crawl does not start
        except NutchError as exc:
            refuse_to_start(exc)
        assert crawler.stats is not None

        def pause() -> None:
            assert crawler.engine is not None
            crawler.engine.pause()

        def resume() -> None:
            assert crawler.engine is not None
            crawler.engine.unpause()

        def halt(reason: str) -> None:
            crawler.signals.send_catch_log(fetch_halted, reason=reason)

        from nutchy._warcwork import WarcProcess

        open_sink = functools.partial(
            WarcProcess.start,
            directory,
            prefix=settings.get("NUTCH_WARC_PREFIX") or "nutchy",
            max_size=max_size,
            gzip_level=level,
        )
        extension = cls(
            open_sink,
            directory,
            queue_size=queue_size,
            stats=crawler.stats,
            pause=pause,
            resume=resume,
            halt=halt,
            content_signatures=isinstance(signature(settings), MD5Signature),
        )
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(extension.fetch_finished, signal=fetch_finished)
        return extension

    def spider_opened(self) -> None:
        from twisted.internet import reactor

        self._thread = _Writer(self.open_sink, self, call_in_reactor=reactor.callFromThread)
        self._thread.start()

    def fetch_finished(
        self,
        request: Request,
        outcome: FetchOutcome | None,
        response: Response | None = None,
    ) -> None:
        """Queue the answer *response* to *request* for the writer thread: references only,
        the thread reads them."""
        thread = self._thread
        if response is None or outcome is None or thread is None or thread.error is not None:
            return
        prev_signature = None
        if self.content_signatures:
            from nutchy._fetch import META_ENTRY

            prev_signature = getattr(request.meta.get(META_ENTRY), "signature", None)
        payload = outcome.content if outcome.content is not None else response.body
        answers = thread.answers
        answers.put(
            (request, response, payload, outcome.truncated, prev_signature, time.time() * 1000)
        )
        if not self.paused and answers.qsize() >= self.queue_size:
            # The disk is behind: no request starts until half the queue is written.
            self.paused = True
            self.stats.inc_value("nutch/warc/paused")
            self._pause()

    def _resume(self) -> None:
        thread = self._thread
        if self.paused and (thread is None or thread.answers.qsize() <= self.queue_size // 2):
            self.paused = False
            self._resume_engine()

    def _write_failed(self, error: OSError) -> None:
        self.stats.inc_value("nutch/warc/write_error")
        logger.error(
            "Cannot write the WARC file in %(dir)s: %(error)s; the fetch stops taking URLs (the"
            " rows not fetched are left for -a resume=true; nutchy warc exports what the table"
            " holds)",
            {"dir": self.directory, "error": error},
        )
        if self.paused:
            self.paused = False
            self._resume_engine()
        self._halt(f"the WARC file cannot be written: {error}")

    async def spider_closed(self) -> None:
        """Write what waits, close the file, and count it all in the stats."""
        from scrapy.utils.asyncio import run_in_thread

        thread = self._thread
        if thread is None:
            return
        thread.answers.put(None)
        await run_in_thread(thread.join)
        sink = thread.sink
        captures, records, revisits, files = (
            (0, 0, 0, 0)
            if sink is None
            else (sink.captures, sink.records, sink.revisits, len(sink.files))
        )
        stats = self.stats
        stats.set_value("nutch/warc/captures", captures)
        stats.set_value("nutch/warc/records", records)
        stats.set_value("nutch/warc/revisits", revisits)
        stats.set_value("nutch/warc/files", files)
        if thread.lost:
            stats.set_value("nutch/warc/lost", thread.lost)
        logger.info(
            "Wrote %(captures)d answers (%(records)d WARC records, %(revisits)d revisits) to"
            " %(files)d files in %(dir)s%(lost)s",
            {
                "captures": captures,
                "records": records,
                "revisits": revisits,
                "files": files,
                "dir": self.directory,
                "lost": f"; {thread.lost} NOT written" if thread.lost else "",
            },
        )


# --- nutchy warc ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What :func:`export_warc` wrote: *captures* rows into *files*."""

    captures: int
    files: list[Path]


def export_warc(
    table: WebTable,
    out: Path,
    *,
    batch_id: str | None,
    max_size: int,
    prefix: str = "nutchy",
    gzip_level: int = DEFAULT_GZIP_LEVEL,
    progress: Callable[[], None] | None = None,
) -> ExportResult:
    """Write a ``response`` record for every row of the table that holds content (of batch
    *batch_id*, by its fetch or updatedb mark, or every row for ``None``) into WARC files in *out*:
    the stored headers and content, dated by the fetch (``f:pts`` once updatedb has moved the
    fetch time on, ``f:ts`` before), with the stored server address when there is one."""
    from nutchy.core.status import Mark, Metadata, ProtocolStatusCode

    out.mkdir(parents=True, exist_ok=True)
    files = WarcFiles(out, prefix=prefix, max_size=max_size, gzip_level=gzip_level)
    fields = (
        "content",
        "headers",
        "protocol_status",
        "fetch_time",
        "prev_fetch_time",
        "markers",
        "metadata",
    )
    if batch_id is None:
        pages: Iterator[WebPage] = table.scan(fields, skip_errors=True)
    else:  # fetched and not updated yet, then updated
        pages = itertools.chain(
            table.scan(fields, marker=(Mark.FETCH, batch_id), skip_errors=True),
            table.scan(fields, marker=(Mark.UPDATEDB, batch_id), skip_errors=True),
        )
    try:
        for page in pages:
            if not page.content or page.protocol_status is None:
                continue
            if page.protocol_status.code != ProtocolStatusCode.SUCCESS:
                continue  # only an answer 200 is known with its status code
            updated = Mark.UPDATEDB in page.markers
            when = page.prev_fetch_time if updated and page.prev_fetch_time else page.fetch_time
            address = page.metadata.get(Metadata.IP)
            files.write(
                Capture(
                    url=page.url,
                    date=warc_date(when),
                    status=200,
                    headers=sorted(page.headers.items()),
                    payload=page.content,
                    ip=address.decode("utf-8", "replace") if address else None,
                    truncated=page.metadata.get("truncated-content") == b"true",
                )
            )
            if progress is not None:
                progress()
    finally:
        files.close()
    return ExportResult(files.captures, files.files)
