"""The ``nutchy`` command: Nutch's verbs on the web table.

Each subcommand builds the settings (nutchy's defaults, the Scrapy project's settings when run
inside a project, then ``-s NAME=VALUE`` and ``-crawlId``), opens the table, calls one job, prints a
summary and returns an exit code. None of them starts the Twisted reactor.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import secrets
import sys
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from nutchy import __version__
from nutchy._checks import check_settings
from nutchy.config import load_settings
from nutchy.core.generate import new_batch_id
from nutchy.core.inject import InjectMode
from nutchy.core.status import Mark
from nutchy.exceptions import NutchError, UnknownBatch
from nutchy.index.commands import run_index, run_search
from nutchy.jobs._batches import require_batch
from nutchy.jobs._cycle import parse_config, signature, update_config
from nutchy.jobs._regions import Tasks, key_text, table_splits
from nutchy.jobs._settings import get_bool, get_float, get_int
from nutchy.jobs.crawl import QUIET_CHILD, SITEMAP_FREQUENCIES, SitemapOptions, crawl
from nutchy.jobs.generate import GenerateOptions, GenerateResult, generate
from nutchy.jobs.history import history_path, read_history
from nutchy.jobs.hostdb import HEADER as HOSTDB_HEADER
from nutchy.jobs.hostdb import (
    describe_update,
    host_line,
    host_record,
    read_hosts,
    update_hostdb_of,
)
from nutchy.jobs.inject import InjectOptions, SeedPathError, inject, seed_files
from nutchy.jobs.parse import parse_batch
from nutchy.jobs.plot import plot_crawl, table_values
from nutchy.jobs.readdb import (
    DUMP_FORMATS,
    dump,
    page_lines,
    parse_status_filter,
    read_page,
    table_stats,
    top_scored,
)
from nutchy.jobs.updatedb import updatedb
from nutchy.progress import Progress
from nutchy.store import open_host_store, open_table

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)


class _Parser(argparse.ArgumentParser):
    """argparse with Nutch's single-dash long options (``-topN``, ``-crawlId``)."""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-crawlId",
        "--crawl-id",
        dest="crawl_id",
        help="prefix of the table name (NUTCH_STORAGE_CRAWL_ID): <crawlId>_webpage",
    )
    parser.add_argument(
        "-s",
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a setting, as Scrapy's -s does (may be repeated)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="nutchy", description="The Nutch 2.x crawl cycle on a web table.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    parser.add_argument("--version", action="version", version=f"nutchy {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    storage = commands.add_parser("storage", help="create, inspect or drop the web table")
    storage_commands = storage.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in (
        ("init", "create the table if it is missing (safe to repeat)"),
        ("info", "say which store and table the settings name, and whether it exists"),
        ("drop", "delete the table and everything in it (needs --confirm)"),
        ("splits", "print the table's key ranges, one START<TAB>STOP line each, for -range"),
        ("check", "read every page of the embedded store's file (SQLite's quick check)"),
    ):
        sub = storage_commands.add_parser(name, help=text, description=text)
        _common(sub)
        sub.set_defaults(parser=sub)
        if name == "drop":
            sub.add_argument(
                "--confirm",
                action="store_true",
                help="really delete the table; without it nothing is deleted",
            )
        if name == "splits":
            sub.add_argument(
                "-numTasks",
                dest="num_tasks",
                type=_positive_int,
                metavar="K",
                help="at most K ranges of about as many regions each (default: every region)",
            )
        sub.set_defaults(run=_storage)

    inject = _subcommand(
        commands,
        "inject",
        "add seed URLs to the web table",
        "Read seed URLs (Nutch's seed line format) from a file or from the files of a directory,"
        " normalize and filter them, and add them to the web table, creating it if needed."
        " URLs already in the table are kept as they are unless -overwrite or -update says"
        " otherwise. Exit code 0 when seeds were read, 1 when nothing could be read.",
    )
    add_inject_arguments(inject)
    inject.set_defaults(run=_inject)

    generate = _subcommand(
        commands,
        "generate",
        "select the next batch of URLs to fetch",
        "Select due URLs by score (at most -topN, and at most NUTCH_GENERATE_MAX_COUNT per host"
        " or domain), mark them with a batch id and print the batch id. Exit code 0 when URLs"
        " were selected, 1 when none were (as Nutch's, so scripts can loop on it).",
    )
    generate.add_argument(
        "-topN",
        dest="top_n",
        type=_positive_int,
        metavar="N",
        help="select at most N URLs (default: no limit)",
    )
    generate.add_argument(
        "-batchId",
        dest="batch_id",
        type=_batch_id,
        metavar="ID",
        help="the batch id to write (default: <epoch seconds>-<random number>)",
    )
    generate.add_argument(
        "-numFetchers",
        dest="num_fetchers",
        type=_positive_int,
        default=1,
        metavar="K",
        help="split the batch into K partitions by host, domain or IP"
        " (NUTCH_PARTITION_URL_MODE; default 1)",
    )
    generate.add_argument(
        "-adddays",
        dest="add_days",
        type=int,
        default=0,
        metavar="D",
        help="select URLs due D days from now (default 0)",
    )
    _no_filter(generate, "do not apply the URL filter (NUTCH_GENERATE_FILTER)")
    generate.add_argument(
        "-noNorm",
        dest="normalize",
        action="store_false",
        help="do not skip URLs that are not normalized (NUTCH_GENERATE_NORMALISE)",
    )
    _num_tasks(generate, "read and select the due rows: ")
    generate.set_defaults(run=_generate)

    readdb = _subcommand(
        commands,
        "readdb",
        "show what the web table holds",
        "Print statistics of the table (-stats), one row (-url), the best-scored URLs (-topN),"
        " or dump rows to a file (-dump).",
    )
    action = readdb.add_mutually_exclusive_group(required=True)
    action.add_argument("-stats", action="store_true", help="print statistics of the table")
    action.add_argument("-url", metavar="URL", help="print every field of the row of URL")
    action.add_argument("-dump", metavar="DIR", help="write the rows to DIR/<table>.<format>")
    action.add_argument(
        "-topN",
        dest="top_n",
        type=_positive_int,
        metavar="N",
        help="print the N URLs with the highest score",
    )
    readdb.add_argument(
        "-topHosts",
        dest="top_hosts",
        type=_positive_int,
        default=10,
        metavar="N",
        help="with -stats: how many of the hosts with most rows to list (default 10)",
    )
    readdb.add_argument(
        "-format",
        dest="fmt",
        choices=DUMP_FORMATS,
        default="jsonl",
        help="with -dump: jsonl (every field, default) or csv (scalar fields)",
    )
    readdb.add_argument(
        "-status",
        metavar="S",
        help="with -dump: only rows of this status (a name such as fetched, or a number)",
    )
    readdb.add_argument(
        "-regex", metavar="R", help="with -dump: only rows whose URL matches R (re.search)"
    )
    readdb.add_argument(
        "-content", action="store_true", help="with -dump: add the raw content (base64)"
    )
    readdb.add_argument("-text", action="store_true", help="with -dump: add the parsed text")
    readdb.add_argument(
        "-json", action="store_true", help="with -stats: print the statistics as one JSON object"
    )
    _num_tasks(readdb, "with -stats, -dump and -topN: ", key_range=True)
    readdb.set_defaults(run=_readdb)

    updatehostdb = _subcommand(
        commands,
        "updatehostdb",
        "update the host database from the web table",
        "Read the web table once and write each host's rows by status, fetches, errors, 404s,"
        " robots.txt denials, mean response time and last fetch to the host table"
        " (docs/hostdb.md).",
    )
    updatehostdb.set_defaults(run=_updatehostdb)
    readhostdb = _subcommand(
        commands, "readhostdb", "show the host database", "Print the host table, one host a line."
    )
    readhostdb.add_argument("-host", metavar="HOST", help="only this host")
    readhostdb.add_argument("-json", action="store_true", help="one JSON object per host")
    readhostdb.set_defaults(run=_readhostdb)

    parse = _subcommand(
        commands,
        "parse",
        "parse the fetched pages of a batch",
        "Parse the pages a fetch of batch ID stored (or of every batch with -all): title, text,"
        " outlinks, signature and parse status. Safe to run again.",
    )
    _batch_or_all(parse)
    parse.add_argument(
        "-resume", action="store_true", help="leave pages already parsed in this batch alone"
    )
    _num_tasks(parse, key_range=True)
    parse.set_defaults(run=_parse)

    update = _subcommand(
        commands,
        "updatedb",
        "fold a fetched batch back into the web table",
        "Apply the outcomes of batch ID (or of every generated batch with -all): status"
        " transitions, next fetch times, scores, inlinks and new rows for new outlinks. Safe to"
        " run again.",
    )
    _batch_or_all(update)
    _num_tasks(update, "read the pages of the batch: ")
    update.set_defaults(run=_updatedb)

    dedup = _subcommand(
        commands,
        "dedup",
        "mark the pages whose content another page has too as duplicates",
        "Group the fetched pages by signature (within a host or domain with -group): in each"
        " group one page is kept, chosen by -compareOrder, and the others get the DUPLICATE"
        " status, which index leaves out and clean deletes from the index. A duplicate that is"
        " the one to keep now becomes FETCHED again. One streaming pass; safe to run again.",
    )
    dedup.add_argument(
        "-compareOrder",
        dest="compare_order",
        metavar="ORDER",
        help="which page of a group is kept: score,urlLength,fetchTime[,httpsOverHttp] in the"
        " order they decide (NUTCH_DEDUPLICATION_COMPARE_ORDER)",
    )
    dedup.add_argument(
        "-group",
        choices=("none", "host", "domain"),
        help="compare pages only within one host or domain (NUTCH_DEDUPLICATION_GROUP_MODE)",
    )
    dedup.set_defaults(run=_dedup)

    clean = _subcommand(
        commands,
        "clean",
        "delete gone, redirected and duplicate pages from every index writer's index",
        "Read the whole table and delete every page that is gone (404, 410, denied), redirected"
        " (at fetch or by a meta refresh) or a duplicate (nutchy dedup) from each index writer of"
        " NUTCH_INDEX_WRITERS, then commit. Safe to run again.",
    )
    clean.add_argument(
        "-noCommit",
        dest="commit",
        action="store_false",
        help="send the deletions but do not ask the writers to commit them",
    )
    clean.set_defaults(run=_clean)

    fetch = _subcommand(
        commands,
        "fetch",
        "fetch the URLs of a generated batch (scrapy crawl nutch -a batch=ID)",
        "Fetch the URLs generate put in batch ID (or every generated URL with -all): the nutch"
        " spider's crawl, as 'scrapy crawl nutch -a batch=ID' runs it, with the Scrapy project's"
        " settings when run inside one, then -s NAME=VALUE and -crawlId. Exit code 0 when the"
        " batch was fetched, 1 when the fetch could not start (an unknown batch, no table, a bad"
        " setting), could not read or write the table, or was stopped by a signal.",
    )
    _batch_or_all(fetch)
    fetch.add_argument(
        "-resume",
        action="store_true",
        help="leave the URLs of the batch that were fetched already (-a resume=true)",
    )
    fetch.set_defaults(run=_fetch)

    crawl = _subcommand(
        commands,
        "crawl",
        "inject, then rounds of generate, fetch, parse and updatedb",
        "Nutch's bin/crawl: inject SEEDS once, then run rounds until -rounds are done, generate"
        " selects nothing, or a file named STOP appears in the crawl directory (NUTCH_CRAWL_DIR);"
        " the round under way always finishes.",
    )
    crawl.add_argument("seeds", metavar="SEEDS", help="a seed file, or a directory of seed files")
    crawl.add_argument(
        "-rounds",
        type=_positive_int,
        default=1,
        metavar="N",
        help="at most N rounds (default 1)",
    )
    crawl.add_argument(
        "-topN",
        dest="top_n",
        type=_positive_int,
        metavar="M",
        help="fetch at most M URLs per round (default: every due URL)",
    )
    crawl.add_argument(
        "-adddays",
        dest="add_days",
        type=int,
        default=0,
        metavar="D",
        help="each round, select URLs due D days from now, as generate -adddays (default 0)",
    )
    crawl.add_argument(
        "-numFetchers",
        dest="num_fetchers",
        type=_positive_int,
        default=1,
        metavar="K",
        help="fetch each round in K processes at once, each host in one of them, as generate"
        " -numFetchers K (default 1)",
    )
    crawl.add_argument(
        "-sitemaps",
        dest="sitemap_urls",
        metavar="FILE",
        help="before the first generate, read these sitemaps, as nutchy sitemap -sitemapUrls:"
        " a file of sitemap URLs, one a line (or URLs separated by commas)",
    )
    crawl.add_argument(
        "-sitemapsFromHostdb",
        dest="sitemaps_from_hosts",
        choices=SITEMAP_FREQUENCIES,
        default="never",
        help="read the sitemaps of every host of the table, as nutchy sitemap -robots: never"
        " (default), once (before the first generate) or always (before every generate)",
    )
    crawl.set_defaults(run=_crawl)

    plot = _subcommand(
        commands,
        "plot",
        "draw the crawl's rounds and the table into an image (matplotlib)",
        "Draw the rows by status over the rounds and the pages/s of each round (from the"
        " history nutchy crawl keeps in the crawl directory), and the fetch interval and score"
        " distributions of the table, into FILE (.png, .svg or .pdf). Needs nutchy[plot].",
    )
    plot.add_argument("-out", required=True, type=Path, metavar="FILE", help="the image to write")
    plot.set_defaults(run=_plot)

    sitemap = _subcommand(
        commands,
        "sitemap",
        "add the URLs of sitemaps to the web table",
        "Read sitemaps (and sitemap indexes, gzipped or not) and inject the URLs they list, with"
        " their lastmod, changefreq and priority; URLs already in the table get the new interval"
        " and priority, and are made due when the sitemap says they changed since their fetch."
        " Exit code 0 when a sitemap was read, 1 when none could be.",
    )
    sitemap.add_argument(
        "-sitemapUrls",
        dest="sitemap_urls",
        metavar="FILE",
        help="a file of sitemap URLs, one a line (or URLs separated by commas)",
    )
    sitemap.add_argument(
        "-robots",
        action="store_true",
        help="the sitemaps that the robots.txt of every host of the table names"
        " (/sitemap.xml when it names none)",
    )
    sitemap.add_argument(
        "-noStrict",
        dest="strict",
        action="store_false",
        help="also take URLs that a sitemap may not list (another host, outside its folder)",
    )
    _no_filter(sitemap)
    sitemap.add_argument(
        "-noNorm", dest="normalize", action="store_false", help="do not normalize the URLs"
    )
    sitemap.set_defaults(run=_sitemap)

    freegen = _subcommand(
        commands,
        "freegen",
        "make a batch of the URLs of a seed file, due or not",
        "Inject the URLs of a seed file (or a directory of them) that the table does not hold,"
        " then mark every one with a new batch id, whatever its schedule (Nutch 1.x's"
        " freegen), and print the batch id for nutchy fetch / scrapy crawl nutch -a batch=."
        " Rows already in another batch are left to it. Exit code 0 when URLs were marked.",
    )
    freegen.add_argument("seeds", metavar="URLS", help="a seed file, or a directory of them")
    _no_filter(freegen)
    freegen.set_defaults(run=_freegen)

    for name, text in (
        ("parsechecker", "fetch and parse one URL as the crawl would, and show the result"),
        ("indexchecker", "show the document the index would get of one URL, fetched now"),
    ):
        checker = _subcommand(
            commands,
            name,
            text,
            text[0].upper() + text[1:] + ": the crawl's settings, robots.txt and URL filter,"
            " in a scratch table (the crawl's table is read, never written). Prints the fetch"
            " status, headers, title, text, outlinks and signature, and what updatedb would set."
            " Exit code 0 when the fetch recorded an outcome, 1 when nothing was fetched.",
        )
        checker.add_argument("url", metavar="URL")
        _no_filter(checker, "fetch the URL even if the URL filter rejects it")
        checker.add_argument(
            "-text", type=int, default=500, metavar="N", help="characters of text shown (500)"
        )
        checker.set_defaults(run=_checker, index=name == "indexchecker")

    index = _subcommand(
        commands,
        "index",
        "index the pages of a batch (or of every batch) into the index writers",
        "Build a document of each page that updatedb updated in batch ID (or of every page with"
        " -all) through NUTCH_INDEXING_FILTERS and write it to every one of NUTCH_INDEX_WRITERS"
        " (the embedded index by default); pages gone, redirected, duplicates or noindex are"
        " deleted from them (docs/index.md).",
    )
    _batch_or_all(index)
    index.add_argument(
        "-rebuild", action="store_true", help="with -all: start every index from empty"
    )
    index.set_defaults(run=_index)

    search = _subcommand(
        commands,
        "search",
        "search the embedded index",
        "Print the best pages of the embedded index (NUTCH_INDEXER_EMBEDDED_PATH) for QUERY:"
        ' words, "a phrase", +must, -not, field:word (title, content, anchor, url, host, type)'
        " (docs/index.md).",
    )
    search.add_argument("query", metavar="QUERY", help="the query")
    search.add_argument(
        "-n", dest="limit", type=_positive_int, default=10, metavar="N", help="N hits (default 10)"
    )
    search.add_argument("-json", action="store_true", help="print the hits as one JSON object")
    search.set_defaults(run=_search)

    warc = _subcommand(
        commands,
        "warc",
        "export the stored pages of a batch to WARC files (warcio)",
        "Write a WARC response record for every row of batch ID (or every row with -all) that"
        " holds content fetched with status 200, from the stored headers and content, into"
        " gzipped WARC files in DIR, a new file every NUTCH_WARC_MAX_SIZE bytes. Needs"
        " nutchy[warc].",
    )
    _batch_or_all(warc)
    warc.add_argument("-out", required=True, type=Path, metavar="DIR", help="the folder to write")
    warc.set_defaults(run=_warc)
    return parser


def _num_tasks(parser: argparse.ArgumentParser, scope: str = "", key_range: bool = False) -> None:
    parser.add_argument(
        "-numTasks",
        dest="num_tasks",
        type=_positive_int,
        default=1,
        metavar="K",
        help=f"{scope}scan the table region by region in K processes at once (default 1)",
    )
    if key_range:
        parser.add_argument(
            "-range",
            dest="key_range",
            nargs=2,
            metavar=("START", "STOP"),
            help=f"{scope}only the rows from key START to key STOP ('' for an open end; as"
            " 'nutchy storage splits' prints them), so several machines can share the table",
        )


def _batch_or_all(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("batch_id", nargs="?", type=_batch_id, metavar="ID", help="the batch id")
    which.add_argument("-all", dest="all", action="store_true", help="every batch")


def _subcommand(
    commands: argparse._SubParsersAction[_Parser],
    name: str,
    summary: str,
    description: str,
) -> argparse.ArgumentParser:
    sub = commands.add_parser(name, help=summary, description=description, allow_abbrev=False)
    _common(sub)
    sub.set_defaults(parser=sub)  # which parser says that an argument is not one of its own
    return sub


def add_inject_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``nutchy inject`` (also used by ``scrapy inject``)."""
    parser.add_argument("seeds", metavar="SEEDS", help="a seed file, or a directory of seed files")
    existing = parser.add_mutually_exclusive_group()
    existing.add_argument(
        "-overwrite",
        dest="mode",
        action="store_const",
        const=InjectMode.OVERWRITE,
        help="reset the schedule, score and batch marks of URLs already in the table",
    )
    existing.add_argument(
        "-update",
        dest="mode",
        action="store_const",
        const=InjectMode.UPDATE,
        help="apply only the seed line's own score, interval and metadata to known URLs",
    )
    parser.set_defaults(mode=InjectMode.KEEP)
    _no_filter(parser)


def _no_filter(
    parser: argparse.ArgumentParser,
    text: str = "do not apply the URL filter (NUTCH_URLFILTER_REGEX_FILE)",
) -> None:
    parser.add_argument("-noFilter", dest="filter_urls", action="store_false", help=text)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _batch_id(text: str) -> str:
    if not text or len(text) > 256 or not text.isprintable() or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(
            f"a batch id is 1 to 256 printable characters without spaces, got {text!r}"
        )
    return text


def _settings(args: argparse.Namespace) -> Any:
    overrides: dict[str, Any] = {}
    for item in args.settings:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise NutchError(f"-s expects NAME=VALUE, got {item!r}")
        overrides[name] = value
    if args.crawl_id is not None:
        overrides["NUTCH_STORAGE_CRAWL_ID"] = args.crawl_id
    return load_settings(overrides)


def _storage(args: argparse.Namespace) -> int:
    settings = _settings(args)
    with open_table(settings) as table:
        if args.action == "splits":
            for start, stop in table_splits(table.store, args.num_tasks):
                print(f"{key_text(start)}\t{key_text(stop or b'')}")
        elif args.action == "init":
            created = table.create()
            print(f"{'Created' if created else 'Found'} table {table.name} in {table.store!r}")
        elif args.action == "check":
            check = getattr(table.store, "check", None)
            if check is None:
                print(f"{table.store!r}: nothing to check (the HBase servers check their files)")
                return 0
            problems = check()
            for problem in problems:
                print(problem)
            if problems:
                return 1
            print(f"{table.store!r}: the file is whole")
        elif args.action == "info":
            state = "exists" if table.exists() else "does not exist (run: nutchy storage init)"
            print(f"{table.store!r}: table {table.name} {state}")
        elif not args.confirm:
            print(
                f"Not dropping table {table.name}: add --confirm to delete it and all its rows",
                file=sys.stderr,
            )
            return 2
        else:
            table.store.drop()
            print(f"Dropped table {table.name} from {table.store!r}")
    return 0


def _now() -> int:
    return int(time.time() * 1000)


def _inject(args: argparse.Namespace) -> int:
    return run_inject(_settings(args), args.seeds, mode=args.mode, filter_urls=args.filter_urls)


def run_inject(
    settings: BaseSettings,
    seeds: str,
    *,
    mode: InjectMode = InjectMode.KEEP,
    filter_urls: bool = True,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Inject *seeds* into the table of *settings*, print a summary; return the exit code.

    This is ``nutchy inject`` and ``scrapy inject``: 0 when seed lines were read (whatever
    became of them), 1 when nothing could be read.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    options = InjectOptions.from_settings(settings, mode=mode, filter_urls=filter_urls)
    try:
        files = seed_files(seeds)
    except SeedPathError as exc:
        print(f"nutchy inject: nothing injected: {exc}", file=err)
        return 1
    with open_table(settings) as table, Progress("inject", unit="lines", total=_size(files)) as bar:
        result = inject(table, files, options, now=_now(), progress=bar)
        name = table.name
    for problem in result.unreadable:
        print(f"nutchy inject: cannot read {problem}", file=err)
    rows = [("lines read", result.lines), *result.outcomes()]
    if result.created_table:
        print(f"Created table {name}: it did not exist yet", file=out)
    print(f"Injected {result.injected} new URLs into table {name}", file=out)
    for label, value in rows:
        print(f"  {label + ':':<15}{value:>10}", file=out)
    for line in result.malformed_lines:
        print(f"  malformed line {line}", file=out)
    if result.malformed > len(result.malformed_lines):
        print(f"  … and {result.malformed - len(result.malformed_lines)} more", file=out)
    if result.lines == 0:
        print("nutchy inject: nothing could be read from the seed files", file=err)
        return 1
    return 0


def _size(files: Sequence[Path]) -> int | None:
    try:
        return sum(f.stat().st_size for f in files)
    except OSError:
        return None


def _generate(args: argparse.Namespace) -> int:
    settings = _settings(args)
    check_settings(settings)  # the fetch's too: a batch it could not fetch would stay marked
    options = GenerateOptions.from_settings(
        settings,
        top_n=args.top_n,
        num_fetchers=args.num_fetchers,
        filter_urls=args.filter_urls,
        normalize=args.normalize,
    )
    now = _now()
    batch_id = args.batch_id or new_batch_id(now, secrets.randbelow(2**31))
    with open_table(settings) as table, Progress("generate: due rows read") as bar:
        result = generate(
            table,
            options,
            now=now,
            batch_id=batch_id,
            add_days=args.add_days,
            progress=bar,
            tasks=Tasks.from_settings(settings, args.num_tasks),
        )
        published = _publish(settings, table, batch_id) if result.selected else None
    print(f"nutchy generate: {_generate_summary(result)}", file=sys.stderr)
    if result.undecodable:
        print(f"nutchy generate: skipped {result.undecodable} undecodable rows", file=sys.stderr)
    if not result.selected:
        print("nutchy generate: 0 URLs selected, no batch written", file=sys.stderr)
        return 1
    parts = ""
    if len(result.partitions) > 1:
        parts = (
            f" in {len(result.partitions)} partitions ({', '.join(map(str, result.partitions))})"
        )
    print(
        f"nutchy generate: batch {batch_id}: {result.selected} URLs selected{parts}",
        file=sys.stderr,
    )
    if published is not None:
        print(f"nutchy generate: {published}", file=sys.stderr)
    print(batch_id)
    return 1 if published is not None and "NOT published" in published else 0


def _publish(settings: Any, table: Any, batch_id: str) -> str | None:
    """With ``NUTCH_FRONTIER = "redis"``, publish the batch to Redis for the workers; say how
    it went (``None``: the frontier is local)."""
    if settings.get("NUTCH_FRONTIER") != "redis":
        return None
    from nutchy._fetch import FetchJob, FetchSettings
    from nutchy.exceptions import FrontierError
    from nutchy.frontier import BatchReader
    from nutchy.redis_frontier import open_redis_frontier
    from nutchy.workers import publish_batch

    redis = open_redis_frontier(settings)
    reader = BatchReader(
        table, FetchJob(batch_id), FetchSettings.from_settings(settings), resume=True
    )
    try:
        count = publish_batch(redis, reader, batch_id)
    except FrontierError as exc:
        return (
            f"batch {batch_id} NOT published ({exc}); the first worker publishes it:"
            f" scrapy crawl nutch -a batch={batch_id}"
        )
    finally:
        redis.client.close()
    return f"batch {batch_id}: {count} URLs published to Redis at {redis.address}"


def _generate_summary(result: GenerateResult) -> str:
    counts = result.counts
    reasons = [
        (counts.generated, "in unfinished batches"),
        (counts.not_due, "not due"),
        (counts.distance, "beyond NUTCH_GENERATE_MAX_DISTANCE"),
        (counts.min_score, "below NUTCH_GENERATE_MIN_SCORE"),
        (counts.malformed, "with a malformed URL"),
        (counts.unnormalized, "not normalized"),
        (counts.filtered, "filtered"),
        (counts.suspended, "of hosts the host database suspends"),
        (counts.limited, "over -topN or NUTCH_GENERATE_MAX_COUNT"),
    ]
    text = f"{counts.seen} due rows read, {counts.selected} selected"
    left_out = [f"{n} {reason}" for n, reason in reasons if n]
    if left_out:
        text += "; left out: " + ", ".join(left_out)
    if counts.expired:
        text += f"; {counts.expired} taken back from batches older than NUTCH_CRAWL_GEN_DELAY"
    return text


def _readdb(args: argparse.Namespace) -> int:
    if args.json and not args.stats:
        print("nutchy readdb: -json only applies to -stats", file=sys.stderr)
        return 2
    if args.dump is None:
        stray = [
            flag
            for flag, given in (
                ("-format", args.fmt != "jsonl"),
                ("-status", args.status is not None),
                ("-regex", args.regex is not None),
                ("-content", args.content),
                ("-text", args.text),
            )
            if given
        ]
        if stray:
            print(f"nutchy readdb: {', '.join(stray)} only applies to -dump", file=sys.stderr)
            return 2
    settings = _settings(args)
    status = None if args.status is None else parse_status_filter(args.status)
    tasks = Tasks.from_settings(settings, args.num_tasks, args.key_range)
    with open_table(settings) as table:
        if args.stats:
            with Progress("readdb -stats") as bar:
                stats = table_stats(table, now=_now(), progress=bar, tasks=tasks)
            if args.json:
                print(json.dumps(stats.to_dict(args.top_hosts), indent=2))
            else:
                print("\n".join(stats.lines(args.top_hosts)))
        elif args.url is not None:
            page = read_page(table, args.url)
            if page is None:
                print(f"nutchy readdb: {args.url} is not in table {table.name}", file=sys.stderr)
                return 1
            print("\n".join(page_lines(page)))
        elif args.dump is not None:
            with Progress("readdb -dump") as bar:
                path, count = dump(
                    table,
                    args.dump,
                    fmt=args.fmt,
                    status=status,
                    regex=args.regex,
                    content=args.content,
                    text=args.text,
                    progress=bar,
                    tasks=tasks,
                )
            print(f"Dumped {count} rows to {path}")
        else:
            with Progress("readdb -topN") as bar:
                best = top_scored(table, args.top_n, progress=bar, tasks=tasks)
            for score, url in best:
                print(f"{score:.6g}\t{url}")
    return 0


def _updatehostdb(args: argparse.Namespace) -> int:
    settings = _settings(args)
    with open_table(settings) as table:
        if not table.store.exists():
            print(f"nutchy updatehostdb: there is no table {table.name}", file=sys.stderr)
            return 1
        with Progress("updatehostdb: rows read") as bar:
            result, name = update_hostdb_of(table, settings, now=_now(), progress=bar)
    print(describe_update(result, name))
    return 0


def _readhostdb(args: argparse.Namespace) -> int:
    settings = _settings(args)
    with closing(open_host_store(settings)) as hosts:
        found = 0
        if not args.json:
            print(HOSTDB_HEADER)
        for host, stats in read_hosts(hosts, args.host):
            found += 1
            if args.json:
                print(json.dumps(host_record(host, stats)))
            else:
                print(host_line(host, stats))
    if args.host is not None and not found:
        print(f"nutchy readhostdb: {args.host} is not in {hosts.table_name}", file=sys.stderr)
        return 1
    return 0


def _parse(args: argparse.Namespace) -> int:
    settings = _settings(args)
    config = parse_config(settings)
    sig = signature(settings)
    skip_truncated = get_bool(settings, "NUTCH_PARSER_SKIP_TRUNCATED")
    timeout = get_float(settings, "NUTCH_PARSER_TIMEOUT")
    batch_id = None if args.all else args.batch_id
    with open_table(settings) as table, Progress("parse: rows read") as bar:
        if batch_id is not None:
            marks = require_batch(table, batch_id)
            if Mark.FETCH not in marks:
                print(
                    f"nutchy parse: batch {batch_id} has no fetched page to parse: "
                    + _unfetched(batch_id, marks),
                    file=sys.stderr,
                )
                return 0  # a known batch: nothing to do is not an error (safe to run again)
        counts = parse_batch(
            table,
            batch_id,
            config=config,
            signature=sig,
            skip_truncated=skip_truncated,
            timeout=timeout,
            resume=args.resume,
            tasks=Tasks.from_settings(settings, args.num_tasks, args.key_range),
            progress=bar,
        )
    print(
        f"nutchy parse: {counts.parsed} parsed, {counts.redirects} redirects,"
        f" {counts.not_parsed} not parsed (content type), {counts.failed} failed,"
        f" {counts.truncated} truncated skipped, {counts.resumed} already parsed",
        file=sys.stderr,
    )
    return 0


def _updatedb(args: argparse.Namespace) -> int:
    settings = _settings(args)
    batch_id = None if args.all else args.batch_id
    config = update_config(settings, batch_id)
    with open_table(settings) as table:
        marks = None if batch_id is None else require_batch(table, batch_id)
        counts = updatedb(
            table,
            batch_id,
            now=_now(),
            config=config,
            tasks=Tasks.from_settings(settings, args.num_tasks),
            progress=Progress,
        )
    if marks is not None and Mark.FETCH not in marks:
        # Only the generate marks of the batch were there to drop: its rows can be generated
        # again; no page was fetched, so no status, score or outlink changed.
        print(
            f"nutchy updatedb: batch {batch_id} was never fetched: "
            + (
                f"dropped its generate mark from {counts.batch_pages} rows, which can be"
                " generated again; no status, score or outlink changed"
                if Mark.GENERATE in marks
                else _unfetched(args.batch_id, marks)
            ),
            file=sys.stderr,
        )
        return 0
    print(
        f"nutchy updatedb: {counts.batch_pages} pages of the batch updated,"
        f" {counts.existing_targets} known and {counts.new_rows} new outlink targets"
        f" ({counts.not_added} not added, {counts.invalid_targets} invalid)",
        file=sys.stderr,
    )
    return 0


def _dedup(args: argparse.Namespace) -> int:
    from nutchy.jobs.dedup import DedupOptions, dedup

    settings = _settings(args)
    if args.compare_order is not None:
        settings.set("NUTCH_DEDUPLICATION_COMPARE_ORDER", args.compare_order, "cmdline")
    if args.group is not None:
        settings.set("NUTCH_DEDUPLICATION_GROUP_MODE", args.group, "cmdline")
    options = DedupOptions.from_settings(settings)
    with open_table(settings) as table, Progress("dedup: rows read") as bar:
        result = dedup(table, options, progress=bar)
    counts = result.counts
    print(
        f"nutchy dedup: {counts.pages} fetched pages compared, {counts.groups} signatures"
        f" shared by several pages: {counts.marked} marked duplicate, {counts.unchanged} were"
        f" already, {counts.kept} duplicates kept again; {result.written} rows written"
        f" ({result.changed_meanwhile} fetched meanwhile, left alone;"
        f" {result.skipped} undecodable rows skipped)",
        file=sys.stderr,
    )
    if result.sort.runs:
        print(
            f"nutchy dedup: sorted in {result.sort.runs} runs spilled to disk"
            f" ({result.sort.spilled_bytes / 2**20:.1f} MB, deleted)",
            file=sys.stderr,
        )
    return 0


def _clean(args: argparse.Namespace) -> int:
    from nutchy.index.chain import load_writers
    from nutchy.jobs.clean import clean

    settings = _settings(args)
    writers = load_writers(settings)
    with open_table(settings) as table, Progress("clean: rows read") as bar:
        counts = clean(table, writers, commit=args.commit, progress=bar)
    print(
        f"nutchy clean: {counts.rows} rows read; deleted {counts.deleted} URLs ({counts.gone}"
        f" gone, {counts.redirected} redirected, {counts.duplicates} duplicates) from"
        f" {', '.join(w.describe() for w in writers)}"
        + ("" if args.commit else ", not committed (-noCommit)"),
        file=sys.stderr,
    )
    return 0


def _unfetched(batch_id: str, marks: frozenset[str]) -> str:
    """What became of batch *batch_id*, whose rows hold *marks* but no fetch mark."""
    if Mark.GENERATE in marks:
        return f"it was generated and not fetched (run: nutchy fetch {batch_id})"
    return "it was updated already (updatedb drops the fetch marks), nothing is left to do"


def _fetch(args: argparse.Namespace) -> int:
    from scrapy.crawler import CrawlerProcess

    from nutchy._fetchrun import FAILURE_STATS
    from nutchy.jobs._batches import ALL_BATCHES
    from nutchy.spiders import NutchSpider

    settings = _settings(args)
    settings.set("ADDONS", {**settings.getdict("ADDONS"), "nutchy.NutchAddon": 0}, "cmdline")
    if args.verbose:
        settings.set("LOG_LEVEL", "DEBUG", "cmdline")
    arguments = {"batch": ALL_BATCHES if args.all else args.batch_id}
    if args.resume:
        arguments["resume"] = "true"
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(NutchSpider)
    process.crawl(crawler, **arguments)
    process.start()
    if process.bootstrap_failed:  # the reason is logged, in one line
        return 1
    stats = crawler.stats.get_stats() if crawler.stats is not None else {}
    if any(stats.get(key) for key in FAILURE_STATS):
        return 1
    return 1 if stats.get("finish_reason") == "shutdown" else 0


def _crawl(args: argparse.Namespace) -> int:
    settings = _settings(args)
    overrides = dict(item.partition("=")[::2] for item in args.settings)
    if args.crawl_id is not None:
        overrides["NUTCH_STORAGE_CRAWL_ID"] = args.crawl_id
    try:
        files = seed_files(args.seeds)
    except SeedPathError as exc:
        print(f"nutchy crawl: {exc}", file=sys.stderr)
        return 1
    report = crawl(
        settings,
        files,
        rounds=args.rounds,
        top_n=args.top_n,
        overrides=overrides,
        add_days=args.add_days,
        num_fetchers=args.num_fetchers,
        sitemaps=SitemapOptions(_sitemap_list(args.sitemap_urls), args.sitemaps_from_hosts),
        # one write a line: the fetch may log from its thread meanwhile (docs/crawl.md)
        log=lambda line: print(f"nutchy crawl: {line}\n", end="", file=sys.stderr),
        verbose=args.verbose,
    )
    return 1 if report.stopped.startswith("the fetch") else 0


def _plot(args: argparse.Namespace) -> int:
    settings = _settings(args)
    history = read_history(history_path(settings))
    with open_table(settings) as table:
        intervals, scores = table_values(table)
        result = plot_crawl(args.out, history.rounds, intervals, scores, title=table.name)
    skipped = f" ({history.skipped} unreadable lines of the history skipped)"
    print(
        f"Drew {result.rounds} rounds and {result.rows} rows into {result.path}"
        f"{skipped if history.skipped else ''}"
    )
    return 0


def _sitemap(args: argparse.Namespace) -> int:
    from nutchy.jobs.sitemap import LABELS, read_sitemaps

    if not args.sitemap_urls and not args.robots:
        raise NutchError("nothing to read: give -sitemapUrls FILE, -robots, or both")
    _settings(args)  # a bad -s is said here, before a child starts
    overrides: dict[str, Any] = dict(item.partition("=")[::2] for item in args.settings)
    if args.crawl_id is not None:
        overrides["NUTCH_STORAGE_CRAWL_ID"] = args.crawl_id
    if not args.verbose:
        overrides = {"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, **overrides}
    spider_args: dict[str, Any] = {
        "robots": args.robots,
        "strict": args.strict,
        "filter": args.filter_urls,
        "normalize": args.normalize,
    }
    if args.sitemap_urls:
        spider_args["sitemaps"] = _sitemap_list(args.sitemap_urls)
    report = read_sitemaps(spider_args, overrides)
    if report.code != 0:
        print("nutchy sitemap: the sitemap crawl could not start", file=sys.stderr)
        return 1
    counts = report.counts
    print(f"Read {counts.get('read', 0)} sitemaps: {counts.get('injected', 0)} new URLs")
    for name, label in LABELS:
        print(f"  {label + ':':<16}{counts.get(name, 0):>10}")
    if not counts.get("read"):
        print("nutchy sitemap: no sitemap could be read", file=sys.stderr)
        return 1
    return 0


def _sitemap_list(value: str | None) -> str | None:
    """``-sitemapUrls`` / ``-sitemaps``: URLs as given, a file by its absolute path (one that
    cannot be read is a usage error, said before anything starts)."""
    if not value or "://" in value:
        return value
    path = Path(value).resolve()
    if not os.access(path, os.R_OK) or not path.is_file():
        raise NutchError(f"cannot read the sitemap list {value}")
    return str(path)


def _index(args: argparse.Namespace) -> int:
    if args.rebuild and not args.all:
        print("nutchy index: -rebuild rebuilds every index: use it with -all", file=sys.stderr)
        return 2
    return run_index(_settings(args), None if args.all else args.batch_id, args.rebuild)


def _search(args: argparse.Namespace) -> int:
    return run_search(_settings(args), args.query, args.limit, as_json=args.json)


def _warc(args: argparse.Namespace) -> int:
    from nutchy.warc import export_warc, gzip_level

    settings = _settings(args)
    max_size = get_int(settings, "NUTCH_WARC_MAX_SIZE", 1)
    level = gzip_level(settings)
    with open_table(settings) as table, Progress("warc: rows written") as bar:
        if not args.all:
            require_batch(table, args.batch_id)
        result = export_warc(
            table,
            args.out,
            batch_id=None if args.all else args.batch_id,
            max_size=max_size,
            prefix=settings.get("NUTCH_WARC_PREFIX") or "nutchy",
            gzip_level=level,
            progress=bar.advance,
        )
    names = ", ".join(path.name for path in result.files)
    print(f"Wrote {result.captures} pages to {len(result.files)} WARC files in {args.out}: {names}")
    return 0


def _freegen(args: argparse.Namespace) -> int:
    from nutchy.jobs.checkers import freegen

    settings = _settings(args)
    options = InjectOptions.from_settings(settings, filter_urls=args.filter_urls)
    try:
        files = seed_files(args.seeds)
    except SeedPathError as exc:
        print(f"nutchy freegen: {exc}", file=sys.stderr)
        return 1
    now = _now()
    batch_id = new_batch_id(now, secrets.randbelow(2**31))
    with open_table(settings) as table:
        result = freegen(table, files, options, now=now, batch_id=batch_id)
    injected = result.inject
    print(
        f"nutchy freegen: batch {batch_id}: {result.marked} URLs marked ({injected.injected} new,"
        f" {result.in_batch} left to another batch, {injected.filtered} filtered,"
        f" {injected.malformed} malformed)",
        file=sys.stderr,
    )
    if not result.marked:
        return 1
    print(batch_id)
    return 0


def _checker(args: argparse.Namespace) -> int:
    from nutchy.jobs.checkers import check_lines, check_url, index_lines

    settings = _settings(args)
    overrides: dict[str, Any] = dict(item.partition("=")[::2] for item in args.settings)
    if args.crawl_id is not None:
        overrides["NUTCH_STORAGE_CRAWL_ID"] = args.crawl_id
    if not args.verbose:
        overrides = {**QUIET_CHILD, **overrides}
    result = check_url(settings, overrides, args.url, now=_now(), filter_urls=args.filter_urls)
    if result.refused is not None:
        print(f"nutchy {args.command}: {result.url}: {result.refused}", file=sys.stderr)
        return 1
    if result.fetched is None or result.updated is None or not result.fetched.protocol_status:
        print(f"nutchy {args.command}: {result.url}: nothing was fetched", file=sys.stderr)
        return 1
    for line in check_lines(result, text_chars=args.text):
        print(line)
    if args.index:
        for line in index_lines(settings, result.updated):
            print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``nutchy`` command; return its exit code."""
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # said by the subcommand's parser, with its usage
            args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, or a usage error argparse has printed
        return exc.code if isinstance(exc.code, int) else 2
    if args.command != "fetch":  # Scrapy sets up the fetch's logging
        logging.basicConfig(
            level=logging.DEBUG if args.verbose else logging.WARNING,
            format="%(asctime)s %(name)s %(levelname)s: %(message)s",
        )
        # Off a terminal the progress of long jobs is a periodic INFO line (nutchy/progress.py).
        logging.getLogger("nutchy.progress").setLevel(logging.INFO)
    try:
        code: int = args.run(args)
        sys.stdout.flush()  # a closed pipe is found here rather than at exit
    except BrokenPipeError:
        # The reader went away (nutchy readdb -topN 5000 | head -1): stop quietly, as a tool
        # that SIGPIPE ends, and leave Python nothing to flush to the closed pipe at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # 141, as a shell reports a process ended by SIGPIPE
    except UnknownBatch as exc:
        print(f"nutchy {args.command}: {exc}", file=sys.stderr)
        return 1
    except NutchError as exc:
        print(f"nutchy {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"nutchy {args.command}: interrupted", file=sys.stderr)
        return 130  # as a shell reports a process ended by SIGINT
    return code


def run() -> None:
    """The ``nutchy`` program (its console script and ``python -m nutchy``, through
    :func:`nutchy.__main__.run`, which imports this module): :func:`main` on the command line,
    then exit with its code.

    Before the interpreter's exit, every object is frozen out of the cyclic garbage collector
    (:func:`gc.freeze`): the exit then skips the collection it runs over everything the command
    left (Scrapy's modules, the fetch's and updatedb's leftovers in ``nutchy crawl``), 0.1-0.3 s
    of a re-crawl's end, and the system takes the memory back whole. Reference counting and
    ``atexit`` (logging's flush among them) run as before. Not in :func:`main`, which a program
    of its own may call and go on.
    """
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
