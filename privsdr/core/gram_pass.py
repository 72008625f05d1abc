"""One blocked pass over the rows: the declared blocks of the Gram of the augmented row z = [u | phi(y) | 1].

The parts of z (``RowParts``, all public):

* u = clip_L2(clip_box((x - shift) / scale, box), l2): the row shifted by a public centre, divided by public
  per-column scales, clipped per column to [-box_j, box_j], then scaled down to L2 norm <= l2 (each step optional);
* phi(y): none; ``"label"`` clip(y - y_shift, -y_bound, y_bound); ``"square"`` that value squared; or ``"slices"``
  the one-hot indicators e_h of y's slice among public cut points q_1 < ... < q_{H-1} (h = #{q_j < y}), or of
  slice labels given by the caller;
* the constant 1.

The blocks (``BLOCKS``): ``count`` = sum 1, ``x_sum`` = sum u, ``xtx`` = sum u u^T, ``x_sq`` = sum u * u (the
diagonal of xtx alone), ``x_phi`` = sum u phi^T (X^T y or the p x H slice sums), ``phi_sum`` = sum phi (the label
sum or the H slice counts). Their sensitivities are ``privsdr.released.gram``'s; this module is numerics only.

The rows are read once, ``block_rows`` at a time (about 2 MB of X, so that a block stays in the CPU cache between
its reads), in one of two ways:

* **an L2 ball alone** (no shift, scale or box: AdaSSP, DPPLS S2, DPMeanCovariance without a centre): no copy of the
  block. The squared row norms q_i of the block X_b (a view of X) find the rows over the bound (s_i = l2 / sqrt(q_i)),
  and sum u u^T = X_b^T X_b - sum_{clipped} (1 - s_i^2) x_i x_i^T (one SYRK on the view, a correction for the few
  clipped rows), sum u phi^T and sum u are r^T X_b with r_i = s_i phi_i (or s_i) on the clipped rows. The norms'
  sum is finite exactly when the block is (NaN and inf reach it); a block that is not, or that holds a row beyond
  ``FAR_FACTOR`` times the bound (whose correction would cancel the other rows' digits), takes the second way.
* **otherwise** the block is shifted and clipped into one reused buffer U (a box of one width is one scalar clip
  straight from X's block), its finiteness checked by one reduction of the cached block before the clip hides an
  inf, then one SYRK U^T U and one product U^T phi.

phi(y)'s sums come from y's block itself (slice counts by ``np.bincount``). No copy of X is made beyond one block.
``gram_sums`` takes an in-memory array; a chunk of ``privsdr.Chunks`` or a dask partition is such an array, and the
sums of the chunks add up (``add_sums``).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import numpy as np

from .arrays import FloatArray

BLOCKS = ("count", "x_sum", "xtx", "x_sq", "x_phi", "phi_sum")
PHI = ("none", "label", "square", "slices")

#: bytes of X in one block of rows: the block stays in the CPU cache (L2/L3) between its reads, and is large enough
#: that the per-block Python calls are a small part of its cost (``benchmarks/bench_one_pass.py --block-rows``)
BLOCK_BYTES = 1 << 21
#: a block whose clipped rows all lie within this factor of the L2 bound is corrected in its Gram, not copied
FAR_FACTOR = 4.0


@attrs.frozen
class RowParts:
    """The declared parts of the augmented row (see the module docstring); arrays are per column or scalars."""

    shift: Any = None
    scale: Any = None
    box: Any = None
    l2: float | None = None
    phi: str = "none"
    y_shift: float = 0.0
    y_bound: float | None = None
    cuts: Any = None
    n_slices: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.phi not in PHI:
            raise ValueError(f"phi must be one of {PHI}, got {self.phi!r}")
        if self.phi == "slices" and self.cuts is None and self.n_slices is None:
            raise ValueError("slice indicators need public cut points or the number of slices (with given labels)")

    @property
    def width(self) -> int:
        """Columns of phi(y)."""
        if self.phi == "none":
            return 0
        if self.phi == "slices":
            return int(self.n_slices) if self.n_slices is not None else len(np.atleast_1d(self.cuts)) + 1
        return 1


def block_rows_for(p: int, k: int = 0) -> int:
    """Rows per block: the power of two nearest below ``BLOCK_BYTES`` of rows of width p + k + 1, within 2^12..2^16."""
    rows = BLOCK_BYTES // (8 * (p + k + 1))
    return int(min(1 << 16, max(1 << 12, 1 << max(0, rows.bit_length() - 1))))


def empty_sums(p: int, parts: RowParts, blocks: Iterable[str]) -> dict[str, Any]:
    """The accumulators of ``blocks`` for rows of width p (zeros)."""
    k = parts.width
    shapes = {"count": (), "x_sum": (p,), "xtx": (p, p), "x_sq": (p,), "x_phi": (p, k), "phi_sum": (k,)}
    return {name: np.zeros(shapes[name]) for name in _checked_blocks(blocks, parts)}


def _checked_blocks(blocks: Iterable[str], parts: RowParts) -> tuple[str, ...]:
    names = tuple(blocks)
    unknown = [b for b in names if b not in BLOCKS]
    if unknown:
        raise ValueError(f"unknown Gram blocks {unknown}; expected some of {BLOCKS}")
    if parts.phi == "none" and any(b in ("x_phi", "phi_sum") for b in names):
        raise ValueError("the blocks x_phi and phi_sum need a label part phi(y)")
    return names


def gram_sums(X: Any, y: Any, parts: RowParts, blocks: Iterable[str], *, labels: Any = None, name: str = "X",
              block_rows: int | None = None) -> dict[str, Any]:
    """The wanted blocks (``BLOCKS``) summed over the rows of X (n x p, any real dtype) and y, in one blocked pass.

    ``labels``: slice labels 0..n_slices-1 given by the caller (``phi="slices"`` without cut points). ValueError if
    a row of X (or a used y) holds NaN or inf, named ``name``."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {X.shape}")
    n, p = X.shape
    names = _checked_blocks(blocks, parts)
    sums = empty_sums(p, parts, names)
    if n == 0:
        return sums
    k = parts.width
    rows = min(n, block_rows or block_rows_for(p, k))
    rule = _Rule(parts, p)
    cuts = None if parts.cuts is None else np.asarray(parts.cuts, dtype=float)
    y_all = None if y is None else np.asarray(y).reshape(-1)
    if rule.direct and ("x_sq" not in names or "xtx" in names):
        with np.errstate(over="ignore", invalid="ignore"):
            _direct_pass(X, y_all, labels, parts, rule, sums, names, cuts, name, rows)
        if "count" in names:
            sums["count"] = np.asarray(float(n))
        return sums
    U = np.empty((rows, p))  # the clipped block (contiguous: numpy's broadcasting loops are slow on strided views)
    P = np.empty((rows, k)) if k else None
    with np.errstate(over="ignore", invalid="ignore"):  # NaN, inf and overflow are found and handled per block
        _blocked_pass(X, y_all, labels, parts, rule, U, P, sums, names, cuts, name)
    if "xtx" in names:
        sums["xtx"] = (sums["xtx"] + sums["xtx"].T) / 2.0
    if "count" in names:
        sums["count"] = np.asarray(float(n))
    return sums


def _blocked_pass(X: np.ndarray, y_all: np.ndarray | None, labels: Any, parts: RowParts, rule: _Rule, U: FloatArray,
                  P: FloatArray | None, sums: dict[str, Any], names: tuple[str, ...], cuts: FloatArray | None,
                  name: str) -> None:
    """The pass that clips each block into the reused buffer U (a shift, a scale or a box), then one SYRK U^T U and
    one product U^T phi per block."""
    n = X.shape[0]
    rows = U.shape[0]
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        Ub = U[: stop - start]
        rule.clip_into(Ub, X[start:stop], name)
        Pb = None
        if P is not None:
            Pb = P[: stop - start]
            phi_sum = _phi_into(Pb, None if y_all is None else y_all[start:stop],
                                None if labels is None else labels[start:stop], parts, cuts)
            if "phi_sum" in names:
                sums["phi_sum"] += phi_sum
        _add_reductions(sums, Ub, Pb, names)


def _direct_pass(X: np.ndarray, y_all: np.ndarray | None, labels: Any, parts: RowParts, rule: _Rule, sums: dict[str, Any],
                 names: tuple[str, ...], cuts: FloatArray | None, name: str, rows: int) -> None:
    """The pass when u is x scaled down to the L2 ball (no shift, scale or box): no copy of a block of X.

    Per block X_b (a view of X, or its float64 conversion): the squared row norms q_i = ||x_i||^2 (their sum is finite
    exactly when every entry of the block is finite and no square overflows; otherwise the block goes through the
    copying rule, which refuses NaN and inf and handles overflow), the rows over the bound, c = {i: q_i > l2^2},
    with s_i = l2 / sqrt(q_i), and

        sum_b u u^T = X_b^T X_b - sum_{i in c} (1 - s_i^2) x_i x_i^T      (one SYRK on the view, a small correction)
        sum_b u [phi | 1]^T = X_b^T [r * phi | r],   r_i = s_i on c, 1 elsewhere.

    Exact in real arithmetic; in floating point the correction cancels about ||x_i||^2 per clipped row, so a block
    with a row beyond ``FAR_FACTOR`` times the bound is clipped in a copy instead (rounding then stays within a small
    factor of the plain clip-then-multiply's)."""
    n, p = X.shape
    k = parts.width
    gram = "xtx" in names or "x_sq" in names
    phi_cols = k if "x_phi" in names else 0
    with_sum = "x_sum" in names
    width = phi_cols + int(with_sum)
    G = np.zeros((p, p)) if gram else None
    C = np.zeros((width, p))
    R = np.empty((width, rows))  # one row per cross term: each is one matrix-vector product r^T X_b
    if with_sum:
        R[phi_cols] = 1.0
    P = np.empty((rows, k)) if k else None
    convert = X.dtype != np.float64
    B = np.empty((rows, p)) if convert else None
    U: FloatArray | None = None  # the copy for blocks that need it, made when first needed
    bound2 = None if rule.l2 is None else rule.l2 * rule.l2
    far2 = None if rule.l2 is None else (FAR_FACTOR * rule.l2) ** 2
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        m = stop - start
        Xb = X[start:stop]
        if B is not None:
            np.copyto(B[:m], Xb, casting="same_kind")
            Xb = B[:m]
        Pb = None
        if P is not None:
            Pb = P[:m]
            phi_sum = _phi_into(Pb, None if y_all is None else y_all[start:stop],
                                None if labels is None else labels[start:stop], parts, cuts)
            if "phi_sum" in names:
                sums["phi_sum"] += phi_sum
        clipped = _clipped_rows(Xb, bound2, far2)
        if clipped is None:  # non-finite, overflowing or far rows: the rule on a copy of the block
            if U is None:
                U = np.empty((rows, p))
            rule.clip_into(U[:m], Xb, name)
            Xb, clipped = U[:m], _NONE_CLIPPED
        idx, q = clipped
        s = None if not idx.size else float(rule.l2 or 0.0) / np.sqrt(q)
        if G is not None:
            G += Xb.T @ Xb
            if s is not None:
                Xc = Xb[idx]
                G -= Xc.T @ (Xc * (1.0 - s * s)[:, None])
        if width:
            Rb = R[:, :m]
            if phi_cols:
                Rb[:phi_cols] = Pb.T  # type: ignore[union-attr]
            if s is not None:
                if phi_cols:
                    Rb[:phi_cols, idx] *= s
                if with_sum:
                    Rb[phi_cols, idx] = s
            for j in range(width):
                C[j] += Rb[j] @ Xb
            if s is not None and with_sum:
                Rb[phi_cols, idx] = 1.0
    if G is not None:
        G = (G + G.T) / 2.0
        if "xtx" in names:
            sums["xtx"] = G
        if "x_sq" in names:
            sums["x_sq"] = np.diag(G).copy()
    if phi_cols:
        sums["x_phi"] = C[:phi_cols].T.copy()
    if with_sum:
        sums["x_sum"] = C[phi_cols].copy()


_NONE_CLIPPED = (np.zeros(0, dtype=np.intp), np.zeros(0))


def _clipped_rows(Xb: FloatArray, bound2: float | None, far2: float | None) -> tuple[np.ndarray, FloatArray] | None:
    """(indices, squared norms) of the block's rows beyond the L2 bound, or None when the block needs the copying
    rule: an entry NaN or inf or a square that overflows (the sum of the squared norms is then not finite: NaN and
    inf reach it, inf - inf cannot occur in a sum of squares), or a clipped row beyond ``FAR_FACTOR`` times the bound."""
    q = np.einsum("ij,ij->i", Xb, Xb)
    if not np.isfinite(q.sum()):
        return None
    if bound2 is None:
        return _NONE_CLIPPED
    idx = np.flatnonzero(q > bound2)
    if not idx.size:
        return _NONE_CLIPPED
    qc = q[idx]
    if far2 is not None and qc.max() > far2:
        return None
    return idx, qc


def _column(value: Any, p: int) -> FloatArray | None:
    if value is None:
        return None
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0 or arr.size == 1:
        return np.full(p, float(arr.reshape(-1)[0]))
    if arr.shape != (p,):
        raise ValueError(f"a per-column value has {arr.size} entries for {p} columns")
    return arr


class _Rule:
    """The clip rule of x for rows of width p: u = clip_L2(clip_box((x - shift) / scale, box), l2).

    A box of one width b for every column is one scalar clip of (x - shift) / scale into [-b, b]; per-column widths
    are a scalar clip of (x - shift) / (scale box) into [-1, 1], times the box (numpy's clip with per-column bounds is
    many times slower than its scalar clip)."""

    def __init__(self, parts: RowParts, p: int) -> None:
        shift = _column(parts.shift, p)
        self.shift = shift if shift is not None and np.any(shift) else None  # a zero shift is no shift: one pass fewer
        scale, self.box = _column(parts.scale, p), _column(parts.box, p)
        self.scale = scale
        self.uniform_box = float(self.box[0]) if self.box is not None and np.all(self.box == self.box[0]) else None
        if self.box is None or self.uniform_box is not None:
            self.inverse = None if scale is None else 1.0 / scale
        else:
            self.inverse = 1.0 / ((1.0 if scale is None else scale) * self.box)
        self.l2 = None if parts.l2 is None else float(parts.l2)
        #: u is x scaled down to the L2 ball (or x itself): the pass reads X's blocks without copying them
        self.direct = self.shift is None and self.scale is None and self.box is None

    def clip_into(self, U: FloatArray, Xb: np.ndarray, name: str) -> None:
        """U <- the clip rule applied to the block Xb, its finiteness checked on the cached block.

        Each step reads the previous one's result (X's block itself while nothing has been written to U), so that a
        one-step rule (a box of one width, an L2 ball) is one pass writing U plus one reduction."""
        src: np.ndarray = Xb if Xb.dtype == np.float64 else U
        if src is U:
            np.copyto(U, Xb, casting="same_kind")
        if self.shift is not None:
            np.subtract(src, self.shift, out=U)
            src = U
        if self.inverse is not None:
            np.multiply(src, self.inverse, out=U)
            src = U
        norms = None
        if self.box is None and self.l2 is not None:  # the norms the L2 clip needs: NaN and inf reach them too
            norms = np.sqrt(np.einsum("ij,ij->i", src, src))
            finite = bool(np.isfinite(norms).all())
        else:
            finite = bool(np.isfinite(src.sum()))
        if not finite:
            if not (np.isfinite(Xb.min()) and np.isfinite(Xb.max())):  # NaN propagates through min/max
                raise ValueError(f"{name} contains NaN or inf")
            if not (np.isfinite(src.min()) and np.isfinite(src.max())):  # finite values that overflow after the shift
                self._clip_halved(U, Xb)
                return
            norms = None  # finite values whose squares overflow: _scale_to_ball handles those rows
        if self.uniform_box is not None:
            np.clip(src, -self.uniform_box, self.uniform_box, out=U)
        elif self.box is not None:
            np.clip(src, -1.0, 1.0, out=U)
            U *= self.box
        elif src is not U:
            np.copyto(U, src)
        if self.l2 is not None:
            _scale_to_ball(U, self.l2, norms)

    def _clip_halved(self, U: FloatArray, Xb: np.ndarray) -> None:
        """The rule on halved values (x/2 - shift/2 cannot overflow), doubled after clipping."""
        np.multiply(Xb, 0.5, out=U)
        if self.shift is not None:
            U -= self.shift * 0.5
        if self.scale is not None:
            U /= self.scale
        if self.box is not None:
            np.clip(U, -self.box * 0.5, self.box * 0.5, out=U)
        if not (np.isfinite(U.min()) and np.isfinite(U.max())):
            raise ValueError("a row overflows after its public shift and scale (values near the float64 limit)")
        if self.l2 is not None:
            _scale_to_ball(U, self.l2 * 0.5)
        U *= 2.0


def _scale_to_ball(U: FloatArray, bound: float, norms: FloatArray | None = None) -> None:
    """Each row scaled down to L2 norm <= bound: u * min(1, bound / ||u||) (``norms``: the rows' norms, if known)."""
    if norms is None:
        norms = np.sqrt(np.einsum("ij,ij->i", U, U))
    wide = ~np.isfinite(norms)
    if wide.any() and np.isfinite(bound):  # squares that overflow: far beyond the bound, so the row's direction times it
        W = U[wide] / np.max(np.abs(U[wide]), axis=1)[:, None]
        U[wide] = W * (bound / np.linalg.norm(W, axis=1))[:, None]
        norms[wide] = bound
    over = norms > bound
    count = int(np.count_nonzero(over))
    if 2 * count > len(norms):  # most rows clipped: one multiply of the block
        with np.errstate(divide="ignore"):
            U *= np.minimum(1.0, bound / norms)[:, None]
    elif count:  # a few rows clipped: only those
        U[over] *= (bound / norms[over])[:, None]


def _phi_into(P: FloatArray, yb: np.ndarray | None, labels: np.ndarray | None, parts: RowParts,
              cuts: FloatArray | None) -> FloatArray:
    """P (a contiguous block of rows) <- phi(y) of the block's rows; returns its column sums."""
    if parts.phi == "slices":
        if labels is None:
            if yb is None or cuts is None:
                raise ValueError("slice indicators need y and public cut points, or slice labels")
            labels = np.searchsorted(cuts, _finite_y(yb), side="left")
        m, k = P.shape
        counts = np.bincount(labels, minlength=k)  # ValueError on a negative label
        if counts.size > k:
            raise ValueError(f"a slice label is beyond the {k} slices")
        P.fill(0.0)
        P.reshape(-1)[np.arange(0, m * k, k) + labels] = 1.0  # one-hot rows, by flat index
        return counts.astype(float)
    if yb is None:
        raise ValueError("the label part phi(y) needs y")
    t = _finite_y(yb) - parts.y_shift  # contiguous, then one copy into the buffer's column
    if parts.y_bound is not None:
        np.clip(t, -parts.y_bound, parts.y_bound, out=t)
    if parts.phi == "square":
        t *= t
    P[:, 0] = t
    return np.array([t.sum()])


def _finite_y(yb: np.ndarray) -> np.ndarray:
    yv = np.asarray(yb, dtype=float)
    if not np.isfinite(yv.sum()) and not np.all(np.isfinite(yv)):
        raise ValueError("y contains NaN or inf")
    return yv


def _add_reductions(sums: dict[str, Any], U: FloatArray, P: FloatArray | None, names: tuple[str, ...]) -> None:
    """The wanted sums of one clipped block U (column sums by a matrix-vector product: faster than sum(axis=0))."""
    if "xtx" in names:
        sums["xtx"] += U.T @ U  # SYRK
    if "x_sum" in names:
        sums["x_sum"] += np.ones(U.shape[0]) @ U
    if "x_sq" in names:
        sums["x_sq"] += np.einsum("ij,ij->j", U, U)
    if "x_phi" in names and P is not None:
        sums["x_phi"] += U.T @ P


def add_sums(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> dict[str, Any]:
    """Two row sets' blocks added (the sums of row chunks add up to the sums of their union)."""
    if a is None:
        return dict(b)
    return {name: a[name] + b[name] for name in b}
