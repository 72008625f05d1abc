"""Issue 25 item 3: preprocessing that keeps a fit private. ``PublicRangeScaler`` (declared ranges, free),
``DPStandardScaler`` (a DP mean and variance on the ledger: noise off against numpy, sensitivity probes, an audit,
bad input before spending, plan pricing), ``check_pipeline`` and the ``NonPrivatePreprocessingWarning`` at fit."""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.decomposition import PCA
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, Normalizer, StandardScaler

import privsdr
from privsdr import (
    DPPLS,
    DPSIR,
    Budget,
    BudgetExceededError,
    DPStandardScaler,
    Ledger,
    NonPrivatePreprocessingWarning,
    PublicRangeScaler,
    Sensitivity,
    ValidationError,
    check_pipeline,
)
from privsdr.audit import GDP, audit_estimator, claim_from_report, probe_sensitivity
from privsdr.audit.replay import record
from privsdr.preprocessing.standard import scaler_moments

ALPHA = 1e-3
LOW, HIGH = np.array([18.0, 1.0, 90.0]), np.array([80.0, 2.0, 310.0])  # age, a 1/2 code, a lab value


def ranged_rows(n: int = 300, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.uniform(10, 90, n), rng.integers(1, 3, n).astype(float), rng.normal(200, 60, n)])


def labels(X: np.ndarray, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (X - (LOW + HIGH) / 2) / (HIGH - LOW) @ np.array([2.0, -1.0, 1.0]) + 0.1 * rng.standard_normal(len(X))


def quiet(fn, *args, **kwargs):
    """Call ``fn`` with the noise diagnostics silenced (tiny data; they are tested where they matter)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", privsdr.NoiseDominatesWarning)
        return fn(*args, **kwargs)


# -- PublicRangeScaler ---------------------------------------------------------------------------------------------
def test_public_range_scaler_maps_each_declared_range_onto_the_target_and_clips():
    X = ranged_rows()
    scaler = PublicRangeScaler(LOW, HIGH).fit(X)
    Z = scaler.transform(X)
    expected = np.empty_like(X)  # written out cell by cell: clip to [lo, hi], then the affine map onto [-1, 1]
    for i, j in itertools.product(range(X.shape[0]), range(X.shape[1])):
        v = min(max(X[i, j], LOW[j]), HIGH[j])
        expected[i, j] = -1.0 + 2.0 * (v - LOW[j]) / (HIGH[j] - LOW[j])
    assert np.allclose(Z, expected, rtol=0, atol=1e-12)
    assert Z.min() == -1.0 and Z.max() == 1.0  # rows outside the declared ranges were clipped
    assert np.array_equal(scaler.bound_, np.ones(3)) and scaler.row_bound_ == pytest.approx(math.sqrt(3))
    assert np.allclose(scaler.inverse_transform(Z), np.clip(X, LOW, HIGH), rtol=1e-12, atol=1e-9)
    other = PublicRangeScaler(0.0, 10.0, feature_range=(0.0, 5.0)).fit(X)  # one range for every column, another target
    assert np.allclose(other.transform(X), np.clip(X, 0.0, 10.0) / 2.0) and np.array_equal(other.bound_, np.full(3, 5.0))


def test_public_range_scaler_fit_keeps_nothing_of_the_values_and_charges_nothing():
    X, Y = ranged_rows(seed=0), ranged_rows(seed=7) * 3.0  # same shape, different values
    tracked = privsdr.default_ledger().spent
    a, b = PublicRangeScaler(LOW, HIGH).fit(X), PublicRangeScaler(LOW, HIGH).fit(Y)
    fitted = [k for k in vars(a) if k.endswith("_")]
    assert set(fitted) == {"low_", "high_", "bound_", "row_bound_", "n_features_in_"}
    assert all(np.array_equal(getattr(a, k), getattr(b, k)) for k in fitted)
    assert privsdr.default_ledger().spent == tracked and not hasattr(a, "privacy_report_")


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(low=None, high=HIGH), ValidationError, "low"),
    (dict(low=LOW, high=HIGH[:2]), ValidationError, "high has 2 values for 3 columns"),
    (dict(low=HIGH, high=LOW), ValidationError, "low < high"),
    (dict(low=[0.0, np.nan, 0.0], high=HIGH), ValidationError, "finite"),
    (dict(low="zero", high=HIGH), TypeError, "low"),
    (dict(low=True, high=HIGH), TypeError, "low"),
    (dict(low=LOW, high=HIGH, feature_range=(1.0, -1.0)), ValidationError, "feature_range"),
], ids=["no_low", "short_high", "reversed", "nan", "string", "bool", "target"])
def test_public_range_scaler_refuses_bad_ranges(kwargs, error, match):
    with pytest.raises(error, match=match):
        PublicRangeScaler(**kwargs).fit(ranged_rows())


def test_a_public_range_scaler_in_front_of_a_dp_estimator_is_the_fit_on_the_scaled_rows_and_does_not_warn():
    X = ranged_rows(800)
    y = labels(X)
    sir = DPSIR(1, bound=1.0, cut_points=[-0.5, 0.0, 0.5], budget=Budget(1.0, 1e-6), random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonPrivatePreprocessingWarning)
        pipe = quiet(make_pipeline(PublicRangeScaler(LOW, HIGH), sir).fit, X, y)
        alone = quiet(clone(sir).fit, PublicRangeScaler(LOW, HIGH).fit_transform(X), y)
    assert np.array_equal(pipe.transform(X), alone.transform(PublicRangeScaler(LOW, HIGH).fit_transform(X)))
    assert check_pipeline(pipe) == []


# -- DPStandardScaler: noise off against numpy ------------------------------------------------------------------------
@pytest.mark.parametrize("center, bound", [(None, 400.0), ((LOW + HIGH) / 2, (HIGH - LOW) / 2), (50.0, [40.0, 1.0, 100.0])])
def test_noise_off_the_dp_scaler_is_numpy_standardisation_of_the_clipped_rows(center, bound):
    X = ranged_rows(500)
    est = DPStandardScaler(bound=bound, center=center, budget=Budget.infinite()).fit(X)
    c = np.broadcast_to(np.asarray(0.0 if center is None else center, dtype=float), (3,))
    b = np.broadcast_to(np.asarray(bound, dtype=float), (3,))
    clipped = np.clip(X, c - b, c + b)
    sd = np.maximum(clipped.std(axis=0), 0.01 * b)  # numpy's population sd, floored at min_scale * b
    assert np.allclose(est.mean_, clipped.mean(axis=0), rtol=1e-10, atol=1e-9 * b.max())
    assert np.allclose(est.scale_, sd, rtol=1e-9)
    assert np.allclose(est.transform(X), (clipped - clipped.mean(axis=0)) / sd, rtol=1e-8, atol=1e-8)
    assert np.allclose(est.inverse_transform(est.transform(X)), clipped, rtol=1e-9, atol=1e-9 * b.max())
    assert np.all(np.abs(est.transform(X)) <= est.bound_ * (1 + 1e-12))
    assert est.privacy_report_.status_line.startswith("NON-PRIVATE BASELINE") and est.n_samples_seen_ == 500


def test_noise_off_without_clipping_it_is_sklearns_standard_scaler():
    X = ranged_rows(400)
    est = DPStandardScaler(bound=1e3, min_scale=1e-4, budget=Budget.infinite()).fit(X)  # the floor 0.1 is below every sd
    assert np.allclose(est.transform(X), StandardScaler().fit_transform(X), rtol=1e-8, atol=1e-8)
    assert np.allclose(est.var_, StandardScaler().fit(X).var_, rtol=1e-9)


def test_a_constant_column_gets_the_public_floor_not_a_division_by_zero():
    X = ranged_rows(100)
    X[:, 1] = 1.5
    est = DPStandardScaler(bound=[100.0, 2.0, 400.0], min_scale=0.05, budget=Budget.infinite()).fit(X)
    assert est.scale_[1] == pytest.approx(0.1) and np.all(np.isfinite(est.transform(X)))


# -- DPStandardScaler: declared sensitivities, probed; the audit ------------------------------------------------------
def _box_rows(c: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """Every corner of the box c +- b, its centre, the face centres and two rows far outside (clipping must hold)."""
    rows = [c + np.array(s) * b for s in itertools.product((-1.0, 1.0), repeat=c.size)] + [c.copy()]
    rows += [c + sign * b[j] * np.eye(c.size)[j] for j in range(c.size) for sign in (-1.0, 1.0)]
    return rows + [c + 10.0 * b, c - 7.0 * b * np.arange(1, c.size + 1)]


def test_the_plan_declares_the_unit_scale_sensitivities_and_the_probe_confirms_them():
    X = ranged_rows(40)
    c, b = (LOW + HIGH) / 2, (HIGH - LOW) / 2
    n, p = X.shape
    plan = DPStandardScaler(bound=b, center=c, budget=Budget(1.0, 1e-6)).plan(n, p)
    declared = {name: spec.sensitivity for name, spec in plan.specs.items()}
    assert declared["mean"] == Sensitivity(2 * math.sqrt(p) / n, "l2", "replace_one", declared["mean"].derivation)
    assert declared["second_moment"].value == pytest.approx(math.sqrt(p) / n) and declared["second_moment"].norm == "l2"
    datasets = []
    for row in _box_rows(c, b):
        D = X.copy()
        D[0] = row
        datasets.append(D)
    pairs = [(a, z) for a, z in itertools.combinations(range(len(datasets)), 2)]
    for k, name in enumerate(("mean", "second_moment")):
        values = [scaler_moments(D, c, b)[k] for D in datasets]
        probe = probe_sensitivity(lambda i, values=values: values[i], pairs, declared[name])
        assert probe.passed, probe.summary()
        assert probe.max_change > declared[name].value / 2  # attained: halving the declaration is caught
    # the query the probe checks is the one the fit releases (noise off: the released values are the queries)
    _, recording = record(lambda: DPStandardScaler(bound=b, center=c, budget=Budget.infinite()).fit(datasets[3]))
    first, second = scaler_moments(datasets[3], c, b)
    assert np.array_equal(recording.release(("DPStandardScaler", "mean")).output, first)
    assert np.array_equal(recording.release(("DPStandardScaler", "second_moment")).output, second)


AUDIT_BUDGET = Budget(2.0, 1e-5)


def _pair(n: int = 40, p: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Rows inside the unit box; record 0 is a corner in D and the origin in D' (moves both releases)."""
    rng = np.random.default_rng(5)
    D0 = rng.uniform(-0.5, 0.5, (n, p))
    D1 = D0.copy()
    D0[0], D1[0] = 1.0, 0.0
    return D0, D1


def _audited(rng) -> DPStandardScaler:
    """The audited configuration; each fit on a ledger of its own (as a fresh budget, without the process's tracking)."""
    return DPStandardScaler(bound=1.0, budget=AUDIT_BUDGET, ledger=Ledger(AUDIT_BUDGET), random_state=rng)


def _releases(D: np.ndarray, rng) -> np.ndarray:
    """The fit's two raw releases, whitened by their public noise sds (the projection is then the likelihood ratio)."""
    est, recording = record(lambda: quiet(_audited(rng).fit, D))
    sd = {name: spec.scale for name, spec in est.plan_.specs.items()}
    return np.concatenate([recording.release(("DPStandardScaler", k)).output / sd[k] for k in ("mean", "second_moment")])


def _scales() -> tuple[dict[str, float], privsdr.PrivacyReport]:
    est = quiet(_audited(0).fit, _pair()[0])
    return {name: spec.scale for name, spec in est.plan_.specs.items()}, est.privacy_report_


def test_the_dp_scaler_passes_its_end_to_end_audit_and_half_the_noise_fails():
    scales, report = _scales()
    claim = claim_from_report(report)
    assert isinstance(claim, GDP) and claim.epsilon <= AUDIT_BUDGET.epsilon + 1e-9
    D0, D1 = _pair()

    def reference(D):
        first, second = scaler_moments(D, np.zeros(3), np.ones(3))
        return np.concatenate([first / scales["mean"], second / scales["second_moment"]])

    result = audit_estimator(_releases, D0, D1, reference=reference, claim=claim, samples=400, alpha=ALPHA, seed=12)
    assert result.passed, result.summary()

    def half_noise(D, rng):
        first, second = scaler_moments(D, np.zeros(3), np.ones(3))
        return np.concatenate([first / scales["mean"] + 0.5 * rng.standard_normal(3),
                               second / scales["second_moment"] + 0.5 * rng.standard_normal(3)])

    mutant = audit_estimator(half_noise, D0, D1, reference=reference, claim=claim, samples=2_000, alpha=ALPHA, seed=14)
    assert not mutant.passed, mutant.summary()


# -- DPStandardScaler: bad input before anything is spent; the ledger; the noise diagnostic ---------------------------
def _untouched(ledger: Ledger) -> None:
    assert ledger.charges == () and ledger.spent == (0.0, 0.0)
    quiet(DPStandardScaler(bound=1.0, ledger=ledger, budget=ledger.budget, random_state=0).fit, ranged_rows(30))  # nothing reserved
    assert len(ledger.charges) == 2


GOOD = ranged_rows(30)


@pytest.mark.parametrize("kwargs, X, error, match", [
    (dict(bound=None), GOOD, ValidationError, "bound"),
    (dict(bound=[1.0, 2.0]), GOOD, ValidationError, "2 per-column values for 3 columns"),
    (dict(bound=-1.0), GOOD, ValidationError, "bound"),
    (dict(bound=1.0, center=[0.0, np.inf, 0.0]), GOOD, ValidationError, "center"),
    (dict(bound=1.0, min_scale=0.0), GOOD, ValidationError, "min_scale"),
    (dict(bound=1.0, split=(1.0, 0.0)), GOOD, ValidationError, "split"),
    (dict(bound=1.0, calibration="bogus"), GOOD, ValidationError, "calibration"),
    (dict(bound=1.0, random_state="seed"), GOOD, TypeError, "random_state"),
    (dict(bound=1.0), np.where(GOOD > 100, np.nan, GOOD), ValueError, "NaN"),
    (dict(bound=1.0), GOOD[:1], ValueError, "rows"),
    (dict(bound=1.0), GOOD[:, 0], ValueError, "2-D"),
    (dict(bound=1.0, budget=Budget(5.0, 1e-6)), GOOD, BudgetExceededError, "nothing was spent"),
], ids=["no_bound", "short_bound", "negative_bound", "inf_center", "min_scale", "split", "calibration", "random_state",
        "nan", "one_row", "one_d", "over_budget"])
def test_bad_input_is_refused_before_anything_is_charged(kwargs, X, error, match):
    ledger = Ledger(Budget(1.0, 1e-6))
    with pytest.raises(error, match=match):
        DPStandardScaler(**{"ledger": ledger, **kwargs}).fit(X)
    _untouched(ledger)


def test_fits_share_a_ledger_and_the_plan_prices_the_fit_before_it_runs():
    ledger = Ledger(Budget(1.0, 1e-5), accountant="basic")
    est = DPStandardScaler(bound=(HIGH - LOW) / 2, center=(LOW + HIGH) / 2, budget=Budget(0.5, 5e-6), ledger=ledger, random_state=0)
    price = est.plan(300, 3).cost("basic")
    quiet(est.fit, ranged_rows(300))
    assert ledger.spent == pytest.approx(price) and price.epsilon == pytest.approx(0.5)
    assert est.privacy_report_.status == "certified" and est.ledger_ is ledger
    quiet(clone(est).fit, ranged_rows(300))  # a clone charges the same ledger
    with pytest.raises(BudgetExceededError):
        est.fit(ranged_rows(300))
    assert ledger.spent.epsilon == pytest.approx(1.0)


def test_the_noise_diagnostic_warns_when_the_noise_hides_the_moments():
    X = ranged_rows(50_000)
    bound, center = (HIGH - LOW) / 2, (LOW + HIGH) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", privsdr.NoiseDominatesWarning)
        big = DPStandardScaler(bound=bound, center=center, budget=Budget(1.0, 1e-6), random_state=0).fit(X)
    assert 0 < big.noise_ratio_ < 0.01 and big.privacy_report_.diagnostics["noise_ratio"] == big.noise_ratio_
    assert np.allclose(big.mean_, np.clip(X, LOW, HIGH).mean(axis=0), rtol=0.01)
    with pytest.warns(privsdr.NoiseDominatesWarning, match="half-width"):
        small = DPStandardScaler(bound=bound, center=center, budget=Budget(0.1, 1e-6), random_state=0).fit(X[:20])
    assert small.noise_ratio_ == max(spec.scale for spec in small.plan_.specs.values()) > 0.5


# -- check_pipeline and the warning at fit --------------------------------------------------------------------------
def _dp(**kw):
    return DPPLS(1, bound_x=2.0, bound_y=3.0, budget=Budget(1.0, 1e-6), random_state=0, **kw)


@pytest.mark.parametrize("reader", [StandardScaler(), MinMaxScaler(), PCA(2), FunctionTransformer(lambda X: X - X.mean(axis=0))],
                         ids=["StandardScaler", "MinMaxScaler", "PCA", "FunctionTransformer(lambda)"])
def test_a_step_fitted_on_the_rows_before_a_dp_estimator_is_reported_and_warned_at_fit(reader):
    X = ranged_rows(400)
    pipe = make_pipeline(reader, _dp())
    problems = check_pipeline(pipe, strict=False)
    assert [(p.estimator, p.feeds) for p in problems] == [(type(reader).__name__, "dppls")]
    with pytest.raises(ValidationError, match="does not hold"):
        check_pipeline(pipe)
    with pytest.warns(NonPrivatePreprocessingWarning, match=type(reader).__name__):
        quiet(pipe.fit, X, labels(X))
    name = pipe.steps[0][0]
    assert check_pipeline(pipe, public=[name]) == []  # the caller vouches for it


def test_public_steps_pass_and_nested_and_parallel_steps_are_seen():
    X = ranged_rows(400)
    y = labels(X)
    fine = Pipeline([("log", FunctionTransformer(np.log1p)), ("identity", FunctionTransformer()), ("norm", Normalizer()),
                     ("range", PublicRangeScaler(0.0, 6.0)), ("scale", DPStandardScaler(bound=1.0, budget=Budget(1.0, 1e-6))),
                     ("pls", _dp())])
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonPrivatePreprocessingWarning)
        quiet(fine.fit, X, y)
    assert check_pipeline(fine) == []
    nested = Pipeline([("prep", Pipeline([("range", PublicRangeScaler(LOW, HIGH)), ("pca", PCA(2))])), ("pls", _dp())])
    assert [(p.step, p.feeds) for p in check_pipeline(nested, strict=False)] == [("prep/pca", "pls")]
    with pytest.warns(NonPrivatePreprocessingWarning, match="prep/pca"):
        quiet(nested.fit, X, y)
    parallel = Pipeline([("columns", ColumnTransformer([("public", PublicRangeScaler(0.0, 100.0), [0]),
                                                       ("z", StandardScaler(), [1, 2])])), ("pls", _dp())])
    assert [(p.step, p.feeds) for p in check_pipeline(parallel, strict=False)] == [("columns/z", "pls")]
    with pytest.warns(NonPrivatePreprocessingWarning, match="columns/z"):
        quiet(parallel.fit, X, y)
    inside = Pipeline([("columns", ColumnTransformer([("p", Pipeline([("z", StandardScaler()), ("dp", DPStandardScaler(bound=1.0))]),
                                                       [0, 1])])), ("pls", _dp())])
    assert [(p.step, p.feeds) for p in check_pipeline(inside, strict=False)] == [("columns/p/z", "columns/p/dp")]
    after = make_pipeline(PublicRangeScaler(LOW, HIGH), DPSIR(1, bound=1.0, cut_points=[0.0], budget=Budget(1.0, 1e-6)),
                          StandardScaler())  # after the DP step: not a voided guarantee, but the model is not private
    (problem,) = check_pipeline(after, strict=False)
    assert problem.feeds is None and "not covered" in problem.message
    with pytest.raises(TypeError, match="Pipeline"):
        check_pipeline(_dp())


def test_the_warning_names_the_steps_before_it_only_and_fits_outside_a_pipeline_are_silent():
    X = ranged_rows(400)
    y = labels(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonPrivatePreprocessingWarning)
        quiet(_dp().fit, StandardScaler().fit_transform(X), y)  # outside a pipeline the fit cannot know where X came from
    first = DPStandardScaler(bound=1e3, budget=Budget(1.0, 1e-6))
    pipe = make_pipeline(first, StandardScaler(), _dp())
    with pytest.warns(NonPrivatePreprocessingWarning) as seen:
        quiet(pipe.fit, X, y)
    messages = [str(w.message) for w in seen if w.category is NonPrivatePreprocessingWarning]
    assert len(messages) == 1 and messages[0].startswith("DPPLS") and "standardscaler" in messages[0]
