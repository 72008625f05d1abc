"""DPPLS (edPLS spec edpls_001.md): noise-off exactness, plans and reports (O-9 ... O-17), certified
budget use, what is (not) stored, and bad input. Sensitivity probes and audits: tests/test_pls_privacy.py."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.cross_decomposition import PLSRegression

from privsdr import DPPLS, Budget, BudgetExceededError, Ledger, UncertifiedPlanError, ValidationError, core
from privsdr.accounting.gaussian import gaussian_epsilon
from privsdr.algorithms import MSC
from privsdr.algorithms.pls import paper_event_count
from privsdr.datasets import load_corn
from privsdr.mechanisms import gaussian_noise_multiplier

BOUNDS = dict(bound_x=100.0, bound_y=100.0)  # never active on the test data: noise-off equals plain PLS


def regression_data(n: int, m: int, seed: int, offset: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, m)) @ np.diag(np.linspace(1.0, 0.3, m)) + offset
    y = X @ rng.standard_normal(m) + 0.3 * rng.standard_normal(n) + 1.0
    return X, y


def sklearn_coef(X: np.ndarray, y: np.ndarray, A: int) -> np.ndarray:
    return np.asarray(PLSRegression(n_components=A, scale=False).fit(X, y).coef_).reshape(-1)


def untouched(ledger: Ledger) -> None:
    assert ledger.charges == () and ledger.spent == (0.0, 0.0)
    assert ledger.remaining == ledger.budget.as_cost()


def paper(A: int, budget=Budget(1.0, 0.01), **kw) -> DPPLS:
    return DPPLS(A, mode="paper", budget=budget, allow_uncertified=True, **kw)


# ==================================================================================================
# noise off (Budget.infinite()): every mode is PLS1 (O-5)
# ==================================================================================================
@pytest.mark.parametrize("mode", ["certified", "certified_iterative", "paper"])
@pytest.mark.parametrize("n, m, A", [(60, 15, 4), (30, 50, 6)])
def test_noise_off_equals_sklearn(mode, n, m, A):
    X, y = regression_data(n, m, seed=n * m)
    kw = {"allow_uncertified": True} if mode == "paper" else BOUNDS
    est = DPPLS(A, mode=mode, budget=Budget.infinite(), random_state=0, **kw).fit(X, y)
    assert np.max(np.abs(est.coef_ - sklearn_coef(X, y, A))) < 1e-10
    sk = PLSRegression(n_components=A, scale=False).fit(X, y)
    assert np.max(np.abs(est.predict(X) - sk.predict(X).ravel())) < 1e-9
    for a in range(1, A + 1):  # the coefficient path is b with a components
        assert np.max(np.abs(est.coef_path_[:, a - 1] - sklearn_coef(X, y, a))) < 1e-10
    assert est.privacy_report_.status_line.startswith("NON-PRIVATE BASELINE")


def test_noise_off_public_centring_at_the_mean_and_corn():
    corn = load_corn()
    X, y = corn.X, corn.y
    b = sklearn_coef(X, y, 10)
    s2 = DPPLS(10, bound_x=100.0, bound_y=100.0, centering="public", x_center=X.mean(axis=0), y_center=float(y.mean()),
               budget=Budget.infinite()).fit(X, y)
    assert np.max(np.abs(s2.coef_ - b)) < 1e-10
    assert np.max(np.abs(paper(10, Budget.infinite()).fit(X, y).coef_ - b)) < 1e-10


# ==================================================================================================
# paper mode: events, composed cost, status (O-15, O-16), scale dependence (O-9), shapes (O-10)
# ==================================================================================================
@pytest.fixture(scope="module")
def paper_fit():
    X, y = regression_data(60, 20, seed=1)
    return paper(10, random_state=3).fit(X, y), X, y


def test_paper_mode_logs_4A_gaussian_events_at_the_per_release_multiplier(paper_fit):
    est = paper_fit[0]
    z = gaussian_noise_multiplier(1.0, 0.01, "analytic")
    noisy = [n for n in est.privacy_report_.nodes if n.mechanism == "gaussian"]
    assert len(noisy) == 40 == paper_event_count(10)
    assert all(n.status == "none" and n.released for n in noisy)
    assert all(n.noise_multiplier == pytest.approx(z, rel=1e-12) and n.params["claimed_per_release"] == [1.0, 0.01] for n in noisy)
    assert {n.name for n in est.privacy_report_.nodes if n.mechanism == "non_private"} == {"x_mean", "y_mean"}
    events = [e for c in est.ledger_.charges for e in c.events if e.kind != "non_private"]
    assert len(events) == 40 and all(e.kind == "gaussian" and e.noise_multiplier == pytest.approx(z) for e in events)
    assert math.fsum(e.delta for e in events) <= 0.01


def test_paper_mode_composed_cost_is_what_eps_1_really_costs(paper_fit):
    est = paper_fit[0]
    report = est.privacy_report_
    assert report.status == "none" and report.status_line.startswith("NOT PRIVATE")
    assert "read off the private data" in report.status_line
    z = gaussian_noise_multiplier(1.0, 0.01)
    assert report.totals["pld"]["epsilon"] == pytest.approx(12.7527, abs=1e-3)
    assert report.totals["pld"]["delta"] == pytest.approx(0.01, rel=1e-9)
    assert report.totals["pld"]["epsilon"] == pytest.approx(gaussian_epsilon(z / math.sqrt(40), 0.01), abs=1e-3)  # mu-GDP
    assert report.totals["rdp"]["epsilon"] == pytest.approx(14.42, abs=0.05)  # looser
    assert report.spent[0] == pytest.approx(12.7527, abs=1e-3)  # the ledger's best accountant
    assert est.ledger_.spent.epsilon == pytest.approx(12.7527, abs=1e-3)
    # without the scores: 3A releases, 10.31 (spec §4.4)
    X, y = paper_fit[1], paper_fit[2]
    no_t = paper(10, release_scores=False, random_state=3).fit(X, y)
    assert sum(n.mechanism == "gaussian" for n in no_t.privacy_report_.nodes) == 30 == paper_event_count(10, False)
    assert no_t.privacy_report_.totals["pld"]["epsilon"] == pytest.approx(10.31, abs=0.01)
    assert not hasattr(no_t, "x_scores_")


def test_paper_mode_is_refused_by_default_and_charges_a_given_ledger(paper_fit):
    X, y = paper_fit[1], paper_fit[2]
    ledger = Ledger(Budget(100.0, 0.05))
    with pytest.raises(UncertifiedPlanError):
        DPPLS(2, mode="paper", budget=Budget(1.0, 0.01), ledger=ledger).fit(X, y)
    untouched(ledger)
    small = Ledger(Budget(3.0, 0.01))
    with pytest.raises(BudgetExceededError):
        paper(2, ledger=small).fit(X, y)  # 8 releases at (1, 0.01) compose to ~4.04 > 3
    untouched(small)
    est = paper(2, ledger=ledger).fit(X, y)
    # the ledger reads its guarantee at its own delta (0.05); spec §4.4's 4.042 (A = 2) is read at the plan's 0.01
    assert tuple(ledger.spent) == est.privacy_report_.spent and ledger.spent.delta == 0.05
    assert 2.5 < ledger.spent.epsilon < 4.042
    assert est.plan_.cost("pld").epsilon == pytest.approx(4.042, abs=5e-3)
    with pytest.raises(ValidationError, match="per-release"):
        DPPLS(2, mode="paper", ledger=ledger, allow_uncertified=True).fit(X, y)


def test_paper_mode_noise_scale_depends_on_the_data_scale():
    """O-9: sigma_w/||w|| scales by a b under X -> aX, y -> by; sigma_p/||p|| and sigma_c/|c| do not."""
    X, y = regression_data(40, 8, seed=2)
    a, b = 3.0, 0.25

    def ratios(Xs: np.ndarray, ys: np.ndarray) -> tuple[float, float, float]:
        scale = {n.name: n.noise_scale for n in paper(1, random_state=0).fit(Xs, ys).privacy_report_.nodes}
        fit = core.nipals_pls1(Xs, ys, 1)
        return scale["w_1"] / 1.0, scale["p_1"] / np.linalg.norm(fit.loadings[:, 0]), scale["c_1"] / abs(fit.y_loadings[0])

    w0, p0, c0 = ratios(X, y)
    w1, p1, c1 = ratios(a * X, b * y)
    assert w1 == pytest.approx(a * b * w0, rel=1e-9)
    assert p1 == pytest.approx(p0, rel=1e-9) and c1 == pytest.approx(c0, rel=1e-9)


def test_paper_mode_uses_max_abs_residual_for_y_max():
    """O-14: y centred to f with min -5 and max 1: Delta_c = 5 (not the signed max 1)."""
    y = np.array([-5.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    X = np.column_stack([np.arange(6.0), np.arange(6.0) ** 2])
    X = X - X.mean(axis=0)
    node = {n.name: n for n in paper(1, random_state=0).fit(X, y).privacy_report_.nodes}
    assert node["c_1"].sensitivity["value"] == pytest.approx(5.0)
    assert node["p_1"].sensitivity["value"] == pytest.approx(np.linalg.norm(X, axis=1).max())
    assert node["w_1"].sensitivity["value"] == pytest.approx(5.0 * np.linalg.norm(X, axis=1).max())


def test_paper_mode_shapes_and_normalisation(paper_fit):
    est, X, _ = paper_fit
    n, m = X.shape
    assert est.x_weights_.shape == (m, 10) and est.x_loadings_.shape == (m, 10)
    assert est.x_scores_.shape == (n, 10) and est.y_loadings_.shape == (10,) and est.coef_.shape == (m,)
    assert np.allclose(np.linalg.norm(est.x_weights_, axis=0), 1.0) and np.allclose(np.linalg.norm(est.x_scores_, axis=0), 1.0)
    assert not np.allclose(np.linalg.norm(est.x_loadings_, axis=0), 1.0)  # P~ is not renormalised (A26)
    b, _ = core.regression_vector(est.x_weights_, est.x_loadings_, est.y_loadings_)
    assert np.allclose(est.coef_, b)  # b~ = W~ (P~^T W~)^{-1} c~ from the released components (E19)


def test_paper_mode_noise_std_is_sigma_not_sigma_squared():
    """O-12: the noise on p has std sigma (1e5 draws, within 1%); the legacy switch draws sigma^2 (A13)."""
    rng = np.random.default_rng(0)
    X = 0.02 * rng.standard_normal((12, 1000))  # x_max ~ 0.7: sigma_p ~ 0.2 at eps = 10, sigma^2 ~ 0.04
    y = X[:, 0] + 0.01 * rng.standard_normal(12)
    p_true = core.nipals_pls1(X, y, 1).loadings[:, 0]
    for legacy in (False, True):
        noise, sigmas = [], []
        for seed in range(100):
            est = paper(1, Budget(10.0, 0.01), random_state=seed, legacy_std_is_variance=legacy).fit(X, y)
            noise.append(est.x_loadings_[:, 0] - p_true)
            sigmas.append({n.name: n for n in est.privacy_report_.nodes}["p_1"].noise_scale)
        sigma_expected = gaussian_noise_multiplier(10.0, 0.01) * np.linalg.norm(X - X.mean(axis=0), axis=1).max()
        assert np.allclose(sigmas, sigmas[0])
        target = sigma_expected**2 if legacy else sigma_expected
        assert sigmas[0] == pytest.approx(target, rel=1e-9)
        assert np.std(np.concatenate(noise)) == pytest.approx(target, rel=0.01)


def test_same_seed_same_output_different_seed_different():
    """O-13 for every mode."""
    X, y = regression_data(50, 10, seed=5)
    # S2 without the shrinkage: at n = 50 the default falls back to the DP mean, whose slopes are 0 at every seed
    for kw in ({"mode": "certified", "shrinkage": "none", **BOUNDS}, {"mode": "certified_iterative", "shrinkage": "none", **BOUNDS},
               {"mode": "paper", "allow_uncertified": True}):
        fits = [DPPLS(3, budget=Budget(2.0, 1e-3), random_state=s, **kw).fit(X, y).coef_ for s in (7, 7, 8)]
        assert np.array_equal(fits[0], fits[1]) and not np.allclose(fits[0], fits[2])


# ==================================================================================================
# certified modes: plans, sensitivities, budget use (O-17)
# ==================================================================================================
def test_certified_ssp_plan_and_report():
    X, y = regression_data(400, 12, seed=6)
    est = DPPLS(3, bound_x=4.0, bound_y=5.0, budget=Budget(1.0, 1e-6), random_state=0)
    priced = est.plan(*X.shape).cost("best")  # before any data is read
    est.fit(X, y)
    report = est.privacy_report_
    assert report.status == "certified" and report.relation == "add_remove"
    sens = {n.name: n.sensitivity["value"] for n in report.nodes}
    assert sens == pytest.approx({"count": 1.0, "x_sum": 4.0, "y_sum": 5.0, "xtx": 16.0, "xty": 20.0})
    assert report.spent[0] <= 1.0 + 1e-9 and report.spent[1] <= 1e-6
    assert report.spent[0] == pytest.approx(priced.epsilon, rel=1e-9)
    assert report.spent[0] > 0.99  # tight: the budget is used
    assert set(est.statistics_) == {"count", "x_sum", "y_sum", "xtx", "xty"}
    public = DPPLS(3, bound_x=4.0, bound_y=5.0, centering="public", budget=Budget(1.0, 1e-6), random_state=0).fit(X, y)
    assert {n.name for n in public.privacy_report_.nodes} == {"xtx", "xty"}
    # one release serves every number of components (A11): the plan does not depend on A
    one, nine = (DPPLS(A, bound_x=4.0, bound_y=5.0, budget=Budget(1.0, 1e-6)).plan(400, 12) for A in (1, 9))
    assert one.charges() == nine.charges() and one.specs == nine.specs


def test_certified_iterative_budget_split_matches_the_spec():
    """O-17: 40 equal Gaussian releases composed to total (1, 0.01): per-event multiplier 11.877."""
    X, y = regression_data(300, 12, seed=7)
    est = DPPLS(10, mode="certified_iterative", bound_x=3.0, bound_y=3.0, centering="public",
                budget=Budget(1.0, 0.01), accountant="pld", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    report = est.privacy_report_
    nodes = [n for n in report.nodes if n.mechanism == "gaussian"]
    assert len(nodes) == 40 and {n.name[0] for n in nodes} == set("ughr")
    assert all(n.noise_multiplier == pytest.approx(11.877, rel=2e-3) for n in nodes)
    assert est.ledger_.spent.epsilon <= 1.0 + 1e-6 and est.ledger_.spent.delta <= 0.01
    sens = {n.name: n.sensitivity["value"] for n in nodes}
    assert sens["u_1"] == sens["r_1"] == pytest.approx(9.0) and sens["g_1"] == sens["h_1"] == pytest.approx(9.0)


def test_certified_accuracy_with_many_rows():
    """At n = 20000 and eps = 1 the certified modes are close to non-private PLS."""
    X, y = regression_data(20_000, 10, seed=8)
    b = sklearn_coef(X, y, 3)
    for mode in ("certified", "certified_iterative"):
        est = DPPLS(3, mode=mode, bound_x=6.0, bound_y=15.0, budget=Budget(1.0, 1e-6), random_state=1).fit(X, y)
        assert np.linalg.norm(est.coef_ - b) / np.linalg.norm(b) < 0.2
        assert est.score(X, y) > 0.95 * PLSRegression(n_components=3, scale=False).fit(X, y).score(X, y)


def test_component_choice_is_post_processing():
    X, y = regression_data(20_000, 10, seed=9)
    est = DPPLS(6, bound_x=6.0, bound_y=15.0, budget=Budget(1.0, 1e-6), random_state=0, shrinkage="none").fit(X, y)
    assert est.coef_path_.shape == (10, 6) and np.allclose(est.predict(X, n_components=6), est.predict(X))
    assert not np.allclose(est.predict(X, n_components=2), est.predict(X))
    # > 5: issue 33 gave the DP means a larger share of the budget (the fallback), so X^T y and X^T X got less
    assert est.component_snr_.shape == (6,) and est.component_snr_[0] > 5
    auto = DPPLS("auto", bound_x=6.0, bound_y=15.0, budget=Budget(1.0, 1e-6), random_state=0).fit(X, y)
    assert auto.n_components_ >= 3 and np.all(auto.component_snr_[: auto.n_components_] > 1)
    # the default shrinkage makes n_components a maximum: the leading components above the noise, as "auto"
    capped = DPPLS(6, bound_x=6.0, bound_y=15.0, budget=Budget(1.0, 1e-6), random_state=0).fit(X, y)
    assert capped.n_components_ == min(6, auto.n_components_)
    assert 0.9 < capped.shrinkage_factor_ < 1.0  # signal dominates: the James-Stein factor shrinks little
    np.testing.assert_allclose(capped.coef_, capped.shrinkage_factor_ * est.coef_path_[:, capped.n_components_ - 1])
    tiny = DPPLS("auto", bound_x=6.0, bound_y=15.0, budget=Budget(1e-3, 1e-6), random_state=0, shrinkage="none").fit(X[:500], y[:500])
    assert tiny.n_components_ == 1  # nothing stands above the noise: "auto" alone keeps the first component
    trivial = DPPLS("auto", bound_x=6.0, bound_y=15.0, budget=Budget(1e-3, 1e-6), random_state=0).fit(X[:500], y[:500])
    assert trivial.n_components_ == 0 and np.all(trivial.coef_ == 0)  # X^T y is noise: the DP mean
    assert np.allclose(trivial.predict(X[:5]), trivial.y_mean_)
    assert auto.privacy_report_.spent == pytest.approx(est.privacy_report_.spent)  # same release, same cost


def test_no_raw_data_residuals_or_scores_are_stored():
    X, y = regression_data(57, 9, seed=10)
    for kw in ({"mode": "certified", **BOUNDS}, {"mode": "certified_iterative", **BOUNDS},
               {"mode": "paper", "allow_uncertified": True, "release_scores": False}):
        est = DPPLS(3, budget=Budget(2.0, 1e-3), random_state=0, **kw).fit(X, y)
        for name, value in vars(est).items():
            assert not (isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == 57), name
            if isinstance(value, dict):
                assert not any(np.ndim(v) >= 1 and np.shape(v)[0] == 57 for v in value.values()), name


def test_dp_msc_reference_is_charged_and_composes_with_the_fit():
    corn = load_corn()
    ledger = Ledger(Budget(2.0, 1e-5))
    msc = MSC("dp_mean", bound=15.0, ledger=ledger, budget=Budget(0.5, 2e-6), random_state=0).fit(corn.X)
    # read at the ledger's delta (1e-5), the (0.5, 2e-6) release costs a little less than 0.5
    assert msc.privacy_report_.status == "certified" and 0.4 < ledger.spent.epsilon <= 0.5
    Xm = msc.transform(corn.X)
    assert Xm.shape == corn.X.shape
    DPPLS(2, bound_x=15.0, bound_y=2.0, y_center=10.0, ledger=ledger, random_state=0, diagnose_noise=False).fit(Xm, corn.y)
    assert ledger.spent.epsilon <= 2.0 + 1e-9 and len(ledger.runs) == 2
    free = MSC(corn.X[:10].mean(axis=0)).fit(corn.X)  # a public reference costs nothing
    assert not hasattr(free, "privacy_report_") and np.allclose(free.reference_, corn.X[:10].mean(axis=0))


# ==================================================================================================
# bad input: refused before anything is spent
# ==================================================================================================
X_OK, Y_OK = regression_data(20, 6, seed=11)


def _with(index, value, arr):
    arr = arr.copy()
    arr[index] = value
    return arr


BAD = [
    ("too many components", {"n_components": 7}, X_OK, Y_OK, "exceeds"),
    ("A > n - 1", {"n_components": 6}, X_OK[:6], Y_OK[:6], "exceeds"),
    ("A = 0", {"n_components": 0}, X_OK, Y_OK, "n_components"),
    ("A float", {"n_components": 2.0}, X_OK, Y_OK, "n_components"),
    ("NaN in X", {}, _with((0, 0), np.nan, X_OK), Y_OK, "NaN"),
    ("inf in y", {}, X_OK, _with(3, np.inf, Y_OK), "NaN or inf"),
    ("y constant (paper mode)", {"mode": "paper", "allow_uncertified": True}, X_OK, np.ones(20), "constant"),
    ("two responses", {}, X_OK, np.column_stack([Y_OK, Y_OK]), "one response"),
    ("y length", {}, X_OK, Y_OK[:-1], "values for"),
    ("bound_x zero", {"bound_x": 0.0}, X_OK, Y_OK, "bound_x"),
    ("bound_y negative", {"bound_y": -1.0}, X_OK, Y_OK, "bound_y"),
    ("bound_x missing", {"bound_x": None}, X_OK, Y_OK, "bound_x"),
    ("bound_y nan", {"bound_y": float("nan")}, X_OK, Y_OK, "bound_y"),
    ("unknown mode", {"mode": "fast"}, X_OK, Y_OK, "mode"),
    ("scores in certified mode", {"release_scores": True}, X_OK, Y_OK, "scores"),
    ("legacy switch in certified mode", {"legacy_std_is_variance": True}, X_OK, Y_OK, "paper mode only"),
    ("bad centring", {"centering": "median"}, X_OK, Y_OK, "centering"),
    ("x_center length", {"x_center": np.zeros(4)}, X_OK, Y_OK, "x_center"),
    ("unknown weight", {"weights": {"xtz": 1.0}}, X_OK, Y_OK, "weight"),
    ("negative ridge", {"ridge": -1.0}, X_OK, Y_OK, "ridge"),
    ("auto in S1", {"n_components": "auto", "mode": "certified_iterative"}, X_OK, Y_OK, "certified"),
]


@pytest.mark.parametrize("name, override, X, y, match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises_before_spending(name, override, X, y, match):
    ledger = Ledger(Budget(5.0, 1e-3))
    kw = {"n_components": 2, "bound_x": 3.0, "bound_y": 3.0, "ledger": ledger, "budget": Budget(1.0, 1e-4)}
    kw.update(override)
    with pytest.raises(ValidationError, match=match):
        DPPLS(**kw).fit(X, y)
    untouched(ledger)


@pytest.mark.parametrize("override, match", [({"bound_x": 1.0}, "not used"), ({"n_components": "auto"}, "certified"),
                                              ({"n_components": 9}, "exceeds")])
def test_paper_mode_bad_input(override, match):
    ledger = Ledger(Budget(50.0, 0.05))
    with pytest.raises(ValidationError, match=match):
        DPPLS(**{"n_components": 2, "mode": "paper", "budget": Budget(1.0, 0.01), "ledger": ledger, "allow_uncertified": True, **override}).fit(X_OK, Y_OK)
    untouched(ledger)


def test_small_delta_warning_and_predict_checks():
    X, y = regression_data(30, 5, seed=12)
    with pytest.warns(UserWarning, match="1/n"):
        est = DPPLS(2, bound_x=3.0, bound_y=5.0, budget=Budget(1.0, 0.05), random_state=0).fit(X, y)
    assert any("1/n" in note for note in est.privacy_report_.notes)
    with pytest.raises(ValidationError):
        est.predict(X[:, :3])
    with pytest.raises(ValidationError):
        est.predict(X, n_components=3)


# ==================================================================================================
# the plan node kind the paper mode needs: data_dependent (status none, priced at its published calibration)
# ==================================================================================================
def test_data_dependent_nodes_are_none_status_and_priced_by_their_published_calibration():
    from privsdr import Plan, PlanError, Run
    from privsdr.mechanisms import Sensitivity

    sens = Sensitivity(1.0, "l2", "add_remove")
    plan = Plan("p", "add_remove")
    plan.add("a", "gaussian", sens, noise_multiplier=2.0, delta=1e-3, status="none", data_dependent=True)
    assert plan.nodes["a"].adaptive and "data_dependent" in plan.nodes["a"].public_dict()
    with pytest.raises(PlanError):
        plan.add("b", "gaussian", sens, status="none")  # a noisy 'none' node must say why
    with pytest.raises(PlanError):
        plan.add("c", "non_private", sens, status="none", data_dependent=True)
    with pytest.raises(PlanError):
        plan.add("d", "gaussian", sens, data_dependent=True)  # certified + data-dependent is a contradiction
    ordinary = Plan("q", "add_remove")
    ordinary.add("a", "gaussian", sens, noise_multiplier=2.0, delta=1e-3)
    assert "data_dependent" not in ordinary.nodes["a"].public_dict()  # other plans' hashes are unchanged
    calibrated = plan.allocate(Budget(1.0, 1e-3))
    (charge,) = calibrated.charges()
    assert charge.status.value == "none" and [e.kind for e in charge.events] == ["gaussian"]
    ledger = Ledger(Budget(10.0, 1e-3))
    with pytest.raises(UncertifiedPlanError):
        Run(calibrated, ledger).__enter__()
    untouched(ledger)
    with Run(calibrated, ledger, allow_uncertified=True, random_state=0) as run:
        run.release("a", np.zeros(3), sensitivity=0.5)
    assert ledger.spent.epsilon == pytest.approx(gaussian_epsilon(2.0, 1e-3), rel=1e-9)
    node = run.report.nodes[0]
    assert node.noise_scale == pytest.approx(1.0) and "PRIVATE data" in node.description
    assert run.report.status_line.startswith("NOT PRIVATE") and "published" in run.report.status_line


def test_certified_s2_warns_when_the_noise_wins_and_records_it_in_the_report():
    """``noise_ratio_`` (privsdr.released.regression): the bootstrap of the released statistics says how far the noise
    alone moves the fitted predictions; above 1/2 the fit warns, below it stays silent; noise off it is 0."""
    import warnings

    from privsdr import NoiseDominatesWarning

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (20_000, 4)) / 2
    y = X @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.1 * rng.standard_normal(20_000)
    kw = dict(bound_x=1.0, bound_y=4.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatesWarning)
        strong = DPPLS(2, budget=Budget(1.0, 1e-6), **kw).fit(X, y)
        off = DPPLS(2, budget=Budget.infinite(), **kw).fit(X, y)
    assert 0 < strong.noise_ratio_ < 0.1 and off.noise_ratio_ == 0.0
    assert strong.privacy_report_.diagnostics["noise_ratio"] == strong.noise_ratio_
    with pytest.warns(NoiseDominatesWarning, match="constant prediction"):
        weak = DPPLS(2, budget=Budget(0.3, 1e-6), **kw).fit(X[:60], y[:60])
    assert weak.noise_ratio_ > 0.5 and "cannot be told" in weak.privacy_report_.diagnostics["messages"]["noise"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatesWarning)
        quiet = DPPLS(2, budget=Budget(0.3, 1e-6), diagnose_noise=False, **kw).fit(X[:60], y[:60])
    # no warning and no diagnostic in the report; the shrinkage still reads the same bootstrap, so the fit is the same
    assert "noise_ratio" not in quiet.privacy_report_.diagnostics and np.array_equal(quiet.coef_, weak.coef_)
    plain = DPPLS(2, budget=Budget(0.3, 1e-6), diagnose_noise=False, shrinkage="none", **kw).fit(X[:60], y[:60])
    assert not hasattr(plain, "noise_ratio_")
