"""The ``nutchy`` command: Nutch's verbs on the web table.

Each subcommand builds the settings (nutchy's defaults, the Scrapy project's settings when run
inside a project, then ``-s NAME=VALUE`` and ``-crawlId``), opens the table, calls one job, prints a
summary and returns an exit code. None of them starts the Twisted reactor.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from nutchy.config import load_settings
from nutchy.exceptions import NutchError
from nutchy.store import open_table

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
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    storage = commands.add_parser("storage", help="create, inspect or drop the web table")
    storage_commands = storage.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in (
        ("init", "create the table if it is missing (safe to repeat)"),
        ("info", "say which store and table the settings name, and whether it exists"),
        ("drop", "delete the table and everything in it (needs --confirm)"),
    ):
        sub = storage_commands.add_parser(name, help=text, description=text)
        _common(sub)
        if name == "drop":
            sub.add_argument(
                "--confirm",
                action="store_true",
                help="really delete the table; without it nothing is deleted",
            )
        sub.set_defaults(run=_storage)

    return parser


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
        if args.action == "init":
            created = table.create()
            print(f"{'Created' if created else 'Found'} table {table.name} in {table.store!r}")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``nutchy`` command; return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
    )
    try:
        code: int = args.run(args)
    except NutchError as exc:
        print(f"nutchy {args.command}: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
