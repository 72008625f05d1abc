"""Never worse than the DP mean (issue 33): every certified regression and PLS mode, on sklearn's diabetes and on a
noise-dominated simulation whose mean sits far from the public centre, over 20 folds (5-fold CV, 4 shuffles), at
eps = 1 and 8. Each fold is scored against the fit's own DP-mean predictor (the trivial model its releases carry: a
fit that falls back to a public centre, as DP-BCD did, fails here) and in absolute test R^2 (pre-registered: >= -0.05).

SecureVerticalRegression's fallback is its post-processing of a ``Released`` (``secure_regression_from_released``); here the release is
simulated in process (the clipped Gram plus Gaussian noise at the plan's opened sd), so no MPC process is started.
"""
from __future__ import annotations

import math
import warnings
from functools import cache
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from privsdr import DPPLS, AdaSSPRegression, Budget, DPBCDRegression, PRIDERegressor
from privsdr.algorithms._pls_modes import dp_means
from privsdr.datasets.vertical import dpbcd_synthetic
from privsdr.released import Released
from privsdr.released.regression import dp_centred, symmetric_noise, towards_dp_mean

THRESHOLD = -0.05  #: pre-registered (issue 33): the smallest test R^2 over the 20 folds, and against the DP mean
EPSILONS = (1.0, 8.0)
ESTIMATORS = ("AdaSSP", "DPPLS S2", "DPPLS S1", "DPBCD", "PRIDE", "Secure ridge", "Secure PLS")


@cache
def data(name: str) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """(X, y, public bounds). Diabetes: every column has norm 1 over its 442 rows (documented), so ||x|| <= 0.35;
    the target's documented range 25..346 gives the centre 185.5 +- 160.5. Simulation: the DP-BCD design (p = 10,
    population R^2 0.1, 1000 rows) with y shifted 1.5 sd away from the public centre 0."""
    if name == "diabetes":
        from sklearn.datasets import load_diabetes

        X, y = load_diabetes(return_X_y=True)
        return X, y, {"bound_x": 0.35, "bound_y": 160.5, "y_center": 185.5, "entry": 0.35, "coef": 2000.0}
    d = dpbcd_synthetic(1000, 10, r2=0.1, seed=7)
    sd = math.sqrt(float(d.beta @ (0.7 * np.eye(10) + 0.3) @ d.beta) / 0.1)  # the design's public sd of y
    return np.hstack(d.blocks), d.y + 1.5 * sd, {"bound_x": 2.5 * math.sqrt(10), "bound_y": 4.5 * sd, "y_center": 0.0,
                                                "entry": 4.0, "coef": 6.5 * math.sqrt(5)}


def folds(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import KFold

    return [split for shuffle in range(4) for split in KFold(5, shuffle=True, random_state=shuffle).split(np.zeros(n))]


def r2(y: np.ndarray, pred: np.ndarray) -> float:
    return 1.0 - float(np.sum((y - pred) ** 2)) / float(np.sum((y - y.mean()) ** 2))


def secure_fit(X: np.ndarray, y: np.ndarray, b: dict[str, float], eps: float, seed: int, n_components: int | None) -> Any:
    """SecureVerticalRegression's post-processing on a simulated opening: Z^T Z and Z^T y of the clipped blocks and
    the constant column, plus Gaussian noise at the plan's opened sds (the shared post-processing, no processes)."""
    from privsdr.mechanisms.distributed import share_noise
    from privsdr.vertical.secure_regression import (
        SecureVerticalRegression,
        released_constant,
        secure_regression_from_released,
    )

    widths = {"party0": 5, "party1": 5}
    bound = b["bound_x"] / math.sqrt(2.0)
    # y in units of its public bound (a public constant: the secure grid refuses bounds 250x apart, issue 33 item 6)
    unit = b["bound_y"]
    y = y / unit
    b = {**b, "bound_y": 1.0, "y_center": b["y_center"] / unit}
    est = SecureVerticalRegression(row_bound=bound, label_bound=b["bound_y"], y_center=b["y_center"], n_components=n_components,
                                   budget=Budget(eps, 1e-6), random_state=seed)
    c = est._checked(list(widths), list(widths.values()))
    specs = est.plan(widths).specs
    scales = {k: share_noise(specs[k]).opened_sd for k in ("xtx", "xty")}
    blocks = []
    for block in (X[:, :5], X[:, 5:]):
        norms = np.maximum(np.linalg.norm(block, axis=1) / bound, 1.0)
        blocks.append(block / norms[:, None])
    Z = np.column_stack(blocks + [np.full(len(y), released_constant(c))])
    # the party program's public rescale of the label (issue 33 item 4): y in units of C_y / C
    labels = np.clip(y - b["y_center"], -b["bound_y"], b["bound_y"]) * c["label_scale"]
    rng = np.random.default_rng(seed)
    released = Released({"xtx": Z.T @ Z + symmetric_noise(scales["xtx"], Z.shape[1], rng),
                         "xty": Z.T @ labels + scales["xty"] * rng.standard_normal(Z.shape[1])}, scales, 0, "add_remove", "simulated")
    secure_regression_from_released(released, x_center=c["x_center"], y_center=c["y_center"], label_bound=c["label_bound"],
                                    constant=released_constant(c), columns_scale=c["columns_scale"], label_scale=c["label_scale"],
                                    fit_intercept=c["intercept"], n_components=c["n_components"], failure_probability=c["rho"],
                                    random_state=seed).apply(est)
    est.coef_, est.intercept_ = unit * est.coef_, unit * est.intercept_
    y_shift = dp_centred(released["xtx"], released["xty"], released_constant(c), c["label_bound"])[1] / c["label_scale"]
    est.dp_mean_ = unit * (b["y_center"] + y_shift)
    return est


def fitted(name: str, X: np.ndarray, y: np.ndarray, b: dict[str, float], eps: float, seed: int) -> tuple[Any, float]:
    """(the fit, its DP-mean prediction: the trivial model its own releases carry)."""
    budget = Budget(eps, 1e-6)
    if name == "AdaSSP":
        est = AdaSSPRegression(bound_x=b["bound_x"], bound_y=b["bound_y"], y_center=b["y_center"], budget=budget, random_state=seed)
        est.fit(X, y)
        return est, b["y_center"] + dp_means(dict(est.released_.arrays), b["bound_x"], b["bound_y"])[2]
    if name.startswith("DPPLS"):
        mode = "certified" if name.endswith("S2") else "certified_iterative"
        est = DPPLS(2, mode=mode, bound_x=b["bound_x"], bound_y=b["bound_y"], y_center=b["y_center"], budget=budget,
                    random_state=seed).fit(X, y)
        return est, est.y_mean_
    if name == "DPBCD":  # the DP mean is read off the recorded y_sum release, not off what the fit made of it
        from privsdr.audit.replay import record

        est = DPBCDRegression("certified", n_parties=2, budget=budget, row_bound=b["bound_x"] / math.sqrt(2.0), label_bound=b["bound_y"],
                              coef_bound=b["coef"], y_center=b["y_center"], message_reports=False, random_state=seed)
        _, recording = record(lambda: est.fit(X, y))
        total = next(float(np.ravel(r.output)[0]) for r in recording.releases if r.key[1].endswith("/y_sum"))
        return est, b["y_center"] + float(np.clip(total / len(y), -b["bound_y"], b["bound_y"]))
    if name == "PRIDE":  # y is not protected in PRIDE (spec A0.2): its trivial model is the training mean
        est = PRIDERegressor("certified", bounds=(-b["entry"], b["entry"]), n_parties=2, budget=budget, message_reports=False,
                             random_state=seed).fit(X, y)
        return est, float(np.mean(y))
    est = secure_fit(X, y, b, eps, seed, 2 if name == "Secure PLS" else None)
    return est, est.dp_mean_


def predict(est: Any, X: np.ndarray) -> np.ndarray:
    return X @ np.asarray(est.coef_) + float(est.intercept_) if hasattr(est, "dp_mean_") else est.predict(X)


@cache
def scores(name: str, dataset: str, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Test R^2 of the fit and of its DP-mean predictor on each of the 20 folds (fixed seeds)."""
    X, y, b = data(dataset)
    model, trivial = [], []
    for k, (train, test) in enumerate(folds(len(y))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est, mean = fitted(name, X[train], y[train], b, eps, seed=k)
        model.append(r2(y[test], predict(est, X[test])))
        trivial.append(r2(y[test], np.full(len(test), mean)))
    return np.array(model), np.array(trivial)


#: cells that still miss the threshold with these seeds (issue 33, not done; docs/accuracy.md): strict, so a fix shows.
#: The DP mean alone cannot clear the bar reliably on these 88-row test folds (the exact training mean itself reaches
#: -0.042): a fit that falls back fully passes by the luck of its noise draw (``bench_never_worse.py fallback-floor``).
#: AdaSSP's cell here passes with these seeds, as DPPLS S1's does, but its median (-0.006) says it mostly falls back
#: too: with other seeds it misses (docs/accuracy.md).
KNOWN_GAPS = {
    ("absolute", "DPBCD", "diabetes", 1.0): "falls back to the DP mean in every fold; the DP mean alone misses by its own noise",
}


def cells(kind: str, keep: Any) -> list[Any]:
    return [pytest.param(name, dataset, eps, marks=[pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[(kind, name, dataset, eps)])]
                         if (kind, name, dataset, eps) in KNOWN_GAPS else [])
            for name in ESTIMATORS for dataset in ("diabetes", "simulation") for eps in EPSILONS if keep(dataset, eps)]


@pytest.mark.parametrize(("name", "dataset", "eps"), cells("relative", lambda dataset, eps: True))
def test_never_worse_than_its_own_dp_mean(name: str, dataset: str, eps: float) -> None:
    """The fallback rule: on no fold is the fit more than 0.05 of test R^2 below the DP mean its releases carry."""
    model, trivial = scores(name, dataset, eps)
    assert float(np.min(model - trivial)) >= THRESHOLD, (model - trivial).round(3)


@pytest.mark.parametrize(("name", "dataset", "eps"), cells("absolute", lambda dataset, eps: True))
def test_min_test_r2(name: str, dataset: str, eps: float) -> None:
    """Issue 33's threshold: the smallest test R^2 over the 20 folds is at least -0.05. On diabetes at eps = 1 a fit
    that falls back fully has little room: the exact training mean itself reaches -0.042 on its 88-row test folds."""
    model, _ = scores(name, dataset, eps)
    assert float(np.min(model)) >= THRESHOLD, model.round(3)


def test_the_exact_mean_leaves_little_room_on_diabetes() -> None:
    """Why a fit that falls back fully on diabetes rarely clears the bar: the training mean itself scores below -0.04."""
    X, y, _ = data("diabetes")
    worst = min(r2(y[test], np.full(len(test), y[train].mean())) for train, test in folds(len(y)))
    assert -0.05 < worst < -0.04


# -- the certified AdaSSP's releases: DPPLS S2's count, sums, X^T X and X^T y of the clipped rows ---------------
def small_data(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.5, 0.5, (n, 3))
    X[:5] *= 4.0  # some rows beyond the bound 1: scaled down
    return X, 4.0 + X @ np.array([1.0, -1.0, 0.5]) + rng.uniform(-3, 3, n)  # some labels beyond the bound 2 around 4


def test_noise_off_the_releases_are_the_clipped_statistics_and_the_fallback_is_the_clipped_mean() -> None:
    """Noise off: the five releases are n, sum x, sum y, X^T X, X^T y of the rows scaled to norm <= C_x around mu_x and
    the labels clipped to +-C_y around mu_y (recomputed here with numpy from the rows), the fit is OLS on those rows
    (centred at their means), and a fit whose slopes are dropped (``towards_dp_mean`` at ratio 1) predicts mu_y + the
    clipped mean. The published variant (shrinkage="none") releases its three."""
    X, y = small_data()
    cx = np.array([0.1, 0.0, -0.1])
    est = AdaSSPRegression(bound_x=1.0, bound_y=2.0, x_center=cx, y_center=4.0, budget=Budget.infinite(), random_state=0).fit(X, y)
    norms = np.linalg.norm(X - cx, axis=1)
    D = (X - cx) / np.maximum(norms / 1.0, 1.0)[:, None]
    t = np.clip(y - 4.0, -2.0, 2.0)
    assert np.any(norms > 1.0) and np.any(np.abs(y - 4.0) > 2.0)
    r = est.released_
    assert set(r.arrays) == {"count", "x_sum", "y_sum", "xtx", "xty"} and r["count"][0] == len(y)
    for name, reference in (("x_sum", D.sum(axis=0)), ("y_sum", [t.sum()]), ("xtx", D.T @ D), ("xty", D.T @ t)):
        assert np.allclose(r[name], reference, atol=1e-12), name
    ols = LinearRegression().fit(D, t)
    assert np.allclose(est.coef_, ols.coef_, atol=1e-9) and est.ridge_ == 0.0
    assert est.intercept_ == pytest.approx(4.0 + ols.intercept_ - cx @ ols.coef_, abs=1e-9)
    coef, intercept, factor = towards_dp_mean(est.coef_, est.intercept_, cx + D.mean(axis=0), 1.0)
    assert factor == 0.0 and np.all(coef == 0.0) and intercept == pytest.approx(4.0 + t.mean(), abs=1e-10)
    published = AdaSSPRegression(bound_x=1.0, bound_y=2.0, y_center=4.0, shrinkage="none", budget=Budget.infinite()).fit(X, y)
    assert set(published.released_.arrays) == {"lambda_min", "xtx", "xty"}


def test_the_releases_stay_within_their_declared_sensitivities() -> None:
    """The certified AdaSSP's five releases, probed through the production fit on extreme add/remove neighbours (a
    record at the origin or beyond the bound along e1, with y far beyond the bound on either side): each moves by at
    most, and close to, its declared sensitivity (count 1, x_sum C_x, y_sum C_y, X^T X C_x^2, X^T y C_x C_y)."""
    from privsdr.audit import add_record_pair, probe_releases

    X, y = small_data(12, seed=1)
    datasets = [(X, y)] + [add_record_pair(X, y, row, label)[0] for row in (np.zeros(3), 5.0 * np.eye(3)[0])
                           for label in (4.0 + 50.0, 4.0 - 50.0)]

    def fit(D: tuple[np.ndarray, np.ndarray]) -> Any:
        return AdaSSPRegression(bound_x=1.0, bound_y=2.0, y_center=4.0, budget=Budget.infinite(), random_state=0).fit(*D)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = probe_releases(fit, datasets, [(0, i) for i in range(1, len(datasets))])
    assert set(results) == {"count", "x_sum", "y_sum", "xtx", "xty"}
    for node, declared in (("count", 1.0), ("x_sum", 1.0), ("y_sum", 2.0), ("xtx", 1.0), ("xty", 2.0)):
        assert results[node].passed, results[node].summary()
        assert results[node].declared == pytest.approx(declared) and results[node].max_change >= 0.99 * declared
