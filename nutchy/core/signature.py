"""Page signatures: Nutch's ``MD5Signature`` and ``TextProfileSignature``.

A signature tells updatedb whether a page changed between two fetches (``p:sig`` against
``p:psig``). Both classes give the same 16 bytes as Nutch for the same input.

>>> MD5Signature().calculate(b"hello", "", "http://x/").hex()
'5d41402abc4b2a76b9719d911017c592'
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections import Counter
from typing import Protocol

from nutchy.core.java import f32, java_round
from nutchy.core.javamap import java_hash_map_order

__all__ = ["MD5Signature", "Signature", "TextProfileSignature", "java_hash_map_order"]

#: Unicode categories for which Java's ``Character.isLetterOrDigit`` is true.
_LETTER_OR_DIGIT = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nd"})


class Signature(Protocol):
    """What ``db.signature.class`` names: a digest of a fetched and parsed page."""

    def calculate(self, content: bytes | None, text: str | None, base_url: str | None) -> bytes:
        """The signature of a page with raw *content*, parsed *text* and *base_url*."""
        ...


class MD5Signature:
    """MD5 of the raw content, or of the base URL when there is no content."""

    def calculate(self, content: bytes | None, text: str | None, base_url: str | None) -> bytes:
        if content:
            return hashlib.md5(content, usedforsecurity=False).digest()
        if base_url is None:
            raise ValueError("MD5Signature needs content or a base URL")
        return hashlib.md5(base_url.encode("utf-8"), usedforsecurity=False).digest()


def _java_lower(char: str) -> str:
    """Java's ``Character.toLowerCase(char)``: a one-character mapping, else unchanged."""
    if char == "\u0130":  # LATIN CAPITAL LETTER I WITH DOT ABOVE: Java maps it to "i".
        return "i"
    lower = char.lower()
    return lower if len(lower) == 1 else char


class TextProfileSignature:
    """Nutch's ``TextProfileSignature``: near-duplicate pages get the same signature.

    The text is split into lower-cased tokens of letters and digits (Java's rules, one UTF-16
    unit at a time); tokens longer than *min_token_len* are counted, counts are rounded down to
    a multiple of a quantum derived from *quant_rate* and the highest count, tokens below the
    quantum are dropped, and the signature is the MD5 of the ``token count`` lines, sorted by
    count descending with ties in Java ``HashMap`` order. Pages without text fall back to
    :class:`MD5Signature`.

    >>> sig = TextProfileSignature()
    >>> sig.calculate(b"<p>x</p>", "The cat and the Cat. THE END", None) == sig.calculate(
    ...     b"other bytes", "the cat, the cat and the end!", None)
    True
    >>> sig.profile("The cat and the Cat. THE END")
    'the 2\\ncat 2'
    """

    def __init__(self, min_token_len: int = 2, quant_rate: float = 0.01) -> None:
        self.min_token_len = min_token_len
        self.quant_rate = quant_rate

    def profile(self, text: str) -> str:
        """The profile string whose MD5 is the signature."""
        counts: Counter[str] = Counter()
        token: list[str] = []
        units = text.encode("utf-16-le")
        chars = [units[i : i + 2].decode("utf-16-le", "replace") for i in range(0, len(units), 2)]
        for char in [*chars, " "]:
            # A lone surrogate half decodes to U+FFFD, which is not a letter: a separator, as in Java.
            if unicodedata.category(char) in _LETTER_OR_DIGIT:
                token.append(_java_lower(char))
                continue
            if len(token) > self.min_token_len:
                counts["".join(token)] += 1
            token = []
        if not counts:
            return ""
        max_freq = max(counts.values())
        # Java: Math.round(maxFreq * QUANT_RATE), float arithmetic, halves rounded up.
        quant = java_round(f32(f32(max_freq) * f32(self.quant_rate)))
        if quant < 2:
            quant = 2 if max_freq > 1 else 1
        kept: list[tuple[str, int]] = []
        for word in java_hash_map_order(list(counts)):
            cnt = counts[word] // quant * quant
            if cnt >= quant:
                kept.append((word, cnt))
        kept.sort(key=lambda item: -item[1])  # stable: ties keep HashMap order
        return "\n".join(f"{word} {cnt}" for word, cnt in kept)

    def calculate(self, content: bytes | None, text: str | None, base_url: str | None) -> bytes:
        if not text:
            return MD5Signature().calculate(content, text, base_url)
        return hashlib.md5(self.profile(text).encode("utf-8"), usedforsecurity=False).digest()
