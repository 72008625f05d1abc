"""The run of ``SecureVerticalRegression`` (``vertical.secure_regression``, the scikit-learn estimator) without
scikit-learn, so that a party process (``privsdr vertical party --secure``) starts without it. The method: linear
regression on vertically partitioned data at the central rate (issue 23).

The parties hold column blocks of the same N aligned rows (one also holds y). Each clips its own rows to its public
bound C_i (the whole row then has ||x|| <= C = sqrt(sum C_i^2)) and rounds them to a public fixed-point grid; the
Gram Z^T Z and Z^T y of Z = [X_1 ... X_k, c 1] (c <= C, the intercept's constant column) are computed inside a
secure computation on MPyC (``privsdr.secure.crossproducts``: the cross-blocks on Shamir shares), every party adds a
discrete Gaussian noise share, and only the noisy statistics are opened -- once, for all N rows. These are AdaSSP's
sufficient statistics (Wang 2018; ``privsdr.algorithms.adassp``), released with the same calibration as on pooled
data (add/remove one row; node sensitivities ||z||^2 <= 2 C^2 and ||z y|| <= sqrt(2) C C_y with an intercept), so
the fit pays the central price of privacy, times sqrt(m / (m - t)) on the noise sd for tolerating t colluders among
the m parties (every party, the helper included, adds a share).

Post-processing (free): ``n_components=None``: ridge with AdaSSP's noise-aware lambda, its lower bound on
lambda_min taken from the noisy Gram itself (no third release: ``adassp_solution``); ``n_components=k``: DPPLS S2's
kernel PLS1 on the same release, centred at the DP means the intercept column carries (``released.ssp.ssp_postprocess``).

Trust (``privsdr.secure.trust``, ``docs/vertical.md``): semi-honest parties, at most t colluding (t < m/2); two data
parties need a third, non-colluding helper (it holds no data, adds a noise share and receives Shamir shares only).
Nothing inside the secure computation checks a data party's input: one that inputs unclipped rows (r times its bound)
leaves the others r times the privacy loss, which every report says. Row alignment is public: every party knows N and
which row is whose; the field is sized from the public cap ``max_rows``, so nothing the fit files depends on N. A
party's own values in one row are a replacement of that row: (2 eps, (1 + e^eps) delta) by group privacy.

Bounds far apart: each party clips and rounds (x - x_center) s_i (``column_scales``) and the label holder
(y - y_center) s_y (``label_scale``), powers of two read off the public bounds only; the coefficients are scaled back
afterwards (post-processing).

Memory: a data party may read its rows as ``Chunks`` (``secure_rows``): checked in a first pass before anything is
agreed or charged, then read again and streamed to its party process as the secure cross-products consume them.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._validation import check_positive, check_random_state, diagnostic_rng
from ..accounting import Budget, Ledger
from ..accounting.budget import as_budget
from ..errors import ValidationError
from ..network.addresses import check_addresses
from ..network.certificates import load_credentials
from ..parties.layout import Layout, Party
from ..plan import CalibratedPlan, Plan, Run
from ..plan.fit_budget import BudgetedFit, for_ledger
from ..released import Released, from_run, gram, regression
from ..released.fitted import Fitted
from ..released.ssp import adassp_solution, ssp_postprocess
from ..secure import crossproducts
from ..secure.aggregate import (
    agreed_own_party,
    agreed_parties,
    decline_own_party,
    declining,
    gram_job,
    secure_gram_release,
)
from .secure_parties import (
    CONSTANT,
    LABEL,
    regression_parties,
)
from .secure_rows import checked_parties, read_block

RELATION = "add_remove"
NODES = ("xtx", "xty")
#: a public cap on N: the fixed-point grid is set from it (never from the data's own N)
MAX_ROWS = 2**24


class SecureRegressionRun(BudgetedFit):
    """The public parameters of a secure vertical regression and its run, without scikit-learn: every party on this
    machine (``SecureVerticalRegression.fit``) or one party of it (``fit_party``, ``decline_party``: what
    ``privsdr vertical party --secure`` and ``vertical helper`` build). The parameters are
    ``SecureVerticalRegression``'s (its docstring); after a run: ``coef_``, ``coef_blocks_``, ``intercept_``, ``ridge_``,
    ``released_``, ``privacy_report_``, ``secure_cost_``, ``noise_ratio_``, ``plan_``, ``ledger_``, ``parties_``, ``layout_``."""

    def __init__(self, row_bound: Any = None, label_bound: float | None = None, *, x_center: Any = None, y_center: float = 0.0,
                 fit_intercept: bool = True, n_components: int | None = None, colluders: int = 1, helper: Any = "auto",
                 timeout: float = 120.0, max_rows: int = MAX_ROWS, addresses: Any = None, tls: bool = True,
                 certificates: Any = None, failure_probability: float = 0.05,
                 weights: Mapping[str, float] | None = None, n_parties: int | None = None, diagnose_noise: bool = True,
                 budget: Budget | tuple[float, float] | None = None, ledger: Ledger | None = None, accountant: str = "best",
                 tight: bool = True, random_state: Any = None) -> None:
        self.row_bound = row_bound
        self.label_bound = label_bound
        self.x_center = x_center
        self.y_center = y_center
        self.fit_intercept = fit_intercept
        self.n_components = n_components
        self.colluders = colluders
        self.helper = helper
        self.timeout = timeout
        self.max_rows = max_rows
        self.addresses = addresses
        self.tls = tls
        self.certificates = certificates
        self.failure_probability = failure_probability
        self.weights = weights
        self.n_parties = n_parties
        self.diagnose_noise = diagnose_noise
        self.budget = budget
        self.ledger = ledger
        self.accountant = accountant
        self.tight = tight
        self.random_state = random_state

    # -- public parameters -------------------------------------------------------------------------
    def _bounds(self, names: list[str]) -> dict[str, float]:
        if self.label_bound is None:
            raise ValidationError("row_bound (C_i per party) and label_bound (C_y) are required public bounds; they are never read off the data")
        return party_bounds(self.row_bound, names)

    def _parties_of(self, names: list[str]) -> tuple[list[str], int]:
        """The MPyC parties in order (the helper first, if any) and t, checked (honest majority)."""
        return regression_parties(names, self.colluders, self.helper)

    def _checked(self, names: list[str], widths: list[int]) -> dict[str, Any]:
        bounds = self._bounds(names)
        label_bound = check_positive(self.label_bound, "label_bound")
        m = sum(widths)
        x_center = np.zeros(m) if self.x_center is None else np.asarray(self.x_center, dtype=float).reshape(-1)
        if x_center.shape != (m,) or not np.all(np.isfinite(x_center)):
            raise ValidationError(f"x_center must be {m} finite public numbers (one per column, pooled order)")
        if np.ndim(self.y_center) != 0 or not math.isfinite(float(self.y_center)):
            raise ValidationError(f"y_center must be one finite number, got {self.y_center!r}")
        if not isinstance(self.fit_intercept, (bool, np.bool_)) or not isinstance(self.diagnose_noise, (bool, np.bool_)):
            raise ValidationError("fit_intercept and diagnose_noise must be True or False")
        k = self.n_components
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= m):
            raise ValidationError(f"n_components must be None (ridge) or an integer in [1, {m}], got {k!r}")
        rho = check_positive(self.failure_probability, "failure_probability")
        if not rho < 1:
            raise ValidationError(f"failure_probability must be in (0, 1), got {rho}")
        weights = {"xtx": 1.0, "xty": 1.0}
        for name, value in dict(self.weights or {}).items():
            if name not in weights:
                raise ValidationError(f"unknown weight {name!r}; expected some of {sorted(weights)}")
            weights[name] = check_positive(value, f"weights[{name!r}]")
        max_rows = self.max_rows
        if isinstance(max_rows, bool) or not isinstance(max_rows, (int, np.integer)) or max_rows < 1:
            raise ValidationError(f"max_rows must be a positive integer, got {max_rows!r}")
        timeout = check_positive(self.timeout, "timeout")
        check_random_state(self.random_state)
        parties, t = self._parties_of(names)
        if not isinstance(self.tls, (bool, np.bool_)):
            raise ValidationError(f"tls must be True or False (False: plaintext channels, asked for explicitly), got {self.tls!r}")
        addresses = check_addresses(self.addresses, parties) if self.addresses is not None else None
        declared = bounds
        row_scales = column_scales(declared)  # each block in units of its bound / the largest (powers of two, public)
        bounds = {n: declared[n] * row_scales[n] for n in names}
        C = math.sqrt(sum(b * b for b in bounds.values()))
        scale = label_scale(C, label_bound)  # y in units of C_y / C (a power of two): public, never read off y
        exponent = crossproducts.grid_exponent(int(max_rows), max(C, label_bound * scale), len(parties))
        constant = math.floor(C / 2.0**exponent) if self.fit_intercept else 0  # c <= C on the grid
        row_bound = math.hypot(C, constant * 2.0**exponent) if self.fit_intercept else C
        return {"bounds": bounds, "declared_bounds": declared, "row_scales": row_scales,
                "columns_scale": np.repeat([row_scales[n] for n in names], widths), "label_bound": label_bound * scale, "label_scale": scale, "declared_label_bound": label_bound,
                "x_center": x_center, "y_center": float(self.y_center), "rho": rho,
                "weights": weights, "parties": parties, "t": t, "exponent": exponent, "constant": constant, "row_bound": row_bound,
                "timeout": timeout, "max_rows": int(max_rows), "intercept": bool(self.fit_intercept), "n_components": k,
                "addresses": addresses, "tls": bool(self.tls)}

    def build_plan(self, widths: Mapping[str, int]) -> Plan:
        """The release plan for blocks of these widths (party -> width, column order): public parameters only."""
        names, w = list(widths), [int(v) for v in widths.values()]
        c = self._checked(names, w)
        return self._plan(c, names, w)

    def _plan(self, c: dict[str, Any], names: list[str], widths: list[int]) -> Plan:
        P = sum(widths) + (1 if c["intercept"] else 0)
        public = {"blocks": dict(zip(names, widths, strict=True)), "row_bounds": c["declared_bounds"], "row_scales": c["row_scales"],
                  "label_bound": c["declared_label_bound"], "label_scale": c["label_scale"],
                  "fit_intercept": c["intercept"], "parties": c["parties"], "colluders": c["t"], "max_rows": c["max_rows"],
                  "grid_exponent": c["exponent"], "aggregation": "secure vertical Gram (MPyC)"}
        plan = Plan("secure_vertical_regression", RELATION, public)
        share = {"parties": len(c["parties"]), "colluders": c["t"], "grid_exponent": 2 * c["exponent"]}
        C, Cy = c["row_bound"], c["label_bound"]
        plan.add("xtx", "distributed_symmetric_gaussian",
                 gram.xtx(C, RELATION),
                 weight=c["weights"]["xtx"], calibration="analytic", params={**share, "dimension": P * (P + 1) // 2},
                 description="Z^T Z of the clipped, rounded rows (cross-blocks computed on secret shares)")
        plan.add("xty", "distributed_gaussian", gram.xty(C, Cy, RELATION), weight=c["weights"]["xty"],
                 calibration="analytic", params={**share, "dimension": P}, description="Z^T y of the clipped, rounded rows")
        return plan

    def plan(self, widths: Mapping[str, int]) -> CalibratedPlan:
        """The calibrated plan for blocks of these widths: ``.cost()`` prices it before any data is read."""
        budget, ledger = self._resolve_budget()
        return for_ledger(self.build_plan(widths), ledger).allocate(budget, accountant=ledger.accountant, tight=self.tight)

    # -- one party of the run ------------------------------------------------------------------------
    def fit_party(self, layout: Layout, name: str, party: Party | None, addresses: list[str] | None = None, progress: Any = None,
                  certificates: Any = None) -> SecureRegressionRun:
        """Run one party of the fit in this process (``privsdr vertical party --secure``): ``layout`` is the public
        layout every party shares, ``party`` this party's own data (None for the helper), ``addresses`` every party's
        ``host:port`` in MPyC's order (``parties_for``; default the estimator's ``addresses``), ``certificates`` this
        party's own folder (``privsdr secure keys``; required with TLS). The other parties run the same call elsewhere
        with the same public configuration; every one of them ends with the same opened statistics and the same model.

        Agreement (issue 33): the party spends exactly ``budget`` (given explicitly: never what its ledger holds),
        and charges nothing until every party has confirmed, over MPyC's channels, that it holds the same public job
        (one digest over the budget, accountant, bounds, layout, noise shares, parties and t) and is ready. A party
        whose data or ledger is refused here tells the others it is not ready; every party then stops with nothing
        charged."""
        if self.budget is None or (isinstance(self.budget, str) and self.budget == "remaining"):
            raise ValidationError("a party of a secure run spends the run's configured budget: pass budget=Budget(epsilon, "
                                  "delta) as every party has it, not what this party's ledger holds; nothing was charged")
        if party is not None and party.name != name:
            raise ValidationError(f"the data belong to {party.name!r}, not {name!r}")
        addresses = self.addresses if addresses is None else addresses
        if addresses is None:
            raise ValidationError("one party's run needs every party's address (host:port, in parties_for order); nothing was charged")
        self._fit_layout(layout, {} if party is None else {name: party}, name, list(addresses), progress, certificates)
        return self

    def decline_party(self, layout: Layout, name: str, addresses: list[str] | None, why: str, progress: Any = None,
                      certificates: Any = None) -> None:
        """Take part in the agreement of a fit on ``layout`` as party ``name``, not ready (``why``: the kind of
        failure, never data), so that every party stops at once with nothing charged (issue 36: a party whose CSV,
        output, journal or address cannot be used). This party's own ledger is not read."""
        names, widths = [p.name for p in layout.parties], [p.n_columns for p in layout.parties]
        c = self._checked(names, widths)
        if name not in c["parties"]:
            raise ValidationError(f"{name!r} is not one of the parties {c['parties']}")
        budget = as_budget(self.budget)
        ledger = Ledger(budget, accountant=self.accountant)  # the configured budget and accountant, as the others price it
        calibrated = for_ledger(self._plan(c, names, widths), ledger).allocate(budget, accountant=ledger.accountant, tight=self.tight)
        products, bound = _gram_shape(c, layout)
        checked = check_addresses(list(self.addresses if addresses is None else addresses), c["parties"])
        job = gram_job(calibrated, products, parties=c["parties"], threshold=c["t"], bound=bound, timeout=c["timeout"],
                       addresses=checked, tls=c["tls"])
        decline_own_party(job, name, why, progress, certificates)

    def _own_data(self, layout: Layout, name: str, party: Party) -> Party:
        """This party's data, checked against the public layout."""
        info = {p.name: p for p in layout.parties}.get(name)
        if info is None:
            raise ValidationError(f"{name!r} is not a party of the layout {[p.name for p in layout.parties]}")
        [party], own = checked_parties([party], min_rows=1)
        shape = (own.n_rows, own.parties[0].n_columns)  # a Chunks party's public n_rows and n_features
        if shape != (layout.n_rows, info.n_columns) or party.holds_label != info.holds_label:
            raise ValidationError(f"{name!r} must hold {layout.n_rows} rows and {info.n_columns} columns"
                                  + (" and the label" if info.holds_label else " and no label")
                                  + f" (the layout), got {shape[0]} x {shape[1]}"
                                  + (" with a label" if party.holds_label else ""))
        return party

    def parties_for(self, layout: Layout) -> list[str]:
        """The MPyC parties of a fit on this layout, in order (the helper first when there is one)."""
        return self._parties_of([p.name for p in layout.parties])[0]

    def _fit_layout(self, layout: Layout, data: dict[str, Party], own: str | None, addresses: list[str] | None, progress: Any,
                    certificates: Any = None) -> None:
        names, widths = [p.name for p in layout.parties], [p.n_columns for p in layout.parties]
        labels = [p.name for p in layout.parties if p.holds_label]
        if len(labels) != 1:
            raise ValidationError(f"exactly one party must hold y, got {len(labels)}")
        c = self._checked(names, widths)
        if own is not None and own not in c["parties"]:
            raise ValidationError(f"{own!r} is not one of the parties {c['parties']}")
        if own is not None:
            c["addresses"] = check_addresses(addresses or [], c["parties"])
            if c["tls"]:  # this party's own key and certificate, checked before anything else (it cannot connect without)
                if certificates is None:
                    raise ValidationError(f"this run uses TLS: party {own!r} needs its certificate folder (`privsdr secure keys`), "
                                          "or plaintext asked for explicitly in the shared configuration; nothing was charged")
                load_credentials(certificates, c["parties"].index(own))
        else:
            certificates = self.certificates
        N = layout.n_rows
        if N > c["max_rows"]:
            raise ValidationError(f"{N} rows exceed max_rows = {c['max_rows']} (the public cap that sets the fixed-point grid): raise max_rows")
        budget, ledger = self._resolve_budget()
        calibrated = for_ledger(self._plan(c, names, widths), ledger).allocate(budget, accountant=ledger.accountant, tight=self.tight)
        e = c["exponent"]
        products, bound = _gram_shape(c, layout)
        job = None
        if own is not None:  # this party's data and ledger, checked before the agreement: a refusal stops every party
            job = gram_job(calibrated, products, parties=c["parties"], threshold=c["t"], bound=bound, timeout=c["timeout"],
                           addresses=c["addresses"], tls=c["tls"])
            with declining(job, own, progress, certificates):
                if own in data:
                    data = {own: self._own_data(layout, own, data[own])}
                ledger.preflight(calibrated)
        arrays: dict[str, dict[str, Any]] = {}
        at = 0
        for name, w in zip(names, widths, strict=True):
            if name in data:  # an array's int64 block, or a Chunks party's stream (read again after the charge)
                arrays[name] = {"block": read_block(data[name].X, c["x_center"][at:at + w], c["row_scales"][name], c["bounds"][name], e)}
                if data[name].holds_label:
                    y_scaled = (np.asarray(data[name].y, dtype=float) - c["y_center"]) * c["label_scale"]
                    arrays[name]["label"] = crossproducts.label_vector(y_scaled, c["label_bound"], e)
            at += w
        # every party ready before the run (and its journal) is opened: this party alone, or every party here (issue 36)
        if own is not None and job is not None:
            session = agreed_own_party(job, own, products.inputs(arrays, own).get(own), progress, certificates)
        else:
            job = gram_job(calibrated, products, parties=c["parties"], threshold=c["t"], bound=bound, timeout=c["timeout"],
                           addresses=c["addresses"], tls=c["tls"])
            session = agreed_parties(job, products.inputs(arrays), certificates=certificates)
        try:
            with Run(calibrated, ledger, random_state=self.random_state, data_shape=None, algorithm="SecureVerticalRegression",
                     notes=["X^T X and X^T y were computed inside a secure computation (MPyC) from the parties' clipped, rounded "
                            "columns; every party added a discrete Gaussian share and only the noisy statistics were opened"]) as run:
                done = secure_gram_release(run, products, arrays, parties=c["parties"], threshold=c["t"], bound=bound,
                                           timeout=c["timeout"], helper=helpers_of(c["parties"], products.parties), own=own,
                                           addresses=list(session.job.addresses), tls=c["tls"], certificates=certificates,
                                           progress=progress, session=session)
        finally:
            session.__exit__(None, None, None)
        released = from_run(run, NODES, n=0, source="secure vertical Gram")
        fitted = secure_regression_from_released(
            released, x_center=c["x_center"], y_center=c["y_center"], label_bound=c["label_bound"], constant=released_constant(c),
            columns_scale=c["columns_scale"], label_scale=c["label_scale"], fit_intercept=c["intercept"],
            n_components=c["n_components"], failure_probability=c["rho"], diagnose_noise=self.diagnose_noise,
            random_state=self.random_state, blocks=dict(zip(names, widths, strict=True)))
        self.plan_ = calibrated
        self.ledger_ = ledger
        self.parties_ = c["parties"]
        self.layout_ = layout
        # seconds and bytes grow with N: they stay on the estimator (the parties know N) and are never put in the report
        self.secure_cost_ = {"seconds": done.opened.seconds, "bytes_sent": dict(done.opened.bytes_sent), "field_bits": done.job.bits}
        self.privacy_report_ = fitted.apply(self, run.report, stacklevel=5)

def secure_regression_from_released(released: Released, *, x_center: np.ndarray, y_center: float, label_bound: float,
                                    constant: float, columns_scale: np.ndarray, label_scale: float = 1.0,
                                    fit_intercept: bool = True, n_components: int | None = None,
                                    failure_probability: float = 0.05, diagnose_noise: bool = True, random_state: Any = None,
                                    blocks: Mapping[str, int] | None = None) -> Fitted:
    """SecureVerticalRegression from the opened Gram (a ``Released`` with arrays xtx, xty of Z = [the parties' scaled,
    clipped columns | the constant] on the fixed-point grid): AdaSSP's ridge (``n_components`` None) or PLS on the
    DP-centred statistics, back to the columns' and y's own units (``columns_scale``, ``label_scale``: the public
    powers of two; ``label_bound``, ``constant``: the label bound and the constant column in the opened units), the
    noise ratio and, with an intercept or PLS, the fallback towards the DP mean (issue 33). Post-processing of the record
    and public parameters only: every party computes the same (unseeded, the bootstrap is seeded by the record)."""
    c: dict[str, Any] = {"x_center": np.asarray(x_center, dtype=float), "y_center": float(y_center), "label_bound": float(label_bound),
         "constant": float(constant), "columns_scale": np.asarray(columns_scale, dtype=float), "label_scale": float(label_scale),
         "intercept": bool(fit_intercept), "n_components": n_components, "rho": float(failure_probability)}
    theta, ridge = _solve(released, c)
    m = c["columns_scale"].shape[0]
    const = c["constant"]
    theta = theta / c["label_scale"]  # back to y's own units (post-processing) ...
    theta[:m] = theta[:m] * c["columns_scale"]  # ... and to the columns' own units
    coef = theta[:m]
    intercept = c["y_center"] + (float(theta[m]) * const if c["intercept"] else 0.0) - float(c["x_center"] @ coef)
    attributes: dict[str, Any] = {"ridge_": ridge, "x_center_": c["x_center"], "y_center_": c["y_center"], "released_": released}
    shrink = n_components is not None or c["intercept"]
    diagnostics: tuple[Any, ...] = ()
    warned: tuple[tuple[type[Warning], str], ...] = ()
    if diagnose_noise or shrink:
        rng = diagnostic_rng(random_state if random_state is not None else _release_seed(released))
        metric = regression.slope_gram(released["xtx"], c["intercept"]) + ridge * np.eye(m)
        ratio = attributes["noise_ratio_"] = regression.noise_ratio(released, lambda r: _solve(r, c)[0][:m], metric, rng)
        if shrink:  # coef_ times max(0, 1 - ratio^2); the intercept keeps the prediction at the DP means
            x_mean = c["x_center"]
            if c["intercept"]:
                shift = regression.dp_centred(released["xtx"], released["xty"].ravel(), const, c["label_bound"])[0]
                x_mean = x_mean + shift / c["columns_scale"]  # the DP means, back in the columns' own units
            coef, intercept, attributes["shrinkage_factor_"] = regression.towards_dp_mean(coef, intercept, x_mean, ratio)
        if diagnose_noise:
            diagnostics = (regression.diagnostic(ratio),)
            warned = regression.warned(ratio, regression.FALLBACK_NOTE if shrink else None)
    attributes["coef_"], attributes["intercept_"] = coef, intercept
    if blocks is not None:
        starts = np.cumsum([0, *blocks.values()])
        attributes["coef_blocks_"] = {name: coef[a:b] for name, a, b in zip(blocks, starts[:-1], starts[1:], strict=True)}
    return Fitted(attributes, diagnostics, warned)


def _solve(released: Released, c: dict[str, Any]) -> tuple[np.ndarray, float]:
    """(theta on the columns of Z, ridge) from the release: AdaSSP's ridge, or PLS on the DP-centred statistics."""
    const = c["constant"]
    if c["n_components"] is None:
        theta, ridge, _ = adassp_solution(released, c["rho"], const if c["intercept"] else None, c["label_bound"])
        return theta, ridge
    gram, xty = released["xtx"], released["xty"].ravel()
    if c["intercept"]:
        x_shift, y_shift, S, u = regression.dp_centred(gram, xty, const, c["label_bound"])
    else:
        x_shift, y_shift, S, u = np.zeros(gram.shape[0]), 0.0, gram, xty
    settings = {"dp_centring": False, "ridge": "noise", "psd_repair": True, "A": int(c["n_components"]), "auto": False,
                "x_center": x_shift, "y_center": y_shift, "shrinkage": "snr"}
    fitted = ssp_postprocess({"xtx": S, "xty": u}, released.scales["xtx"], settings,
                             {"u_variance": centred_xty_variance(released, x_shift, y_shift, const if c["intercept"] else None)})
    slopes = fitted["coef_path"][:, -1] if fitted["coef_path"].shape[1] else np.zeros(S.shape[0])
    if c["intercept"]:  # back to the columns of Z: the constant column carries y_shift - x_shift^T slopes
        return np.append(slopes, (y_shift - float(x_shift @ slopes)) / const), released.scales["xtx"] * math.sqrt(S.shape[0])
    return slopes, released.scales["xtx"] * math.sqrt(S.shape[0])


def _gram_shape(c: dict[str, Any], layout: Layout) -> tuple[crossproducts.CrossProducts, float]:
    """The declared blocks of ``layout`` (``gram_layout``) and the public bound on their entries: the public cap
    ``max_rows`` sizes the field, never N."""
    label = next(p.name for p in layout.parties if p.holds_label)
    products = gram_layout(layout.n_rows, [(p.name, p.n_columns) for p in layout.parties], label, c["exponent"], c["constant"])
    return products, c["max_rows"] * max(c["row_bound"], c["label_bound"]) ** 2


def gram_layout(rows: int, widths: Sequence[tuple[str, int]], label: str, exponent: int, constant: int = 0) -> crossproducts.CrossProducts:
    """The regression's declaration of blocks: each party's columns (input ``block``), the constant c (grid units; 0:
    none) and the label holder's y (input ``label``); xtx = Z^T Z (upper triangle) and xty = Z^T y of
    Z = [X_1 ... X_k, c]."""
    groups = [crossproducts.Group(name, int(width), name) for name, width in widths]
    if constant:
        groups.append(crossproducts.Group(CONSTANT, 1, value=int(constant), description="constant"))
    z = tuple(g.name for g in groups)
    groups.append(crossproducts.Group(LABEL, 1, label, "label", description="label"))
    blocks = [crossproducts.Block("xtx", z, description="X^T X"), crossproducts.Block("xty", z, (LABEL,), description="X^T y")]
    return crossproducts.CrossProducts(rows, groups, blocks, exponent)


def party_bounds(row_bound: Any, names: Sequence[str]) -> dict[str, float]:
    """Each data party's public row bound C_i: one number for all, or a mapping party -> number (checked)."""
    if row_bound is None:
        raise ValidationError("row_bound (C_i per party) is a required public bound; it is never read off the data")
    if isinstance(row_bound, Mapping):
        missing = [n for n in names if n not in row_bound]
        if missing:
            raise ValidationError(f"row_bound has no bound for the parties {missing}")
        return {n: check_positive(row_bound[n], f"row_bound[{n!r}]") for n in names}
    return {n: check_positive(row_bound, "row_bound") for n in names}


def helpers_of(parties: Sequence[str], data_parties: Sequence[str]) -> str | None:
    """The helpers among ``parties`` (the report's ``server`` field): the parties that hold no data, comma-separated,
    or None. Read off the data parties, not the names: a data party may be called "helper2" when one helper runs."""
    found = [p for p in parties if p not in set(data_parties)]
    return ", ".join(found) or None


def column_scales(bounds: Mapping[str, float]) -> dict[str, float]:
    """Per party, the public power of two s_i with s_i C_i within a factor sqrt(2) of the largest bound: a party whose
    bound is orders of magnitude below another's keeps its resolution on the common fixed-point grid and its share of
    the Gram's sensitivity. Equal bounds give s_i = 1. The party clips and rounds (x - x_center) s_i to s_i C_i; the
    coefficients are multiplied by s_i afterwards (post-processing). A function of the public bounds only."""
    largest = max(bounds.values())
    return {name: float(2.0 ** round(math.log2(largest / bound))) for name, bound in bounds.items()}


def label_scale(row_bound: float, label_bound: float) -> float:
    """The public power of two s_y with s_y C_y within a factor sqrt(2) of C: the parties clip and round
    (y - y_center) s_y to the bound s_y C_y, so that a label bound orders of magnitude from the row bound neither
    wastes the fixed-point grid nor leaves the Gram's noise below it; the coefficients are divided by s_y
    afterwards (post-processing). A function of the public bounds only."""
    return float(2.0 ** round(math.log2(row_bound / label_bound)))


def released_constant(c: dict[str, Any]) -> float:
    """The constant column's value in the opened statistics: the public constant on the fixed-point grid 2^exponent."""
    return float(c["constant"] * 2.0 ** c["exponent"])


def centred_xty_variance(released: Released, x_shift: np.ndarray, y_shift: float, constant: float | None) -> np.ndarray:
    """The noise variance per entry of the DP-centred X^T y, u = g_xy - G_xc g_cy / (c^2 n~), for DPPLS's pre-test
    (issue 24): s_y^2 plus ``regression.centring_variance`` with the constant column's sums, sum x = G_xc / c (noise
    s_G / c) and sum y = g_cy / c (noise s_y / c)."""
    s_y, s_g = released.scales["xty"], released.scales["xtx"]
    if constant is None:
        return np.full(x_shift.shape[0], s_y**2)
    n_t = regression.dp_count(released["xtx"], constant)
    return s_y**2 + regression.centring_variance(s_g / constant, s_y / constant, x_shift, y_shift, n_t)


def _release_seed(released: Released) -> int:
    """A seed read off the opened statistics (public): the same at every party of one run."""
    import hashlib

    digest = hashlib.sha256(b"".join(np.ascontiguousarray(released[k], dtype=float).tobytes() for k in NODES)).digest()
    return int.from_bytes(digest[:8], "little")


def _is_party_list(X: Any) -> bool:
    return isinstance(X, (list, tuple)) and bool(X) and all(isinstance(p, Party) for p in X)
