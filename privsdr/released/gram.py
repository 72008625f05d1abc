"""The Gram-block spec: every released sufficient statistic is a block of the Gram of one augmented row, and each
block's sensitivity is derived here, once, from public bounds.

The augmented row is z = [clip(x) | phi(y) | 1]: the clipped features, a label feature phi(y) (the clipped label y,
its square, or the one-hot slice indicators e_h of y's slice) and the constant. A released statistic is a block
sum_i a_i b_i^T of two parts a, b of z (divided by a public ``per``: n under replace-one, where n is public):

=================  ==========  =========================================================================
block              a, b        used by
=================  ==========  =========================================================================
X^T X              x, x        DPSIR/FSIR moments, DPMeanCovariance, sparse PCA, DPPLS S2, AdaSSP, DP-BCD
X^T phi(y)         x, phi      DPPLS S2 and AdaSSP (phi = y), DPSIR moments (slice sums: phi = e_h), DP-BCD
column sums        x, 1        DP means (DPMeanCovariance, DPSIR centring, DPPLS centring, MSC)
label sum          y, 1        DPPLS centring, DP-BCD's intercept
slice counts       1, e_h      DPSIR/FSIR moments
count              1, 1        DPPLS centring, MSC (add/remove only: under replace-one n is public)
=================  ==========  =========================================================================

Each part has a public domain, described by its radius R = sup ||a|| and diameter D = sup ||a - a'|| (``Part``):
a row clipped to ||x|| <= C is a ball (R = C, D = 2C), the one-hot slice indicators have R = 1, D = sqrt(2), the
constant c has R = c, D = 0, and a box [lo, hi] has R = ||max(|lo|, |hi|)||, D = ||hi - lo||.

The block rule (``block_value``; L2 norm, the Frobenius norm of the upper triangle with its diagonal when a = b):

* add/remove one row: the block moves by a b^T, ||a b^T||_F = ||a|| ||b|| <= R_a R_b (R_a^2 when a = b);
* replace one row (n public):
  - a = b: ||a a^T - a' a'^T||_F^2 = ||a||^4 + ||a'||^4 - 2 (a^T a')^2 <= 2 R_a^4, so sqrt(2) R_a^2; 0 if D_a = 0;
  - a constant (D_a = 0, a = a' = c): ||c (b - b')^T|| <= R_a D_b (and symmetrically);
  - otherwise ||a b^T - a' b'^T||_F <= ||a|| ||b|| + ||a'|| ||b'|| <= 2 R_a R_b.

So X^T X: C^2 (add/remove), sqrt(2) C^2 (replace-one, Analyze-Gauss: Dwork, Talwar, Thakurta & Zhang, STOC 2014);
X^T y: C C_y, 2 C C_y; column sums: C, 2 C; slice counts: sqrt(2) (a record moved between two slices changes two
counts by 1); slice sums: 2 C (within a slice ||x - x'|| <= 2C, across slices sqrt(||x||^2 + ||x'||^2) <= sqrt(2) C);
the count: 1. Sufficient-statistics perturbation on these blocks: Vu & Slavkovic 2009; Wang, UAI 2018 (AdaSSP).
The smallest eigenvalue of X^T X (``gram_eigenvalue``) moves by at most R^2 under both relations (Weyl: adding
z z^T >= 0 moves it by at most ||z||^2). ``tests/test_gram_spec.py`` checks each value against a brute-force worst
case over extreme neighbours.

Estimators declare the blocks they release through the named helpers below (each returns a ``Sensitivity`` whose
derivation names the block and the rule); no other module derives these numbers.
"""
from __future__ import annotations

import math

import attrs
import numpy as np

from ..accounting.relation import Relation
from ..mechanisms import Sensitivity

ADD_REMOVE, REPLACE_ONE = Relation.ADD_REMOVE, Relation.REPLACE_ONE


@attrs.frozen
class Part:
    """A part of the augmented row with its public domain: radius R = sup ||a||, diameter D = sup ||a - a'||, and
    R^2 as given (so that a bound given as a sum of squares keeps its exact value)."""

    name: str
    radius: float
    diameter: float
    square: float

    @classmethod
    def ball(cls, name: str, bound: float, square: float | None = None) -> Part:
        """A part clipped to ||a|| <= bound (``square``: bound^2 when it is known exactly, e.g. sum_j c_j^2)."""
        bound = float(bound)
        return cls(name, bound, 2.0 * bound, bound * bound if square is None else float(square))

    @classmethod
    def constant(cls, name: str = "1", value: float = 1.0) -> Part:
        return cls(name, float(value), 0.0, float(value) * float(value))

    @classmethod
    def one_hot(cls, name: str = "e_h") -> Part:
        """The slice indicators: exactly one entry is 1."""
        return cls(name, 1.0, math.sqrt(2.0), 1.0)

    @classmethod
    def box(cls, name: str, low: np.ndarray, high: np.ndarray) -> Part:
        """A part clipped entrywise into [low, high]."""
        low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
        far = np.maximum(np.abs(low), np.abs(high))
        square = float(far @ far)
        return cls(name, math.sqrt(square), float(np.linalg.norm(high - low)), square)


def _relation(relation: Relation | str) -> Relation:
    rel = Relation.parse(relation)
    if rel not in (ADD_REMOVE, REPLACE_ONE):
        raise ValueError(f"the Gram-block spec covers add_remove and replace_one, not {rel.value!r}")
    return rel


def block_value(a: Part, b: Part | None, relation: Relation | str, per: float = 1.0) -> tuple[float, str]:
    """(sensitivity, rule) of the block sum_i a_i b_i^T / per (b None: the symmetric block of a with itself): the block
    rule of the module docstring, the one place it is written."""
    rel, symmetric = _relation(relation), b is None or b is a
    other = a if b is None else b
    if rel is ADD_REMOVE:
        if symmetric:
            value, rule = a.square, f"||{a.name} {a.name}^T||_F = ||{a.name}||^2 <= R^2"
        else:
            value, rule = a.radius * other.radius, f"||{a.name} {other.name}^T||_F <= R_{a.name} R_{other.name}"
    elif symmetric:
        if a.diameter == 0.0:
            raise ValueError(f"the block {a.name}^T {a.name} does not change under replace-one (n is public): not a release")
        value, rule = math.sqrt(2.0) * a.square, f"sqrt(||{a.name}||^4 + ||{a.name}'||^4) <= sqrt(2) R^2"
    elif a.diameter == 0.0 or other.diameter == 0.0:
        fixed, moving = (a, other) if a.diameter == 0.0 else (other, a)
        value, rule = fixed.radius * moving.diameter, f"|{fixed.name}| ||{moving.name} - {moving.name}'|| <= R D"
    else:
        value, rule = 2.0 * a.radius * other.radius, f"||{a.name} {other.name}^T|| + ||{a.name}' {other.name}'^T|| <= 2 R R"
    if per != 1.0:
        value, rule = value / per, f"{rule}; / {per:g}"
    return value, rule


def block(a: Part, b: Part | None, relation: Relation | str, per: float = 1.0) -> Sensitivity:
    """The declared L2 sensitivity of a Gram block (``block_value``), its derivation naming the block and the rule."""
    value, rule = block_value(a, b, relation, per)
    rel = _relation(relation)
    name = f"{a.name}^T {a.name if b is None else b.name}"
    return Sensitivity(value, "l2", rel, f"Gram block {name}, {rel.value}: {rule} (privsdr.released.gram)")


# -- the named blocks (readability at the call sites; every value comes from block_value) -----------------------------
def xtx(row_bound: float, relation: Relation | str, per: float = 1.0, square: float | None = None) -> Sensitivity:
    """X^T X of rows clipped to ||x|| <= row_bound (``square``: row_bound^2 given exactly)."""
    return block(Part.ball("x", row_bound, square), None, relation, per)


def xty(row_bound: float, label_bound: float, relation: Relation | str, per: float = 1.0) -> Sensitivity:
    """X^T y of rows ||x|| <= row_bound and labels |y| <= label_bound."""
    return block(Part.ball("x", row_bound), Part.ball("y", label_bound), relation, per)


def column_sum(row_bound: float, relation: Relation | str, per: float = 1.0, square: float | None = None) -> Sensitivity:
    """X^T 1, the column sums of rows ||x|| <= row_bound."""
    return block(Part.constant(), Part.ball("x", row_bound, square), relation, per)


def box_sum(low: np.ndarray, high: np.ndarray, relation: Relation | str, per: float = 1.0) -> Sensitivity:
    """The column sums of rows clipped entrywise into [low, high]."""
    return block(Part.constant(), Part.box("u", low, high), relation, per)


def label_sum(label_bound: float, relation: Relation | str, per: float = 1.0) -> Sensitivity:
    """y^T 1, the sum of labels clipped to |y| <= label_bound."""
    return block(Part.constant(), Part.ball("y", label_bound), relation, per)


def count(relation: Relation | str) -> Sensitivity:
    """1^T 1, the number of rows (add/remove only: under replace-one it is public)."""
    return block(Part.constant(), None, relation)


def slice_sums(row_bound: float, relation: Relation | str, per: float = 1.0, square: float | None = None) -> Sensitivity:
    """X^T e_h, the slice sums (p x H) of rows ||x|| <= row_bound."""
    return block(Part.ball("x", row_bound, square), Part.one_hot(), relation, per)


def slice_counts(relation: Relation | str, per: float = 1.0) -> Sensitivity:
    """1^T e_h, the slice counts (H)."""
    return block(Part.constant(), Part.one_hot(), relation, per)


def gram_eigenvalue(row_bound: float, relation: Relation | str, square: float | None = None) -> Sensitivity:
    """lambda_min(Z^T Z) of rows ||z|| <= row_bound: R^2 under both relations (Weyl's inequality; ``square``: R^2
    given exactly)."""
    value = block_value(Part.ball("z", row_bound, square), None, ADD_REMOVE)[0]
    rel = _relation(relation)
    return Sensitivity(value, "l2", rel, f"lambda_min(Z^T Z), {rel.value}: adding or removing z z^T (PSD, ||z z^T||_2 = "
                                          "||z||^2 <= R^2) moves it by <= R^2 (Weyl) (privsdr.released.gram)")
