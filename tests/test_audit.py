"""Empirical DP audits: formulas, every registered mechanism, mutants that must fail, the probe.

Audits use fixed seeds and alpha = 1e-3 (pre-registered); no retries.
"""
import json
import math

import numpy as np
import pytest
from scipy import stats

from privsdr import Budget, DPMeanCovariance, Sensitivity
from privsdr.audit import (
    GDP,
    ApproxDP,
    adversarial_neighbours,
    assert_dp,
    assert_mechanism_dp,
    assert_sensitivity,
    audit,
    audit_estimator,
    audit_mechanism,
    claim_from_report,
    clip_bound_pair,
    cp_upper,
    epsilon_lower_bound,
    label_flip_pair,
    mu_lower_bound,
    probe_sensitivity,
    slice_change_pair,
)
from privsdr.core import clip_rows_l2, second_moment
from privsdr.mechanisms import available_mechanisms, get_mechanism

ALPHA = 1e-3


# -- formulas -----------------------------------------------------------------------------------
def test_clopper_pearson_matches_scipy_binomtest():
    for k, n, a in [(0, 100, 0.025), (1839, 10_000, 0.025), (50, 60, 1e-3), (999, 1000, 0.05)]:
        ref = stats.binomtest(k, n, alternative="less").proportion_ci(confidence_level=1 - a, method="exact").high
        assert cp_upper(k, n, a) == pytest.approx(ref, abs=1e-12)
    assert cp_upper(10, 10, 0.01) == 1.0


def test_worked_example_of_the_spec():
    # spec/auditing.md §1.2: Laplace eps=1, 1e4 per side, FP=1839, FN=5000, alpha=0.05 -> 0.939
    fpr_u, fnr_u = cp_upper(1839, 10_000, 0.025), cp_upper(5000, 10_000, 0.025)
    assert epsilon_lower_bound(fpr_u, fnr_u, 0.0) == pytest.approx(0.9391237, abs=1e-6)


def test_gdp_reference_values():
    # spec/auditing.md §1.4: eps=1, delta=1e-5 <-> mu = 0.26808 (sigma/Delta = 3.7306)
    assert GDP(0.26808, 1e-5).epsilon == pytest.approx(1.0, abs=2e-4)
    assert GDP.gaussian(3.7306, 1e-5).mu == pytest.approx(0.26805, abs=1e-4)
    assert mu_lower_bound(0.5, 0.5) == 0.0  # never an absolute value: no evidence is zero


def test_lower_bound_is_never_above_truth_for_exact_rates():
    # with the *true* rates of a Gaussian threshold test, the mu bound equals the true mu
    mu = 0.7
    t = mu / 2
    fpr, fnr = stats.norm.sf(t), stats.norm.cdf(t - mu)
    assert mu_lower_bound(fpr, fnr) == pytest.approx(mu, abs=1e-9)


# -- every registered mechanism -------------------------------------------------------------------
AUDITABLE = [m for m in available_mechanisms() if m not in ("opaque", "non_private")]


@pytest.mark.parametrize("name", AUDITABLE)
def test_every_registered_mechanism_passes_its_audit(name):
    # the unbatched samplers (one matrix or selection per draw) at 5,000 samples: a pass-side check; the power of
    # the audit is shown by test_meta_correct_gaussian_bound_is_tight and the mutants below
    result = assert_mechanism_dp(name, epsilon=1.0, delta=1e-5, alpha=ALPHA, seed=11,
                                 samples=5_000 if name in ("symmetric_gaussian", "peeling", "report_noisy_max", "noisy_top")
                                 else 1_500 if name.startswith("distributed") else None)
    assert result.confidence == 1 - ALPHA
    assert result.epsilon_lower <= 1.0 + 1e-9


@pytest.mark.parametrize("calibration", ["classical", "thm3_exact", "paper_approx", "analytic"])
def test_gaussian_calibrations_pass(calibration):
    assert_mechanism_dp("gaussian", epsilon=1.0, delta=1e-5, calibration=calibration, alpha=ALPHA, seed=3)


def test_symmetric_modsulq_passes():
    assert_mechanism_dp("symmetric_gaussian", epsilon=1.0, delta=1e-5, calibration="modsulq", alpha=ALPHA, seed=4, samples=5_000)


def test_non_private_release_is_caught():
    result = audit_mechanism("non_private", epsilon=1.0, delta=1e-5, alpha=ALPHA, seed=5)
    assert not result.passed and result.epsilon_lower > 5


def test_opaque_mechanism_needs_its_own_sampler():
    with pytest.raises(ValueError, match="opaque"):
        audit_mechanism("opaque")


def test_meta_correct_gaussian_bound_is_tight():
    result = audit_mechanism("gaussian", epsilon=1.0, delta=1e-5, samples=100_000, alpha=ALPHA, seed=2024)
    assert result.passed and result.epsilon_lower >= 0.8


# -- mutants that must fail ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gaussian", "laplace", "shaped_gaussian", "symmetric_gaussian", "report_noisy_max"])
def test_sigma_halved_fails(name):
    # at eps = 4 the halved noise is rejected with 2,000 samples per side (eps >= 4.2 ... 7.7); at eps = 1 it took 20,000+
    assert not audit_mechanism(name, epsilon=4.0, delta=1e-5, noise_scale=0.5, samples=2_000, alpha=ALPHA, seed=7).passed


def test_noisy_top_with_half_its_noise_fails():
    # at eps = 24 one round's eps0 is about 4 (as report_noisy_max's at eps = 4 above); halved noise: about 8
    assert not audit_mechanism("noisy_top", epsilon=24.0, delta=1e-5, noise_scale=0.5, samples=2_000, alpha=ALPHA, seed=7).passed
    assert audit_mechanism("noisy_top", epsilon=24.0, delta=1e-5, samples=2_000, alpha=ALPHA, seed=7).passed


@pytest.mark.parametrize("name", AUDITABLE)
def test_noise_off_fails(name):
    assert not audit_mechanism(name, epsilon=1.0, delta=1e-5, noise_scale=0.0, alpha=ALPHA, seed=8, samples=2_000).passed


def _vector_audit(mech_name, sensitivity, value_shift, claim, threshold, statistic, samples, inclusive=False):
    mech = get_mechanism(mech_name)
    share = Budget(1.0, 0.0 if mech.pure else 1e-5)
    spec = mech.calibrate(sensitivity, share)
    d = value_shift.size

    def sampler(v, k, rng):
        return mech.sample(mech.prepare(np.broadcast_to(v, (k, d)), spec), spec, rng)

    return audit(sampler, np.zeros(d), value_shift, claim=claim, statistic=statistic, threshold=threshold,
                 samples=samples, alpha=ALPHA, seed=9, batched=True, inclusive=inclusive)


def test_l2_sensitivity_used_where_l1_is_needed_fails():
    # a change spread over d = 4 coordinates: L2 norm 1 but L1 norm 2. A Laplace calibrated with the
    # L2 value (as if it were L1) is 2-DP, not 1-DP. Event: every coordinate at or beyond the shift,
    # where the density ratio is flat at e^(L1/b).
    d = 4
    shift = np.full(d, 0.5)
    stat = lambda out: np.min(np.asarray(out), axis=1)  # noqa: E731
    buggy = _vector_audit("laplace", Sensitivity(1.0, "l1"), shift, ApproxDP(1.0, 0.0), 0.5, stat, 20_000, inclusive=True)
    assert not buggy.passed and buggy.epsilon_lower > 1.2
    correct = _vector_audit("laplace", Sensitivity(2.0, "l1"), shift, ApproxDP(1.0, 0.0), 0.5, stat, 20_000, inclusive=True)
    assert correct.passed


def test_per_coordinate_sensitivity_used_where_l2_is_needed_fails():
    # Gaussian on a d = 16 vector whose change has L_inf norm 0.25 but L2 norm 1: calibrating with the
    # per-coordinate (L_inf) value gives 4x too little noise.
    d = 16
    shift = np.full(d, 0.25)
    spec = get_mechanism("gaussian").calibrate(Sensitivity(0.25, "l2"), Budget(1.0, 1e-5))
    claim = GDP.gaussian(spec.noise_multiplier * 4.0, 1e-5)  # the claim for the true L2 sensitivity 1
    stat = lambda out: np.asarray(out) @ shift  # noqa: E731
    result = _vector_audit("gaussian", Sensitivity(0.25, "l2"), shift, claim, float(shift @ shift) / 2, stat, 50_000)
    assert not result.passed


# -- estimators end to end ---------------------------------------------------------------------------
# The fit's two releases are whitened by their (public) noise scales and concatenated, so that the
# projection statistic is the likelihood ratio of the whole fit: its separation is the composed mu.
EPS2 = Budget(2.0, 1e-5)
PAIR = clip_bound_pair(40, 3, 1.0, seed=1)
REPORT = DPMeanCovariance(clip=1.0, budget=EPS2, random_state=0).fit(PAIR[0]).privacy_report_
SCALES = {n.name: n.noise_scale for n in REPORT.nodes}


def _whitened(mean, second):
    return np.concatenate([mean / SCALES["mean"], second[np.triu_indices(3)] / SCALES["second_moment"]])


def _mean_cov_fit(D, rng):
    est = DPMeanCovariance(clip=1.0, budget=EPS2, random_state=rng).fit(D)
    return _whitened(est.mean_, est.second_moment_)


def _mean_cov_reference(D):
    est = DPMeanCovariance(clip=1.0, budget=Budget.infinite()).fit(D)
    return _whitened(est.mean_, est.second_moment_)


def test_dp_mean_covariance_passes_end_to_end_audit():
    claim = claim_from_report(REPORT)
    assert isinstance(claim, GDP) and claim.epsilon <= 2.0 + 1e-9
    result = audit_estimator(_mean_cov_fit, *PAIR, reference=_mean_cov_reference, claim=claim, samples=400, alpha=ALPHA, seed=12)
    assert result.passed, result.summary()


def test_sigma_halved_estimator_fails_end_to_end():
    def mutant(D, rng):
        Xc = clip_rows_l2(D, 1.0)
        mean = Xc.mean(axis=0) + 0.5 * SCALES["mean"] * rng.standard_normal(3)
        upper = np.triu(0.5 * SCALES["second_moment"] * rng.standard_normal((3, 3)))
        return _whitened(mean, second_moment(Xc) + upper + np.triu(upper, 1).T)

    result = audit_estimator(mutant, *PAIR, reference=_mean_cov_reference, claim=claim_from_report(REPORT),
                             samples=2_000, alpha=ALPHA, seed=14)
    assert not result.passed, result.summary()


def test_noise_added_before_clipping_fails_end_to_end():
    # mutant: noise is calibrated for 2C/n but clipping happens *after* the release, so an outlier
    # record moves the mean by far more than the declared sensitivity.
    D0, D1 = clip_bound_pair(40, 3, 1.0, seed=1)
    D1 = D1.copy()
    D1[0] = [-25.0, 0.0, 0.0]
    spec = get_mechanism("gaussian").calibrate(Sensitivity(2.0 / 40, "l2"), Budget(1.0, 1e-5))

    def mutant(D, rng):
        noisy = D.mean(axis=0) + spec.scale * rng.standard_normal(3)
        return clip_rows_l2(noisy[None, :], 1.0)[0]

    result = audit_estimator(mutant, D0, D1, reference=lambda D: clip_rows_l2(D.mean(axis=0)[None, :], 1.0)[0],
                             claim=GDP.gaussian(spec.noise_multiplier, 1e-5), samples=2_000, alpha=ALPHA, seed=13)
    assert not result.passed


def test_assert_dp_raises_on_a_mutant():
    with pytest.raises(AssertionError, match="FAILED"):
        assert_dp(lambda D, k, rng: D + 0.1 * rng.standard_normal(k), 0.0, 1.0, claim=GDP(1.0, 1e-5),
                  statistic=np.asarray, threshold=0.5, samples=2_000, alpha=ALPHA, batched=True)


def test_split_threshold_policy_is_valid_and_reported():
    result = audit(lambda D, k, rng: D + rng.standard_normal(k), 0.0, 1.0, claim=GDP(1.0, 1e-5),
                   statistic=np.asarray, threshold="split", samples=20_000, alpha=ALPHA, batched=True, seed=3)
    assert result.passed and "held-out" in result.threshold_policy and 0.5 < result.mu_lower <= 1.0


# -- sensitivity probe ------------------------------------------------------------------------------
def test_probe_confirms_mean_and_second_moment_sensitivities():
    rng = np.random.default_rng(0)
    X, C = rng.standard_normal((30, 4)), 2.0
    n = len(X)
    pairs = list(adversarial_neighbours(X, C, indices=(0, 5)))
    assert_sensitivity(lambda D: clip_rows_l2(D, C).mean(axis=0), pairs, Sensitivity(2 * C / n, "l2"))
    assert_sensitivity(lambda D: second_moment(clip_rows_l2(D, C)), pairs, Sensitivity(math.sqrt(2) * C * C / n, "l2"),
                       mechanism="symmetric_gaussian")
    # the worst case is attained: the probe is not vacuous
    r = probe_sensitivity(lambda D: clip_rows_l2(D, C).mean(axis=0), pairs, Sensitivity(2 * C / n, "l2"))
    assert r.max_change == pytest.approx(2 * C / n, rel=1e-12)


def test_probe_catches_missing_clipping_and_wrong_declarations():
    rng = np.random.default_rng(1)
    X, C = rng.standard_normal((30, 4)), 2.0
    pairs = list(adversarial_neighbours(X, C))
    assert not probe_sensitivity(lambda D: D.mean(axis=0), pairs, Sensitivity(2 * C / 30, "l2")).passed
    assert not probe_sensitivity(lambda D: clip_rows_l2(D, C).mean(axis=0), pairs, Sensitivity(C / 30, "l2")).passed
    # a second moment without clipping breaks its declaration too
    assert not probe_sensitivity(lambda D: second_moment(D), pairs, Sensitivity(math.sqrt(2) * C * C / 30, "l2"),
                                 mechanism="symmetric_gaussian").passed


def test_neighbour_generators():
    X = np.zeros((5, 2))
    (_, y0), (_, y1) = label_flip_pair(X, np.array([0, 1, 0, 1, 1]), index=2)
    assert y0[2] == 0 and y1[2] == 1 and np.sum(y0 != y1) == 1
    (_, z0), (_, z1) = slice_change_pair(X, np.array([0.1, 0.9, 0.4, 0.6, 0.2]), [0.5], index=2)
    assert (z0[2] < 0.5) != (z1[2] < 0.5) and np.sum(z0 != z1) == 1
    D0, D1 = clip_bound_pair(10, 3, 2.0)
    assert np.linalg.norm(D0[0]) == pytest.approx(2.0) and np.sum(np.any(D0 != D1, axis=1)) == 1


# -- command line ------------------------------------------------------------------------------------
def test_cli_audit_json_and_exit_codes():
    from conftest import run_cli

    ok = run_cli("audit", "laplace", "--epsilon", "1", "--json")
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert {"epsilon_lower", "confidence", "samples", "passed"} <= set(data) and data["passed"] is True
    bad = run_cli("audit", "gaussian", "--noise-scale", "0.5", "--json")
    assert bad.returncode == 1 and json.loads(bad.stdout)["passed"] is False


def test_subspace_and_membership_statistics():
    from privsdr.audit import membership_statistic, subspace_statistic

    stat, t = subspace_statistic(np.array([[1.0], [0.0]]), np.array([[0.0], [1.0]]))
    # sign and scale of the basis do not matter; D' side scores above the threshold
    assert stat([np.array([[0.0], [-3.0]])])[0] > t > stat([np.array([[2.0], [0.0]])])[0]
    m, t = membership_statistic(4)
    assert list(m([np.array([1, 4]), np.array([0, 2])])) == [1.0, 0.0] and t == 0.5


def test_peeling_membership_audit_end_to_end():
    # a "fit" that selects 1 of 20 columns with the peeling mechanism; D' raises column 0
    mech = get_mechanism("peeling")
    spec = mech.calibrate(Sensitivity(1.0, "linf"), Budget(1.0, 0.0), params={"s": 1, "d": 1, "delta": 1e-5})
    D0, D1 = np.full((1, 20), 1.0), np.zeros((1, 20))
    D0[0, 0], D1[0, 0] = 0.0, 1.0
    fit = lambda D, rng: mech.sample(mech.prepare(D, spec), spec, rng)[1]  # noqa: E731
    result = audit_estimator(fit, D0, D1, reference=lambda D: 0, claim=ApproxDP(1.0, 1e-5), kind="membership",
                             samples=2_000, alpha=ALPHA, seed=21)
    assert result.passed
    off = spec.scaled(0.0)
    leaky = lambda D, rng: mech.sample(mech.prepare(D, off), off, rng)[1]  # noqa: E731
    assert not audit_estimator(leaky, D0, D1, reference=lambda D: 0, claim=ApproxDP(1.0, 1e-5), kind="membership",
                               samples=2_000, alpha=ALPHA, seed=22).passed
