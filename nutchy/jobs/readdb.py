"""The readdb job: what the web table holds.

Every function here streams the table with the fewest fields it needs, so memory does not grow
with the number of rows: :func:`table_stats` keeps counters (one per status, batch and host),
:func:`top_scored` a heap of *n* rows, and :func:`dump` writes each row as it reads it.

With *tasks* (``-numTasks K``), each scans the table range by range in *K* processes
(:mod:`nutchy.jobs._regions`) and merges what the ranges give: the counters added up, the best
rows of each range ranked again, the dump of each range appended in key order.
"""

from __future__ import annotations

import base64
import csv
import datetime
import glob
import heapq
import json
import math
import os
import re
import shutil
import struct
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from nutchy.core.fetch import TRUNCATED_KEY
from nutchy.core.generate import GENERATE_TIME_KEY, PARTITION_KEY
from nutchy.core.status import CrawlStatus, Mark, Metadata, crawl_status_name
from nutchy.core.urls import InvalidURL, normalize_url, reverse_url, reversed_host, unreverse_host
from nutchy.core.webpage import ALL_FIELDS, MAP_FIELDS, WebPage
from nutchy.exceptions import NutchError
from nutchy.jobs._regions import Tasks, run

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from nutchy.progress import Progress
    from nutchy.store.table import WebTable

__all__ = [
    "DUMP_FORMATS",
    "TableStats",
    "dump",
    "page_lines",
    "page_record",
    "parse_status_filter",
    "read_page",
    "table_stats",
    "top_scored",
]

DUMP_FORMATS: Final = ("jsonl", "csv")
_STATS_FIELDS: Final = ("status", "score", "fetch_time", "fetch_interval", "markers", "metadata")
_TOP_FIELDS: Final = ("score", "fetch_time")
#: Fields dumped by default: everything but the raw content and the parsed text, which are most
#: of a table's bytes (``-content`` and ``-text`` add them).
_DUMP_FIELDS: Final = tuple(f for f in ALL_FIELDS if f not in ("content", "text"))
#: ``mtdt`` keys whose bytes are numbers, with their struct format.
_NUMERIC_METADATA: Final = {
    Metadata.CASH: ">f",
    Metadata.RESPONSE_TIME: ">i",
    GENERATE_TIME_KEY: ">q",
    PARTITION_KEY: ">i",
}
_CSV_COLUMNS: Final = (
    "url",
    "key",
    "status",
    "status_name",
    "fetch_time",
    "prev_fetch_time",
    "fetch_interval",
    "retries_since_fetch",
    "score",
    "modified_time",
    "prev_modified_time",
    "batch_id",
    "base_url",
    "repr_url",
    "content_type",
    "protocol_status",
    "parse_status",
    "title",
    "signature",
    "prev_signature",
    "stm_priority",
    "inlinks",
    "outlinks",
    "markers",
    "metadata",
)


class ReadDbError(NutchError):
    """readdb was asked something it cannot do: an unknown status, a bad regular expression,
    a dump file that exists already."""


@dataclass(slots=True)
class _Summary:
    """Minimum, maximum and sum of a series of numbers."""

    count: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.low = min(self.low, value)
        self.high = max(self.high, value)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def merge(self, other: _Summary) -> None:
        """Add the numbers *other* summarizes."""
        self.count += other.count
        self.total += other.total
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)


@dataclass(slots=True)
class TableStats:
    """Counts over the whole table.

    *by_status* counts rows per crawl status; *score* and *fetch_interval* summarize those
    fields; *due* counts rows due at the time given; *batches* counts rows per generate mark
    (batches generated and not yet through updatedb); *hosts* counts rows per host, exactly.
    """

    rows: int = 0
    by_status: Counter[int] = field(default_factory=Counter)
    score: _Summary = field(default_factory=_Summary)
    fetch_interval: _Summary = field(default_factory=_Summary)
    fetch_time: _Summary = field(default_factory=_Summary)
    due: int = 0
    batches: Counter[str] = field(default_factory=Counter)
    hosts: Counter[str] = field(default_factory=Counter)
    undecodable: int = 0
    #: rows whose last fetch was cut at the content limit, and whose last parse left links
    #: unread at ``db.max.outlinks.per.page``
    truncated: int = 0
    outlinks_cut: int = 0

    def merge(self, other: TableStats) -> None:
        """Add the counts of *other* (another key range of the table)."""
        self.rows += other.rows
        self.by_status.update(other.by_status)
        self.score.merge(other.score)
        self.fetch_interval.merge(other.fetch_interval)
        self.fetch_time.merge(other.fetch_time)
        self.due += other.due
        self.batches.update(other.batches)
        self.hosts.update(other.hosts)
        self.undecodable += other.undecodable
        self.truncated += other.truncated
        self.outlinks_cut += other.outlinks_cut

    def to_dict(self, top_hosts: int = 10) -> dict[str, Any]:
        """The statistics as plain JSON values (``nutchy readdb -stats -json``): counts by crawl
        status name, intervals in seconds, times in ms since the epoch, the *top_hosts* hosts
        with most rows."""
        some = self.rows > 0
        return {
            "rows": self.rows,
            "by_status": {
                crawl_status_name(code): count for code, count in sorted(self.by_status.items())
            },
            "due": self.due,
            "score": _summary_dict(self.score, some),
            "fetch_interval": _summary_dict(self.fetch_interval, some),
            "fetch_time": _summary_dict(self.fetch_time, some),
            "batches": dict(sorted(self.batches.items())),
            "hosts": len(self.hosts),
            "top_hosts": dict(_top(self.hosts, top_hosts)),
            "undecodable": self.undecodable,
        }

    def lines(self, top_hosts: int = 10) -> list[str]:
        """The statistics as text, in the spirit of Nutch's ``readdb -stats``."""
        out = [f"TOTAL urls:\t{self.rows}"]
        for code, count in sorted(self.by_status.items()):
            out.append(f"status {code} ({crawl_status_name(code)}):\t{count}")
        if self.rows:
            out += [
                f"min score:\t{self.score.low:.6g}",
                f"avg score:\t{self.score.mean:.6g}",
                f"max score:\t{self.score.high:.6g}",
                f"shortest fetch interval:\t{_duration(self.fetch_interval.low)}",
                f"avg fetch interval:\t{_duration(self.fetch_interval.mean)}",
                f"longest fetch interval:\t{_duration(self.fetch_interval.high)}",
                f"earliest fetch time:\t{_when(int(self.fetch_time.low))}",
                f"latest fetch time:\t{_when(int(self.fetch_time.high))}",
                f"due now:\t{self.due}",
            ]
        for batch, count in sorted(self.batches.items()):
            out.append(f"generated, batch {batch}:\t{count}")
        if self.hosts:
            out.append(f"hosts:\t{len(self.hosts)}")
            for host, count in _top(self.hosts, top_hosts):
                out.append(f"  {host}:\t{count}")
        if self.truncated:
            out.append(f"truncated at the content limit:\t{self.truncated}")
        if self.outlinks_cut:
            out.append(f"outlinks cut (db.max.outlinks.per.page):\t{self.outlinks_cut}")
        if self.undecodable:
            out.append(f"rows skipped (a cell did not decode):\t{self.undecodable}")
        return out


def _summary_dict(summary: _Summary, some: bool) -> dict[str, float | None]:
    if not some:
        return {"min": None, "mean": None, "max": None}
    return {"min": summary.low, "mean": summary.mean, "max": summary.high}


def _top(counter: Counter[str], n: int) -> list[tuple[str, int]]:
    """The *n* largest counts, ties by name."""
    return heapq.nsmallest(n, counter.items(), key=lambda item: (-item[1], item[0]))


def table_stats(
    table: WebTable,
    *,
    now: int,
    progress: Progress | None = None,
    tasks: Tasks | None = None,
) -> TableStats:
    """Statistics of the whole table, in one streaming scan (one per key range with *tasks*)."""
    parts = run(
        table,
        tasks or Tasks(),
        partial(_range_stats, now=now),
        local=partial(_range_stats, now=now, progress=progress),
        on_result=None if progress is None else lambda part: progress.advance(part.rows),
    )
    stats = parts[0]
    for part in parts[1:]:
        stats.merge(part)
    return stats


def _range_stats(
    table: WebTable,
    settings: BaseSettings,
    start: bytes,
    stop: bytes | None,
    *,
    now: int,
    progress: Progress | None = None,
) -> TableStats:
    """Statistics of the rows from *start* to *stop*."""
    stats = TableStats()
    skipped_before = table.skipped
    host_of_key: dict[str, str] = {}
    for page in table.scan(_STATS_FIELDS, start=start, stop=stop, skip_errors=True):
        stats.rows += 1
        stats.by_status[page.status] += 1
        stats.score.add(page.score)
        stats.fetch_interval.add(page.fetch_interval)
        stats.fetch_time.add(page.fetch_time)
        if page.fetch_time <= now:
            stats.due += 1
        mark = page.markers.get(Mark.GENERATE)
        if mark is not None:
            stats.batches[mark] += 1
        metadata = page.metadata
        if metadata.get(TRUNCATED_KEY) == b"true":
            stats.truncated += 1
        if Metadata.OUTLINKS_CUT in metadata:
            stats.outlinks_cut += 1
        try:
            reversed_name = reversed_host(page.key)
        except InvalidURL:
            reversed_name = page.key
        host = host_of_key.get(reversed_name)
        if host is None:
            host = host_of_key[reversed_name] = unreverse_host(reversed_name) or "(no host)"
        stats.hosts[host] += 1
        if progress is not None:
            progress.advance()
    stats.undecodable = table.skipped - skipped_before
    return stats


def read_page(table: WebTable, url: str) -> WebPage | None:
    """The whole row of *url*, normalized first as inject normalizes it; ``None`` if missing.

    A URL that does not normalize is looked up as it is written (a row written by another tool
    may have such a key); one that cannot even be reversed raises :class:`ReadDbError`.
    """
    try:
        key = reverse_url(normalize_url(url))
    except InvalidURL:
        try:
            key = reverse_url(url)
        except InvalidURL as exc:
            raise ReadDbError(f"cannot look up {url!r}: {exc.reason}") from None
    return table.get_key(key)


def top_scored(
    table: WebTable, n: int, *, progress: Progress | None = None, tasks: Tasks | None = None
) -> list[tuple[float, str]]:
    """The *n* rows with the highest score, best first (ties by URL), as ``(score, url)``."""
    if n < 1:
        raise ValueError(f"'n' must be >= 1, got {n!r}")
    parts = run(
        table,
        tasks or Tasks(),
        partial(_range_top, n=n),
        local=partial(_range_top, n=n, progress=progress),
    )
    return heapq.nsmallest(n, (row for part in parts for row in part), key=_by_score)


def _by_score(row: tuple[float, str]) -> tuple[float, str]:
    return -row[0], row[1]


def _range_top(
    table: WebTable,
    settings: BaseSettings,
    start: bytes,
    stop: bytes | None,
    *,
    n: int,
    progress: Progress | None = None,
) -> list[tuple[float, str]]:
    """The *n* best rows from *start* to *stop*, as :func:`top_scored` gives them."""

    def rows() -> Iterator[tuple[float, str]]:
        for page in table.scan(_TOP_FIELDS, start=start, stop=stop, skip_errors=True):
            if progress is not None:
                progress.advance()
            yield page.score, page.url

    return heapq.nsmallest(n, rows(), key=_by_score)


def parse_status_filter(text: str) -> int:
    """The crawl status a ``-status`` argument names: a number (``2``, ``0x22``) or a name
    (``fetched``, ``status_fetched``, ``FETCHED``).

    >>> parse_status_filter("fetched"), parse_status_filter("status_retry"), parse_status_filter("0x26")
    (2, 34, 38)
    """
    name = text.strip().lower()
    try:
        return int(name, 0)
    except ValueError:
        pass
    name = name.removeprefix("status_")
    try:
        return int(CrawlStatus[name.upper()])
    except KeyError:
        known = ", ".join(s.name.lower() for s in CrawlStatus)
        raise ReadDbError(f"unknown status {text!r}; use a number or one of: {known}") from None


def page_record(page: WebPage) -> dict[str, Any]:
    """The row as JSON-ready values: times in ms, status names beside codes, binary values in
    hex (signatures) or base64 (content), ``mtdt`` numbers decoded."""
    record: dict[str, Any] = {"url": _url(page), "key": page.key}
    for name in ALL_FIELDS:
        if name not in page.loaded:
            continue
        value = getattr(page, name)
        if name == "status":
            record["status"] = value
            record["status_name"] = crawl_status_name(value)
        elif name == "protocol_status":
            record[name] = (
                None
                if value is None
                else {
                    "code": value.code,
                    "name": value.name,
                    "args": list(value.args),
                }
            )
        elif name == "parse_status":
            record[name] = (
                None
                if value is None
                else {
                    "major": value.major,
                    "minor": value.minor,
                    "args": list(value.args),
                }
            )
        elif name in ("signature", "prev_signature"):
            record[name] = None if value is None else value.hex()
        elif name == "content":
            record["content_base64"] = None if value is None else base64.b64encode(value).decode()
        elif name == "metadata":
            record[name] = {key: _metadata_value(key, raw) for key, raw in sorted(value.items())}
        elif name in MAP_FIELDS:
            record[name] = dict(sorted(value.items()))
        else:
            record[name] = value
    return record


def _metadata_value(key: str, raw: bytes) -> Any:
    fmt = _NUMERIC_METADATA.get(key)
    if fmt is not None and len(raw) == struct.calcsize(fmt):
        return struct.unpack(fmt, raw)[0]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode()}


#: Characters a terminal acts on or a reader cannot see, shown escaped (``\x1b``): the C0 and
#: C1 controls, DEL, the line and paragraph separators, and the bidirectional overrides and
#: isolates (which reorder what follows them on the screen).
_UNPRINTABLE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    r"""*text* with the characters that a terminal would act on escaped as Python does, so that
    a value a page or server chose (a title, a header) cannot clear the screen or forge lines.

    >>> print(printable("Title\x1b[2J\r\nX-Forged: 1\u202e"))
    Title\x1b[2J\r\nX-Forged: 1\u202e
    """
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


def page_lines(page: WebPage) -> list[str]:
    """Every field of the row, decoded, one ``name:<TAB>value`` line each (map entries indented
    below their map); control characters in values and keys are escaped (:func:`printable`)."""
    record = page_record(page)
    out = [f"url:\t{_shown(record.pop('url'))}", f"key:\t{_shown(record.pop('key'))}"]
    status_name = record.pop("status_name", None)
    for name, value in record.items():
        if name == "status":
            out.append(f"status:\t{value} ({status_name})")
        elif name in ("fetch_time", "prev_fetch_time", "modified_time", "prev_modified_time"):
            out.append(f"{name}:\t{value} ({_when(value)})" if value else f"{name}:\t0")
        elif name == "fetch_interval":
            out.append(f"{name}:\t{value} ({value / 86400:.2f} days)")
        elif name == "content_base64":
            size = "null" if page.content is None else f"{len(page.content)} bytes"
            out.append(f"content:\t{size}")
        elif name in ("protocol_status", "parse_status") and value is not None:
            out.append(f"{name}:\t{printable(json.dumps(value, ensure_ascii=False))}")
        elif isinstance(value, dict):
            out.append(f"{name}:\t{len(value)} entries")
            out += [f"\t{printable(key)}:\t{_shown(entry)}" for key, entry in value.items()]
        else:
            out.append(f"{name}:\t{_shown(value)}")
    return out


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return printable(json.dumps(value, ensure_ascii=False))
    return printable(str(value))


def dump(
    table: WebTable,
    directory: str | os.PathLike[str],
    *,
    fmt: str = "jsonl",
    status: int | None = None,
    regex: str | None = None,
    content: bool = False,
    text: bool = False,
    progress: Progress | None = None,
    tasks: Tasks | None = None,
) -> tuple[Path, int]:
    """Write the rows of *table* to ``<directory>/<table name>.<fmt>``; return the file and the
    number of rows written.

    *fmt* is ``jsonl`` (one JSON object per row, every field; see :func:`page_record`) or
    ``csv`` (one line per row, scalar fields, with the maps as counts or JSON). *status* keeps
    the rows of one crawl status and *regex* the rows whose URL it matches (``re.search``).
    *content* and *text* add the raw content (base64) and the parsed text. The file is written
    under a temporary name and renamed when complete; an existing file is never overwritten.
    With *tasks*, each key range is written to a file of its own beside it, and the parts are
    appended in key order: the file is the same.
    """
    if fmt not in DUMP_FORMATS:
        raise ReadDbError(f"unknown dump format {fmt!r}; use one of: {', '.join(DUMP_FORMATS)}")
    try:
        pattern = None if regex is None else re.compile(regex)
    except re.error as exc:
        raise ReadDbError(f"invalid regular expression {regex!r}: {exc}") from None
    out_dir = Path(directory)
    target = out_dir / f"{table.name}.{fmt}"
    if target.exists():
        raise ReadDbError(f"{target} exists already; remove it or dump to another directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReadDbError(f"cannot create {out_dir}: {exc.strerror or exc}") from None
    partial_file = out_dir / f".{target.name}.partial"
    extra = (("text",) if text else ()) + (("content_base64",) if content else ())
    spec = _DumpSpec(
        fmt,
        _DUMP_FIELDS + (("content",) if content else ()) + (("text",) if text else ()),
        _CSV_COLUMNS + extra,
        status,
        pattern,
        str(partial_file),
    )
    with partial_file.open("w", encoding="utf-8", newline="") as stream:
        if fmt == "csv":
            csv.writer(stream).writerow(spec.columns)
        try:
            parts = run(
                table,
                tasks or Tasks(),
                partial(_dump_range, spec=spec),
                local=partial(_dump_range, spec=spec, stream=stream, progress=progress),
                on_result=None if progress is None else lambda part: progress.advance(part[2]),
            )
            count = 0
            for part, written, _ in parts:
                count += written
                if part is not None:
                    with Path(part).open(encoding="utf-8", newline="") as piece:
                        shutil.copyfileobj(piece, stream)
        finally:
            for leftover in out_dir.glob(glob.escape(partial_file.name) + ".*"):
                leftover.unlink(missing_ok=True)
    partial_file.replace(target)
    return target, count


@dataclass(frozen=True, slots=True)
class _DumpSpec:
    """What :func:`dump` writes of each row, and where the parts of its key ranges go."""

    fmt: str
    fields: tuple[str, ...]
    columns: tuple[str, ...]
    status: int | None
    pattern: re.Pattern[str] | None
    partial: str


def _dump_range(
    table: WebTable,
    settings: BaseSettings,
    start: bytes,
    stop: bytes | None,
    *,
    spec: _DumpSpec,
    stream: TextIO | None = None,
    progress: Progress | None = None,
) -> tuple[str | None, int, int]:
    """Write the rows from *start* to *stop* to *stream*, or without one to a part file of
    their own beside the dump; return the part file (``None`` for *stream*), the rows written
    and the rows read."""
    part = None
    if stream is None:
        handle, part = tempfile.mkstemp(
            prefix=Path(spec.partial).name + ".", dir=Path(spec.partial).parent
        )
        stream = open(handle, "w", encoding="utf-8", newline="")  # noqa: SIM115
    count = read = 0
    try:
        write = _jsonl_writer(stream) if spec.fmt == "jsonl" else _csv_writer(stream, spec.columns)
        for page in table.scan(spec.fields, start=start, stop=stop, skip_errors=True):
            read += 1
            if progress is not None:
                progress.advance()
            if spec.status is not None and page.status != spec.status:
                continue
            if spec.pattern is not None and spec.pattern.search(_url(page)) is None:
                continue
            write(page_record(page))
            count += 1
    except BaseException:
        if part is not None:
            stream.close()
            Path(part).unlink(missing_ok=True)
        raise
    if part is not None:
        stream.close()
    return part, count, read


def _jsonl_writer(stream: TextIO) -> Callable[[dict[str, Any]], None]:
    def write(record: dict[str, Any]) -> None:
        stream.write(json.dumps(record, ensure_ascii=False))
        stream.write("\n")

    return write


def _csv_writer(stream: TextIO, columns: tuple[str, ...]) -> Callable[[dict[str, Any]], None]:
    """A writer of records as CSV lines of *columns* (the header is written by :func:`dump`)."""
    writer = csv.writer(stream)

    def write(record: dict[str, Any]) -> None:
        row = []
        for column in columns:
            value = record.get(column)
            if column in ("inlinks", "outlinks"):
                value = len(value or {})
            elif column == "protocol_status" and value is not None:
                value = value["name"]
            elif column == "parse_status" and value is not None:
                value = f"{value['major']}/{value['minor']}"
            elif column in ("markers", "metadata"):
                value = json.dumps(value or {}, ensure_ascii=False, sort_keys=True)
            row.append("" if value is None else printable(str(value)))
        writer.writerow(row)

    return write


def _url(page: WebPage) -> str:
    try:
        return page.url
    except InvalidURL:
        return page.key


def _when(ms: int) -> str:
    """A time in ms as ISO 8601 UTC."""
    try:
        moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _duration(seconds: float) -> str:
    """Seconds as seconds and days."""
    return f"{seconds:.0f} s ({seconds / 86400:.2f} days)"
