"""Seeds given to the ``nutch`` spider: ``scrapy crawl nutch -a seeds=...``.

A crawl that generates its own batches (no ``-a batch``) can inject seeds first, as
``nutchy crawl SEEDS`` does: what a scrapyd job needs, since it has no other step before the
fetch. The value is either a seed file or a directory of them (read as ``nutchy inject`` reads
them, on the machine the crawl runs on), or seed lines themselves, in Nutch's seed format:
separated by newlines, or by commas when the value has no newline (a URL with a comma in it needs
the newline form or a file). A value with ``://`` in it is taken as seed lines.
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nutchy.exceptions import ConfigError
from nutchy.jobs.inject import InjectOptions, InjectResult, SeedPathError, inject, seed_files

if TYPE_CHECKING:
    from nutchy.store.table import WebTable

__all__ = ["Seeds"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Seeds:
    """The seeds of a crawl: seed *lines*, or the seed *path* (a file or a directory)."""

    lines: tuple[str, ...] = ()
    path: Path | None = None

    @classmethod
    def from_arg(cls, value: str) -> Seeds:
        """Read ``-a seeds=VALUE``; :exc:`~nutchy.exceptions.ConfigError` explains a bad one.

        >>> Seeds.from_arg("http://a.example/, http://b.example/").lines
        ('http://a.example/', 'http://b.example/')
        >>> Seeds.from_arg("http://a.example/\\tnutch.score=2\\nhttp://b.example/").lines
        ('http://a.example/\\tnutch.score=2', 'http://b.example/')
        """
        text = value.strip()
        if not text:
            raise ConfigError(
                "-a seeds is empty: give a seed file or directory, or URLs separated by commas"
            )
        if "://" in text:
            separator = "\n" if "\n" in text else ","
            lines = tuple(line.strip() for line in text.split(separator) if line.strip())
            return cls(lines=lines)
        path = Path(text).expanduser()
        try:
            seed_files(path)
        except SeedPathError as exc:
            raise ConfigError(f"-a seeds: {exc}") from None
        return cls(path=path.resolve())

    def __str__(self) -> str:
        if self.path is not None:
            return str(self.path)
        return f"{len(self.lines)} seed lines given to the spider"

    def inject(self, table: WebTable, options: InjectOptions) -> InjectResult:
        """Inject the seeds into *table*, creating it when it is missing (blocking: run it in a
        thread), and log what became of them."""
        now = int(time.time() * 1000)
        if self.path is not None:
            result = inject(table, seed_files(self.path), options, now=now)
        else:
            with tempfile.TemporaryDirectory(prefix="nutchy-seeds-") as folder:
                seeds = Path(folder) / "seeds.txt"
                seeds.write_text("".join(f"{line}\n" for line in self.lines), encoding="utf-8")
                result = inject(table, [seeds], options, now=now, workers=0)
        others = [f"{n} {label}" for label, n in result.outcomes() if n and label != "injected"]
        logger.info(
            "Injected %(n)d URLs into %(table)s from %(seeds)s%(others)s",
            {
                "n": result.injected,
                "table": table.name,
                "seeds": self,
                "others": f" ({', '.join(others)})" if others else "",
            },
        )
        for problem in result.unreadable:
            logger.warning("Cannot read the seeds of %(path)s", {"path": problem})
        for malformed in result.malformed_lines:
            logger.warning("Malformed seed line %(line)s", {"line": malformed})
        return result
