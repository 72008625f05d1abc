"""Declared sensitivities: value, norm and neighbouring relation.

The value must follow from public quantities only (clip bounds, n, p, hyperparameters) and the query
that produces the released value must enforce it (clip first). ``privsdr.audit`` probes it.
"""
from __future__ import annotations

import math
from typing import Any

import attrs

from ..accounting.relation import Relation, parse_relation

NORMS = ("l1", "l2", "linf")


def _check_value(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"sensitivity must be a positive finite number, got {value!r}")


def _check_norm(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in NORMS:
        raise ValueError(f"unknown sensitivity norm {value!r}; expected one of {NORMS}")


@attrs.frozen
class Sensitivity:
    """``sup ||f(D) - f(D')||_norm`` over neighbours ``D ~ D'`` under ``relation``.

    ``l2`` on a matrix is the Frobenius norm (for the symmetric-matrix mechanism: of the upper
    triangle including the diagonal); ``linf`` is the largest entry change.
    """

    value: float = attrs.field(converter=float, validator=_check_value)
    norm: str = attrs.field(default="l2", validator=_check_norm)
    relation: Relation = attrs.field(default=Relation.REPLACE_ONE, converter=parse_relation)
    derivation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "norm": self.norm, "relation": self.relation.value, "derivation": self.derivation}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sensitivity:
        return cls(**data)
