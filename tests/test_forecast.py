"""``est.plan(n, p).forecast()`` (issue 24): the accuracy of a certified regression forecast from public parameters
only, on a public synthetic problem; calibrated against the DP-BCD simulation on a small fixed grid."""
import math
import warnings

import numpy as np
import pytest

from privsdr import DPPLS, DPSIR, AdaSSPRegression, Budget, DPMeanCovariance, Ledger, ValidationError
from privsdr.datasets.vertical import dpbcd_synthetic

P = 10
SIGMA = 0.7 * np.eye(P) + 0.3  # the simulation's covariance: correlation 0.3


def _excess_risk(est, d, sigma, var_y) -> float:
    """Fit ``est`` on the DP-BCD simulation ``d`` (warnings silenced): ((b - beta)^T Sigma (b - beta) + intercept^2) / var(y)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(np.hstack(d.blocks), d.y)
    miss = est.coef_ - d.beta
    return float((miss @ sigma @ miss + est.intercept_**2) / var_y)


def adassp(eps, bound_y, seed=0, **kw):
    return AdaSSPRegression(bound_x=2.5 * math.sqrt(P), bound_y=bound_y, budget=Budget(eps, 1e-6), random_state=seed, **kw)


def measured_excess_risk(n, eps, seeds):
    """The excess risk on the DP-BCD simulation, exact from its beta and covariance (median over seeds)."""
    risks = []
    for seed in range(seeds):
        d = dpbcd_synthetic(n, P, seed=seed)
        var_y = float(d.beta @ SIGMA @ d.beta) / 0.3
        est = adassp(eps, 3.0 * math.sqrt(var_y), seed)
        risks.append(_excess_risk(est, d, SIGMA, var_y))
    return float(np.median(risks)), var_y


@pytest.mark.parametrize("n, eps", [(1_000, 0.5), (1_000, 2.0), (10_000, 0.5), (10_000, 2.0)])
def test_the_forecast_agrees_with_the_measured_excess_risk_within_a_factor_2(n, eps):
    """Pre-registered: forecast / measured in [1/2, 2] (benchmarks/bench_never_worse.py forecast: 0.77 .. 1.67 here).
    The measured median is over 9 seeds (5 before AdaSSP's certified default took DPPLS S2's releases: at n = 10^4,
    eps = 2 its 5-seed median was 0.0044 against 0.0030 over 20 seeds, ratio 0.48 against 0.71)."""
    measured, var_y = measured_excess_risk(n, eps, 9)
    forecast = adassp(eps, 3.0 * math.sqrt(var_y)).plan(n, P).forecast(signal=0.3, search=False)
    assert 0.5 <= forecast.private_error / measured <= 2.0, (forecast.private_error, measured)
    assert forecast.nonprivate_error < forecast.private_error


def test_the_forecast_reads_no_data_spends_nothing_and_finds_the_epsilon_within_1_5x():
    ledger = Ledger(Budget(1.0, 1e-5))
    est = AdaSSPRegression(bound_x=5.0, bound_y=30.0, budget=Budget(0.5, 1e-6), ledger=ledger, random_state=0)
    first = est.plan(2_000, 5).forecast(reps=3)
    assert ledger.spent.epsilon == 0.0 and first == est.plan(2_000, 5).forecast(reps=3)  # seeded: the same forecast
    assert first.epsilon_within is not None and first.epsilon_within > 0.5  # not within 1.5x at this budget
    there = AdaSSPRegression(bound_x=5.0, bound_y=30.0, budget=Budget(first.epsilon_within, 1e-6)).plan(2_000, 5)
    assert there.forecast(reps=3, search=False).private_error <= 1.5 * first.nonprivate_error + 1e-12
    assert "within 1.5x" in first.summary()
    off = AdaSSPRegression(bound_x=5.0, bound_y=30.0, budget=Budget.infinite()).plan(2_000, 5).forecast(reps=2, search=False)
    assert off.private_error == off.nonprivate_error


def test_dppls_forecasts_and_other_plans_say_they_cannot():
    forecast = DPPLS(2, bound_x=5.0, bound_y=30.0, budget=Budget(1.0, 1e-6)).plan(5_000, 5).forecast(reps=2, search=False)
    assert 0.0 < forecast.private_error < forecast.signal
    with pytest.raises(ValidationError, match="no accuracy forecast"):
        DPMeanCovariance(3.0, budget=Budget(1.0, 1e-6)).plan(1000, 5).forecast()
    with pytest.raises(ValidationError, match="signal"):
        AdaSSPRegression(bound_x=5.0, bound_y=30.0, budget=Budget(1.0, 1e-6)).plan(1000, 5).forecast(signal=1.5)


def test_record_forecast_files_a_forecast_beside_the_noise_diagnostic_at_the_released_count():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (1500, 3))
    y = X @ np.array([1.0, -1.0, 0.5]) + 0.5 * rng.standard_normal(1500)
    est = AdaSSPRegression(bound_x=2.0, bound_y=3.0, budget=Budget(1.0, 1e-6), random_state=0).fit(X, y)
    made = est.record_forecast(reps=2, search=False)
    counted = est._released_row_count()
    assert made.n_samples == counted and counted != 1500 and abs(counted - 1500) < 100  # the DP count, not n
    diagnostics = est.privacy_report_.diagnostics
    assert diagnostics["forecast"]["n_samples"] == counted and {"noise", "forecast"} <= set(diagnostics["messages"])
    before = AdaSSPRegression(bound_x=2.0, bound_y=3.0, budget=Budget(1.0, 1e-6)).plan(1500, 3).forecast(reps=2, search=False)
    assert est.record_forecast(before) is before and est.privacy_report_.diagnostics["forecast"]["source"] == "made before the fit"
    public = DPPLS(1, bound_x=2.0, bound_y=3.0, centering="public", budget=Budget(1.0, 1e-6), random_state=0).fit(X, y)
    with pytest.raises(ValidationError, match="no row count"):
        public.record_forecast()
    with pytest.raises(ValidationError, match="Forecast"):
        est.record_forecast("a guess")


def test_the_dpsir_forecast_agrees_with_dpsir_on_model_m1_within_a_factor_2():
    """Calibration (pre-registered: factor 2; ``bench_never_worse.py forecast-sir`` has the 12-cell grid, 0.67-1.87):
    the forecast on the public single-index problem against certified DPSIR on the DP-SIR paper's model M1."""
    from privsdr.core import projection_distance
    from privsdr.datasets import sir_model

    cuts = [-6.0, 0.0, 6.0]
    forecast = DPSIR(1, bound=1.0, cut_points=cuts, budget=Budget(2.0, 1e-6)).plan(10_000, 10).forecast(search=False, reps=3)
    measured = []
    for r in range(3):
        X, y, B = sir_model("M1", 10_000, 10, seed=2000 + r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = DPSIR(1, bound=1.0, cut_points=cuts, budget=Budget(2.0, 1e-6), random_state=r, diagnose_noise=False).fit(X, y)
        measured.append(projection_distance(est.directions_, B))
    assert 0.5 <= forecast.private_error / float(np.median(measured)) <= 2.0
    assert forecast.nonprivate_error < forecast.private_error < forecast.random_error
    grid = DPSIR(1, bound=1.0, y_grid=np.linspace(-6, 6, 25), budget=Budget(2.0, 1e-6)).plan(2_000, 4).forecast(reps=2, search=False)
    assert grid.nonprivate_error < grid.random_error and not grid.searched and "not searched" in grid.summary()
    with pytest.raises(ValidationError, match="no accuracy forecast"):  # the paper's mode: no forecast
        DPSIR(1, bound=1.0, cut_points=cuts, mode="paper", budget=Budget(2.0, 1e-6), allow_uncertified=True).plan(2_000, 4).forecast()


def test_fit_dpsir_dry_run_and_forecast_on_the_command_line(tmp_path):
    from conftest import run_cli

    from privsdr.datasets import sir_model

    X, y, _ = sir_model("M1", 2000, 4, seed=3)
    data = tmp_path / "rows.csv"
    data.write_text("a,b,c,d,y\n" + "\n".join(",".join(f"{v:.6f}" for v in (*r, t)) for r, t in zip(X, y, strict=True)) + "\n")
    common = ("fit", "dpsir", "--data", data, "--target", "y", "--bound", 1, "--cut-points", -6, 0, 6, "--epsilon", 1, "--delta", 1e-6)
    dry = run_cli(*common, "--dry-run", "--rows", 2000)
    assert dry.returncode == 0 and "public single-index problem" in dry.stdout, dry.stderr
    report = tmp_path / "r.json"
    out = run_cli(*common, "--forecast", "--report", report)
    assert out.returncode == 0 and "forecast at n = 2000, p = 4" in out.stdout, out.stderr  # n is public for DPSIR
    import json

    assert json.loads(report.read_text())["diagnostics"]["forecast"]["n_samples"] == 2000


def test_the_sparse_forecast_uses_an_s_sparse_index_and_fill_moves_it():
    from privsdr import SparseDPSIR

    est = SparseDPSIR(1, sparsity=3, bound=1.0, cut_points=[-1.0, 0.0, 1.0], budget=Budget(4.0, 1e-6))
    thin = est.plan(4000, 60).forecast(reps=2, search=False)
    full = est.plan(4000, 60).forecast(reps=2, search=False, fill=0.9)
    assert thin.nonprivate_error < thin.random_error and full.private_error <= thin.private_error + 0.05
    with pytest.raises(ValidationError, match="fill"):
        est.plan(4000, 60).forecast(fill=0.0)
    with pytest.raises(ValidationError, match="no accuracy forecast"):
        SparseDPSIR(1, algorithm="onepass", sparsity=3, bound=1.0, cut_points=[-1.0, 0.0, 1.0],
                    budget=Budget(4.0, 1e-6)).plan(4000, 60).forecast()


def test_dpbcd_forecasts_on_the_parties_blocks_and_correlation_is_a_public_assumption():
    from privsdr import DPBCDRegression

    est = DPBCDRegression("certified", budget=Budget(4.0, 1e-6), row_bound=5.0, label_bound=9.0, coef_bound=10.0)
    made = est.plan(5000, [3, 2]).forecast(reps=2, search=False)
    assert made.n_features == 5 and 0.0 <= made.nonprivate_error < made.private_error <= 0.3 + 0.05
    correlated = est.plan(5000, [3, 2]).forecast(reps=2, search=False, correlation=0.5)
    assert correlated.private_error != made.private_error
    with pytest.raises(ValidationError, match="correlation"):
        est.plan(5000, [3, 2]).forecast(correlation=1.0)
    with pytest.raises(ValidationError, match="no accuracy forecast"):
        est.plan(5000, [3, 2], label_party=1).forecast()


def test_a_forecast_at_1e8_rows_never_allocates_a_full_size_data_set():
    """Issue 33: the forecast simulated 10^8-row data sets (MemoryError). Now each simulated set has at most
    ``simulated_rows`` rows and the errors are carried to n: peak memory far below one 10^8 x 5 array (4 GB)."""
    import tracemalloc

    from privsdr import DPSIR

    tracemalloc.start()
    try:
        made = AdaSSPRegression(bound_x=5.0, bound_y=30.0, budget=Budget(1.0, 1e-6)).plan(10**8, 5).forecast(reps=1, search=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    sir = DPSIR(1, bound=1.0, cut_points=[-6.0, 0.0, 6.0], budget=Budget(1.0, 1e-6)).plan(10**8, 4).forecast(reps=1, search=False)
    assert peak < 200e6, peak
    assert made.simulated_rows < 10**8 and "simulated on" in made.summary() and made.n_samples == 10**8
    assert 0.0 < made.nonprivate_error <= made.private_error < 1e-5  # the 1/n and 1/n^2 rates from 10^5 rows
    assert 0.0 < sir.private_error < 0.01 and "simulated on" in sir.summary()


def test_the_extrapolated_forecast_agrees_with_the_simulated_one_within_a_factor_2(monkeypatch):
    """Pre-registered: the forecast at 4 x 10^4 rows carried from 10^4 simulated rows (``at_full_size``) within 2x of
    the one simulated at full size (benchmarks/bench_forecast.py extrapolation has 10^5 -> 10^6: 0.47-0.92)."""
    import privsdr.algorithms.forecast as forecast

    est = adassp(1.0, 30.0)
    direct = est.plan(40_000, P).forecast(reps=3, search=False)
    monkeypatch.setattr(forecast, "MAX_SIMULATED_ROWS", 10_000)
    monkeypatch.setattr(forecast, "MIN_SIMULATED_ROWS", 10_000)
    carried = est.plan(40_000, P).forecast(reps=3, search=False)
    assert carried.simulated_rows == 10_000 and direct.simulated_rows == 40_000
    assert 0.5 <= carried.private_error / direct.private_error <= 2.0, (carried.private_error, direct.private_error)


def measured_on_correlated(name, n, eps, rho, seeds):
    """The excess risk of AdaSSP or DP-BCD on the DP-BCD simulation at column correlation rho (coefficients
    N(2, 1.5^2): of one sign, mostly along the common factor), exact from beta and Sigma, median over seeds."""
    from privsdr import DPBCDRegression

    sigma = (1 - rho) * np.eye(P) + rho
    risks = []
    for seed in range(seeds):
        d = dpbcd_synthetic(n, P, seed=seed, correlation=rho)
        var_y = float(d.beta @ sigma @ d.beta) / 0.3
        if name == "dpbcd":
            est = DPBCDRegression("certified", n_parties=2, budget=Budget(eps, 1e-6), row_bound=2.5 * math.sqrt(5),
                                  label_bound=3.0 * math.sqrt(var_y), coef_bound=6.5 * math.sqrt(5), message_reports=False,
                                  random_state=seed)
        else:
            est = adassp(eps, 3.0 * math.sqrt(var_y), seed)
        risks.append(_excess_risk(est, d, sigma, var_y))
    return float(np.median(risks)), est


@pytest.mark.parametrize("name, direction, eps", [("dpbcd", "common", 2.0), ("dpbcd", "common", 8.0),
                                                  ("adassp", "same_sign", 2.0), ("adassp", "same_sign", 8.0)])
def test_the_forecast_under_the_public_correlation_and_direction_is_within_2x_on_correlated_columns(name, direction, eps):
    """Issue 33 (pre-registered: factor 2; benchmarks/bench_forecast.py has the grid): correlation 0.6, n = 10^4.
    Issue 24's forecast (a random direction) was 5x too pessimistic for DP-BCD here."""
    # AdaSSP over 9 seeds (3 before its certified default took DPPLS S2's releases: its 3-seed median at eps = 2 was
    # 0.0058 against 0.0031 over 20 seeds)
    measured, est = measured_on_correlated(name, 10_000, eps, 0.6, 9 if name == "adassp" else 3)
    plan = est.plan(10_000, [5, 5]) if name == "dpbcd" else est.plan(10_000, P)
    made = plan.forecast(correlation=0.6, direction=direction, reps=2, search=False)
    assert 0.5 <= made.private_error / measured <= 2.0, (made.private_error, measured)
    assert set(made.by_direction) == {"random", "common", "same_sign"} and made.by_direction[direction] == made.private_error


def test_the_forecast_says_when_the_direction_decides_more_than_a_factor_2():
    est = adassp(2.0, 30.0)
    made = est.plan(10_000, P).forecast(correlation=0.9, reps=2, search=False)
    assert made.direction_spread() > 2.0 and "can be more than 2x from this forecast" in made.summary()
    assert "correlation 0.9, the signal along a random direction" in made.summary()
    independent = est.plan(10_000, P).forecast(reps=2, search=False)
    assert independent.by_direction == {} and "more than 2x" not in independent.summary()
    with pytest.raises(ValidationError, match="direction"):
        est.plan(10_000, P).forecast(direction="sideways")
