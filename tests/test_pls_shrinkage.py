"""Certified DPPLS (S2) never does worse than the trivial model (issue 24): ``shrinkage="snr"`` keeps the components
above the noise, none when the released X^T y is noise, and scales the slopes by max(0, 1 - noise_ratio_^2)."""
import warnings

import numpy as np
import pytest

from privsdr import DPPLS, Budget, NoiseDominatesWarning
from privsdr.algorithms._pls_modes import signal_in_xty

M = 8
BETA = np.linspace(1.0, -1.0, M)


def problem(n, seed):
    """Rows in a public box around a public centre (x in 0.5 +- 0.5, y in 3 +- 3), an offset mean, R^2 about 0.5."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, (2 * n, M))
    y = np.clip(1.0 + (X - 0.5) @ BETA + 0.4 * rng.standard_normal(2 * n), 0.0, 6.0)
    return X[:n], y[:n], X[n:], y[n:]


def fit(X, y, eps, seed, **kw):
    kw.setdefault("bound_x", 0.5 * np.sqrt(M))
    return DPPLS(2, bound_y=3.0, x_center=0.5, y_center=3.0, budget=Budget(eps, 1e-6), random_state=seed, **kw).fit(X, y)


def r2(y, pred):
    return 1.0 - float(np.mean((y - pred) ** 2)) / float(np.mean((y - y.mean()) ** 2))


def test_the_pre_test_drops_noise_and_keeps_a_clear_signal():
    rng = np.random.default_rng(0)
    variances = np.full(M, 4.0)
    kept = sum(signal_in_xty(2.0 * rng.standard_normal(M), variances) for _ in range(400))
    assert kept <= 0.1 * 400  # pre-registered: noise alone passes at level 0.05
    assert signal_in_xty(np.full(M, 20.0) + 2.0 * rng.standard_normal(M), variances)
    assert signal_in_xty(np.full(M, 1e-9), np.zeros(M))  # no noise: any statistic is signal


def test_where_noise_dominates_the_fit_is_no_worse_than_the_dp_mean_and_warns():
    """40 seeds, n = 200, eps = 0.3: test R^2 within 0.05 of the DP-mean predictor in >= 95 % (38) of them, and the
    warning in >= 95 %; the unshrunk fit is far below it."""
    ok = warned = 0
    unshrunk = []
    for seed in range(40):
        X, y, Xt, yt = problem(200, seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = fit(X, y, 0.3, seed)
            plain = fit(X, y, 0.3, seed, shrinkage="none", diagnose_noise=False)
        trivial = r2(yt, np.full(len(yt), est.y_mean_))
        ok += r2(yt, est.predict(Xt)) >= trivial - 0.05
        warned += any(issubclass(w.category, NoiseDominatesWarning) for w in caught)
        unshrunk.append(r2(yt, plain.predict(Xt)) - trivial)
    assert ok >= 38 and warned >= 38
    assert np.median(unshrunk) < -0.5  # what the shrinkage fixes


def test_where_signal_dominates_there_is_no_warning_and_the_shrinkage_moves_the_fit_less_than_its_noise():
    X, y, Xt, yt = problem(20_000, 1)
    exact = DPPLS(2, bound_x=0.5 * np.sqrt(M), bound_y=3.0, x_center=0.5, y_center=3.0, budget=Budget.infinite()).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatesWarning)
        shrunk = fit(X, y, 8.0, 2)
        plain = fit(X, y, 8.0, 2, shrinkage="none")
    assert shrunk.noise_ratio_ < 0.5 and shrunk.n_components_ == plain.n_components_ == 2
    # in the metric of the predictions: the shrinkage moves them by less than the noise moved the unshrunk fit
    assert np.linalg.norm(Xt @ (shrunk.coef_ - plain.coef_)) < 0.1 * np.linalg.norm(Xt @ (plain.coef_ - exact.coef_))
    assert r2(yt, shrunk.predict(Xt)) > 0.99 * r2(yt, exact.predict(Xt))


def test_noise_off_the_shrinkage_is_off():
    X, y, _, _ = problem(500, 3)
    on = DPPLS(3, bound_x=0.5 * np.sqrt(M), bound_y=3.0, x_center=0.5, y_center=3.0, budget=Budget.infinite()).fit(X, y)
    off = DPPLS(3, bound_x=0.5 * np.sqrt(M), bound_y=3.0, x_center=0.5, y_center=3.0, budget=Budget.infinite(),
                shrinkage="none").fit(X, y)
    np.testing.assert_array_equal(on.coef_path_, off.coef_path_)
    assert on.n_components_ == 3 and on.shrinkage_factor_ == 1.0 and on.noise_ratio_ == 0.0


def test_bad_shrinkage_is_refused_before_anything_is_spent():
    from privsdr import Ledger, ValidationError

    ledger = Ledger(Budget(1.0, 1e-5))
    X, y, _, _ = problem(50, 4)
    with pytest.raises(ValidationError, match="shrinkage"):
        DPPLS(2, bound_x=1.0, bound_y=3.0, budget=Budget(0.5, 1e-6), ledger=ledger, shrinkage="james").fit(X, y)
    assert ledger.spent.epsilon == 0.0


def test_the_slopes_are_scaled_by_the_share_of_their_spread_the_noise_does_not_explain():
    """Between the two regimes (n = 1000, eps = 1): a component is kept, and its slopes are scaled by
    max(0, 1 - noise_ratio_^2) (positive-part James-Stein on the bootstrap's noise share)."""
    X, y, _, _ = problem(1000, 5)
    est = fit(X, y, 1.0, 0)
    plain = fit(X, y, 1.0, 0, shrinkage="none")
    assert est.n_components_ == 1 and 0.0 < est.shrinkage_factor_ < 0.5
    assert est.shrinkage_factor_ == pytest.approx(1.0 - est.noise_ratio_**2)
    np.testing.assert_allclose(est.coef_, est.shrinkage_factor_ * plain.coef_path_[:, 0], rtol=1e-9, atol=1e-12)
    assert est.intercept_ == pytest.approx(est.y_mean_ - est.x_mean_ @ est.coef_)


def test_s1_keeps_components_up_to_the_first_that_is_noise_and_otherwise_falls_back_to_the_dp_mean():
    """S1 (no bootstrap): where noise dominates (n = 200, eps = 0.3, 40 seeds) the fit is within 0.05 of its DP-mean
    predictor in >= 95 % and warns when it is that predictor; noise off it keeps every component."""
    ok = trivial = warned = 0
    for seed in range(40):
        X, y, Xt, yt = problem(200, seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = fit(X, y, 0.3, seed, mode="certified_iterative")
        ok += r2(yt, est.predict(Xt)) >= r2(yt, np.full(len(yt), est.y_mean_)) - 0.05
        trivial += est.n_components_ == 0
        warned += est.n_components_ == 0 and any(issubclass(w.category, NoiseDominatesWarning) for w in caught)
    assert ok >= 38 and trivial >= 20 and warned == trivial
    X, y, _, _ = problem(500, 3)
    off = DPPLS(3, mode="certified_iterative", bound_x=0.5 * np.sqrt(M), bound_y=3.0, x_center=0.5, y_center=3.0,
                budget=Budget.infinite()).fit(X, y)
    plain = DPPLS(3, mode="certified_iterative", bound_x=0.5 * np.sqrt(M), bound_y=3.0, x_center=0.5, y_center=3.0,
                  budget=Budget.infinite(), shrinkage="none").fit(X, y)
    assert off.n_components_ == 3 and np.array_equal(off.coef_path_, plain.coef_path_)


def test_s1_keeps_no_component_when_y_is_noise():
    """y independent of X (n = 2000, eps = 2): s^T s and w^T E^T s are real signal, only E^T f is noise; its pre-test
    (level 0.05 / A) keeps a component in at most 1 of 20 seeds."""
    def kept(n, eps, **kw):
        count = 0
        for seed in range(20):
            rng = np.random.default_rng(seed)
            X, y = rng.uniform(0.0, 1.0, (n, M)), np.clip(3.0 + rng.standard_normal(n), 0.0, 6.0)
            count += fit(X, y, eps, seed, mode="certified_iterative", **kw).n_components_ > 0
        return count

    assert kept(2000, 2.0) <= 1
    # small n, a loose public bound: the DP means are noisy, and n (x_bar - mean x)(y_bar - mean y) enters E^T f;
    # the pre-test counts it (without it 10 of these 20 keep a component)
    assert kept(300, 0.5, bound_x=2.0 * np.sqrt(M)) <= 3
