"""One FSIR client: its own records in, a private ``ClientMessage`` out (spec fsir_000.md §4).

Releases (replace-one within the client, n public, |x_ij| <= R after truncation):

* slice means M = (1/n) [sum_{i in h} x_i]_h  (p x H): Frobenius sensitivity 2 R sqrt(p) / n (Prop. 2);
* second moment S = X^T X / n: upper-triangle sensitivity sqrt(2) R^2 p / n; MOD-SULQ (Lemma 1 with
  c_R = R sqrt(p)) or Analyze-Gauss;
* screening: CCMD votes (Algorithm 3, a ``none`` node: not private) or peeling on the rows of M
  (entry-wise sensitivity 2R/n; H entries per row).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .. import core
from ..accounting import Budget, Ledger
from .._validation import check_matrix
from ..errors import ValidationError
from ..mechanisms import Sensitivity
from ..plan import CalibratedPlan, Plan, Run
from .protocol import ClientMessage, FSIRConfig

RELATION = "replace_one"


def client_plan(config: FSIRConfig, n: int, p: int, budget: Budget, *, screening_round: bool = False) -> CalibratedPlan:
    """The plan of one client's upload: public parameters only."""
    H = config.n_slices
    c = config.row_bound(p)  # ||x|| <= c after truncation
    plan = Plan("fsir_client" + ("_screening" if screening_round else ""), RELATION,
                {"n": n, "p": p, "n_slices": H, "bound": config.bound, "norm": config.norm, "mechanism": config.mechanism, "cov_mechanism": config.cov_mechanism,
                 "calibration": config.calibration, "screening": config.screening, "config": config.digest()})
    if screening_round:
        if config.screening == "ccmd":
            plan.add("votes", "non_private", Sensitivity(1.0, "linf", RELATION, "none: raw index upload (Algorithm 3)"), status="none",
                     description="CCMD: indices with |slice mean - mean| > t, uploaded without noise (NOT private)")
        else:
            entry = 2.0 * min(config.bound, c)  # |x_j| <= R (linf) or <= C (l2)
            plan.add("votes", "peeling", Sensitivity(entry / n, "linf", RELATION, "entries of M change by <= 2 max|x_j| / n"),
                     share=Budget(budget.epsilon, 0.0) if not budget.is_infinite else None,
                     params={"s": config.screen_size, "d": H, "delta": max(budget.delta, 1e-12) if not budget.is_infinite else 0.5},
                     description="private screening: peeling on the rows of the slice-mean matrix")
        return plan.allocate(budget)
    if config.mechanism == "none":
        for name in ("slice_means", "second_moment"):
            plan.add(name, "gaussian" if name == "slice_means" else "symmetric_gaussian", Sensitivity(1.0, "l2"), noise_multiplier=0.0, delta=0.0,
                     description="non-private baseline (no noise)")
        return plan.allocate(Budget.infinite())
    eps_x, delta_x = budget.epsilon * config.cov_share, budget.delta * config.cov_share
    eps_m, delta_m = budget.epsilon - eps_x, budget.delta - delta_x
    inf = budget.is_infinite
    mean_sens = Sensitivity(2.0 * c / n, "l2", RELATION, "||x - x'||_2 / n <= 2 ||x||_max / n (Prop. 2: 2 R sqrt(p) / n)")
    if config.mechanism == "iid":
        plan.add("slice_means", "gaussian", mean_sens, share=None if inf else Budget(eps_m, delta_m), calibration=config.calibration,
                 description="Proposition 2: i.i.d. Gaussian on the p x H slice-mean matrix")
    elif config.mechanism in ("vgm", "vgm_public"):
        published = config.mechanism == "vgm"
        plan.add("slice_means", "shaped_gaussian", mean_sens, share=None if inf else Budget(eps_m, delta_m),
                 calibration=config.calibration, status="claimed" if published else "certified",
                 description="VGM (Algorithm 2): floor + boost along the top-d left singular vectors of the PRIVATE M "
                             "(Theorem 3 does not cover a data-dependent shape)" if published else
                             "VGM with a public basis and spectrum above the floor")
    else:  # vgm_two_stage
        f = config.two_stage_share
        plan.add("slice_means_stage1", "gaussian", mean_sens, share=None if inf else Budget(eps_m * f, delta_m * f),
                 calibration=config.calibration, description="two-stage VGM, stage 1: an IID release whose SVD shapes stage 2")
        plan.add("slice_means", "shaped_gaussian", mean_sens, share=None if inf else Budget(eps_m * (1 - f), delta_m * (1 - f)),
                 calibration=config.calibration, parents=("slice_means_stage1",),
                 description="two-stage VGM, stage 2: floor + boost along the stage-1 singular vectors (post-processing of a DP release)")
    cov_sens = Sensitivity(math.sqrt(2.0) * c * c / n, "l2", RELATION, "||xx^T - x'x'^T||_F / n <= sqrt(2) ||x||_max^2 / n")
    cov_cal = "modsulq" if config.cov_mechanism == "modsulq" else ("analyze_gauss" if config.calibration == "classical" else config.calibration)
    plan.add("second_moment", "symmetric_gaussian", cov_sens, share=None if inf else Budget(eps_x, delta_x), calibration=cov_cal,
             params={"n": n, "p": p, "scale": c * c},
             description="Lemma 1 (MOD-SULQ, c_R = the public row bound)" if cov_cal == "modsulq" else "Analyze-Gauss on the upper triangle")
    return plan.allocate(budget)


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
    y = np.asarray(y, dtype=float).ravel()
    if y.size != X.shape[0] or not np.all(np.isfinite(y)):
        raise ValidationError("y must be finite with one value per row of X")
    if active is not None:
        X = X[:, np.asarray(active, dtype=int)]
    return config.truncate(X), config.slice_labels(y)


def client_message(X: Any, y: Any, config: FSIRConfig, budget: Budget, *, client_id: str, random_state: Any = None,
                   active: Sequence[int] | None = None, ledger: Ledger | None = None) -> ClientMessage:
    """Compute one client's private upload from its own data (round 2, or the only round)."""
    Xt, labels = _prepare(X, y, config, active)
    n, p = Xt.shape
    H = config.n_slices
    if n < 2 * H:
        raise ValidationError(f"client {client_id!r} has {n} records, fewer than 2 per slice")
    plan = client_plan(config, n, p, budget)
    ledger = ledger or Ledger(plan.budget if not plan.budget.is_infinite else Budget.infinite())
    S, _ = core.slice_sums(Xt, labels, H)
    M = S / n
    with Run(plan, ledger, random_state=random_state, data_shape=Xt.shape, algorithm="FSIR client",
             allow_uncertified=True) as run:
        if config.mechanism == "vgm":
            floor = plan.specs["slice_means"].scale
            run_M = run.release("slice_means", M, boost=_vgm_boost(M, floor**2, config.n_directions))
        elif config.mechanism == "vgm_public":
            spectrum = np.asarray(config.spectrum)
            floor = plan.specs["slice_means"].scale
            if np.any(spectrum < floor**2):
                raise ValidationError(f"vgm_public spectrum must be >= the floor variance {floor**2:.3g}")
            basis = np.asarray(config.basis)
            run_M = run.release("slice_means", M, shape=basis * np.sqrt(spectrum))
        elif config.mechanism == "vgm_two_stage":
            stage1 = run.release("slice_means_stage1", M)
            floor = plan.specs["slice_means"].scale
            run_M = run.release("slice_means", M, boost=_vgm_boost(stage1, floor**2, config.n_directions))
        else:
            run_M = run.release("slice_means", M)
        run_S = run.release("second_moment", core.covariance_uncentred(Xt))
    return ClientMessage(client_id=str(client_id), config_digest=config.digest(), n=n, p=p, n_slices=H,
                         slice_means=np.asarray(run_M), second_moment=np.asarray(run_S), report_json=run.report.to_json(),
                         active=None if active is None else tuple(int(a) for a in active))


def screening_message(X: Any, y: Any, config: FSIRConfig, budget: Budget, *, client_id: str, random_state: Any = None) -> ClientMessage:
    """Round 1 of screening: CCMD votes (not private) or private peeling votes."""
    if config.screening is None:
        raise ValidationError("this configuration has no screening round")
    Xt, labels = _prepare(X, y, config, None)
    n, p = Xt.shape
    H = config.n_slices
    plan = client_plan(config, n, p, budget, screening_round=True)
    ledger = Ledger(plan.budget if not plan.budget.is_infinite else Budget.infinite())
    S, counts = core.slice_sums(Xt, labels, H)
    with Run(plan, ledger, random_state=random_state, data_shape=Xt.shape, algorithm="FSIR screening", allow_uncertified=True) as run:
        if config.screening == "ccmd":
            mean = Xt.mean(axis=0)
            omega = np.abs(S / np.maximum(counts, 1.0) - mean[:, None])  # |slice mean - overall mean|
            omega[:, counts == 0] = 0.0
            if config.ccmd_rule == "top_s":
                top = np.argsort(omega, axis=0)[-config.screen_size:, :]
                votes = np.unique(top)  # client_union vote: the s largest per slice
            else:
                votes = np.flatnonzero(np.any(omega > float(config.ccmd_threshold), axis=1))  # client_union vote
            votes = run.release("votes", votes)
        else:
            _, votes = run.release("votes", (S / n).T)
    return ClientMessage(client_id=str(client_id), config_digest=config.digest(), n=n, p=p, n_slices=H, slice_means=None,
                         second_moment=None, report_json=run.report.to_json(), votes=tuple(sorted(int(v) for v in votes)))
