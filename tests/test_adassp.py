"""AdaSSPRegression (Wang 2018): noise off it is OLS on the clipped rows; its ridge follows the paper's rule from the
released noise sds alone; its three releases pass a tight audit and a half-noise mutant fails; chunks give the
in-memory fit; bad input is refused before anything is charged."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

import privsdr
from privsdr import AdaSSPRegression, Budget, Ledger, NoiseDominatesWarning, ValidationError
from privsdr.algorithms import adassp as adassp_module
from privsdr.algorithms.adassp import adassp_solution
from privsdr.audit import GDP, audit_estimator, claim_from_report
from privsdr.plan import Run
from privsdr.released import Released

ALPHA = 1e-3


def linear_data(n, p=5, seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, p)) / math.sqrt(p)
    y = X @ np.linspace(2.0, -1.0, p) + 0.5 + noise * rng.standard_normal(n)
    return X, y


def test_noise_off_it_is_ols_on_the_rows_within_their_bounds():
    X, y = linear_data(400)
    est = AdaSSPRegression(bound_x=1.0, bound_y=5.0, budget=Budget.infinite()).fit(X, y)
    ref = LinearRegression().fit(X, y)  # every row is inside the bounds: nothing is clipped
    assert np.allclose(est.coef_, ref.coef_, atol=1e-10) and est.intercept_ == pytest.approx(ref.intercept_, abs=1e-10)
    assert est.ridge_ == 0.0 and est.privacy_report_.status == "none"
    assert np.allclose(est.predict(X), ref.predict(X), atol=1e-10)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_noise_off_with_clipping_and_public_centres_it_is_lstsq_on_the_clipped_design(fit_intercept):
    X, y = linear_data(300, p=4, seed=1)
    X, y = 3.0 * X + 0.7, 2.0 * y  # some rows beyond the bound around the centre: clipped
    cx, cy, Cx, Cy = np.full(4, 0.7), 0.5, 1.5, 1.0
    est = AdaSSPRegression(bound_x=Cx, bound_y=Cy, x_center=cx, y_center=cy, fit_intercept=fit_intercept,
                           budget=Budget.infinite()).fit(X, y)
    # the reference, written out: scale rows to norm <= Cx around cx, clip y around cy, least squares
    D = X - cx
    norms = np.linalg.norm(D, axis=1)
    D = D * np.minimum(1.0, Cx / np.maximum(norms, 1e-300))[:, None]
    assert np.any(norms > Cx)
    t = np.clip(y - cy, -Cy, Cy)
    Z = np.column_stack([D, np.ones(len(D))]) if fit_intercept else D
    theta = np.linalg.lstsq(Z, t, rcond=None)[0]  # (the estimator's constant column is C_x: the same least squares)
    assert np.allclose(est.coef_, theta[:4], atol=1e-9)
    assert est.intercept_ == pytest.approx(cy + (theta[4] if fit_intercept else 0.0) - cx @ theta[:4], abs=1e-9)


def test_the_ridge_is_the_papers_rule_from_the_released_noise_sds():
    gram = np.array([[4.0, 1.0], [1.0, 3.0]])
    xty = np.array([1.0, 2.0])
    released = Released({"lambda_min": [1.0], "xtx": gram, "xty": xty}, {"lambda_min": 0.2, "xtx": 0.5, "xty": 0.1},
                        100, "add_remove", "test")
    theta, ridge, lower = adassp_solution(released, 0.05)
    assert lower == pytest.approx(1.0 - 0.2 * math.sqrt(2 * math.log(3 / 0.05)))
    assert ridge == pytest.approx(0.5 * math.sqrt(2 * math.log(8 / 0.05)) - lower) and ridge > 0
    assert np.allclose((gram + ridge * np.eye(2)) @ theta, xty)
    # a well-conditioned Gram far above its noise gets no ridge; a released lambda_min below zero is floored at 0
    big = Released({"lambda_min": [1e4], "xtx": gram * 1e4, "xty": xty}, {"lambda_min": 1.0, "xtx": 1.0, "xty": 1.0}, 100,
                   "add_remove", "test")
    assert adassp_solution(big)[1] == 0.0
    low = Released({"lambda_min": [-3.0], "xtx": gram, "xty": xty}, {"lambda_min": 1.0, "xtx": 1.0, "xty": 1.0}, 100,
                   "add_remove", "test")
    assert adassp_solution(low)[2] == 0.0 and adassp_solution(low)[1] == pytest.approx(math.sqrt(2 * math.log(8 / 0.05)))


def test_with_noise_it_is_charged_once_and_close_to_ols_when_the_signal_dominates():
    X, y = linear_data(20_000, seed=2)
    ledger = Ledger(Budget(1.0, 1e-6))
    est = AdaSSPRegression(bound_x=1.0, bound_y=3.0, ledger=ledger, random_state=0).fit(X, y)
    assert est.privacy_report_.status == "certified" and ledger.spent.epsilon == pytest.approx(1.0, rel=1e-3)
    # the certified default releases DPPLS S2's five statistics (issue 33); no lambda_min
    assert [n.name for n in est.privacy_report_.nodes] == ["count", "x_sum", "y_sum", "xtx", "xty"]
    ols = LinearRegression().fit(X, y).score(X, y)
    assert est.score(X, y) > ols - 0.03
    assert set(est.released_.arrays) == {"count", "x_sum", "y_sum", "xtx", "xty"} and est.released_.relation == "add_remove"
    published = AdaSSPRegression(bound_x=1.0, bound_y=3.0, shrinkage="none", budget=Budget(1.0, 1e-6), random_state=0).fit(X, y)
    assert [n.name for n in published.privacy_report_.nodes] == ["lambda_min", "xtx", "xty"]  # Wang (2018) as published


def test_with_little_data_the_ridge_grows_and_shrinks_the_coefficients():
    X, y = linear_data(200, seed=3)
    small = AdaSSPRegression(bound_x=1.0, bound_y=3.0, budget=Budget(0.5, 1e-6), random_state=0).fit(X, y)
    X2, y2 = linear_data(50_000, seed=3)
    large = AdaSSPRegression(bound_x=1.0, bound_y=3.0, budget=Budget(0.5, 1e-6), random_state=0).fit(X2, y2)
    assert small.ridge_ > large.ridge_
    assert np.linalg.norm(small.coef_) < np.linalg.norm(LinearRegression().fit(X, y).coef_)


def test_chunks_give_the_in_memory_fit():
    X, y = linear_data(900, seed=4)
    kw = dict(bound_x=1.0, bound_y=3.0, x_center=0.05, budget=Budget(1.0, 1e-6), random_state=7)
    a = AdaSSPRegression(**kw).fit(X, y)
    parts = np.array_split(np.arange(len(y)), 4)
    b = AdaSSPRegression(**kw).fit(privsdr.Chunks(lambda: [(X[i], y[i]) for i in parts]))
    assert np.allclose(a.coef_, b.coef_, atol=1e-8) and a.intercept_ == pytest.approx(b.intercept_, abs=1e-8)


# -- audit -------------------------------------------------------------------------------------------
CX, CY = 1.5, 2.0  # C_x != 1: a sensitivity that drops a factor C_x is not equivalent
AUD_BUDGET = Budget(4.4, 1e-5)  # mu ~ 1


def tight_pair():
    """D0: rows along e2 and e3 only (Gram diag(0, 20, 20)); D1 adds the record x = C_x e1, y = C_y. Every release
    moves by exactly its sensitivity: lambda_min 0 -> C_x^2, the Gram's (1, 1) entry by C_x^2, X^T y by C_x C_y."""
    X0 = np.vstack([np.tile([0.0, 1.0, 0.0], (20, 1)), np.tile([0.0, 0.0, 1.0], (20, 1))])
    y0 = np.r_[np.full(20, 0.5), np.full(20, -0.5)]
    return (X0, y0), (np.vstack([X0, [CX, 0.0, 0.0]]), np.r_[y0, CY])


class HalvedNoiseRun(Run):
    """Mutant: every node draws half its calibrated noise (the claim is unchanged)."""

    def _spec_for(self, name, sensitivity):
        return super()._spec_for(name, sensitivity).scaled(0.5)


def test_the_three_releases_pass_a_tight_audit_and_the_half_noise_mutant_fails(monkeypatch):
    D0, D1 = tight_pair()
    kw = dict(bound_x=CX, bound_y=CY, fit_intercept=False, diagnose_noise=False)
    report = AdaSSPRegression(budget=AUD_BUDGET, random_state=0, **kw).fit(*D0).privacy_report_
    claim = claim_from_report(report)
    assert isinstance(claim, GDP) and 0.8 < claim.mu < 1.6
    iu = np.triu_indices(3)

    def whiten(est):
        r = est.released_
        return np.concatenate([r["lambda_min"] / r.scales["lambda_min"], r["xtx"][iu] / r.scales["xtx"],
                               r["xty"] / r.scales["xty"]])

    def fit(budget):
        return lambda D, rng: whiten(AdaSSPRegression(budget=budget, random_state=rng, **kw).fit(*D))

    scales = {n.name: n.noise_scale for n in report.nodes}

    def reference(D):
        r = AdaSSPRegression(budget=Budget.infinite(), **kw).fit(*D).released_
        return np.concatenate([r["lambda_min"] / scales["lambda_min"], r["xtx"][iu] / scales["xtx"], r["xty"] / scales["xty"]])

    assert np.linalg.norm(reference(D1) - reference(D0)) == pytest.approx(claim.mu, rel=1e-6)  # worst case pair
    ok = audit_estimator(fit(AUD_BUDGET), D0, D1, reference=reference, claim=claim, samples=50, alpha=ALPHA, seed=4)
    assert ok.passed, ok.summary()
    monkeypatch.setattr(adassp_module, "Run", HalvedNoiseRun)
    bad = audit_estimator(fit(AUD_BUDGET), D0, D1, reference=reference, claim=claim, samples=250, alpha=ALPHA, seed=5)
    assert not bad.passed, bad.summary()


# -- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    (dict(bound_x=None), "bound_x"),
    (dict(bound_y=-1.0), "bound_y"),
    (dict(failure_probability=1.5), "failure_probability"),
    (dict(x_center=[0.0, 1.0]), "x_center"),
    (dict(y_center=float("nan")), "y_center"),
    (dict(weights={"gram": 1.0}), "unknown weight"),
    (dict(fit_intercept="yes"), "fit_intercept"),
])
def test_bad_parameters_are_refused_before_anything_is_charged(kw, match):
    X, y = linear_data(50)
    ledger = Ledger(Budget(1.0, 1e-6))
    est = AdaSSPRegression(**{"bound_x": 1.0, "bound_y": 2.0, "ledger": ledger, **kw})
    with pytest.raises(ValidationError, match=match):
        est.fit(X, y)
    assert ledger.spent.epsilon == 0.0 and not hasattr(est, "coef_")


def test_bad_data_is_refused_before_anything_is_charged():
    X, y = linear_data(50)
    ledger = Ledger(Budget(1.0, 1e-6))
    est = AdaSSPRegression(bound_x=1.0, bound_y=2.0, ledger=ledger)
    for args, match in (((X, y[:-1]), "rows"), ((X, None), "y is required"), ((np.c_[X[:, :-1], np.full(50, np.nan)], y), "finite|NaN|nan")):
        with pytest.raises(privsdr.PrivsdrError, match=match):
            est.fit(*args)
    assert ledger.spent.epsilon == 0.0
    fitted = AdaSSPRegression(bound_x=1.0, bound_y=2.0, budget=Budget(1.0, 1e-6), random_state=0).fit(X, y)
    with pytest.raises(ValidationError, match="features"):
        fitted.predict(X[:, :3])


# -- the noise diagnostic (privsdr.released.regression) -----------------------------------------------------
def test_the_noise_diagnostic_warns_when_the_noise_wins_and_stays_silent_when_the_signal_does():
    X, y = linear_data(20_000, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", privsdr.NoiseDominatesWarning)
        strong = AdaSSPRegression(bound_x=1.0, bound_y=3.0, budget=Budget(1.0, 1e-6), random_state=0).fit(X, y)
        off = AdaSSPRegression(bound_x=1.0, bound_y=3.0, budget=Budget.infinite()).fit(X, y)
    assert 0 < strong.noise_ratio_ < 0.1 and off.noise_ratio_ == 0.0
    assert strong.privacy_report_.diagnostics["noise_ratio"] == strong.noise_ratio_
    assert "well above the noise" in strong.privacy_report_.diagnostics["messages"]["noise"]
    with pytest.warns(privsdr.NoiseDominatesWarning, match="constant prediction"):
        weak = AdaSSPRegression(bound_x=1.0, bound_y=3.0, budget=Budget(0.5, 1e-6), random_state=0).fit(X[:100], y[:100])
    assert weak.noise_ratio_ > 0.5 and "cannot be told" in weak.privacy_report_.diagnostics["messages"]["noise"]


def test_the_noise_ratio_is_its_formula_on_a_hand_made_release():
    from privsdr.released.regression import noise_ratio, slope_gram

    gram = np.array([[5.0, 1.0, 2.0], [1.0, 4.0, 1.0], [2.0, 1.0, 10.0]])
    released = Released({"xtx": gram, "xty": np.array([1.0, 2.0, 3.0])}, {"xtx": 0.3, "xty": 0.2}, 10, "add_remove", "test")

    def solve(r):
        return np.linalg.solve(r["xtx"] + 0.5 * np.eye(3), r["xty"])

    got = noise_ratio(released, lambda r: solve(r)[:2], slope_gram(gram + 0.5 * np.eye(3), True), np.random.default_rng(0),
                      reps=50)
    # written out: the same draws, the Schur complement of the constant (last) column in gram + 0.5 I
    G = gram + 0.5 * np.eye(3)
    S = G[:2, :2] - np.outer(G[:2, 2], G[:2, 2]) / G[2, 2]
    assert np.allclose(slope_gram(G, True), S)
    b = solve(released)[:2]
    rng = np.random.default_rng(0)
    changes = []
    for _ in range(50):
        upper = np.triu(0.3 * rng.standard_normal((3, 3)))
        noisy = Released({"xtx": gram + upper + np.triu(upper, 1).T, "xty": released["xty"] + 0.2 * rng.standard_normal(3)},
                         released.scales, 10, "add_remove", "test")
        d = solve(noisy)[:2] - b
        changes.append(max(d @ S @ d, 0.0))
    assert got == pytest.approx(math.sqrt(np.median(changes) / (b @ S @ b)), rel=1e-12)


@pytest.mark.parametrize(("n", "eps", "with_lambda_min"), [(40, 0.3, True), (400, 1.0, True), (5000, 8.0, False)])
def test_the_stacked_bootstrap_refits_every_draw_as_centred_solution_does(n, eps, with_lambda_min):
    """The certified fit's noise ratio refits its bootstrap draws as one stack (``centred_slopes_stacked``): the same
    ratio as refitting each draw with ``centred_solution`` (the per-draw loop), from noise-dominated to clear."""
    from privsdr.released.regression import noise_ratio

    X, y = linear_data(n, seed=11)
    released = AdaSSPRegression(bound_x=1.0, bound_y=3.0, budget=Budget(eps, 1e-6), random_state=0).fit(X, y).released_
    if not with_lambda_min:  # the lower bound then comes from the noisy Gram's own eigenvalue
        released = Released({k: v for k, v in released.arrays.items() if k != "lambda_min"}, released.scales, 0, "add_remove", "test")
    metric = adassp_module.centred_solution(released, 0.05, 1.0, 3.0)[5]
    one = noise_ratio(released, lambda r: adassp_module.centred_solution(r, 0.05, 1.0, 3.0)[0], metric, np.random.default_rng(3))
    stacked = noise_ratio(released, lambda r: adassp_module.centred_solution(r, 0.05, 1.0, 3.0)[0], metric, np.random.default_rng(3),
                          stacked_slopes=lambda a: adassp_module.centred_slopes_stacked(a, released.scales, 0.05, 1.0, 3.0))
    assert stacked == pytest.approx(one, rel=1e-9) and one > 0


@pytest.mark.parametrize("block_bytes", [8, 8 * 12 * 7])
def test_bootstrap_draws_made_in_blocks_are_the_draws_made_at_once(monkeypatch, block_bytes):
    """``renoised_draws`` bounds its memory by drawing blocks of draws (one draw, or 7 of 50, at a time here): the
    same numbers as all 50 at once, in the same order, and the generator left in the same state."""
    from privsdr.released import regression

    released = Released({"xtx": np.eye(3), "xty": np.ones(3)}, {"xtx": 0.3, "xty": 0.2}, 10, "add_remove", "test")
    rng_once, rng_blocks = np.random.default_rng(4), np.random.default_rng(4)
    once = list(regression.renoised_draws(released, rng_once, 50))
    monkeypatch.setattr(regression, "DRAW_BLOCK_BYTES", block_bytes)
    blocks = list(regression.renoised_draws(released, rng_blocks, 50))
    assert len(blocks) == 50
    for a, b in zip(once, blocks, strict=True):
        assert all(np.array_equal(a[name], b[name]) for name in ("xtx", "xty"))
    assert rng_once.random() == rng_blocks.random()


def test_the_pretests_chi2_quantile_is_scipys_bit_for_bit():
    """``stands_above_noise`` reads chi^2 quantiles through ``chi2_quantile`` (scipy.special, without scipy.stats'
    argument handling): the same numbers as ``scipy.stats.chi2.ppf``, exactly, so no pre-test changes its verdict."""
    from scipy.stats import chi2

    from privsdr.released.regression import PRETEST_LEVEL, chi2_quantile

    for dof in (0.37, 1.0, 2.5, 7.0, 40.2, 1234.5):
        for q in (0.5, 1.0 - PRETEST_LEVEL, 1.0 - PRETEST_LEVEL / 12, 1.0 - 1e-6):
            assert chi2_quantile(q, dof) == float(chi2.ppf(q, dof)), (q, dof)


def test_under_add_remove_the_number_of_rows_is_not_published():
    """n is not public under add/remove (one record changes it): neither the report nor ``released_`` carries it."""
    X, y = linear_data(321, seed=6)
    est = AdaSSPRegression(bound_x=1.0, bound_y=3.0, budget=Budget(1.0, 1e-6), random_state=0, diagnose_noise=False).fit(X, y)
    report = est.privacy_report_
    assert report.data_shape is None and any("number of rows is not public" in note for note in report.notes)
    assert est.released_.n == 0 and json.loads(report.to_json())["data_shape"] is None and "not recorded" in report.to_html()
    converted = AdaSSPRegression(bound_x=1.0, bound_y=3.0, ledger=Ledger(Budget(1.0, 1e-6), relation="replace_one"),
                                 random_state=0, diagnose_noise=False).fit(X, y)
    assert converted.privacy_report_.data_shape == [321, 5] and converted.released_.n == 321  # public under replace-one


def test_the_intercept_comes_from_the_dp_mean_of_y_not_from_the_public_centre():
    """y around 10 with a public centre 0 and range +-20: the slopes are ridge on the centred release and the
    intercept y_bar - x_bar^T beta is not shrunk, so it stays near the DP mean of y (the released count and label
    sum) at small n and eps; before, the ridge pulled it to the centre 0 (AdaSSP penalises every column)."""
    for seed in range(5):
        X, y = linear_data(1000, seed=seed)
        with pytest.warns(NoiseDominatesWarning):
            est = AdaSSPRegression(bound_x=1.0, bound_y=20.0, budget=Budget(0.3, 1e-6), random_state=seed).fit(X, y + 10.0)
        r = est.released_
        # the DP means of the count and sums (no clamping needed here: |y_bar| < 20, ||x_bar|| < 1)
        dp_mean, x_bar = r["y_sum"][0] / r["count"][0], r["x_sum"] / r["count"][0]
        assert est.intercept_ + x_bar @ est.coef_ == pytest.approx(dp_mean, rel=1e-9)
        assert 8.0 < est.intercept_ < 12.5
