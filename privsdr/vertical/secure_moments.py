"""DP SIR and DP mean / covariance / PCA on vertically partitioned data, from a secure Gram (issue 34, item 4).

The parties hold column blocks of the same N aligned rows; one of them (the label holder) also holds y. Each data
party shifts its columns by a public centre, clips its own rows to its public bound C_i (the whole row then has
||x|| <= C = sqrt(sum C_i^2)) and rounds them to the public fixed-point grid 2^e; the label holder turns y into the
one-hot slice indicators e_h of public cut points (``core.slice_by_cut_points``). These are column groups of the
augmented row z = [x_1 ... x_k | e | 1], and the estimators release blocks of its Gram (``secure.crossproducts``:
cross-blocks on MPyC's Shamir shares, every party adds a discrete Gaussian share, only the noisy blocks are opened):

* ``SecureVerticalSIR``: X^T X (``second_moment``), the slice sums X^T e_h (``slice_sums``) and the slice counts
  1^T e_h (``slice_counts``): the three nodes of ``released.moments.add_moment_nodes`` (replace-one, N public,
  sensitivities sqrt(2) C^2, 2 C and sqrt(2) from ``released.gram``) as sums, divided by the public N afterwards;
  the directions are DPSIR's post-processing of the moments (``MomentRelease.from_released``; Li 1991 for SIR,
  Analyze-Gauss of Dwork, Talwar, Thakurta & Zhang 2014 for the second moment).
* ``SecureVerticalMeanCovariance``: the column sums X^T 1 (``mean``, sensitivity 2C) and X^T X (``second_moment``),
  divided by N: ``DPMeanCovariance``'s releases and post-processing (the mean projected onto ||m|| <= C, the
  covariance S - m m^T onto the PSD cone), and its top eigenvectors (``n_components``: PCA).

Scale: the rows are multiplied by the public power of two s with s C in [2^-1/2, 2^1/2] (``unit_scale``: a function
of the public bounds only) so that the slice indicators and the constant (the real number 1) lie on the grid; the
released arrays and their public noise sds are divided by s (sums) or s^2 (X^T X) afterwards (post-processing).

Trust (``privsdr.secure.trust``): semi-honest parties, at most t colluding (t < m/2, a helper joins when fewer than
3 data parties); every party receives Shamir shares of the other parties' rounded columns (and of the label
holder's rounded slice indicators), the resharings of the cross-products and the opened noisy blocks; y itself never
leaves the label holder, only its slice indicators, secret-shared. Under replace-one with N public, a data party's
own values in one row are a replacement of that row: protected at the run's (epsilon, delta).

Memory (``chunks``): a party reading its rows as ``Chunks`` is checked in a first pass (every chunk finite and of its
width, the rows counted against its public ``n_rows``) before anything is agreed or charged; after the charge its
chunks are read again, clipped and rounded one at a time and streamed to its party process as the secure
cross-products consume them (``CrossProducts.share_rows`` rows at a time; ``crossproducts.ColumnStream``), so neither
the launcher nor the party process holds its whole block: their memory does not grow with N. The label holder's
slice indicators are streamed alike (y itself stays in its memory).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from .. import core
from ..accounting import Budget, Ledger
from ..algorithms._base import PrivateEstimator, check_matrix, check_positive, check_random_state, diagnostic_rng, for_ledger
from ..algorithms.dpsir import sir_from_released
from ..algorithms.mean_covariance import mean_covariance_from_released
from ..errors import ValidationError
from ..network.addresses import check_addresses
from ..parties.layout import Layout, Party, is_block_list, pooled_label
from ..persistence import model_class
from ..plan import CalibratedPlan, Plan, Run
from ..released import Released, from_run, gram
from ..released.fitted import Fitted
from ..released.moments import (
    add_moment_nodes,
)
from ..secure import crossproducts
from ..secure.aggregate import agreed_parties, gram_job, secure_gram_release
from .secure_parties import HELPER, mpc_parties
from .secure_rows import checked_parties, read_block
from .secure_run import _is_party_list, helpers_of, party_bounds

RELATION = "replace_one"
#: the column groups of the slice indicators and of the constant (a data party may not take these names)
SLICES, CONSTANT = "e", "1"
#: a public cap on N: the fixed-point grid is set from it (never from the data's own N)
MAX_ROWS = 2**24


def unit_scale(row_bound: float) -> float:
    """The public power of two s with s C in [2^-1/2, 2^1/2] (module docstring): a function of the public bound only."""
    return float(2.0 ** -round(math.log2(row_bound)))


class _SecureVerticalMoments(PrivateEstimator):
    """The secure part shared by the two estimators: public checks, the parties, the layout and the run."""

    _requires_y = False
    _name = ""

    def _common(self, row_bound: Any, x_center: Any, colluders: int, helper: Any, timeout: float, max_rows: int, tls: bool,
                n_parties: int | None, budget: Any, ledger: Any, accountant: str, tight: bool, random_state: Any,
                addresses: Any = None, certificates: Any = None) -> None:
        self.row_bound = row_bound
        self.x_center = x_center
        self.colluders = colluders
        self.helper = helper
        self.timeout = timeout
        self.max_rows = max_rows
        self.tls = tls
        self.n_parties = n_parties
        self.budget = budget
        self.ledger = ledger
        self.accountant = accountant
        self.tight = tight
        self.random_state = random_state
        self.addresses = addresses
        self.certificates = certificates

    def _checked(self, names: list[str], widths: list[int]) -> dict[str, Any]:
        """Every public parameter, checked before anything is read or charged."""
        bounds = party_bounds(self.row_bound, names)
        m = sum(widths)
        x_center = np.zeros(m) if self.x_center is None else np.asarray(self.x_center, dtype=float).reshape(-1)
        if x_center.shape != (m,) or not np.all(np.isfinite(x_center)):
            raise ValidationError(f"x_center must be {m} finite public numbers (one per column, pooled order)")
        parties, t = mpc_parties(names, self.colluders, self.helper, (HELPER, SLICES, CONSTANT))
        max_rows = self.max_rows
        if isinstance(max_rows, bool) or not isinstance(max_rows, (int, np.integer)) or max_rows < 1:
            raise ValidationError(f"max_rows must be a positive integer, got {max_rows!r}")
        if not isinstance(self.tls, (bool, np.bool_)):
            raise ValidationError(f"tls must be True or False (False: plaintext channels, asked for explicitly), got {self.tls!r}")
        addresses = check_addresses(self.addresses, parties) if self.addresses is not None else None
        timeout = check_positive(self.timeout, "timeout")
        check_random_state(self.random_state)
        C = math.sqrt(sum(b * b for b in bounds.values()))
        s = unit_scale(C)
        exponent = crossproducts.grid_exponent(int(max_rows), max(C * s, 1.0), len(parties))
        if exponent > 0:  # the indicators and the constant (1) must lie on the grid
            raise ValidationError(f"max_rows = {max_rows} is too large for one secure Gram (its grid would be coarser than 1)")
        return {"bounds": bounds, "scaled": {n: b * s for n, b in bounds.items()}, "C": C, "scale": s, "x_center": x_center,
                "parties": parties, "t": t, "exponent": exponent, "one": 2 ** -exponent, "timeout": timeout,
                "max_rows": int(max_rows), "tls": bool(self.tls), "addresses": addresses}

    def _layout_of(self, X: Any, y: Any) -> tuple[list[Party], Layout]:
        """The parties and their public layout, checked. A ``Party`` whose X is ``Chunks`` (with its public ``n_rows``
        and ``n_features``) is read later, chunk by chunk (``read_block``); every other block is checked here."""
        from .estimator import _pooled_blocks

        if _is_party_list(X):
            if y is not None:
                raise ValidationError("with Party objects, y belongs to its party: do not pass y to fit")
            parties = list(X)
        else:
            blocks = X if is_block_list(X) else _pooled_blocks(X, self.n_parties)
            y = pooled_label(y) if self._requires_y else None
            if self._requires_y and y is None:
                raise ValidationError(f"{type(self).__name__} requires y (the first block's party holds it), but the target y is None")
            parties = [Party(f"party{i}", b, y if i == 0 else None) for i, b in enumerate(blocks)]
        return checked_parties(parties, min_rows=2)

    def _groups(self, c: dict[str, Any], layout: Layout) -> list[crossproducts.Group]:
        return [crossproducts.Group(p.name, p.n_columns, p.name) for p in layout.parties]

    def _secure_fit(self, X: Any, y: Any, algorithm: str) -> tuple[Released, dict[str, Any], Layout, Any]:
        """Check, plan, run the secure Gram; the Released as opened (the sums; ``per_row`` brings them to the columns' units)."""
        parties, layout = self._layout_of(X, y)
        names, widths = [p.name for p in layout.parties], [p.n_columns for p in layout.parties]
        c = self._checked(names, widths)
        N = layout.n_rows
        if N > c["max_rows"]:
            raise ValidationError(f"{N} rows exceed max_rows = {c['max_rows']} (the public cap that sets the fixed-point grid): raise max_rows")
        c.update(self._statistic_checks(parties, layout, c))
        budget, ledger = self._resolve_budget()
        plan = self._plan(c, N, sum(widths))
        calibrated = for_ledger(plan, ledger).allocate(budget, accountant=ledger.accountant, tight=self.tight)
        products = crossproducts.CrossProducts(N, self._groups(c, layout), self._blocks(c, layout), c["exponent"])
        arrays: dict[str, dict[str, Any]] = {}
        at = 0
        for party, w in zip(parties, widths, strict=True):
            arrays[party.name] = {"block": read_block(party.X, c["x_center"][at:at + w], c["scale"], c["scaled"][party.name], c["exponent"])}
            at += w
        arrays = self._label_arrays(parties, c, arrays)
        bound = c["max_rows"] * max(c["C"] * c["scale"], 1.0) ** 2  # every entry of the Gram, real units: sizes the field
        job = gram_job(calibrated, products, parties=c["parties"], threshold=c["t"], bound=bound, timeout=c["timeout"],
                       addresses=c["addresses"], tls=c["tls"])
        session = agreed_parties(job, products.inputs(arrays), certificates=self.certificates)  # every party ready before the run (and journal) is opened
        try:
            with Run(calibrated, ledger, random_state=self.random_state, data_shape=(N, sum(widths)), algorithm=algorithm,
                     notes=["the blocks were computed inside a secure computation (MPyC) from the parties' clipped, rounded "
                            "columns; every party added a discrete Gaussian share and only the noisy blocks were opened"]) as run:
                done = secure_gram_release(run, products, arrays, parties=c["parties"], threshold=c["t"], bound=bound,
                                           timeout=c["timeout"], helper=helpers_of(c["parties"], products.parties),
                                           addresses=list(session.job.addresses), tls=c["tls"], certificates=self.certificates,
                                           session=session)
        finally:
            session.__exit__(None, None, None)
        released = from_run(run, [b.name for b in products.blocks], n=N, source="secure vertical Gram")  # the opened sums
        self.plan_, self.ledger_, self.parties_, self.layout_ = calibrated, ledger, c["parties"], layout
        self.secure_cost_ = {"seconds": done.opened.seconds, "bytes_sent": dict(done.opened.bytes_sent), "field_bits": done.job.bits,
                             "peak_rss_kib": dict(done.opened.peak_rss_kib)}
        return released, c, layout, run

    def _statistic_checks(self, parties: list[Party], layout: Layout, c: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _label_arrays(self, parties: list[Party], c: dict[str, Any], arrays: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return arrays

    def _plan(self, c: dict[str, Any], N: int, p: int) -> Plan:
        raise NotImplementedError

    def _blocks(self, c: dict[str, Any], layout: Layout) -> list[crossproducts.Block]:
        raise NotImplementedError

    def _public(self, c: dict[str, Any], N: int) -> dict[str, Any]:
        return {"n": N, "row_bounds": c["bounds"], "unit_scale": c["scale"], "parties": c["parties"], "colluders": c["t"],
                "max_rows": c["max_rows"], "grid_exponent": c["exponent"], "aggregation": "secure vertical Gram (MPyC)"}

    def plan(self, widths: Mapping[str, int], n_samples: int) -> CalibratedPlan:
        """The calibrated plan for blocks of these widths (party -> width) and N rows: ``.cost()`` prices it."""
        names, w = list(widths), [int(v) for v in widths.values()]
        c = self._checked(names, w)
        budget, ledger = self._resolve_budget()
        return for_ledger(self._plan(c, int(n_samples), sum(w)), ledger).allocate(budget, accountant=ledger.accountant, tight=self.tight)


#: how many x-columns (scaled by s) each block's entries carry: 2 for X^T X, 1 for sums of x, 0 for counts
SIR_DEGREES = {"slice_sums": 1, "slice_counts": 0, "second_moment": 2}
MEAN_COVARIANCE_DEGREES = {"mean": 1, "second_moment": 2}


def secure_sir_from_released(opened: Released, *, n_directions: int, cut_points: np.ndarray, x_center: np.ndarray, scale: float,
                             rng: np.random.Generator | None = None) -> Fitted:
    """SecureVerticalSIR from its opened record (the sums as released, N public): ``per_row`` (the public N and unit
    scale s), the slice sums as p x H, then DPSIR's consumer ``sir_from_released``. Post-processing only."""
    rows = per_row(opened, opened.n, scale, SIR_DEGREES)
    p, H = rows["second_moment"].shape[0], len(cut_points) + 1
    rows = attrs.evolve(rows, arrays={**rows.arrays, "slice_sums": rows["slice_sums"].reshape(p, H)})
    fitted = sir_from_released(rows, n_directions=n_directions, cut_points=cut_points, center=x_center, rng=rng)
    a = fitted.attributes
    return attrs.evolve(fitted, attributes={**a, "released_": opened, "mean_": a["center_"], "random_subspace_error_": a["random_error_"]})


def secure_mean_covariance_from_released(opened: Released, *, clip: float, x_center: np.ndarray, scale: float,
                                         n_components: int | None) -> Fitted:
    """SecureVerticalMeanCovariance from its opened record: ``per_row``, then DPMeanCovariance's consumer
    ``mean_covariance_from_released``, and PCA of the covariance (its top ``n_components`` eigenvectors)."""
    fitted = mean_covariance_from_released(per_row(opened, opened.n, scale, MEAN_COVARIANCE_DEGREES), clip, x_center)
    a = fitted.attributes
    values, vectors = np.linalg.eigh(a["covariance_"])
    order = np.argsort(values)[::-1][: n_components or values.size]
    return attrs.evolve(fitted, attributes={**a, "released_": opened, "components_": vectors[:, order].T,
                                            "explained_variance_": values[order]})


def per_row(released: Released, n: int, scale: float, degrees: Mapping[str, int]) -> Released:
    """The opened sums divided by the public N and by s^degree (back to the columns' own units), with their public
    noise sds and grids alike: post-processing of the release (module docstring)."""
    factor = {k: 1.0 / (n * scale ** degrees[k]) for k in released.arrays}
    return attrs.evolve(released, arrays={k: v * factor[k] for k, v in released.arrays.items()},
                        scales={k: v * factor[k] for k, v in released.scales.items()},
                        grid={k: v * factor[k] for k, v in released.grid.items()})


@model_class
class SecureVerticalSIR(_SecureVerticalMoments):
    """DP sliced inverse regression on vertically partitioned data (module docstring).

    Parameters
    ----------
    n_components: K, the number of directions. cut_points: public, increasing cut points of y (H = len + 1 slices;
        never read off y). row_bound: public bound C_i on every row of a party's block (one number or party ->
        number). x_center: public centres of the columns (pooled order; default 0). colluders, helper, timeout,
        max_rows, tls, n_parties, budget, ledger, accountant, tight, random_state, addresses (one ``host:port`` per party
        in MPyC's order, helper first; default free ports on 127.0.0.1), certificates: as ``SecureVerticalRegression``.

    After ``fit`` (by DPSIR's consumer ``sir_from_released``, so with DPSIR's attributes): ``directions_`` (p x K, pooled
    column order), ``eigenvalues_`` (H - 1), ``mean_`` (= ``center_``), ``released_`` (the
    opened sums as released), ``noise_error_`` and ``random_subspace_error_`` (the noise diagnostic), ``privacy_report_``
    (with ``trust_model``), ``secure_cost_``.
    """

    model_attributes = ("directions_", "eigenvalues_", "mean_", "n_features_in_")
    model_required = ("directions_",)
    _requires_y = True

    def __init__(self, n_components: int = 1, *, cut_points: Any = None, row_bound: Any = None, x_center: Any = None,
                 colluders: int = 1, helper: Any = "auto", timeout: float = 120.0, max_rows: int = MAX_ROWS, tls: bool = True,
                 n_parties: int | None = None, budget: Budget | tuple[float, float] | None = None, ledger: Ledger | None = None,
                 accountant: str = "best", tight: bool = True, random_state: Any = None, addresses: Any = None,
                 certificates: Any = None) -> None:
        self.n_components = n_components
        self.cut_points = cut_points
        self._common(row_bound, x_center, colluders, helper, timeout, max_rows, tls, n_parties, budget, ledger, accountant, tight,
                     random_state, addresses, certificates)

    def _cuts(self) -> np.ndarray:
        if self.cut_points is None:
            raise ValidationError("cut_points (public, increasing cut points of y) are required; they are never read off y")
        cuts = np.asarray(self.cut_points, dtype=float).reshape(-1)
        if cuts.size < 1 or not np.all(np.isfinite(cuts)) or np.any(np.diff(cuts) <= 0):
            raise ValidationError(f"cut_points must be one or more finite, strictly increasing numbers, got {self.cut_points!r}")
        return cuts

    def _checked(self, names: list[str], widths: list[int]) -> dict[str, Any]:
        c = super()._checked(names, widths)
        cuts = self._cuts()
        K = self.n_components
        if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or not 1 <= K <= min(sum(widths), cuts.size):
            raise ValidationError(f"n_components must be an integer in [1, min(p, H - 1) = {min(sum(widths), cuts.size)}], got {K!r}")
        return {**c, "cuts": cuts, "H": cuts.size + 1, "K": int(K)}

    def _statistic_checks(self, parties: list[Party], layout: Layout, c: dict[str, Any]) -> dict[str, Any]:
        labels = [p for p in parties if p.holds_label]
        if len(labels) != 1:
            raise ValidationError(f"exactly one party must hold y, got {len(labels)}")
        return {"label": labels[0].name}

    def _plan(self, c: dict[str, Any], N: int, p: int) -> Plan:
        plan = Plan("secure_vertical_sir", RELATION, {**self._public(c, N), "p": p, "cut_points": c["cuts"].tolist()})
        add_moment_nodes(plan, N, p, np.zeros(p), (), n_slices=c["H"], distributed=(len(c["parties"]), c["t"]),
                         row_bound=c["C"] * c["scale"], per=1.0, grid_exponent=2 * c["exponent"])
        return plan

    def _groups(self, c: dict[str, Any], layout: Layout) -> list[crossproducts.Group]:
        label = next(p.name for p in layout.parties if p.holds_label)
        return super()._groups(c, layout) + [crossproducts.Group(SLICES, c["H"], label, "slices", description="slice indicators"),
                                             crossproducts.Group(CONSTANT, 1, value=c["one"], description="constant")]

    def _blocks(self, c: dict[str, Any], layout: Layout) -> list[crossproducts.Block]:
        x = tuple(p.name for p in layout.parties)
        return [crossproducts.Block("slice_sums", x, (SLICES,), description="slice sums X^T e_h"),
                crossproducts.Block("slice_counts", (CONSTANT,), (SLICES,), description="slice counts 1^T e_h"),
                crossproducts.Block("second_moment", x, description="X^T X")]

    def _label_arrays(self, parties: list[Party], c: dict[str, Any], arrays: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        holder = next(p for p in parties if p.holds_label)
        y, H, one = np.asarray(holder.y, dtype=float), c["H"], c["one"]

        def read() -> Any:  # the slice indicators, a chunk of rows at a time (never an N x H block)
            for start in range(0, y.size, crossproducts.SHARE_ROWS):
                labels = core.slice_by_cut_points(y[start:start + crossproducts.SHARE_ROWS], c["cuts"])
                indicators = np.zeros((labels.size, H), dtype=np.int64)
                indicators[np.arange(labels.size), labels] = one  # e_h on the grid: the real number 1 is 2^-e grid steps
                yield indicators

        arrays[holder.name]["slices"] = crossproducts.ColumnStream(read, y.size, H)
        return arrays

    def fit(self, X: Any, y: Any = None) -> SecureVerticalSIR:
        """Fit on ``Party`` objects, column blocks and y, or a pooled X and y with ``n_parties``: every party runs as
        its own MPyC process on 127.0.0.1. Everything is checked before anything is charged."""
        X_raw = X
        released, c, layout, run = self._secure_fit(X, y, "SecureVerticalSIR")
        p = sum(q.n_columns for q in layout.parties)
        # DPSIR's consumer on the opened record alone (the bootstrap's own stream, never the noise's)
        fitted = secure_sir_from_released(released, n_directions=c["K"], cut_points=c["cuts"], x_center=c["x_center"],
                                          scale=c["scale"], rng=diagnostic_rng(self.random_state))
        self.privacy_report_ = fitted.apply(self, run.report, stacklevel=3)
        self._record_features(X_raw if not is_block_list(X_raw) and not _is_party_list(X_raw) else None, p)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """(x - mean_) directions_ for the pooled columns (N x p) or a list of the parties' blocks."""
        self._check_fitted("directions_")
        return (_pooled(X, self.directions_.shape[0]) - self.mean_) @ self.directions_


@model_class
class SecureVerticalMeanCovariance(_SecureVerticalMoments):
    """DP mean, covariance and principal components of vertically partitioned columns (module docstring).

    Parameters
    ----------
    n_components: the number of principal components kept in ``components_`` (None: all p). row_bound, x_center,
        colluders, helper, timeout, max_rows, tls, n_parties, budget, ledger, accountant, tight, random_state, addresses,
        certificates: as ``SecureVerticalSIR``. No party needs y.

    After ``fit``: ``mean_``, ``second_moment_``, ``covariance_`` (PSD), ``components_`` (k x p, the top eigenvectors of
    ``covariance_``), ``explained_variance_``, ``noise_ratio_``, ``released_``, ``privacy_report_``, ``secure_cost_``.
    """

    model_attributes = ("mean_", "second_moment_", "covariance_", "components_", "explained_variance_", "noise_ratio_",
                        "n_features_in_")
    model_required = ("mean_", "covariance_")

    def __init__(self, n_components: int | None = None, *, row_bound: Any = None, x_center: Any = None, colluders: int = 1,
                 helper: Any = "auto", timeout: float = 120.0, max_rows: int = MAX_ROWS, tls: bool = True,
                 n_parties: int | None = None, budget: Budget | tuple[float, float] | None = None, ledger: Ledger | None = None,
                 accountant: str = "best", tight: bool = True, random_state: Any = None, addresses: Any = None,
                 certificates: Any = None) -> None:
        self.n_components = n_components
        self._common(row_bound, x_center, colluders, helper, timeout, max_rows, tls, n_parties, budget, ledger, accountant, tight,
                     random_state, addresses, certificates)

    def _checked(self, names: list[str], widths: list[int]) -> dict[str, Any]:
        c = super()._checked(names, widths)
        k = self.n_components
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= sum(widths)):
            raise ValidationError(f"n_components must be None or an integer in [1, {sum(widths)}], got {k!r}")
        return c

    def _plan(self, c: dict[str, Any], N: int, p: int) -> Plan:
        C = c["C"] * c["scale"]
        shares = {"parties": len(c["parties"]), "colluders": c["t"], "grid_exponent": 2 * c["exponent"]}
        plan = Plan("secure_vertical_mean_covariance", RELATION, {**self._public(c, N), "p": p})
        plan.add("mean", "distributed_gaussian", gram.column_sum(C, RELATION), calibration="analytic",
                 params={**shares, "dimension": p}, description="column sums X^T 1 of the clipped, rounded rows")
        plan.add("second_moment", "distributed_symmetric_gaussian", gram.xtx(C, RELATION), calibration="analytic",
                 params={**shares, "dimension": p * (p + 1) // 2}, description="X^T X of the clipped, rounded rows (upper triangle)")
        return plan

    def _groups(self, c: dict[str, Any], layout: Layout) -> list[crossproducts.Group]:
        return super()._groups(c, layout) + [crossproducts.Group(CONSTANT, 1, value=c["one"], description="constant")]

    def _blocks(self, c: dict[str, Any], layout: Layout) -> list[crossproducts.Block]:
        x = tuple(p.name for p in layout.parties)
        return [crossproducts.Block("mean", x, (CONSTANT,), description="column sums X^T 1"),
                crossproducts.Block("second_moment", x, description="X^T X")]

    def fit(self, X: Any, y: Any = None) -> SecureVerticalMeanCovariance:
        """Fit on ``Party`` objects, column blocks, or a pooled X with ``n_parties`` (y is ignored)."""
        X_raw = X
        released, c, layout, run = self._secure_fit(X, None, "SecureVerticalMeanCovariance")
        p = sum(q.n_columns for q in layout.parties)
        fitted = secure_mean_covariance_from_released(released, clip=c["C"], x_center=c["x_center"], scale=c["scale"],
                                                      n_components=self.n_components)  # DPMeanCovariance's consumer, then PCA
        self.privacy_report_ = fitted.apply(self, run.report, stacklevel=3)
        self._record_features(X_raw if not is_block_list(X_raw) and not _is_party_list(X_raw) else None, p)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """(x - mean_) components_^T for the pooled columns (N x p) or a list of the parties' blocks."""
        self._check_fitted("components_")
        return (_pooled(X, self.components_.shape[1]) - self.mean_) @ self.components_.T


def _pooled(X: Any, p: int) -> np.ndarray:
    if is_block_list(X) or _is_party_list(X):
        X = np.hstack([np.asarray(getattr(b, "X", b), dtype=float) for b in X])
    X = check_matrix(X, "X")
    if X.shape[1] != p:
        raise ValidationError(f"X has {X.shape[1]} features, but the fit had {p}")
    return X
