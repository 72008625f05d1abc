"""Budgets and costs: (epsilon, delta) pairs.

``Budget`` is what a user declares (validated, immutable). ``Cost`` is what an accountant reports
as spent or remaining; it may be zero, so it is a separate, lighter type. Both unpack as
``eps, delta = x``.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from numbers import Real
from typing import NamedTuple

import attrs

from ..errors import ValidationError


def _check_real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValidationError(f"{name} must be a real number, got {type(value).__name__}: {value!r}")
    number = float(value)
    if math.isnan(number):
        raise ValidationError(f"{name} must not be NaN")
    return number


def _real_epsilon(value: object) -> float:
    return _check_real("epsilon", value)


def _real_delta(value: object) -> float:
    return _check_real("delta", value)


def _validate_epsilon(instance: Budget, attribute: attrs.Attribute[float], value: float) -> None:
    if not value > 0:
        raise ValidationError(f"epsilon must be > 0, got {value!r}")
    if math.isinf(value) and not instance.unlimited:
        raise ValidationError("epsilon must be finite; use Budget.infinite() for a non-private baseline")


def _validate_delta(instance: Budget, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise ValidationError(f"delta must satisfy 0 <= delta < 1, got {value!r}")


@attrs.frozen
class Budget:
    """A declared privacy budget (epsilon, delta): epsilon > 0, 0 <= delta < 1, finite.

    ``Budget.infinite()`` (epsilon = inf) is the only infinite budget: it switches noise off and is
    meant for non-private baselines and noise-off tests.
    """

    epsilon: float = attrs.field(converter=_real_epsilon, validator=_validate_epsilon)
    delta: float = attrs.field(default=0.0, converter=_real_delta, validator=_validate_delta)
    unlimited: bool = attrs.field(default=False, kw_only=True, repr=False)

    @classmethod
    def infinite(cls) -> Budget:
        """The non-private baseline budget (epsilon = inf): noise off."""
        return cls(math.inf, 0.0, unlimited=True)

    @property
    def is_infinite(self) -> bool:
        return math.isinf(self.epsilon)

    def __iter__(self) -> Iterator[float]:
        yield self.epsilon
        yield self.delta

    def as_cost(self) -> Cost:
        return Cost(self.epsilon, self.delta)

    def split(self, weights: Sequence[float]) -> list[Budget]:
        """Split into shares proportional to ``weights`` whose exact sum never exceeds this budget.

        Each share is rounded down to a float so that basic composition of the shares, computed in
        exact rational arithmetic, is <= the total (no 0.1 + 0.2 > 0.3 surprises).
        """
        w = [float(x) for x in weights]
        if not w or any(not (x > 0 and math.isfinite(x)) for x in w):
            raise ValidationError("weights must be a non-empty sequence of positive finite numbers")
        total = math.fsum(w)
        eps_shares = _round_down_shares(self.epsilon, [x / total for x in w])
        delta_shares = _round_down_shares(self.delta, [x / total for x in w])
        return [Budget(e, d, unlimited=self.unlimited) for e, d in zip(eps_shares, delta_shares, strict=True)]


def _round_down_shares(total: float, fractions: Sequence[float]) -> list[float]:
    if math.isinf(total) or total == 0.0:
        return [total] * len(fractions)
    shares = [total * f for f in fractions]
    while sum(Fraction(s) for s in shares) > Fraction(total):
        shares = [math.nextafter(s, 0.0) for s in shares]
    return shares


class Cost(NamedTuple):
    """An (epsilon, delta) guarantee as reported by an accountant (spent, remaining, per-node cost)."""

    epsilon: float
    delta: float

    @classmethod
    def zero(cls) -> Cost:
        return cls(0.0, 0.0)

    def fits_within(self, budget: Budget | Cost) -> bool:
        """Exact comparison (no float tolerance): both coordinates at most the budget's."""
        eps, delta = budget
        return _le(self.epsilon, eps) and _le(self.delta, delta)

    def to_dict(self) -> dict[str, float]:
        return {"epsilon": self.epsilon, "delta": self.delta}


def _le(a: float, b: float) -> bool:
    if math.isinf(b):
        return True
    if math.isinf(a) or math.isnan(a):
        return False
    if isinstance(a, float) and isinstance(b, float) and not math.isnan(b):
        return bool(a <= b)  # two finite doubles (numpy float64 too) compare exactly
    return Fraction(a) <= Fraction(b)


def as_budget(value: object) -> Budget:
    """Accept a Budget or an (epsilon, delta) pair; anything else is a clear TypeError."""
    if isinstance(value, Budget):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return Budget(*value)
    raise ValidationError(
        f"budget must be a privsdr.Budget or an (epsilon, delta) pair, got {type(value).__name__}"
    )
