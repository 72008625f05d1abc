"""Mechanisms: calibration numbers against the spec tables, sampling, noise-off, selection, registry.

Oracles:
* FSIR spec §5.3 (fsir_000.md): sigma_x (MOD-SULQ), sigma^2_iid (classical), the paper-approx and
  Theorem-3-exact floors, and the sigma^2/Delta^2 table at delta = 1e-5.
* DP-SIR spec §3 (dpsir_003.md): peeling scale, its events and the explicit advanced composition.
* Balle & Wang (2018): the analytic Gaussian meets its delta exactly.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from privsdr import Budget, Ledger, Plan, PlanError, Sensitivity, execute
from privsdr.accounting import (
    AdvancedAccountant,
    BasicAccountant,
    Cost,
    make_accountant,
)
from privsdr.accounting.accountants import drv_epsilon
from privsdr.accounting.events import GaussianEvent, LaplaceEvent, PureEvent
from privsdr.accounting.gaussian import gaussian_delta
from privsdr.mechanisms import (
    Mechanism,
    NoiseSpec,
    available_mechanisms,
    gaussian_noise_multiplier,
    get_mechanism,
    laplace_noise_multiplier,
    modsulq_sigma,
    register_mechanism,
)

HSET = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------------------------------
# 1. Calibration numbers: FSIR spec §5.3
# --------------------------------------------------------------------------------------------------
# (n, eps, delta, sigma_x, sigma2_iid, sigma2_floor_paper_approx, sigma2_floor_thm3_exact, exact/approx)
FSIR_TABLE = [
    (100, 1, 6.310e-3, 0.45422, 4.2311e-2, 4.6071e-2, 4.9991e-2, 1.085),
    (500, 1, 1.074e-3, 0.10001, 2.2589e-3, 2.4093e-3, 2.5669e-3, 1.065),
    (1000, 1, 5.012e-4, 0.051855, 6.2573e-4, 6.6333e-4, 7.0277e-4, 1.059),
    (5000, 1, 8.534e-5, 0.011181, 3.0695e-5, 3.2199e-5, 3.3780e-5, 1.049),
    (1000, 2, 5.012e-4, 0.026135, 1.5643e-4, 1.6583e-4, 1.8529e-4, 1.117),
    (5000, 2, 8.534e-5, 0.005632, 7.6736e-6, 8.0496e-6, 8.8315e-6, 1.097),
]
R, P = 1.0, 10


def _printed_decimals(x: float, sig: int) -> float:
    """Half a unit in the last printed place of a table entry printed with ``sig`` significant digits."""
    return 0.5 * 10.0 ** (math.floor(math.log10(abs(x))) - sig + 1)


@pytest.mark.parametrize("row", FSIR_TABLE, ids=[f"n{r[0]}-eps{r[1]}" for r in FSIR_TABLE])
def test_fsir_table_5_3(row):
    n, eps, delta_tab, sx, s2_iid, s2_approx, s2_exact, ratio = row
    delta = n ** -1.1
    assert delta == pytest.approx(delta_tab, rel=1e-3)
    d2 = 2.0 * R * math.sqrt(P) / n  # Frobenius L2 sensitivity of the (p x H) moment matrix
    sens = Sensitivity(d2, "l2")
    gauss = get_mechanism("gaussian")
    budget = Budget(eps, delta)

    assert modsulq_sigma(n, P, eps, delta) == pytest.approx(sx, rel=1e-4)

    classical = gauss.calibrate(sens, budget, calibration="classical")
    approx = gauss.calibrate(sens, budget, calibration="paper_approx")
    exact = gauss.calibrate(sens, budget, calibration="thm3_exact")
    assert classical.scale**2 == pytest.approx(s2_iid, rel=1e-4)
    assert approx.scale**2 == pytest.approx(s2_approx, rel=1e-4)
    assert exact.scale**2 == pytest.approx(s2_exact, rel=1e-4)
    # closed form of Prop. 2: 8 R^2 p log(1.25/delta) / (n^2 eps^2)
    assert classical.scale**2 == pytest.approx(8 * R**2 * P * math.log(1.25 / delta) / (n**2 * eps**2), rel=1e-12)
    assert (exact.scale / approx.scale) ** 2 == pytest.approx(ratio, abs=6e-4)
    # the multiplier is per unit of sensitivity, and the scale is multiplier * sensitivity
    assert classical.noise_multiplier == pytest.approx(gaussian_noise_multiplier(eps, delta, "classical"), rel=1e-15)
    assert classical.scale == pytest.approx(classical.noise_multiplier * d2, rel=1e-15)


SIGMA2_OVER_D2 = [  # eps: (thm3_exact, paper_approx, classical), delta = 1e-5
    (0.5, 99.64, 97.65, 93.89),
    (1, 25.40, 24.41, 23.47),
    (2, 6.594, 6.103, 5.868),
    (5, 1.168, 0.976, 0.939),
]


@pytest.mark.parametrize("row", SIGMA2_OVER_D2, ids=[f"eps{r[0]}" for r in SIGMA2_OVER_D2])
def test_fsir_sigma2_over_delta2_table(row):
    eps, exact, approx, classical = row
    for cal, expected in (("thm3_exact", exact), ("paper_approx", approx), ("classical", classical)):
        z2 = gaussian_noise_multiplier(eps, 1e-5, cal) ** 2
        # the table is printed to 4 significant digits (3 for the last row): the value must round to it
        assert z2 == pytest.approx(expected, rel=1e-4, abs=_printed_decimals(expected, 4 if expected >= 1 else 3)), cal
    # ordering of the three calibrations at every eps of the table
    assert (
        gaussian_noise_multiplier(eps, 1e-5, "thm3_exact")
        > gaussian_noise_multiplier(eps, 1e-5, "paper_approx")
        > gaussian_noise_multiplier(eps, 1e-5, "classical")
    )


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-8])
def test_analytic_gaussian_is_exact_and_smallest(eps, delta):
    z = gaussian_noise_multiplier(eps, delta, "analytic")
    spec = get_mechanism("gaussian").calibrate(Sensitivity(0.7, "l2"), Budget(eps, delta), calibration="analytic")
    assert spec.noise_multiplier == z
    # exact profile at the calibrated sigma meets the target, and not by a wide margin
    achieved = gaussian_delta(z, eps)
    assert achieved <= delta
    assert achieved == pytest.approx(delta, rel=1e-6)
    # a hair less noise breaks the target: the calibration is the smallest valid one
    assert gaussian_delta(z * (1 - 1e-6), eps) > delta
    # Theorem 3 exact is valid for every eps; the analytic noise is never larger
    z_thm3 = gaussian_noise_multiplier(eps, delta, "thm3_exact")
    assert gaussian_delta(z_thm3, eps) <= delta
    assert z <= z_thm3
    if eps <= 1.0:  # the classical constant is proven only for eps < 1 (and = 1 empirically here)
        z_cl = gaussian_noise_multiplier(eps, delta, "classical")
        assert gaussian_delta(z_cl, eps) <= delta
        assert z <= z_cl


@pytest.mark.parametrize("eps, delta", [(0.5, 1e-3), (1, 5e-4), (2, 8.5e-5), (3, 1e-5), (5, 1e-5)])
def test_fsir_all_three_calibrations_empirically_valid(eps, delta):
    """FSIR §5.3: at the paper's settings the true delta is below target for all three calibrations."""
    for cal in ("thm3_exact", "paper_approx", "classical"):
        assert gaussian_delta(gaussian_noise_multiplier(eps, delta, cal), eps) < delta, cal


def test_fsir_true_delta_example():
    """FSIR §5.3 example: eps = 2, delta = 5.01e-4: exact 2.2e-6, approx 6.7e-6, classical 1.2e-5."""
    eps, delta = 2.0, 5.01e-4
    got = {cal: gaussian_delta(gaussian_noise_multiplier(eps, delta, cal), eps) for cal in ("thm3_exact", "paper_approx", "classical")}
    assert got["thm3_exact"] == pytest.approx(2.2e-6, rel=0.05)
    assert got["paper_approx"] == pytest.approx(6.7e-6, rel=0.05)
    assert got["classical"] == pytest.approx(1.2e-5, rel=0.05)


def test_laplace_calibration():
    lap = get_mechanism("laplace")
    spec = lap.calibrate(Sensitivity(0.25, "l1"), Budget(0.5))
    assert spec.noise_multiplier == laplace_noise_multiplier(0.5) == 2.0
    assert spec.scale == pytest.approx(0.5)
    assert spec.delta == 0.0
    assert lap.events(spec) == (LaplaceEvent(2.0),)
    assert BasicAccountant().compose(list(lap.events(spec))).epsilon == pytest.approx(0.5)


def test_gaussian_events_carry_multiplier_and_delta_share():
    g = get_mechanism("gaussian")
    spec = g.calibrate(Sensitivity(3.0, "l2"), Budget(1.0, 1e-6), calibration="thm3_exact")
    assert g.events(spec) == (GaussianEvent(spec.noise_multiplier, 1e-6),)
    # basic composition charges the exact profile: thm3_exact over-delivers, so cost eps < 1
    assert BasicAccountant().compose(list(g.events(spec))).epsilon < 1.0


def test_gaussian_needs_delta():
    with pytest.raises(ValueError, match="delta"):
        get_mechanism("gaussian").calibrate(Sensitivity(1.0, "l2"), Budget(1.0, 0.0))


def test_unknown_calibration_refused():
    with pytest.raises(ValueError, match="calibration"):
        get_mechanism("gaussian").calibrate(Sensitivity(1.0, "l2"), Budget(1.0, 1e-5), calibration="bogus")


def test_symmetric_gaussian_calibrations():
    sym = get_mechanism("symmetric_gaussian")
    n, p, C = 1000, 10, 1.5
    sens = Sensitivity(math.sqrt(2) * C * C / n, "l2")
    b = Budget(1.0, 1e-5)
    spec = sym.calibrate(sens, b, calibration="modsulq", params={"n": n, "p": p, "scale": C * C})
    assert spec.scale == pytest.approx(C * C * modsulq_sigma(n, p, 1.0, 1e-5), rel=1e-12)
    assert sym.calibrate(sens, b, calibration="analyze_gauss").scale == pytest.approx(
        get_mechanism("gaussian").calibrate(sens, b, calibration="classical").scale, rel=1e-15
    )
    with pytest.raises(ValueError, match="n"):
        sym.calibrate(sens, b, calibration="modsulq", params={"p": p, "scale": 1.0})
    # MOD-SULQ sigma is independent of R: released noise is c_R^2 sigma_x
    assert modsulq_sigma(n, p, 1.0, 1e-5) == pytest.approx(
        (p + 1) / n * math.sqrt(2 * math.log((p * p + p) / (2 * math.sqrt(2 * math.pi) * 1e-5))) + 1 / n
    )


# --------------------------------------------------------------------------------------------------
# 2. Peeling: DP-SIR spec §3
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d, s, lam, eps, delta", [(1, 1, 1.0, 1.0, 1e-5), (3, 2, 0.3, 0.5, 1e-6), (5, 4, 2.0, 2.0, 1e-3)])
def test_peeling_scale_and_events(d, s, lam, eps, delta):
    peel = get_mechanism("peeling")
    spec = peel.calibrate(Sensitivity(lam, "linf"), Budget(eps), params={"s": s, "d": d, "delta": delta})
    b = lam * 2 * math.sqrt(3 * d * s * math.log(1 / delta)) / eps
    assert spec.scale == pytest.approx(b, rel=1e-12)
    events = peel.events(spec)
    assert len(events) == s + d * s
    selects = [e for e in events if isinstance(e, PureEvent)]
    releases = [e for e in events if isinstance(e, LaplaceEvent)]
    assert len(selects) == s and len(releases) == d * s
    for e in selects:
        assert e.epsilon == pytest.approx(2 * math.sqrt(d) * lam / b, rel=1e-12)
        assert e.epsilon == pytest.approx(eps / math.sqrt(3 * s * math.log(1 / delta)), rel=1e-12)
    for e in releases:
        assert e.noise_multiplier == pytest.approx(b / lam, rel=1e-12)
        assert e.basic_cost().epsilon == pytest.approx(eps / (2 * math.sqrt(3 * d * s * math.log(1 / delta))), rel=1e-12)
    # sum of squared per-event epsilons: 5 eps^2 / (12 ln(1/delta))
    sq = sum(e.basic_cost().epsilon ** 2 for e in events)
    assert sq == pytest.approx(5 * eps**2 / (12 * math.log(1 / delta)), rel=1e-12)


@pytest.mark.parametrize("d, s", [(1, 1), (2, 3), (3, 5), (5, 10), (10, 20), (20, 50)])
def test_peeling_composes_within_eps_under_advanced(d, s):
    eps, delta = 1.0, 1e-5
    peel = get_mechanism("peeling")
    spec = peel.calibrate(Sensitivity(1.0, "linf"), Budget(eps), params={"s": s, "d": d, "delta": delta})
    events = list(peel.events(spec))
    cost = AdvancedAccountant(slack=delta).compose(events)
    assert cost.epsilon <= eps
    assert cost.delta <= delta
    # the named accountant with the default slack (delta/2 of a 2*delta budget) gives the same epsilon,
    # read at its budget's delta
    assert make_accountant("advanced", 2 * delta).compose(events) == Cost(cost.epsilon, 2 * delta)
    # spec closed form: sqrt(2 ln(1/delta) sum eps_i^2) + sum eps_i (e^eps_i - 1), sum eps_i^2 = 5 eps^2/(12 ln(1/delta))
    ln = math.log(1 / delta)
    e0 = eps / math.sqrt(3 * s * ln)
    e1 = eps / (2 * math.sqrt(3 * d * s * ln))
    closed = eps * math.sqrt(5 / 6) + s * e0 * math.expm1(e0) + d * s * e1 * math.expm1(e1)
    drv = drv_epsilon([e.basic_cost().epsilon for e in events], delta)
    assert drv == pytest.approx(closed, rel=1e-12)
    assert cost.epsilon <= drv + 1e-12
    if d * s >= 50:  # many small events: ~ 0.913 eps + 5 eps^2 / (12 ln(1/delta))
        assert drv == pytest.approx(0.9129 * eps + 5 * eps**2 / (12 * ln), abs=0.01)


@pytest.mark.parametrize("d, s", [(10, 20), (20, 50)])
def test_peeling_stages_composed_separately_exceed_eps(d, s):
    """DP-SIR §3: composing selection and release separately overshoots eps; the joint composition does not."""
    eps, delta = 1.0, 1e-5
    peel = get_mechanism("peeling")
    spec = peel.calibrate(Sensitivity(1.0, "linf"), Budget(eps), params={"s": s, "d": d, "delta": delta})
    events = list(peel.events(spec))
    acc = AdvancedAccountant(slack=delta)
    separate = acc.compose(events[:s]).epsilon + acc.compose(events[s:]).epsilon
    assert separate > eps
    assert acc.compose(events).epsilon <= eps


def test_peeling_needs_its_public_params():
    peel = get_mechanism("peeling")
    with pytest.raises(ValueError, match="needs public parameters"):
        peel.calibrate(Sensitivity(1.0, "linf"), Budget(1.0), params={"s": 2, "d": 3})
    with pytest.raises(ValueError):
        peel.calibrate(Sensitivity(1.0, "linf"), Budget(1.0), params={"s": 2, "d": 3, "delta": 1.0})
    spec = peel.calibrate(Sensitivity(1.0, "linf"), Budget(1.0), params={"s": 2, "d": 3, "delta": 1e-5})
    with pytest.raises(ValueError, match="peeling expects"):
        peel.prepare(np.ones((4, 5)), spec)  # wrong d
    with pytest.raises(ValueError, match="peeling expects"):
        peel.prepare(np.ones((3, 1)), spec)  # p < s


def test_report_noisy_max_calibration_and_event():
    rnm = get_mechanism("report_noisy_max")
    spec = rnm.calibrate(Sensitivity(0.5, "linf"), Budget(0.25))
    assert spec.scale == pytest.approx(2 * 0.5 / 0.25)
    (event,) = rnm.events(spec)
    assert isinstance(event, PureEvent) and event.epsilon == pytest.approx(0.25, rel=1e-12)


# --------------------------------------------------------------------------------------------------
# 3. Sampling
# --------------------------------------------------------------------------------------------------
N_DRAWS = 200_000


def test_gaussian_noise_std_matches_sigma():
    g = get_mechanism("gaussian")
    spec = g.calibrate(Sensitivity(0.5, "l2"), Budget(1.0, 1e-5), calibration="classical")
    value = np.full(N_DRAWS, 3.0)
    out = g.sample(g.prepare(value, spec), spec, np.random.default_rng(1))
    noise = out - 3.0
    assert noise.std() == pytest.approx(spec.scale, rel=0.01)
    assert abs(noise.mean()) < 5 * spec.scale / math.sqrt(N_DRAWS)
    # shape is kept for matrices
    m = g.sample(np.zeros((4, 5)), spec, np.random.default_rng(1))
    assert m.shape == (4, 5)


def test_laplace_noise_std_is_sqrt2_b():
    lap = get_mechanism("laplace")
    spec = lap.calibrate(Sensitivity(0.3, "l1"), Budget(0.6))
    b = spec.scale
    noise = lap.sample(np.zeros(N_DRAWS), spec, np.random.default_rng(2))
    assert noise.std() == pytest.approx(math.sqrt(2) * b, rel=0.01)
    assert np.abs(noise).mean() == pytest.approx(b, rel=0.01)  # E|Laplace(b)| = b


def test_symmetric_gaussian_is_symmetric_with_sigma_on_upper_triangle():
    sym = get_mechanism("symmetric_gaussian")
    p, reps = 50, 200
    spec = sym.calibrate(Sensitivity(0.2, "l2"), Budget(1.0, 1e-5), calibration="classical")
    rng = np.random.default_rng(3)
    base = np.eye(p) * 2.0 + 0.1
    off, diag = [], []
    iu = np.triu_indices(p, 1)
    for _ in range(reps):
        out = sym.sample(sym.prepare(base, spec), spec, rng)
        assert np.array_equal(out, out.T)
        noise = out - base
        off.append(noise[iu])
        diag.append(np.diag(noise))
    off, diag = np.concatenate(off), np.concatenate(diag)
    assert off.size > N_DRAWS
    assert off.std() == pytest.approx(spec.scale, rel=0.01)
    assert diag.std() == pytest.approx(spec.scale, rel=0.03)  # 10k draws
    # independent entries above the diagonal: no correlation between neighbours
    assert abs(np.corrcoef(off[:-1], off[1:])[0, 1]) < 0.01


def test_symmetric_gaussian_refuses_non_symmetric():
    sym = get_mechanism("symmetric_gaussian")
    spec = sym.calibrate(Sensitivity(0.2, "l2"), Budget(1.0, 1e-5))
    with pytest.raises(ValueError):
        sym.prepare(np.arange(9.0).reshape(3, 3), spec)
    with pytest.raises(ValueError):
        sym.prepare(np.ones((2, 3)), spec)
    near = np.full((3, 3), 100.0)
    near[0, 1] += 1e-7  # asymmetric by 1e-9 of its size: refused; rounding error (1e-13 of it) is not
    with pytest.raises(ValueError, match="symmetric matrix"):
        sym.prepare(near, spec)
    near[0, 1] = 100.0 + 1e-11
    assert np.array_equal(sym.prepare(near, spec), (near + near.T) / 2)


def test_shaped_gaussian_boost_covariance():
    sh = get_mechanism("shaped_gaussian")
    spec = sh.calibrate(Sensitivity(0.5, "l2"), Budget(1.0, 1e-5), calibration="thm3_exact")
    sigma = spec.scale
    W = np.array([[1.0, 0.0], [0.5, 2.0], [0.0, -1.0]])
    value = np.zeros((3, N_DRAWS // 2))
    prepared = sh.prepare(value, spec, boost=W)
    out = sh.sample(prepared, spec, np.random.default_rng(4), boost=W)
    cov = np.cov(out)
    expected = sigma**2 * np.eye(3) + W @ W.T
    assert np.allclose(cov, expected, atol=0.03 * np.abs(expected).max())
    # without boost: isotropic at sigma
    out0 = sh.sample(sh.prepare(value, spec), spec, np.random.default_rng(5))
    assert np.allclose(np.cov(out0), sigma**2 * np.eye(3), atol=0.03 * sigma**2)


def test_shaped_gaussian_shape_covariance_and_floor():
    sh = get_mechanism("shaped_gaussian")
    spec = sh.calibrate(Sensitivity(0.5, "l2"), Budget(1.0, 1e-5), calibration="thm3_exact")
    sigma = spec.scale
    rng = np.random.default_rng(6)
    Q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    L_ok = Q @ np.diag([sigma * 1.01, sigma * 2, sigma * 3])
    value = np.zeros((3, N_DRAWS // 2))
    out = sh.sample(sh.prepare(value, spec, shape=L_ok), spec, np.random.default_rng(7), shape=L_ok)
    expected = L_ok @ L_ok.T
    assert np.allclose(np.cov(out), expected, atol=0.03 * np.abs(expected).max())
    # smallest singular value below the floor: refused before anything happens
    L_bad = Q @ np.diag([sigma * 0.99, sigma * 2, sigma * 3])
    with pytest.raises(ValueError, match="floor"):
        sh.prepare(value, spec, shape=L_bad)
    # a rank-deficient (too few columns) factor cannot meet the floor either
    with pytest.raises(ValueError):
        sh.prepare(value, spec, shape=L_ok[:, :2] * 100)
    with pytest.raises(ValueError):
        sh.prepare(value, spec, shape=L_ok, boost=L_ok)
    with pytest.raises(ValueError):
        sh.prepare(value, spec, shape=np.eye(4) * 10 * sigma)  # wrong number of rows


NOISY = [
    ("gaussian", Sensitivity(1.0, "l2"), Budget(1.0, 1e-5), {}, np.arange(6.0)),
    ("laplace", Sensitivity(1.0, "l1"), Budget(1.0), {}, np.arange(6.0)),
    ("shaped_gaussian", Sensitivity(1.0, "l2"), Budget(1.0, 1e-5), {}, np.arange(6.0).reshape(3, 2)),
    ("symmetric_gaussian", Sensitivity(1.0, "l2"), Budget(1.0, 1e-5), {}, np.eye(4)),
    ("report_noisy_max", Sensitivity(1.0, "linf"), Budget(1.0), {}, np.arange(50.0) / 50),
    ("peeling", Sensitivity(1.0, "linf"), Budget(1.0), {"s": 2, "d": 3, "delta": 1e-5}, np.ones((3, 30))),
]


def _flat(x):
    if isinstance(x, tuple):
        return np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in x])
    return np.ravel(np.asarray(x, dtype=float))


@pytest.mark.parametrize("name, sens, budget, params, value", NOISY, ids=[r[0] for r in NOISY])
def test_same_seed_same_output_different_seed_differs(name, sens, budget, params, value):
    mech = get_mechanism(name)
    spec = mech.calibrate(sens, budget, params=params)
    prepared = mech.prepare(value, spec)
    a = _flat(mech.sample(prepared, spec, np.random.default_rng(11)))
    b = _flat(mech.sample(prepared, spec, np.random.default_rng(11)))
    assert np.array_equal(a, b)
    outs = {tuple(_flat(mech.sample(prepared, spec, np.random.default_rng(seed)))) for seed in range(12, 22)}
    assert len(outs) > 1
    # the value itself is never modified in place
    assert np.array_equal(prepared, mech.prepare(value, spec))


# --------------------------------------------------------------------------------------------------
# 4. Noise off: exact values and exact selections
# --------------------------------------------------------------------------------------------------
finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@HSET
@given(hnp.arrays(float, hnp.array_shapes(min_dims=1, max_dims=2, max_side=6), elements=finite), st.integers(0, 2**32 - 1))
def test_noise_off_returns_exact_value(value, seed):
    inf = Budget.infinite()
    for name, sens in (("gaussian", Sensitivity(1.0, "l2")), ("laplace", Sensitivity(1.0, "l1")), ("shaped_gaussian", Sensitivity(1.0, "l2"))):
        mech = get_mechanism(name)
        spec = mech.calibrate(sens, inf)
        assert spec.noise_off and spec.scale == 0.0
        out = mech.sample(mech.prepare(value, spec), spec, np.random.default_rng(seed))
        assert np.array_equal(out, value), name
    sym = get_mechanism("symmetric_gaussian")
    m = np.atleast_2d(value)
    s = m.T @ m
    spec = sym.calibrate(Sensitivity(1.0, "l2"), inf)
    out = sym.sample(sym.prepare(s, spec), spec, np.random.default_rng(seed))
    assert np.array_equal(out, (s + s.T) / 2)


@HSET
@given(st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=30, unique=True), st.integers(0, 2**32 - 1))
def test_report_noisy_max_noise_off_is_argmax(scores, seed):
    rnm = get_mechanism("report_noisy_max")
    spec = rnm.calibrate(Sensitivity(1.0, "linf"), Budget.infinite())
    assert rnm.sample(rnm.prepare(scores, spec), spec, np.random.default_rng(seed)) == int(np.argmax(scores))


def test_report_noisy_max_noisy_mostly_right_with_a_big_gap():
    rnm = get_mechanism("report_noisy_max")
    spec = rnm.calibrate(Sensitivity(1.0, "linf"), Budget(1.0))  # Laplace(2)
    scores = np.zeros(10)
    scores[7] = 40.0
    rng = np.random.default_rng(8)
    picks = [rnm.sample(scores, spec, rng) for _ in range(200)]
    assert sum(p == 7 for p in picks) >= 195
    scores[7] = 0.0  # all tied: roughly uniform
    picks = [rnm.sample(scores, spec, rng) for _ in range(2000)]
    assert len(set(picks)) == 10


@st.composite
def peel_case(draw):
    d = draw(st.integers(1, 4))
    p = draw(st.integers(1, 12))
    s = draw(st.integers(1, p))
    A = draw(hnp.arrays(float, (d, p), elements=st.floats(-10, 10, allow_nan=False)))
    norms = np.linalg.norm(A, axis=0)
    # distinct column norms so the top-s set is unique
    from hypothesis import assume

    assume(len(np.unique(np.round(norms, 9))) == p)
    return d, s, A


@HSET
@given(peel_case(), st.integers(0, 2**32 - 1))
def test_peeling_noise_off_selects_top_s_columns(case, seed):
    """DP-SIR oracle 3: with the noise off, peeling is exact hard thresholding of the column norms."""
    d, s, A = case
    peel = get_mechanism("peeling")
    spec = peel.calibrate(Sensitivity(1.0, "linf"), Budget.infinite(), params={"s": s, "d": d, "delta": 1e-5})
    A_hat, selected = peel.sample(peel.prepare(A, spec), spec, np.random.default_rng(seed))
    norms = np.linalg.norm(A, axis=0)
    top = np.argsort(-norms)[:s]
    assert list(selected) == list(top)  # selected in order of decreasing norm
    expected = np.zeros_like(A)
    expected[:, top] = A[:, top]
    assert np.array_equal(A_hat, expected)


def test_peeling_noisy_output_is_supported_on_selection():
    peel = get_mechanism("peeling")
    d, p, s = 3, 40, 4
    spec = peel.calibrate(Sensitivity(0.01, "linf"), Budget(1.0), params={"s": s, "d": d, "delta": 1e-5})
    A = np.zeros((d, p))
    A[:, [3, 10, 17, 25]] = 50.0  # far above the noise scale
    A_hat, selected = peel.sample(peel.prepare(A, spec), spec, np.random.default_rng(9))
    assert sorted(selected) == [3, 10, 17, 25]
    assert len(set(selected.tolist())) == s
    off = np.setdiff1d(np.arange(p), selected)
    assert np.all(A_hat[:, off] == 0.0)
    noise = A_hat[:, selected] - A[:, selected]
    assert np.all(noise != 0.0) and np.all(np.abs(noise) < 20 * spec.scale)


# --------------------------------------------------------------------------------------------------
# 5. Registry
# --------------------------------------------------------------------------------------------------
class MyGauss(Mechanism):
    """A user mechanism: Gaussian with twice the analytic noise."""

    name = "my_gauss"
    norms = ("l2",)
    calibrations = ("double",)
    default_calibration = "double"
    calls = 0

    def _multiplier(self, sensitivity, share, calibration, params):
        return 2.0 * gaussian_noise_multiplier(share.epsilon, share.delta, "analytic")

    def events(self, spec: NoiseSpec):
        return (GaussianEvent(spec.noise_multiplier, spec.delta),)

    def sample(self, value, spec, rng, **kwargs):
        type(self).calls += 1
        arr = np.array(value, dtype=float)
        return arr if spec.noise_off else arr + spec.scale * rng.standard_normal(arr.shape)


@pytest.fixture
def my_gauss():
    from privsdr.mechanisms import registry

    mech = MyGauss()
    register_mechanism(mech, replace=True)
    try:
        yield mech
    finally:
        registry._REGISTRY.pop("my_gauss", None)


def test_builtin_mechanisms_registered():
    names = available_mechanisms()
    for n in ("laplace", "gaussian", "shaped_gaussian", "symmetric_gaussian", "report_noisy_max", "peeling", "opaque", "non_private"):
        assert n in names
    with pytest.raises(ValueError, match="unknown mechanism"):
        get_mechanism("no_such_mechanism")


def test_user_mechanism_in_a_plan(my_gauss):
    assert "my_gauss" in available_mechanisms()
    assert get_mechanism("my_gauss") is my_gauss
    plan = Plan("custom")
    plan.add("x", "my_gauss", Sensitivity(0.1, "l2"), weight=1.0)
    calibrated = plan.allocate(Budget(1.0, 1e-5))
    spec = calibrated.specs["x"]
    assert spec.mechanism == "my_gauss"
    assert spec.noise_multiplier == pytest.approx(2 * gaussian_noise_multiplier(1.0, 1e-5, "analytic"))
    ledger = Ledger(Budget(1.0, 1e-5))
    before = MyGauss.calls
    value = np.zeros(20_000)
    outputs, report = execute(calibrated, ledger, {"x": lambda parents: value}, random_state=0)
    assert MyGauss.calls == before + 1
    assert outputs["x"].std() == pytest.approx(spec.scale, rel=0.03)
    assert [c.label for c in ledger.charges] == ["x"]
    assert ledger.charges[0].events == (GaussianEvent(spec.noise_multiplier, spec.delta),)
    # twice the analytic noise: well within budget
    assert 0 < ledger.spent.epsilon < 0.6
    assert report.nodes[0].mechanism == "my_gauss"


def test_duplicate_registration_refused(my_gauss):
    with pytest.raises(ValueError, match="already registered"):
        register_mechanism(MyGauss())
    with pytest.raises(ValueError, match="already registered"):
        register_mechanism(get_mechanism("gaussian").__class__())
    other = MyGauss()
    assert register_mechanism(other, replace=True) is other
    assert get_mechanism("my_gauss") is other
    with pytest.raises(TypeError):
        register_mechanism("gaussian")  # type: ignore[arg-type]


def test_norm_mismatch_raises():
    with pytest.raises(ValueError, match="sensitivity"):
        get_mechanism("gaussian").calibrate(Sensitivity(1.0, "l1"), Budget(1.0, 1e-5))
    with pytest.raises(ValueError):
        get_mechanism("laplace").calibrate(Sensitivity(1.0, "l2"), Budget(1.0))
    with pytest.raises(ValueError):
        get_mechanism("peeling").calibrate(Sensitivity(1.0, "l2"), Budget(1.0), params={"s": 1, "d": 1, "delta": 1e-5})
    plan = Plan("p")
    with pytest.raises(ValueError):
        plan.add("x", "gaussian", Sensitivity(1.0, "l1"))
    with pytest.raises(ValueError):
        Sensitivity(1.0, "l3")
    with pytest.raises(ValueError):
        Sensitivity(0.0, "l2")
    with pytest.raises(ValueError):
        Sensitivity(float("nan"), "l2")


def test_nan_value_refused_by_prepare():
    for name, sens, budget in (("gaussian", Sensitivity(1.0, "l2"), Budget(1, 1e-5)), ("laplace", Sensitivity(1.0, "l1"), Budget(1.0))):
        mech = get_mechanism(name)
        spec = mech.calibrate(sens, budget)
        with pytest.raises(ValueError, match="NaN"):
            mech.prepare(np.array([1.0, np.nan]), spec)
        with pytest.raises(ValueError, match="NaN"):
            mech.prepare(np.array([1.0, np.inf]), spec)


def test_plan_node_with_unknown_mechanism_refused():
    with pytest.raises(ValueError, match="unknown mechanism"):
        Plan("p").add("x", "nope", Sensitivity(1.0, "l2"))
    assert issubclass(PlanError, ValueError)
