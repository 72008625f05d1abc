"""The three release plans of ``DPPLS`` and the fits that execute them (edPLS spec §3.2, §4.6).

All three use the add/remove-one relation of the paper (spec §4.1).

* ``certified`` (S2, sufficient-statistics perturbation): Analyze-Gauss on X^T X (Delta = C_x^2)
  and a Gaussian on X^T y (Delta = C_x C_y), plus, with ``centering="dp"``, the count (Delta = 1),
  sum x (C_x) and sum y (C_y); then noise-free kernel PLS1 on the centred statistics (post-processing:
  any number of components from one release). Before the kernel step the noisy X^T X gets a ridge
  lambda I (default lambda = sigma_S sqrt(m), half the typical spectral norm 2 sigma_S sqrt(m) of the
  symmetric noise; public) and is projected onto the PSD cone: without it r^T S r can be ~0 or
  negative along noise directions and b explodes.
* ``certified_iterative`` (S1): Algorithm E's loop made sound. Per component: u = E^T f (C_x C_y),
  w = u/||u||; with s = E w (not released), g = E^T s (C_x^2), h = s^T s (C_x^2), r = f^T s
  (C_x C_y); p = g/h, c = r/h; deflate row-locally with the released p, c and re-clip.
* ``paper`` (Algorithm E as published): noise on the unit w, t and on p, c with sigma =
  z(eps, delta) x (max row norm of the deflated E) x (max |f|) etc., all read off the private data,
  every release at the full (eps, delta), deflation with the noise-free t, p, c; non-private means.
  Its nodes are ``data_dependent`` (status ``none``): charged their published calibration
  (Gaussian, multiplier z, delta share delta/k) so that the report composes what "eps" costs.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import core
from ..accounting import Budget
from ..core.arrays import FloatArray
from ..mechanisms import Sensitivity, gaussian_noise_multiplier
from ..plan import Plan, Run
from ..released import Released, from_run, gram
from ..released.ssp import component_snr, dp_means, signal_in_xty, ssp_postprocess  # noqa: F401 (moved there: their old home)
from ._pls_queries import clip_x, clip_y, iterative_deflate, iterative_statistics, ssp_statistics, weight_statistic

RELATION = "add_remove"
CENTRING_NODES = ("count", "x_sum", "y_sum")


def _sens(value: float, derivation: str) -> Sensitivity:
    return Sensitivity(value, "l2", RELATION, derivation)


# -- plans -------------------------------------------------------------------------------------------
def add_centring_nodes(plan: Plan, Cx: float, Cy: float, weights: dict[str, float]) -> None:
    plan.add("count", "gaussian", gram.count(RELATION), weight=weights["count"],
             description="number of rows (DP centring)")
    plan.add("x_sum", "gaussian", gram.column_sum(Cx, RELATION), weight=weights["x_sum"],
             description="sum of the clipped rows x - mu_x (DP centring)")
    plan.add("y_sum", "gaussian", gram.label_sum(Cy, RELATION), weight=weights["y_sum"],
             description="sum of the clipped responses y - mu_y (DP centring)")


def ssp_plan(plan: Plan, Cx: float, Cy: float, dp_centring: bool, weights: dict[str, float]) -> Plan:
    if dp_centring:
        add_centring_nodes(plan, Cx, Cy, weights)
    plan.add("xtx", "symmetric_gaussian", gram.xtx(Cx, RELATION),
             weight=weights["xtx"], calibration="analytic", description="X^T X of the clipped rows (Analyze-Gauss)")
    plan.add("xty", "gaussian", gram.xty(Cx, Cy, RELATION), weight=weights["xty"],
             description="X^T y of the clipped rows")
    return plan


def ssp_site_parts(m: int, Cx: float, Cy: float, dp_centring: bool) -> tuple[dict[str, tuple[int, ...]], dict[str, float]]:
    """S2's nodes for a secure fit over sites (``released.sites``): each node's shape, and a public bound on every
    coordinate of one row's term (count 1, x_sum C_x, y_sum C_y, X^T X C_x^2, X^T y C_x C_y: |x_j| <= ||x|| <= C_x)."""
    shapes: dict[str, tuple[int, ...]] = {"xtx": (m, m), "xty": (m,)}
    entries = {"xtx": Cx * Cx, "xty": Cx * Cy}
    if dp_centring:
        shapes.update({"count": (1,), "x_sum": (m,), "y_sum": (1,)})
        entries.update({"count": 1.0, "x_sum": Cx, "y_sum": Cy})
    return shapes, entries


def iterative_plan(plan: Plan, A: int, Cx: float, Cy: float, dp_centring: bool, weights: dict[str, float]) -> Plan:
    parents: tuple[str, ...] = ()
    if dp_centring:
        add_centring_nodes(plan, Cx, Cy, weights)
        parents = CENTRING_NODES
    for a in range(1, A + 1):
        plan.add(f"u_{a}", "gaussian", gram.xty(Cx, Cy, RELATION), parents=parents,
                 description=f"component {a}: E^T f (its direction is the weight w)")
        plan.add(f"g_{a}", "gaussian", gram.xtx(Cx, RELATION), parents=(f"u_{a}",),
                 description=f"component {a}: E^T s, s = E w")
        plan.add(f"h_{a}", "gaussian", gram.xtx(Cx, RELATION), parents=(f"u_{a}",),
                 description=f"component {a}: s^T s")
        plan.add(f"r_{a}", "gaussian", gram.xty(Cx, Cy, RELATION), parents=(f"u_{a}",),
                 description=f"component {a}: f^T s")
        parents = (f"u_{a}", f"g_{a}", f"h_{a}", f"r_{a}")
    return plan


PAPER_RELEASES = {
    "w": "unit weight w = E^T f/||E^T f|| + N(0, sigma_w^2), sigma_w = z y_max x_max (Eq. 7-8), renormalised",
    "t": "unit score t = E w/||E w|| + N(0, sigma_t^2), sigma_t = z x_max (Eq. 9), renormalised",
    "p": "X-loading p = E^T t + N(0, sigma_p^2), sigma_p = z x_max (Eq. 10)",
    "c": "y-loading c = f^T t + N(0, sigma_c^2), sigma_c = z y_max (Eq. 11)",
}


def paper_releases(release_scores: bool) -> tuple[str, ...]:
    return ("w", "t", "p", "c") if release_scores else ("w", "p", "c")


def paper_plan(plan: Plan, A: int, per_release: Budget, release_scores: bool) -> Plan:
    """4A (3A without T) data-dependent Gaussian nodes at the full per-release (eps, delta)."""
    plan.add("x_mean", "non_private", _sens(1.0, "none: the training mean, released as is"), status="none",
             description="column means of X used for centring and prediction (NOT private)")
    plan.add("y_mean", "non_private", _sens(1.0, "none: the training mean, released as is"), status="none",
             description="mean of y used for centring and prediction (NOT private)")
    kinds = paper_releases(release_scores)
    k = A * len(kinds)
    if per_release.is_infinite:
        z, delta_share = 0.0, 0.0
    else:
        z = gaussian_noise_multiplier(per_release.epsilon, per_release.delta, "analytic")
        delta_share = per_release.delta / k
        while delta_share * k > per_release.delta:  # the shares never sum above delta
            delta_share = math.nextafter(delta_share, 0.0)
    parents: tuple[str, ...] = ("x_mean", "y_mean")
    for a in range(1, A + 1):
        for kind in kinds:
            plan.add(f"{kind}_{a}", "gaussian", _sens(1.0, "paper Eq. 7-11 with sup-norms read off the deflated data (Eq. 8)"),
                     noise_multiplier=z, delta=delta_share, status="none", data_dependent=True, parents=parents,
                     params={"claimed_per_release": [per_release.epsilon, per_release.delta]},
                     description=f"component {a}: {PAPER_RELEASES[kind]}")
        parents = tuple(f"{kind}_{a}" for kind in kinds)
    return plan


# -- fits ---------------------------------------------------------------------------------------------
def fit_ssp(run: Run, X: np.ndarray, y: np.ndarray, c: dict[str, Any], source: str = "in memory") -> Released:
    """S2: release the statistics (the post-processing reads the record: ``pls.pls_from_released``)."""
    return release_ssp(run, ssp_statistics(X, y, c["x_center"], c["y_center"], c["bound_x"], c["bound_y"]), c, source)


def release_ssp(run: Run, stats: dict[str, np.ndarray], c: dict[str, Any], source: str = "in memory") -> Released:
    """S2's releases from the clipped statistics of all rows (in memory, or summed over chunks: ``privsdr.rows``),
    each charged before its noise, as a ``Released`` (add/remove: n is not public, the record's n is 0)."""
    names = (CENTRING_NODES if c["dp_centring"] else ()) + ("xtx", "xty")
    for name in names:
        run.release(name, stats[name])
    return from_run(run, names, n=0, source=source)


def fit_iterative(run: Run, X: np.ndarray, y: np.ndarray, c: dict[str, Any]) -> dict[str, Any]:
    """S1: per component, noisy E^T f -> w, noisy (E^T s, s^T s, f^T s) -> p, c; deflate and re-clip."""
    Cx, Cy = c["bound_x"], c["bound_y"]
    x_mean, y_mean = c["x_center"].copy(), float(c["y_center"])
    offset_sd = 0.0  # sd per entry of E^T f's spurious part n (x_bar - mean x)(y_bar - mean y) from the DP means' noise
    if c["dp_centring"]:
        stats = ssp_statistics(X, y, c["x_center"], c["y_center"], Cx, Cy)
        n_t, x_shift, y_shift = dp_means({name: run.release(name, stats[name]) for name in CENTRING_NODES}, Cx, Cy)
        x_mean, y_mean = x_mean + x_shift, y_mean + y_shift
        offset_sd = run.plan.specs["x_sum"].scale * run.plan.specs["y_sum"].scale / n_t
    E, f = clip_x(X, x_mean, Cx), clip_y(y, y_mean, Cy)
    A, m = c["A"], X.shape[1]
    W, P, cl = np.zeros((m, A)), np.zeros((m, A)), np.zeros(A)
    h_floor = run.plan.specs["h_1"].scale
    keep = A
    for a in range(1, A + 1):
        u = run.release(f"u_{a}", weight_statistic(E, f))
        u_sd = math.hypot(run.plan.specs[f"u_{a}"].scale, offset_sd if a == 1 else 0.0)
        if keep == A and c.get("shrinkage") == "snr" and not component_signal(u, u_sd, A):
            keep = a - 1  # this component's E^T f is noise: it and the later ones are dropped (post-processing)
        norm = float(np.linalg.norm(u))
        w = u / norm if norm > 0 else np.eye(m)[0]
        stats_a = iterative_statistics(E, f, w)
        g = run.release(f"g_{a}", stats_a["g"])
        h_released = float(run.release(f"h_{a}", stats_a["h"])[0])
        if keep == A and c.get("shrinkage") == "snr" and not (
                component_signal(np.array([h_released]), h_floor, A)
                and component_signal(np.array([float(g @ w)]), run.plan.specs[f"g_{a}"].scale, A)):
            keep = a - 1  # s^T s = ||E w||^2 (or w^T E^T s, the same) is noise: p = g/h, c = r/h would be noise over noise
        h = max(h_released, h_floor, 1e-300)
        r = float(run.release(f"r_{a}", stats_a["r"])[0])
        p, ca = g / h, r / h
        E, f = iterative_deflate(E, f, w, p, ca, Cx, Cy)
        root = math.sqrt(h)  # to the unit-score convention: p ||s||, c ||s||
        W[:, a - 1], P[:, a - 1], cl[a - 1] = w, p * root, ca * root
    W, P, cl = W[:, :keep], P[:, :keep], cl[:keep]
    path = coef_path(W, P, cl) if keep else np.zeros((m, 0))
    return {"weights": W, "loadings": P, "y_loadings": cl, "coef_path": path, "x_mean": x_mean, "y_mean": y_mean}


def component_signal(u: np.ndarray, sigma: float, n_components: int) -> bool:
    """S1's pre-test (issue 24): does a component's released E^T f (or its s^T s) stand above its noise N(0, sigma^2 I)?
    ``released.regression.signal_in`` at PRETEST_LEVEL / A. The data are centred before u is computed, so its noise
    is the release's own."""
    from ..released.regression import PRETEST_LEVEL, signal_in

    return signal_in(u, np.full(u.shape[0], sigma**2), PRETEST_LEVEL / n_components)



def fit_paper(run: Run, X: np.ndarray, y: np.ndarray, c: dict[str, Any]) -> dict[str, Any]:
    """Algorithm E line by line (spec §3.2): non-private w, t, p, c drive the deflation."""
    x_mean = run.release("x_mean", X.mean(axis=0))
    y_mean = float(run.release("y_mean", np.array([y.mean()]))[0])
    E: FloatArray
    f: FloatArray
    E, f = X - x_mean, y - y_mean
    A, (n, m) = c["A"], X.shape
    kinds = paper_releases(c["release_scores"])
    W, P, cl = np.zeros((m, A)), np.zeros((m, A)), np.zeros(A)
    T = np.zeros((n, A)) if "t" in kinds else None
    z = run.plan.specs["w_1"].noise_multiplier

    def sens(value: float) -> float:
        # legacy_std_is_variance (spec A13): the reference code draws noise with std sigma^2 = (z Delta)^2,
        # i.e. the sensitivity z Delta^2 at multiplier z. Only for reproducing the paper's figures.
        return z * value * value if c["legacy"] and z > 0 else value

    for a in range(1, A + 1):
        w = core.pls1_weight(E, f)
        x_max = float(np.sqrt(np.max(np.einsum("ij,ij->i", E, E))))  # Eq. 8 on the CURRENT deflated data
        y_max = float(np.max(np.abs(f)))  # max |f_i| (spec A4, O-14)
        w_noisy = run.release(f"w_{a}", w, sensitivity=sens(y_max * x_max))
        t = core.pls1_score(E, w)  # non-private w (spec A3)
        if T is not None:
            t_noisy = run.release(f"t_{a}", t, sensitivity=sens(x_max))
            T[:, a - 1] = t_noisy / np.linalg.norm(t_noisy)
        p, ca = core.pls1_loadings(E, f, t)
        p_noisy = run.release(f"p_{a}", p, sensitivity=sens(x_max))
        c_noisy = float(run.release(f"c_{a}", np.array([ca]), sensitivity=sens(y_max))[0])
        E, f = core.deflate(E, f, t, p, ca)  # with the NON-private t, p, c (E17)
        W[:, a - 1], P[:, a - 1], cl[a - 1] = w_noisy / np.linalg.norm(w_noisy), p_noisy, c_noisy
    return {"weights": W, "loadings": P, "y_loadings": cl, "coef_path": coef_path(W, P, cl), "x_mean": x_mean,
            "y_mean": y_mean, "scores": T}


def coef_path(W: np.ndarray, P: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Column a-1: b with the first a components, W_a (P_a^T W_a)^{-1} c_a (post-processing)."""
    return np.column_stack([core.regression_vector(W[:, :a], P[:, :a], c[:a])[0] for a in range(1, W.shape[1] + 1)])
