"""Certified DP-BCD never does worse than the trivial model: each step is shrunk by the share of its predicted
change that its released noise explains (``dpbcd_shrinkage.certified_increment``), a step of noise alone is dropped, and
the fit warns ``NoiseDominatesWarning`` when the noise wins (issue 24)."""
import math
import warnings

import numpy as np
import pytest

from privsdr import Budget, DPBCDRegression, NoiseDominatesWarning
from privsdr.datasets import dpbcd_synthetic
from privsdr.released.regression import ZEROED_NOTE
from privsdr.vertical import dpbcd_shrinkage as shrinkage

P, M = 10, 5
ROW, COEF = 2.5 * math.sqrt(M), 6.5 * math.sqrt(M)


def simulation(n, seed):
    """The DP-BCD simulation (p = 10, two parties of 5 columns) with test rows; the public sd of y from the design."""
    d = dpbcd_synthetic(2 * n, P, seed=seed)
    X, y = np.hstack(d.blocks), d.y
    y_sd = math.sqrt(float(d.beta @ (0.7 * np.eye(P) + 0.3) @ d.beta) / 0.3)
    return X[:n], y[:n], X[n:], y[n:], y_sd


def fit(X, y, y_sd, budget, seed, **kw):
    return DPBCDRegression("certified", n_parties=2, budget=budget, row_bound=ROW, label_bound=3 * y_sd, coef_bound=COEF,
                           message_reports=False, random_state=seed, **kw).fit(X, y)


def r2(y, pred):
    return 1.0 - float(np.mean((y - pred) ** 2)) / float(np.mean((y - y.mean()) ** 2))


def test_a_step_of_noise_alone_is_dropped_and_a_clear_signal_is_kept_almost_whole():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5, 5))
    G = A @ A.T + 5 * np.eye(5)
    sd = 2.0
    dropped = sum(shrinkage.certified_increment(G, sd * rng.standard_normal(5), np.zeros(5), 0.0, 1e9,
                                            shrinkage.StepNoise(sd), n_steps=10)[1].factor == 0.0 for _ in range(400))
    assert dropped >= 0.98 * 400  # pre-registered: one of 10 steps passes at level 0.05 / 10, about 0.5 % of the time
    signal = G @ np.full(5, 10.0)
    d, kept = shrinkage.certified_increment(G, signal + sd * rng.standard_normal(5), np.zeros(5), 0.0, 1e9, shrinkage.StepNoise(sd))
    assert 0.95 < kept.factor < 1.0 and np.linalg.norm(d - 10.0) < 1.0
    # no noise: no shrinkage; shrink=False keeps the step and still measures its noise
    assert shrinkage.certified_increment(G, signal, np.zeros(5), 0.0, 1e9, shrinkage.StepNoise(0.0))[1].factor == 1.0
    unshrunk = shrinkage.certified_increment(G, sd * rng.standard_normal(5), np.zeros(5), 0.0, 1e9, shrinkage.StepNoise(sd), shrink=False)[1]
    assert unshrunk.factor == 1.0 and unshrunk.noise_energy > 0


def test_noise_off_the_shrinkage_is_off_and_the_intercept_is_the_mean():
    """Noise off: the shrinkage changes nothing, and the DP intercept is BCD on the clipped labels minus their mean
    (clipped again to the label bound; the reference is ``core.bcd``), with that mean as the intercept."""
    from privsdr.core import bcd, clip_rows_l2

    X, y, _, _, y_sd = simulation(500, 1)
    y = y + 7.0
    on = fit(X, y, y_sd, Budget.infinite(), 0)
    off = fit(X, y, y_sd, Budget.infinite(), 0, shrinkage="none")
    np.testing.assert_array_equal(on.coef_, off.coef_)
    assert on.noise_ratio_ == 0.0
    clipped = np.clip(y, -3 * y_sd, 3 * y_sd)
    assert on.intercept_ == pytest.approx(clipped.mean(), rel=1e-12)
    blocks = [clip_rows_l2(X[:, :M], ROW), clip_rows_l2(X[:, M:], ROW)]
    reference = bcd(blocks, np.clip(clipped - clipped.mean(), -3 * y_sd, 3 * y_sd), 5).coef  # clipped again: u's bound
    np.testing.assert_allclose(on.coef_, reference, rtol=1e-9, atol=1e-12)
    without = fit(X, y, y_sd, Budget.infinite(), 0, dp_intercept=False)
    assert without.intercept_ == 0.0
    np.testing.assert_allclose(without.coef_, bcd(blocks, clipped, 5).coef, rtol=1e-9, atol=1e-12)


def test_where_noise_dominates_the_fit_is_no_worse_than_the_trivial_one_and_warns():
    """40 seeds, n = 300, eps = 0.5: test R^2 within 0.05 of the fit's own DP-mean predictor (its intercept) in >= 95 %
    of them (the unshrunk fit of issue 23 is far below). Issue 33: the trivial model is the DP mean, not the public
    centre (here the centre happens to be the design's true mean, so it once passed an absolute threshold by luck)."""
    ok = warned = 0
    for seed in range(40):
        X, y, Xt, yt, y_sd = simulation(300, seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = fit(X, y, y_sd, Budget(0.5, 1e-6), seed)
        ok += r2(yt, est.predict(Xt)) >= r2(yt, np.full(len(yt), est.intercept_)) - 0.05
        noise = [str(w.message) for w in caught if issubclass(w.category, NoiseDominatesWarning)]
        warned += bool(noise)
        # a warned fit drops every slope, and its warning says so (not AdaSSP's "shrunk by max(0, 1 - ratio^2)")
        assert not noise or (ZEROED_NOTE in noise[0] and not np.any(est.coef_))
    assert ok >= 38 and warned >= 38
    X, y, Xt, yt, y_sd = simulation(300, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert r2(yt, fit(X, y, y_sd, Budget(0.5, 1e-6), 0, shrinkage="none").predict(Xt)) < -0.3  # what the shrinkage fixes


def test_where_signal_dominates_there_is_no_warning_and_the_shrinkage_moves_the_fit_less_than_its_noise():
    X, y, Xt, yt, y_sd = simulation(20_000, 2)
    exact = fit(X, y, y_sd, Budget.infinite(), 0).coef_
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatesWarning)
        shrunk = fit(X, y, y_sd, Budget(1000.0, 1e-6), 3)
        plain = fit(X, y, y_sd, Budget(1000.0, 1e-6), 3, shrinkage="none")
    assert shrunk.noise_ratio_ < 0.5
    # in the metric of the predictions: the shrinkage moves them by less than the noise moved the unshrunk fit
    assert np.linalg.norm(Xt @ (shrunk.coef_ - plain.coef_)) < np.linalg.norm(Xt @ (plain.coef_ - exact))
    assert r2(yt, shrunk.predict(Xt)) > 0.25


def test_y_center_is_where_the_labels_are_clipped_and_the_trivial_models_fallback():
    X, y, Xt, yt, y_sd = simulation(300, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        est = fit(X, y + 100.0, y_sd, Budget(0.5, 1e-6), 0, y_center=100.0, dp_intercept=False)
        exact = fit(X, y + 100.0, y_sd, Budget.infinite(), 0, y_center=100.0)
    assert est.intercept_ == 100.0 and np.allclose(est.predict(Xt) - Xt @ est.coef_, 100.0)
    np.testing.assert_allclose(exact.coef_, fit(X, y, y_sd, Budget.infinite(), 0).coef_, rtol=1e-9, atol=1e-12)
    assert exact.intercept_ == pytest.approx(100.0 + np.clip(y, -3 * y_sd, 3 * y_sd).mean())
    with pytest.raises(Exception, match="y_center"):
        fit(X, y, y_sd, Budget(0.5, 1e-6), 0, y_center=float("nan"))
