"""Issue 15 item 4: the secure sampler -- exact discrete Gaussian/Laplace on a public grid (CKS 2020).

The samplers' randomness is the OS CSPRNG; tests that check distributions swap in a seeded source
(``seeded`` fixture) so that every threshold below is met or missed deterministically.
"""
from __future__ import annotations

import math
import random
import secrets
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

import privsdr
from privsdr import Budget, Ledger, Plan, Sensitivity
from privsdr.accounting import DiscreteGaussianEvent, DiscreteLaplaceEvent, GaussianEvent, make_accountant
from privsdr.accounting.gaussian import analytic_noise_multiplier, gaussian_epsilon
from privsdr.accounting.zcdp import zcdp_delta, zcdp_epsilon
from privsdr.audit import audit_mechanism
from privsdr.errors import PlanError, ValidationError
from privsdr.mechanisms import discrete_gaussian_noise_multiplier, get_mechanism, secure
from privsdr.plan import Run

ALPHA = 1e-3


@pytest.fixture
def seeded(monkeypatch):
    """A reproducible randomness source for distribution checks (releases default to the CSPRNG)."""
    source = random.Random(20201)
    monkeypatch.setattr(secure, "randbelow", source.randrange)
    return source


def test_releases_draw_from_the_operating_system_csprng():
    assert secure.randbelow is secrets.randbelow


# -- the exact samplers ------------------------------------------------------------------------------
def _chi_square_p(draws: list[int], pmf: dict[int, float]) -> float:
    """Goodness of fit against an exact pmf, cells with expected count < 5 pooled into one."""
    n = len(draws)
    counts = {k: 0 for k in pmf}
    other = 0
    for x in draws:
        if x in counts:
            counts[x] += 1
        else:
            other += 1
    keep = [k for k in pmf if n * pmf[k] >= 5]
    observed = [counts[k] for k in keep]
    expected = [n * pmf[k] for k in keep]
    observed.append(n - sum(observed))
    expected.append(n - sum(expected))
    return float(stats.chisquare(observed, expected).pvalue)


def _pmf(weight, support: range) -> dict[int, float]:
    w = {k: weight(k) for k in support}
    total = math.fsum(w.values())
    return {k: v / total for k, v in w.items()}


@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(9, 4), Fraction(50)])
def test_discrete_gaussian_has_the_exact_pmf(seeded, sigma2):
    draws = [secure.discrete_gaussian(sigma2) for _ in range(20_000)]
    bound = int(12 * math.sqrt(sigma2)) + 3
    pmf = _pmf(lambda k: math.exp(-k * k / (2 * float(sigma2))), range(-bound, bound + 1))
    assert _chi_square_p(draws, pmf) > ALPHA
    assert abs(np.var(draws) / float(sigma2) - 1) < 0.1 or sigma2 < 1  # N_Z's variance is < sigma2 when sigma2 < 1


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(3), Fraction(7, 2)])
def test_discrete_laplace_has_the_exact_pmf(seeded, scale):
    draws = [secure.discrete_laplace(scale) for _ in range(20_000)]
    bound = int(40 * scale) + 3
    pmf = _pmf(lambda k: math.exp(-abs(k) / float(scale)), range(-bound, bound + 1))
    assert _chi_square_p(draws, pmf) > ALPHA


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(7)])
def test_bernoulli_exp_has_probability_exp_minus_gamma(seeded, gamma):
    n = 20_000
    k = sum(secure.bernoulli_exp(gamma) for _ in range(n))
    p = math.exp(-float(gamma))
    if p == 1.0:
        assert k == n
    else:
        assert stats.binomtest(k, n, p).pvalue > ALPHA


# -- the grid ----------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(d=st.integers(1, 60), delta=st.floats(1e-3, 1e3), z=st.floats(0.1, 50.0), norm=st.sampled_from(["l2", "l1"]),
       seed=st.integers(0, 2**32 - 1))
@example(d=8, delta=499.9999999999999, z=1.0, norm="l1", seed=0)  # just below a power of two: log2 rounded up
def test_rounding_to_the_grid_keeps_the_declared_guarantee(d, delta, z, norm, seed):
    """Neighbours at distance Delta land at most Delta/gamma + spread apart on the grid, and the grid noise
    is z times that: the release is as private as its multiplier says, for at most 0.1% more noise."""
    rng = np.random.default_rng(seed)
    gamma, scale = secure.grid_noise(z, delta, d, norm)
    assert gamma > 0 and math.log2(gamma).is_integer()
    spread = math.ceil(math.sqrt(d)) if norm == "l2" else d
    assert delta / gamma >= secure.GRID_RATIO * spread
    assert scale == Fraction(z) * (Fraction(delta) / Fraction(gamma) + spread)
    assert float(scale) * gamma <= z * delta * (1 + 1.0 / secure.GRID_RATIO) * (1 + 1e-12)
    x = rng.uniform(-1e3, 1e3, d)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u, ord=2 if norm == "l2" else 1)
    x2 = x + delta * rng.uniform(0, 1) * u
    q, q2 = np.array(secure._round_to_grid(x, gamma)), np.array(secure._round_to_grid(x2, gamma))
    shift = np.linalg.norm(q - q2, ord=2 if norm == "l2" else 1)
    assert shift <= delta / gamma + (math.sqrt(d) if norm == "l2" else d) + 1e-6


@pytest.mark.parametrize("mechanism,norm", [("gaussian", "l2"), ("laplace", "l1"), ("shaped_gaussian", "l2")])
def test_release_lies_on_the_grid_with_the_planned_noise(seeded, mechanism, norm):
    plan = Plan("one", "replace_one")
    plan.add("v", mechanism, Sensitivity(0.5, norm))
    spec = plan.allocate(Budget(1.0, 1e-6), sampler="secure").specs["v"]
    value = np.linspace(-3, 3, 7)
    gamma = secure.grid(0.5, value.size, norm)
    mech, rng = get_mechanism(mechanism), np.random.default_rng(0)
    out = np.array([mech.sample(mech.prepare(value, spec), spec, rng) for _ in range(3000)])
    assert np.array_equal(out / gamma, np.round(out / gamma))  # integers times the grid: no float noise bits
    assert np.allclose(out.mean(axis=0), value, atol=5 * spec.scale * math.sqrt(2) / math.sqrt(3000))
    std = spec.scale * (math.sqrt(2.0) if mechanism == "laplace" else 1.0)
    assert (out - value).std() == pytest.approx(std, rel=0.05)


# -- accounting --------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps,delta", [(0.1, 1e-5), (1.0, 1e-6), (8.0, 1e-6), (0.5, 1e-9)])
def test_discrete_gaussian_calibration_meets_its_share_by_the_zcdp_bound(eps, delta):
    z = discrete_gaussian_noise_multiplier(eps, delta)
    event = DiscreteGaussianEvent(z, delta)
    assert event.basic_cost().epsilon <= eps
    assert DiscreteGaussianEvent(z * 0.999, delta).basic_cost().epsilon > eps  # and not needlessly more
    assert z > analytic_noise_multiplier(eps, delta)  # zCDP is never cheaper than the continuous exact profile
    assert event.basic_cost().epsilon >= gaussian_epsilon(z, delta)


@settings(max_examples=40, deadline=None)
@given(rho=st.floats(1e-5, 20.0), log_delta=st.floats(-14, -2))
def test_zcdp_conversion_is_the_cks_bound(rho, log_delta):
    import dp_accounting

    delta = 10.0**log_delta
    eps = zcdp_epsilon(rho, delta)
    assert eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1e-12  # never worse than Bun-Steinke
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.ZCDpEvent(rho))
    assert eps <= acc.get_epsilon(delta) * (1 + 1e-3) + 1e-12  # the same conversion, on a finer order grid near 1
    assert zcdp_delta(rho, eps) <= delta * (1 + 1e-6)


def test_secure_nodes_are_charged_their_own_events_under_every_accountant():
    plan = Plan("both", "replace_one")
    plan.add("g", "gaussian", Sensitivity(1.0, "l2"))
    plan.add("l", "laplace", Sensitivity(1.0, "l1"))
    numpy_plan = plan.allocate(Budget(1.0, 1e-6))
    secure_plan = plan.allocate(Budget(1.0, 1e-6), sampler="secure")
    events = [type(e) for c in secure_plan.charges() for e in c.events]
    assert events == [DiscreteGaussianEvent, DiscreteLaplaceEvent]
    assert secure_plan.sampler == "secure" and numpy_plan.sampler == "numpy"
    for name in ("basic", "advanced", "best"):  # (rdp alone reads the pure part as a zCDP line: looser, still valid)
        assert secure_plan.cost(name).fits_within(Budget(1.0, 1e-6)), name
    g_secure, g_numpy = secure_plan.specs["g"], numpy_plan.specs["g"]
    assert g_secure.noise_multiplier > g_numpy.noise_multiplier
    # the RDP curve of the discrete Gaussian is the zCDP line, read at the same delta as a ZCDpEvent
    rdp = make_accountant("rdp", 1e-6).compose([DiscreteGaussianEvent(3.0, 1e-6)]).epsilon
    continuous = make_accountant("rdp", 1e-6).compose([GaussianEvent(3.0, 1e-6)]).epsilon
    assert rdp == pytest.approx(continuous, rel=1e-9)  # identical RDP (alpha/2z^2); PLD/basic differ


def test_secure_charges_survive_the_journal(tmp_path):
    path = tmp_path / "budget.jsonl"
    ledger = Ledger.create(path, Budget(3.0, 1e-5))
    X = np.random.default_rng(0).uniform(-1, 1, (500, 3))
    privsdr.DPMeanCovariance(clip=2.0, budget=Budget(1.0, 1e-6), ledger=ledger, sampler="secure").fit(X)
    reopened = Ledger.open(path)
    kinds = {e.kind for c in reopened.charges for e in c.events}
    assert kinds == {"discrete_gaussian"}
    assert reopened.spent == ledger.spent


# -- audits (pre-registered: pair, statistic and threshold fixed by the calibration) ------------------
@pytest.mark.parametrize("name", ["gaussian", "laplace", "symmetric_gaussian", "shaped_gaussian"])
def test_secure_mechanisms_pass_their_audit(seeded, name):
    result = audit_mechanism(name, epsilon=4.0, delta=1e-5, sampler="secure", samples=1_500, alpha=ALPHA, seed=3,
                             dim=2 if name == "shaped_gaussian" else 1)
    assert result.passed


@pytest.mark.parametrize("name", ["gaussian", "laplace", "symmetric_gaussian", "shaped_gaussian"])
def test_secure_mechanisms_with_half_the_noise_fail_their_audit(seeded, name):
    # at eps = 4 a halved noise is rejected with 1,500 samples per side (at eps = 1 it took 10,000)
    result = audit_mechanism(name, epsilon=4.0, delta=1e-5, sampler="secure", samples=1_500, alpha=ALPHA, seed=4,
                             noise_scale=0.5, dim=2 if name == "shaped_gaussian" else 1)
    assert not result.passed


def test_selection_mechanisms_have_no_secure_sampler():
    with pytest.raises(ValueError, match="no 'secure' sampler"):
        audit_mechanism("report_noisy_max", sampler="secure")


# -- estimators, reports, bad input ------------------------------------------------------------------
def _sir_data():
    from privsdr.datasets import sir_model

    return sir_model("M1", 4_000, 4, seed=2)[:2]


def test_estimator_reports_say_which_sampler_ran():
    X, y = _sir_data()
    est = privsdr.DPSIR(1, bound=2.0, cut_points=[-1.0, 0.0, 1.0], budget=Budget(1.0, 1e-6), random_state=0,
                        sampler="secure").fit(X, y)
    report = est.privacy_report_
    assert {n.sampler for n in report.nodes} == {"secure"}
    assert any("noise sampler: secure" in note for note in report.notes)
    assert "CSPRNG" in report.seed_policy
    assert "secure sampler" in report.to_markdown() and "secure sampler" in report.summary()
    again = type(report).from_json(report.to_json())
    assert again == report
    plain = privsdr.DPSIR(1, bound=2.0, cut_points=[-1.0, 0.0, 1.0], budget=Budget(1.0, 1e-6), random_state=0).fit(X, y)
    assert {n.sampler for n in plain.privacy_report_.nodes} == {"numpy"} and not any("sampler" in n for n in plain.privacy_report_.notes)


def test_symmetric_secure_release_is_symmetric_and_on_the_grid(seeded):
    plan = Plan("one", "replace_one")
    plan.add("m", "symmetric_gaussian", Sensitivity(0.5, "l2"))
    spec = plan.allocate(Budget(1.0, 1e-6), sampler="secure").specs["m"]
    mech = get_mechanism("symmetric_gaussian")
    value = np.diag([1.0, 2.0, 3.0])
    out = mech.sample(mech.prepare(value, spec), spec, np.random.default_rng(0))
    gamma = secure.grid(0.5, 6, "l2")  # the upper triangle: p(p+1)/2 numbers
    assert np.array_equal(out, out.T) and np.array_equal(out / gamma, np.round(out / gamma))


def test_a_secure_run_names_the_nodes_that_kept_numpy_sampling():
    X, y = _sir_data()
    sparse = privsdr.SparseDPSIR(1, sparsity=2, bound=2.0, cut_points=[-1.0, 0.0, 1.0], budget=Budget(2.0, 1e-6),
                                 random_state=0, sampler="secure").fit(X, y)
    report = sparse.privacy_report_
    note = next(n for n in report.notes if "noise sampler" in n)
    selection = [n.name for n in report.nodes if n.mechanism in ("peeling", "noisy_top")]  # Laplace selections: no exact sampler yet
    assert selection and all(name in note for name in selection) and "numpy floating-point" in note
    assert {n.sampler for n in report.nodes if n.mechanism in ("peeling", "noisy_top")} == {"numpy"}


@pytest.mark.parametrize("make", [
    lambda s: privsdr.DPMeanCovariance(clip=2.0, budget=Budget(1.0, 1e-6), sampler=s),
    lambda s: privsdr.DPSIR(1, bound=2.0, cut_points=[-1.0, 0.0, 1.0], budget=Budget(1.0, 1e-6), sampler=s),
    lambda s: privsdr.DPPLS(1, bound_x=3.0, bound_y=3.0, budget=Budget(1.0, 1e-6), sampler=s),
])
def test_an_unknown_sampler_is_refused_before_any_budget_is_spent(make):
    X, y = _sir_data()
    ledger = Ledger(Budget(5.0, 1e-5))
    est = make("fast")
    est.ledger = ledger
    with pytest.raises(ValidationError, match="sampler must be one of"):
        est.fit(X, y) if not isinstance(est, privsdr.DPMeanCovariance) else est.fit(X)
    assert ledger.spent.epsilon == 0 and not ledger.runs
    assert not hasattr(est, "privacy_report_")


def test_noise_off_is_the_same_with_either_sampler():
    X, y = _sir_data()
    a = privsdr.DPMeanCovariance(clip=2.0, budget=Budget.infinite()).fit(X)
    b = privsdr.DPMeanCovariance(clip=2.0, budget=Budget.infinite(), sampler="secure").fit(X)
    assert np.array_equal(a.covariance_, b.covariance_)


def test_a_party_cannot_swap_the_sampler_of_an_issued_node():
    import attrs

    plan = Plan("one", "replace_one")
    plan.add("v", "gaussian", Sensitivity(1.0, "l2"))
    calibrated = plan.allocate(Budget(1.0, 1e-6), sampler="secure")
    with Run(calibrated, Ledger(Budget(1.0, 1e-6)), random_state=0) as run:
        ticket = run.issue("v")["v"]
        out, spec = ticket.release(np.zeros(2))
        with pytest.raises(PlanError, match="another noise spec"):
            run.accept("v", out, attrs.evolve(spec, sampler="numpy"))
        run.accept("v", out, spec)
