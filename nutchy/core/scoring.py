"""OPIC scoring: Nutch's ``scoring-opic`` plugin, the score every generate sorts by.

Each page holds *cash*, kept in ``mtdt:_csh_`` as a 4-byte big-endian float. A seed starts with
cash equal to its score. When updatedb sees a fetched page, the page's cash is shared among its
outlinks and the page keeps none; each target adds what it received to both its score and its
cash, and passes the cash on after its own fetch.

The worked example of the reference (§10), round 1: seed A (score 1.0) links to B and C on its
host and to D and E elsewhere.

>>> opic = OPICScoring()
>>> shares = opic.distribute_score_to_outlinks(
...     "http://a/", 1.0, ["http://a/b", "http://a/c", "http://d/", "http://e/"])
>>> shares.scores
{'http://a/b': 0.25, 'http://a/c': 0.25, 'http://d/': 0.25, 'http://e/': 0.25}
>>> shares.cash
0.0
>>> opic.update_score(0.0, 0.0, [0.25])
(0.25, 0.25)
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from nutchy.core.java import f32, f32_sum
from nutchy.core.status import Metadata
from nutchy.core.urls import InvalidURL, host_of

__all__ = ["OPICScoring", "Shares", "cash_bytes", "read_cash"]


def read_cash(metadata: Mapping[str, bytes]) -> float:
    """The cash of a page from its metadata; 0.0 when it has none (or an unreadable value).

    >>> read_cash({"_csh_": cash_bytes(0.5)}), read_cash({})
    (0.5, 0.0)
    """
    raw = metadata.get(Metadata.CASH)
    if raw is None or len(raw) != 4:
        return 0.0
    value: float = struct.unpack(">f", raw)[0]
    return value


def cash_bytes(cash: float) -> bytes:
    """*cash* encoded as Nutch stores it: a 4-byte big-endian float."""
    return struct.pack(">f", cash)


class Shares(NamedTuple):
    """What :meth:`OPICScoring.distribute_score_to_outlinks` gives: a score per target, and the
    cash the source keeps."""

    scores: dict[str, float]
    cash: float


@functools.lru_cache(maxsize=65536)  # a target is shared by many pages of a batch
def _host(url: str) -> str | None:
    try:
        return host_of(url).lower()
    except (InvalidURL, ValueError):
        return None


class OPICScoring:
    """Nutch's ``OPICScoringFilter``.

    *injected_score* is ``db.score.injected``; *internal_link_factor* and *external_link_factor*
    are ``db.score.link.internal`` and ``db.score.link.external``, the shares an outlink to the
    same host and to another host receive.
    """

    def __init__(
        self,
        injected_score: float = 1.0,
        internal_link_factor: float = 1.0,
        external_link_factor: float = 1.0,
    ) -> None:
        # Nutch reads them with conf.getFloat: 32-bit floats.
        self.injected_score = f32(injected_score)
        self.internal_link_factor = f32(internal_link_factor)
        self.external_link_factor = f32(external_link_factor)

    def injected_cash(self, score: float) -> float:
        """The cash of a page injected with *score*: the score itself."""
        return score

    def initial_score(self) -> tuple[float, float]:
        """Score and cash of a page first seen as an outlink: nothing, until its inlinks count."""
        return 0.0, 0.0

    def generator_sort_value(self, score: float) -> float:
        """The generate sort value, score²: Nutch multiplies the score by itself."""
        return score * score

    def distribute_score_to_outlinks(
        self, source_url: str, cash: float, targets: Sequence[str]
    ) -> Shares:
        """Share *cash* of the page at *source_url* among *targets*, its outlinks.

        Each target gets ``cash / len(targets)`` times the internal or external link factor (a
        target whose host cannot be read counts as external). A page without cash gives nothing
        and keeps what it has; otherwise it keeps no cash. As in Nutch, the share and each
        factor's product are Java floats (:func:`~nutchy.core.java.f32`), whatever the double
        quotient would be:

        >>> OPICScoring().distribute_score_to_outlinks("http://a/", 1.0, ["http://b/"] * 3).scores
        {'http://b/': 0.3333333432674408}

        >>> OPICScoring(external_link_factor=0.5).distribute_score_to_outlinks(
        ...     "http://a/", 1.0, ["http://a/x", "http://b/"])
        Shares(scores={'http://a/x': 0.5, 'http://b/': 0.25}, cash=0.0)
        >>> OPICScoring().distribute_score_to_outlinks("http://a/", 0.0, ["http://b/"])
        Shares(scores={'http://b/': 0.0}, cash=0.0)
        """
        if not targets or cash == 0.0:
            return Shares(dict.fromkeys(targets, 0.0), cash)
        # float scoreUnit = cash / allCount (the int count read as a float first)
        unit = f32(cash / f32(len(targets)))
        internal_share = f32(unit * self.internal_link_factor)
        if self.internal_link_factor == self.external_link_factor:
            # Nutch's defaults (1.0 and 1.0): no need to tell internal links from external.
            return Shares(dict.fromkeys(targets, internal_share), 0.0)
        external_share = f32(unit * self.external_link_factor)
        source_host = _host(source_url)
        scores: dict[str, float] = {}
        for target in targets:
            internal = source_host is not None and _host(target) == source_host
            scores[target] = internal_share if internal else external_share
        return Shares(scores, 0.0)

    def update_score(
        self, score: float, cash: float, inlink_scores: Iterable[float]
    ) -> tuple[float, float]:
        """Score and cash after a page receives *inlink_scores*: both grow by their sum.

        Nutch adds the inlinks' scores into a ``float``, in the order its reducer receives them
        (best score first, as :func:`~nutchy.core.update.update_row` passes them), then adds
        that float to the float score and cash. Summing in double and rounding once can differ
        by one unit in the last place. Three pages holding cash 1.0 with 2, 3 and 5 outlinks
        give a page 1/2, 1/3 and 1/5 (as floats); Java's loop gives 1.0333334f, the double sum
        rounded once 1.0333333f:

        >>> shares = [f32(1 / 2), f32(1 / 3), f32(1 / 5)]
        >>> OPICScoring().update_score(0.0, 0.0, shares)
        (1.033333420753479, 1.033333420753479)
        >>> f32(sum(shares))
        1.0333333015441895
        """
        adjust = f32_sum(inlink_scores)
        return f32(score + adjust), f32(cash + adjust)
