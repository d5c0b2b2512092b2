"""Nutch's regex URL filter: an ordered list of accept and reject patterns.

A rule file in Nutch's ``regex-urlfilter.txt`` format holds one rule per line. A line that starts
with ``+`` accepts the URLs its regular expression matches; one that starts with ``-`` rejects
them. Blank lines and lines starting with ``#`` are skipped. The first rule whose expression is
found anywhere in the URL (``re.search``, as Java's ``Matcher.find``) decides, and a URL that no
rule matches is rejected, so rule files usually end with ``+.``.

>>> url_filter = RegexURLFilter.from_lines([
...     "# no images",
...     r"-\\.png$",
...     "+^https?://",
... ])
>>> url_filter.accepts("https://example.com/index.html")
True
>>> url_filter.accepts("https://example.com/logo.png")
False
>>> url_filter.accepts("ftp://example.com/")
False

Expressions are compiled by Python's :mod:`re`. The syntax found in Nutch's rule files (classes,
anchors, alternation, back references, a leading ``(?i)``) means the same there. A few Java-only
constructs, such as ``\\p{Alpha}`` classes and ``\\Q...\\E`` quoting, do not compile and are
reported with the file name and line number; Java's class intersection (``[a-z&&[^x]]``) has no
Python counterpart and must be rewritten.

nutchy's own default rules are in :data:`DEFAULT_RULES_PATH`. The filter is meant to see
normalized URLs (:func:`nutchy.core.urls.normalize_url`), as Nutch applies its filters after its
normalizers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Sequence

__all__ = ["ACCEPT_ALL", "DEFAULT_RULES_PATH", "RegexURLFilter", "load_url_filter"]

#: nutchy's default rule file, shipped inside the package.
DEFAULT_RULES_PATH: Final = Path(__file__).with_name("regex-urlfilter.txt")


class RegexURLFilter:
    """Accept or reject URLs by the first matching rule of a Nutch regex rule list.

    *rules* is a sequence of ``(accept, pattern)`` pairs, tried in order: ``accept`` is ``True``
    for a ``+`` rule and ``False`` for a ``-`` rule. Most callers build the filter with
    :meth:`from_file` or :meth:`from_lines` instead.
    """

    __slots__ = ("_rules",)

    def __init__(self, rules: Iterable[tuple[bool, re.Pattern[str]]]) -> None:
        self._rules: tuple[tuple[bool, re.Pattern[str]], ...] = tuple(rules)

    @classmethod
    def from_lines(cls, lines: Iterable[str], source: str = "<string>") -> RegexURLFilter:
        """Parse rules in ``regex-urlfilter.txt`` format from *lines*.

        Surrounding whitespace (line endings included) is ignored. A line that is neither blank,
        a ``#`` comment, nor ``+`` or ``-`` followed by a regular expression raises
        :class:`ValueError`, as does an expression that does not compile; the message starts
        with ``<source>:<line number>:``.

        >>> RegexURLFilter.from_lines(["+^https://", "*.html"], source="rules.txt")
        Traceback (most recent call last):
        ...
        ValueError: rules.txt:2: a rule must start with '+' or '-' (or '#' for a comment), \
got '*.html'
        """
        rules: list[tuple[bool, re.Pattern[str]]] = []
        for number, raw in enumerate(lines, start=1):
            line = raw.strip()
            if not line or line[0] == "#":
                continue
            sign, expression = line[0], line[1:]
            if sign not in "+-":
                raise ValueError(
                    f"{source}:{number}: a rule must start with '+' or '-'"
                    f" (or '#' for a comment), got {line!r}"
                )
            if not expression:
                raise ValueError(
                    f"{source}:{number}: {sign!r} without a regular expression"
                    " (write '.' to match every URL)"
                )
            try:
                pattern = re.compile(expression)
            except re.error as exc:
                raise ValueError(
                    f"{source}:{number}: invalid regular expression {expression!r}: {exc}"
                ) from exc
            rules.append((sign == "+", pattern))
        return cls(rules)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> RegexURLFilter:
        """Read rules from the UTF-8 file at *path*; errors name the file and the line."""
        with open(path, encoding="utf-8") as rule_file:
            return cls.from_lines(rule_file, source=str(path))

    @property
    def rules(self) -> Sequence[tuple[bool, str]]:
        """The rules in order, as ``(accept, expression)`` pairs."""
        return tuple((accept, pattern.pattern) for accept, pattern in self._rules)

    def accepts(self, url: str) -> bool:
        """Tell whether *url* passes: the first rule found in it decides, and no match rejects."""
        for accept, pattern in self._rules:
            if pattern.search(url) is not None:
                return accept
        return False

    def __len__(self) -> int:
        return len(self._rules)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} with {len(self._rules)} rules>"


#: A filter that accepts every URL, for when URL filtering is turned off.
ACCEPT_ALL: Final = RegexURLFilter([(True, re.compile(""))])


def load_url_filter(path: str | os.PathLike[str] | None) -> RegexURLFilter:
    """Return the filter whose rules are in the file at *path*, or :data:`ACCEPT_ALL` for ``None``.

    >>> load_url_filter(None).accepts("mailto:someone@example.com")
    True
    >>> load_url_filter(DEFAULT_RULES_PATH).accepts("mailto:someone@example.com")
    False
    """
    return ACCEPT_ALL if path is None else RegexURLFilter.from_file(path)
