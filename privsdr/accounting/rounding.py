"""Outward rounding: every epsilon the library charges is at least the exact real number it stands for.

Floating-point results are rounded to nearest, so ``1.0 / z`` can land one ulp *below* the real 1/z,
and a node would then be charged less than it costs. These helpers compute in exact rational arithmetic
(``fractions.Fraction`` holds every float exactly) and round the result up to the next float when the
float is below the exact value. ``sqrt_up`` checks its result by squaring exactly.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

#: relative margin added to epsilons computed by libraries we cannot round ourselves (dp-accounting's RDP
#: and PLD): far above their floating-point error (~1e-15 relative), far below anything that matters.
LIBRARY_MARGIN = 1e-12


def up(x: Fraction) -> float:
    """The smallest float >= the exact rational ``x``."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def down(x: Fraction) -> float:
    """The largest float <= the exact rational ``x``."""
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


def div_up(numerator: float, denominator: float) -> float:
    """numerator / denominator rounded up (inf for a zero denominator)."""
    if denominator == 0:
        return math.inf
    if math.isinf(numerator) or math.isinf(denominator):
        return numerator / denominator
    return up(Fraction(numerator) / Fraction(denominator))


def mul_up(a: float, b: float) -> float:
    if math.isinf(a) or math.isinf(b):
        return a * b
    return up(Fraction(a) * Fraction(b))


def sqrt_up(x: float) -> float:
    """The smallest float s with s * s >= x exactly."""
    s = math.sqrt(x)
    while Fraction(s) * Fraction(s) < Fraction(x):
        s = math.nextafter(s, math.inf)
    return s


def sum_up(values: Iterable[float]) -> float:
    """An exact sum rounded up (inf if any term is inf).

    ``math.fsum`` is the exact sum rounded to nearest (half-even, as ``float(Fraction)``), and the fsum of the
    terms minus that result has the sign of the exact residual (a nonzero sum of floats is at least 2^-1074, so
    it never rounds to 0): one ulp up exactly when the nearest float is below the sum. The same answer as the
    Fraction sum, without building a Fraction per term; NaN and intermediate overflow take the Fraction path.
    """
    values = list(values)
    if len(values) == 1 and isinstance(values[0], float) and math.isfinite(values[0]):
        return float(values[0]) + 0.0  # one finite term: its fsum is itself and the residual 0 (what the path below says)
    if all(isinstance(v, float) for v in values):  # floats (numpy's float64 too): the exact sum of their values
        try:
            nearest = math.fsum(values)
            if math.isfinite(nearest):  # no inf or NaN term (either makes the fsum inf or NaN, or raise)
                residual = math.fsum([*values, -nearest])
                return math.nextafter(nearest, math.inf) if residual > 0 else nearest + 0.0
        except (OverflowError, ValueError):  # intermediate overflow, or inf - inf: the checks below
            pass
    if any(math.isinf(v) for v in values):
        return math.inf
    return up(sum((Fraction(v) for v in values), Fraction(0)))


def outward(epsilon: float) -> float:
    """A library-computed epsilon with ``LIBRARY_MARGIN`` added (never below the value given)."""
    if not math.isfinite(epsilon):
        return epsilon
    return math.nextafter(epsilon * (1.0 + LIBRARY_MARGIN), math.inf)


class ExactSum:
    """The exact sum of nonnegative floats (costs) added one at a time, read as ``math.fsum`` of all of them would give
    it (the exact sum rounded to nearest, as ``float(Fraction)``): O(1) per term and per read instead of a pass over
    every term. A NaN term makes it NaN and an infinite one infinite, as ``fsum``; a finite exact sum beyond the largest
    double raises OverflowError, as ``fsum`` does. (With terms of both signs ``fsum`` may also overflow midway, and
    -inf + inf raises ValueError: that too is kept, the rest is not promised.)"""

    __slots__ = ("_exact", "_infinite", "_nan")

    def __init__(self) -> None:
        self._exact = Fraction(0)
        self._infinite: set[float] = set()
        self._nan = False

    def add(self, value: float) -> None:
        if math.isnan(value):
            self._nan = True
        elif math.isinf(value):
            self._infinite.add(value)
        else:
            self._exact += Fraction(value)

    def value(self, extra: float = 0.0) -> float:
        """``math.fsum`` of the terms and ``extra``."""
        finite = float(self._exact + (Fraction(extra) if math.isfinite(extra) else 0)) + 0.0  # OverflowError first, as fsum
        infinite = self._infinite | ({extra} if math.isinf(extra) else set())
        if self._nan or math.isnan(extra):
            return math.nan
        if len(infinite) == 2:
            raise ValueError("-inf + inf in an exact sum")
        return infinite.pop() if infinite else finite
