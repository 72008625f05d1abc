"""Certified PRIDE never does worse than the trivial model (issue 24): the errors-in-variables correction is on by default
(without it every party's block absorbs the effects the others' noisy sketches cannot carry and the global prediction
counts them once per party), and a party whose held-out errors cannot tell its own part of the prediction from each
fold's mean of y sets its coefficients to 0 and warns ``NoiseDominatesWarning``."""
import warnings

import numpy as np
import pytest

from privsdr import Budget, NoiseDominatesWarning, ValidationError
from privsdr.vertical import PRIDERegressor
from privsdr.vertical.pride_steps import held_out_test


def correlated(n, seed, parties=3, width=3):
    """Three parties whose columns share one factor (correlation ~0.9) with y = mean of the columns + noise
    (population R^2 ~0.6), plus as many test rows: the design where each block's own fit absorbs the others'."""
    rng = np.random.default_rng(seed)
    f = rng.standard_normal((2 * n, 1))
    X = f + 0.3 * rng.standard_normal((2 * n, parties * width))
    y = X.mean(axis=1) + 0.8 * rng.standard_normal(2 * n)
    return X[:n], y[:n], X[n:], y[n:]


def fit(X, y, eps, seed, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kw = {"n_parties": 3, **kw}
        est = PRIDERegressor("certified", bounds=(-4, 4), budget=Budget(eps, 1e-6), message_reports=False, random_state=seed,
                             **kw).fit(X, y)
    return est, any(issubclass(w.category, NoiseDominatesWarning) for w in caught)


def r2(y, pred):
    return 1.0 - float(np.mean((y - pred) ** 2)) / float(np.mean((y - y.mean()) ** 2))


def test_the_held_out_test_tells_a_predictor_from_the_constant():
    rng = np.random.default_rng(0)
    y = rng.standard_normal(300)
    p, gain = held_out_test(y, y - y.mean() + 0.1 * rng.standard_normal(300))
    assert p < 1e-6 and 0.95 < gain < 1.0
    p, gain = held_out_test(y, rng.standard_normal(300))
    assert p > 0.5 and gain < 0  # noise predicts worse than the mean
    assert held_out_test(y, np.zeros(300)) == (1.0, 0.0)  # the mean itself: nothing gained
    # pre-registered: under the null (predictions independent of y, scaled small) a level-0.05 test rejects about 5 %
    null = [held_out_test(z, 0.01 * rng.standard_normal(300))[0] < 0.05 for z in rng.standard_normal((400, 300))]
    assert np.mean(null) <= 0.09


def test_noise_dominated_fits_are_never_worse_than_the_fold_mean_and_warn():
    """40 seeds at n = 300, eps = 0.5: issue 23's fit (no correction, no fallback) is below the trivial model in every
    seed (median -1.1); now >= 95 % within 0.05 of it, and the fit warns in >= 80 % (pre-registered thresholds)."""
    gains, warned, before = [], [], []
    for seed in range(40):
        X, y, Xt, yt = correlated(300, seed)
        trivial = r2(yt, np.full(len(yt), y.mean()))
        est, flag = fit(X, y, 0.5, seed)
        gains.append(r2(yt, est.predict(Xt)) - trivial)
        warned.append(flag)
        if seed < 5:
            old, _ = fit(X, y, 0.5, seed, bias_correction=False, shrinkage="none")
            before.append(r2(yt, old.predict(Xt)) - trivial)
    assert np.mean(np.array(gains) >= -0.05) >= 0.95
    assert np.mean(warned) >= 0.8
    assert max(before) < -0.3  # the design really defeats the uncorrected fit


def test_signal_dominated_fits_keep_their_coefficients_and_do_not_warn():
    X, y, Xt, yt = correlated(3000, 0)
    est, flag = fit(X, y, 8.0, 0)
    plain, _ = fit(X, y, 8.0, 0, shrinkage="none")
    assert not flag and est.trivial_blocks_ == [] and set(est.held_out_p_values_) == {"party0", "party1", "party2"}
    np.testing.assert_array_equal(est.coef_, plain.coef_)
    assert r2(yt, est.predict(Xt)) > 0.4  # OLS: about 0.6
    for report in est.privacy_reports_.values():
        assert report.diagnostics["fell_back"] is False and "tells the fit from the constant" in report.diagnostics["messages"]["held_out"]


def test_a_fallback_is_in_the_parties_reports_and_the_paper_modes_are_as_published():
    X, _, _, _ = correlated(200, 3)
    y = np.random.default_rng(3).standard_normal(200)  # no signal at all
    est, flag = fit(X, y, 0.25, 3)
    assert flag and est.trivial_blocks_
    for name in est.trivial_blocks_:
        assert not np.any(est.coef_blocks_[name])
        report = est.privacy_reports_[name]
        assert report.diagnostics["fell_back"] is True and "set to 0" in report.to_markdown()
    config = PRIDERegressor("paper", allow_uncertified=True).config()
    assert not config.corrects_bias and not config.tests_held_out
    assert PRIDERegressor("certified", bounds=(-1, 1)).config().corrects_bias
    assert not PRIDERegressor("certified", bounds=(-1, 1), lam=0.1).config().tests_held_out  # a fixed lambda: no CV


@pytest.mark.parametrize("kw", [dict(shrinkage="james_stein"), dict(bias_correction="yes")])
def test_bad_options_are_refused_before_anything_is_spent(kw):
    from privsdr import Ledger

    ledger = Ledger(Budget(1.0, 1e-6))
    X, y, _, _ = correlated(50, 0)
    with pytest.raises(ValidationError):
        PRIDERegressor("certified", bounds=(-4, 4), n_parties=3, budget=Budget(0.5, 1e-7), ledger=ledger, **kw).fit(X, y)
    assert ledger.spent.epsilon == 0


def test_the_held_out_level_is_split_over_the_label_holders_and_the_lambda_grid(monkeypatch):
    """lambda is chosen by the same held-out errors the test reads, so the level is 0.05 / (label holders x grid size):
    a p-value of 1e-3 with a clear gain passes with one candidate lambda and fails with 31 (two label holders)."""
    import privsdr.vertical.pride_steps as steps

    monkeypatch.setattr(steps, "held_out_test", lambda y, predictions: (1e-3, 0.5))
    X, y, _, _ = correlated(200, 0)
    wide, _ = fit(X, y, 1.0, 0, lambdas=list(np.logspace(-3, 3, 31)), n_parties=2)
    narrow, _ = fit(X, y, 1.0, 0, lambdas=[1.0], n_parties=2)
    assert wide.trivial_blocks_ == ["party0", "party1"] and narrow.trivial_blocks_ == []
