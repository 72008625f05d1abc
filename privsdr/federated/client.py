"""One FSIR client: its own records in, a private ``ClientMessage`` out (spec fsir_000.md §4).

Releases (replace-one within the client, n public, |x_ij| <= R (or R_j per column) after truncation):

* slice means M = (1/n) [sum_{i in h} x_i]_h  (p x H): Frobenius sensitivity 2 ||x||_max / n, with
  ||x||_max = R sqrt(p) (Prop. 2), ||R||_2 for per-column bounds, or C (l2 rows);
* slice proportions w = (n_h / n)_h (when the configuration centres): L2 sensitivity sqrt(2) / n (a
  record moved between two slices changes two counts by 1), Gaussian (analytic) at ``center_share``
  of the budget; the server centres with them (M_c = M - mu w^T, mu = sum_h M[:, h]);
* second moment S = X^T X / n: upper-triangle sensitivity sqrt(2) ||x||_max^2 / n; MOD-SULQ (Lemma 1
  with c_R = ||x||_max) or Analyze-Gauss;
  (the three sensitivities are Gram blocks, derived in ``privsdr.released.gram``);
* screening: CCMD votes (Algorithm 3, a ``none`` node: not private) or the top-s columns of largest between-slice
  spread ||C s_j|| / c_j (``noisy_top``: indices only, sensitivity 2 / n free of p; issue 26);
* ``mechanism="none"``: the statistics uploaded without noise (``none`` nodes: not private).

Rows are shifted by the public centre (``config.center`` a vector) before truncation. VGM shapes its
boost from the slice means centred with the released proportions, so that it boosts the directions
the server will use (not the mean's).

Uncertified uploads (``claimed`` or ``none`` nodes) are refused unless ``allow_uncertified=True``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import core
from .._validation import check_matrix, check_vector
from ..accounting import Budget, Ledger, Scope
from ..errors import ValidationError
from ..mechanisms import Sensitivity
from ..plan import CalibratedPlan, Plan, Run, tap
from ..released import gram
from ..report import PrivacyReport
from .protocol import ClientMessage, FSIRConfig

RELATION = "replace_one"


def _finished(run: Run) -> PrivacyReport:
    """The report of a run whose ``with`` block has exited (Run sets it on exit). An upload carries it as compact JSON
    (``to_json(indent=None)``: read by the server, never by a person; the indented form costs ~4x to write)."""
    assert run.report is not None
    return run.report


def client_public_params(config: FSIRConfig, n: int, p: int, active: Sequence[int] | None = None) -> dict[str, Any]:
    return {"n": n, "p": p, "n_slices": config.n_slices, "bound": list(config.bound) if isinstance(config.bound, tuple) else config.bound,
            "norm": config.norm, "mechanism": config.mechanism, "cov_mechanism": config.cov_mechanism,
            "calibration": config.calibration, "screening": config.screening, "config": config.digest(),
            "center": list(config.center) if isinstance(config.center, tuple) else config.center,
            **({"center_share": config.center_share} if config.centred else {}),
            **({"active": [int(a) for a in active]} if active is not None else {})}


def proportions_sensitivity(n: int) -> Sensitivity:
    """Replace-one within the client: a record moved between two slices changes two counts by 1."""
    return gram.slice_counts(RELATION, n)


def budget_split(config: FSIRConfig, budget: Budget) -> dict[str, Budget]:
    """Each release's share of one client's budget: ``center_share`` for the proportions (when the
    configuration centres), the rest split ``cov_share`` : 1 - ``cov_share`` (covariance : slice means)."""
    eps, delta = budget.epsilon, budget.delta
    out = {}
    if config.centred:
        out["slice_proportions"] = Budget(eps * config.center_share, delta * config.center_share)
        eps, delta = eps - out["slice_proportions"].epsilon, delta - out["slice_proportions"].delta
    out["second_moment"] = Budget(eps * config.cov_share, delta * config.cov_share)
    out["slice_means"] = Budget(eps - out["second_moment"].epsilon, delta - out["second_moment"].delta)
    return out


def add_client_nodes(plan: Plan, config: FSIRConfig, n: int, p: int, budget: Budget, *, screening_round: bool = False,
                     active: Sequence[int] | None = None, prefix: str = "", scope: Scope | None = None) -> None:
    """Add one client's release nodes to ``plan`` (named ``prefix + node``, reading ``scope``)."""
    c = config.row_bound(p, active)  # ||x|| <= c after truncation
    inf = budget.is_infinite
    kw: dict[str, Any] = {"scope": scope}
    if screening_round:
        if config.screening == "ccmd":
            plan.add(prefix + "votes", "non_private", Sensitivity(1.0, "linf", RELATION, "none: raw index upload (Algorithm 3)"),
                     status="none", description="CCMD: indices with |slice mean - mean| > t, uploaded without noise (NOT private)", **kw)
        else:
            plan.add(prefix + "votes", "noisy_top",
                     Sensitivity(2.0 / n, "linf", RELATION, "||C s_j|| / c_j moves by <= 2 / n for every column j (core.slice_spread_scores)"),
                     share=Budget(budget.epsilon, 0.0) if not inf else None,
                     params={"s": config.screen_size, "delta": max(budget.delta, 1e-12) if not inf else 0.5},
                     description="private screening: the screen_size columns of largest between-slice spread (indices only)", **kw)
        return
    if config.mechanism == "none":
        for name, what in (("slice_proportions", "slice proportions"), ("slice_means", "slice-mean matrix"),
                           ("second_moment", "second-moment matrix")):
            if name != "slice_proportions" or config.centred:
                plan.add(prefix + name, "non_private", Sensitivity(1.0, "l2", RELATION, "none: released without noise"), status="none",
                         description=f"non-private baseline: the {what} uploaded without noise (NOT private)", **kw)
        return
    shares = {} if inf else budget_split(config, budget)
    eps_m, delta_m = shares["slice_means"] if not inf else (math.inf, 0.0)
    if config.centred:
        plan.add(prefix + "slice_proportions", "gaussian", proportions_sensitivity(n), share=None if inf else shares["slice_proportions"],
                 calibration="analytic", description="slice proportions n_h / n: the server centres with them (M_c = M - mu w^T)", **kw)
    shaped_by = (prefix + "slice_proportions",) if config.centred else ()
    mean_sens = gram.slice_sums(c, RELATION, n)  # Prop. 2: 2 R sqrt(p) / n
    if config.mechanism == "iid":
        plan.add(prefix + "slice_means", "gaussian", mean_sens, share=None if inf else Budget(eps_m, delta_m), calibration=config.calibration,
                 description="Proposition 2: i.i.d. Gaussian on the p x H slice-mean matrix", **kw)
    elif config.mechanism in ("vgm", "vgm_public"):
        published = config.mechanism == "vgm"
        plan.add(prefix + "slice_means", "shaped_gaussian", mean_sens, share=None if inf else Budget(eps_m, delta_m),
                 calibration=config.calibration, status="claimed" if published else "certified",
                 parents=shaped_by if published else (),
                 description="VGM (Algorithm 2): floor + boost along the top-d left singular vectors of the PRIVATE M "
                             "(Theorem 3 does not cover a data-dependent shape)" if published else
                             "VGM with a public basis and spectrum above the floor", **kw)
    else:  # vgm_two_stage
        f = config.two_stage_share
        plan.add(prefix + "slice_means_stage1", "gaussian", mean_sens, share=None if inf else Budget(eps_m * f, delta_m * f),
                 calibration=config.calibration, description="two-stage VGM, stage 1: an IID release whose SVD shapes stage 2", **kw)
        plan.add(prefix + "slice_means", "shaped_gaussian", mean_sens, share=None if inf else Budget(eps_m * (1 - f), delta_m * (1 - f)),
                 calibration=config.calibration, parents=(prefix + "slice_means_stage1", *shaped_by),
                 description="two-stage VGM, stage 2: floor + boost along the stage-1 singular vectors (post-processing of a DP release)", **kw)
    cov_sens = gram.xtx(c, RELATION, n)
    cov_cal = "modsulq" if config.cov_mechanism == "modsulq" else ("analyze_gauss" if config.calibration == "classical" else config.calibration)
    plan.add(prefix + "second_moment", "symmetric_gaussian", cov_sens, share=None if inf else shares["second_moment"], calibration=cov_cal,
             params={"n": n, "p": p, "scale": c * c},
             description="Lemma 1 (MOD-SULQ, c_R = the public row bound)" if cov_cal == "modsulq" else "Analyze-Gauss on the upper triangle",
             **kw)


def client_budget(config: FSIRConfig, budget: Budget, screening_round: bool = False) -> Budget:
    """What the plan is allocated against: the non-private baseline runs at an infinite budget."""
    if config.mechanism == "none" and not screening_round:
        return Budget.infinite()
    return budget


def client_plan(config: FSIRConfig, n: int, p: int, budget: Budget, *, screening_round: bool = False,
                active: Sequence[int] | None = None) -> CalibratedPlan:
    """The plan of one client's upload: public parameters only. ``p`` is the number of released
    columns; ``active`` their indices among the configuration's columns (after screening)."""
    for name, value in (("n", n), ("p", p)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValidationError(f"{name} must be a positive integer, got {value!r}")
    n, p = int(n), int(p)
    plan = Plan("fsir_client" + ("_screening" if screening_round else ""), RELATION, client_public_params(config, n, p, active))
    add_client_nodes(plan, config, n, p, budget, screening_round=screening_round, active=active)
    return plan.allocate(client_budget(config, budget, screening_round))


def centred_slice_means(M: np.ndarray, proportions: np.ndarray | None) -> np.ndarray:
    """M - mu w^T with mu = sum_h M[:, h] (the mean) and w the slice proportions: column h becomes
    w_h (m_h - mu), the centred slice means SIR needs. ``proportions=None``: M unchanged (no centring)."""
    M = np.asarray(M, dtype=float)
    if proportions is None:
        return M
    return M - np.outer(M.sum(axis=1), np.asarray(proportions, dtype=float))


def _vgm_boost(M: np.ndarray, floor_var: float, d: int | str) -> np.ndarray:
    """Algorithm 2 steps 2-4: W1_d diag(sqrt(r_j)) with gaps r_j = s_j - s_{j+1} of the singular values."""
    U, s, _ = np.linalg.svd(M, full_matrices=False)
    q = min(M.shape)
    s_pad = np.concatenate([s, [0.0]])
    gaps = s_pad[:q] - s_pad[1 : q + 1]
    dd = int(np.argmax(gaps[: max(q - 1, 1)])) + 1 if d == "auto" else int(d)
    return U[:, :dd] * np.sqrt(np.maximum(gaps[:dd], 0.0))


def _prepare(X: Any, y: Any, config: FSIRConfig, active: Sequence[int] | None) -> tuple[np.ndarray, np.ndarray]:
    X = check_matrix(X, "X", min_rows=2)
    y = check_vector(y, "y")
    if y.size != X.shape[0] or not np.all(np.isfinite(y)):
        raise ValidationError("y must be finite with one value per row of X")
    if config.per_column:
        config.column_bounds(X.shape[1])  # refuses bounds that do not match the columns
    center = config.public_center(X.shape[1])  # refuses a centre that does not match the columns
    if np.any(center):
        X = X - center
    if active is not None:
        idx = np.asarray(active, dtype=int)
        if idx.ndim != 1 or np.any(idx < 0) or np.any(idx >= X.shape[1]):
            raise ValidationError(f"active columns {tuple(active)} are not columns of X ({X.shape[1]} columns)")
        X = X[:, idx]
    return config.truncate(X, active), config.slice_labels(y)


def check_client_data(X: Any, y: Any, config: FSIRConfig, client_id: str, active: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Everything a client's upload checks on its data, without spending: (truncated X, slice labels)."""
    if not isinstance(client_id, str) or not client_id:
        raise ValidationError("client_id must be a non-empty string")
    Xt, labels = _prepare(X, y, config, active)
    if Xt.shape[0] < 2 * config.n_slices:
        raise ValidationError(f"client {client_id!r} has {Xt.shape[0]} records, fewer than 2 per slice")
    return Xt, labels


def client_message(X: Any, y: Any, config: FSIRConfig, budget: Budget, *, client_id: str, random_state: Any = None,
                   active: Sequence[int] | None = None, ledger: Ledger | None = None,
                   allow_uncertified: bool = False) -> ClientMessage:
    """Compute one client's private upload from its own data (round 2, or the only round).

    ``ledger``: the client's own account (default: a fresh ledger of ``budget``). Uploads with
    ``claimed``/``none`` nodes (published VGM, the non-private baseline) need ``allow_uncertified=True``.
    """
    Xt, labels = check_client_data(X, y, config, client_id, active)
    n, p = Xt.shape
    H = config.n_slices
    plan = client_plan(config, n, p, budget, active=active)
    ledger = ledger or Ledger(plan.budget if not plan.budget.is_infinite else Budget.infinite())
    if config.mechanism == "vgm_public":
        spectrum = np.asarray(config.spectrum)
        floor = plan.specs["slice_means"].scale
        if np.any(spectrum < floor**2):
            raise ValidationError(f"vgm_public spectrum must be >= the floor variance {floor**2:.3g}")
    S, counts = core.slice_sums(Xt, labels, H)
    M = S / n
    with Run(plan, ledger, random_state=random_state, data_shape=Xt.shape, algorithm="FSIR client",
             allow_uncertified=allow_uncertified) as run:
        run_w = np.asarray(run.release("slice_proportions", counts / n), dtype=float) if config.centred else None
        if config.mechanism == "vgm":
            floor = plan.specs["slice_means"].scale
            run_M = run.release("slice_means", M, boost=_vgm_boost(centred_slice_means(M, run_w), floor**2, config.n_directions))
        elif config.mechanism == "vgm_public":
            basis = np.asarray(config.basis)
            run_M = run.release("slice_means", M, shape=basis * np.sqrt(np.asarray(config.spectrum)))
        elif config.mechanism == "vgm_two_stage":
            stage1 = run.release("slice_means_stage1", M)
            floor = plan.specs["slice_means"].scale
            run_M = run.release("slice_means", M, boost=_vgm_boost(centred_slice_means(stage1, run_w), floor**2, config.n_directions))
        else:
            run_M = run.release("slice_means", M)
        run_S = run.release("second_moment", core.covariance_uncentred(Xt))
    message = ClientMessage(client_id=str(client_id), config_digest=config.digest(), n=n, p=p, n_slices=H,
                            slice_means=np.asarray(run_M, dtype=float), second_moment=np.asarray(run_S, dtype=float),
                            proportions=run_w, report_json=_finished(run).to_json(indent=None),
                            active=None if active is None else tuple(int(a) for a in active))
    arrays = {"slice_means": message.slice_means, "second_moment": message.second_moment,
              **({"proportions": message.proportions} if message.proportions is not None else {})}
    tap.message_sent(message.client_id, "client_upload", ("server",), arrays, tuple(plan.nodes), {"n": n, "p": p, "active": message.active})
    return message


def screening_message(X: Any, y: Any, config: FSIRConfig, budget: Budget, *, client_id: str, random_state: Any = None,
                      ledger: Ledger | None = None, allow_uncertified: bool = False) -> ClientMessage:
    """Round 1 of screening: CCMD votes (not private: needs ``allow_uncertified=True``) or private peeling votes."""
    if config.screening is None:
        raise ValidationError("this configuration has no screening round")
    Xt, labels = check_client_data(X, y, config, client_id)
    n, p = Xt.shape
    H = config.n_slices
    plan = client_plan(config, n, p, budget, screening_round=True)
    ledger = ledger or Ledger(plan.budget if not plan.budget.is_infinite else Budget.infinite())
    S, counts = core.slice_sums(Xt, labels, H)
    with Run(plan, ledger, random_state=random_state, data_shape=Xt.shape, algorithm="FSIR screening",
             allow_uncertified=allow_uncertified) as run:
        if config.screening == "ccmd":
            mean = Xt.mean(axis=0)
            omega = np.abs(S / np.maximum(counts, 1.0) - mean[:, None])  # |slice mean - overall mean|
            omega[:, counts == 0] = 0.0
            if config.ccmd_rule == "top_s":
                top = np.argsort(omega, axis=0)[-config.screen_size:, :]
                votes = np.unique(top)  # client_union vote: the s largest per slice
            else:
                assert config.ccmd_threshold is not None  # FSIRConfig requires it for rule 'threshold'
                votes = np.flatnonzero(np.any(omega > float(config.ccmd_threshold), axis=1))  # client_union vote
            votes = run.release("votes", votes)
        else:
            scores = core.slice_spread_scores(Xt, labels, H, 0.0, config.entry_bounds(p))
            votes = run.release("votes", scores)
    message = ClientMessage(client_id=str(client_id), config_digest=config.digest(), n=n, p=p, n_slices=H, slice_means=None,
                            second_moment=None, report_json=_finished(run).to_json(indent=None), votes=tuple(sorted(int(v) for v in votes)))
    tap.message_sent(message.client_id, "screening_votes", ("server",), {"votes": np.asarray(message.votes)}, tuple(plan.nodes),
                     {"n": n, "p": p})
    return message
