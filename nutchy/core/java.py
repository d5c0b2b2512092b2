"""Java's arithmetic where nutchy must give Nutch's numbers bit for bit.

Nutch computes scores, cash and some schedule intervals in Java ``float`` (32-bit) arithmetic,
rounds with ``Math.round`` (halves up, towards positive infinity) and divides ``long`` values
with truncation towards zero. Python computes in double, rounds halves to even and floors its
integer division, so each of these is written here once:

>>> f32(0.1) == 0.1, f32(0.1)
(False, 0.10000000149011612)
>>> java_round(2.5), round(2.5), java_round(-2.5)
(3, 2, -2)
>>> java_div(-1500, 1000), -1500 // 1000
(-1, -2)

A float operation is done in double and the result rounded to float with :func:`f32`. For one
``+``, ``-``, ``*`` or ``/`` of two floats this gives exactly Java's float result: a double
holds more than twice a float's 24 bits of precision, so rounding twice never differs from
rounding once (the classic result on double rounding for these operations).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from typing import Final

__all__ = ["INT_MAX", "INT_MIN", "f32", "f32_sum", "java_div", "java_round"]

INT_MAX: Final = 2**31 - 1
INT_MIN: Final = -(2**31)

_FLOAT: Final = struct.Struct("<f")


def f32(value: float) -> float:
    """*value* rounded to the nearest Java ``float`` (ties to even), as a Python float.

    >>> f32(1 / 3), f32(1e39), f32(-1e39), f32(3.4028235e38)
    (0.3333333432674408, inf, -inf, 3.4028234663852886e+38)
    """
    try:
        result: float = _FLOAT.unpack(_FLOAT.pack(value))[0]
    except OverflowError:
        # Rounds beyond the largest float: Java's (float) gives an infinity, struct refuses.
        return math.copysign(math.inf, value)
    return result


def f32_sum(values: Iterable[float]) -> float:
    """The sum of *values* (an iterable of floats) as a Java loop ``float s = 0f; s += v;``
    computes it: rounded to float after each addition, in the order given.

    >>> f32_sum([0.1, 0.2, 0.3]), 0.1 + 0.2 + 0.3
    (0.6000000238418579, 0.6000000000000001)
    """
    # f32 inlined: updatedb sums the inlinks of every row it writes.
    pack, unpack = _FLOAT.pack, _FLOAT.unpack
    total = 0.0
    for value in values:
        try:
            total = unpack(pack(total + value))[0]
        except OverflowError:
            total = f32(total + value)
    return total


def java_round(value: float) -> int:
    """Java's ``Math.round(float)``: the nearest int, halves rounded up (towards positive
    infinity), NaN as 0, and values beyond the int range saturated to ``INT_MIN``/``INT_MAX``.

    *value* should be a float already (see :func:`f32`); for one, ``floor(value + 0.5)`` is
    exact in double arithmetic, so this is the mathematically exact half-up rounding.

    >>> [java_round(v) for v in (0.5, 1.5, -0.5, -1.5, 0.49999997, float("nan"), 1e10)]
    [1, 2, 0, -1, 0, 0, 2147483647]
    """
    if math.isnan(value):
        return 0
    if value >= INT_MAX:
        return INT_MAX
    if value <= INT_MIN:
        return INT_MIN
    return math.floor(value + 0.5)


def java_div(dividend: int, divisor: int) -> int:
    """Java's ``long`` division ``dividend / divisor``: the quotient truncated towards zero.

    >>> java_div(7, 2), java_div(-7, 2), java_div(7, -2), java_div(-7, -2)
    (3, -3, -3, 3)
    """
    quotient = abs(dividend) // abs(divisor)
    return quotient if (dividend < 0) == (divisor < 0) else -quotient
