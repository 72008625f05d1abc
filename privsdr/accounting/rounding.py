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
