"""DP-BCD as published (Algorithm 2, paper mode): spec dpbcd_002.md oracles O-D1..D10, O-U2, O-U3, O-P1..P3."""
import math

import numpy as np
import pytest
from scipy import stats

from privsdr import Budget, DPBCDRegression, Ledger, UncertifiedPlanError, ValidationError
from privsdr.accounting import drv_epsilon
from privsdr.core import BlockSolver, abort_probability, bcd, local_residual, paper_utility_bound, r_squared
from privsdr.datasets import dpbcd_synthetic
from privsdr.vertical import DegenerateResidualError, Party, ProtocolAborted, posterior_bound, zero_row_audit
from privsdr.vertical import dpbcd_steps as steps


def data(n=1000, p=10, seed=2022, **kw):
    return dpbcd_synthetic(n, p, seed=seed, **kw)


def paper(eps, **kw):
    kw.setdefault("abort_check", "none")
    kw.setdefault("accounting", "paper")
    return DPBCDRegression("paper", budget=Budget(eps, 0.0) if math.isfinite(eps) else Budget.infinite(), allow_uncertified=True,
                           message_reports=False, **kw)


def test_o_d1_infinite_epsilon_is_bcd_bit_for_bit_and_huge_epsilon_is_close():
    d = data()
    ref = bcd(list(d.blocks), d.y, 5).coef
    assert np.array_equal(paper(math.inf).fit(list(d.blocks), d.y).coef_, ref)
    near = paper(1e12, random_state=0).fit(list(d.blocks), d.y).coef_
    assert np.linalg.norm(near - ref) / np.linalg.norm(ref) < 1e-5


def test_o_d2_step_identities():
    d = data(400)
    X, v = d.blocks[0], d.y
    solver = BlockSolver(X)
    xi = steps.paper_xi(solver, v, 1.2, None)
    eps_step = 0.2
    inc, v_out = steps.paper_step(solver, v, eps_step, 1.2, xi, np.random.default_rng(3), post_check=False)
    b = steps.radial_half_normal(len(v), xi / math.sqrt(eps_step), np.random.default_rng(3))  # the same draw
    r = local_residual(solver.Q, v)
    Pb = solver.Q @ (solver.Q.T @ b)
    assert abs(v_out @ v_out - (r @ r + Pb @ Pb)) < 1e-10 * (v_out @ v_out)
    nondp = np.linalg.lstsq(X, v, rcond=None)[0]
    assert np.allclose(inc - nondp, -np.linalg.solve(X.T @ X, X.T @ b), rtol=1e-8, atol=1e-10)
    assert np.allclose(X.T @ (v_out - b), 0.0, atol=1e-8 * np.abs(X.T @ b).max())


def test_o_d3_noise_law_radial_half_normal():
    rng = np.random.default_rng(4)
    n, m, scale, draws = 12, 3, 2.5, 20_000
    lengths, first, outer, proj = np.empty(draws), np.zeros(n), np.zeros((n, n)), np.empty(draws)
    Q = np.linalg.qr(rng.standard_normal((n, m)))[0]
    for i in range(draws):
        b = steps.radial_half_normal(n, scale, rng)
        lengths[i] = np.linalg.norm(b)
        s = b / lengths[i]
        first += s
        outer += np.outer(s, s)
        proj[i] = np.sum((Q.T @ s) ** 2)
    assert stats.kstest(lengths, stats.halfnorm(scale=scale).cdf).pvalue > 1e-3
    assert abs(lengths.mean() - scale * math.sqrt(2 / math.pi)) < 4 * scale * math.sqrt(1 - 2 / math.pi) / math.sqrt(draws)
    assert np.abs(first / draws).max() < 0.02
    assert np.abs(outer / draws - np.eye(n) / n).max() < 0.01
    assert stats.kstest(proj, stats.beta(m / 2, (n - m) / 2).cdf).pvalue > 1e-3


@pytest.mark.parametrize("seed", [1, 2])
def test_o_d4_abort_rate_is_the_data_independent_quadrature(seed):
    d = data(1000, 10, seed=seed, correlation=0.1 if seed == 1 else 0.5, r2=0.2 if seed == 1 else 0.8)
    X, v = d.blocks[0], d.y
    solver = BlockSolver(X)
    xi = steps.paper_xi(solver, v, 1.2, None)
    rng = np.random.default_rng(seed)
    draws, aborts = 10_000, 0
    for _ in range(draws):
        try:
            steps.paper_step(solver, v, 0.2, 1.2, xi, rng, post_check=True)
        except steps.PaperAbort:
            aborts += 1
    p = abort_probability(0.2, 1.2, 5, 1000)
    assert abs(aborts / draws - p) < 3 * math.sqrt(p * (1 - p) / draws), (aborts / draws, p)


def test_o_d5_expected_inflation():
    d = data(1000)
    X, v = d.blocks[0], d.y
    solver = BlockSolver(X)
    xi = steps.paper_xi(solver, v, 1.2, None)
    r2 = float(np.sum(local_residual(solver.Q, v) ** 2))
    rng = np.random.default_rng(5)
    ratios = [np.sum(steps.paper_step(solver, v, 0.2, 1.2, xi, rng, post_check=False)[1] ** 2) / r2 for _ in range(8_000)]
    assert np.mean(ratios) == pytest.approx(1 + 1.2**2 * 5 / (0.2 * 1000), rel=0.01)


def test_o_d6_post_check_and_gamma_validation():
    d = data(500)
    X, v = d.blocks[0], d.y
    solver = BlockSolver(X)
    xi = steps.paper_xi(solver, v, 1.2, None)
    rng = np.random.default_rng(6)
    for _ in range(200):
        try:
            _, out = steps.paper_step(solver, v, 0.5, 1.2, xi, rng, post_check=True)
        except steps.PaperAbort:
            continue
        assert np.linalg.norm(out) <= xi

    class Huge:  # a mock generator whose every draw is enormous
        def standard_normal(self, size=None):
            return 1e6 if size is None else np.full(size, 1e6)

    with pytest.raises(steps.PaperAbort):
        steps.paper_step(solver, v, 0.5, 1.2, xi, Huge(), post_check=True)
    for gamma in (1.0, 0.9):
        with pytest.raises(ValidationError, match="gamma"):
            paper(1.0, gamma=gamma).fit(list(d.blocks), d.y)


def test_o_d8_equivariance_with_the_same_seed():
    d = data(600)
    base = paper(2.0, random_state=8).fit(list(d.blocks), d.y)
    scaled = paper(2.0, random_state=8).fit(list(d.blocks), 3.0 * d.y)
    assert np.allclose(scaled.coef_, 3.0 * base.coef_, rtol=1e-9, atol=1e-12)
    for a, b in zip(base.messages_, scaled.messages_, strict=True):
        if a.kind == "remainder":
            assert np.allclose(b.arrays["remainder"], 3.0 * a.arrays["remainder"], rtol=1e-9, atol=1e-9)
    A = np.random.default_rng(1).standard_normal((5, 5)) + 3 * np.eye(5)
    reparam = paper(2.0, random_state=8).fit([d.blocks[0] @ A, d.blocks[1]], d.y)
    assert np.allclose(reparam.coef_blocks_["party0"], np.linalg.solve(A, base.coef_blocks_["party0"]), rtol=1e-7, atol=1e-9)
    assert np.allclose(reparam.predict([d.blocks[0] @ A, d.blocks[1]]), base.predict(list(d.blocks)), rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("accounting, total", [("paper", 2.0), ("conservative", 4.0)])
def test_o_d9_budget_kT_entries_of_eps_over_kT(accounting, total):
    d = data(500)
    est = paper(total, accounting=accounting, random_state=1).fit(list(d.blocks), d.y)
    k, T = 2, 5
    for report in est.privacy_reports_.values():
        steps_ = [n for n in report.nodes if "/step" in n.name]
        assert len(steps_) == T and all(n.cost["epsilon"] == pytest.approx(2.0 / (k * T)) for n in steps_)
        assert report.status == "claimed" and "LSDP" in report.status_line
    assert est.privacy_["per_record"]["basic"]["epsilon"] == pytest.approx(total)
    assert est.privacy_["relation"] == "lsdp_zero_row" and not est.privacy_["standard_dp"]


def test_o_d9_abort_publishes_nothing_and_keeps_the_charges():
    d = data(500)
    ledgers = {"party0": Ledger(Budget(1.0, 0.0), "basic"), "party1": Ledger(Budget(1.0, 0.0), "basic")}
    # the post-check: at eps = 1e-6 the first step aborts almost surely, after its noise was drawn
    est = DPBCDRegression("paper", budget=Budget(1e-6, 0.0), abort_check="post", accounting="paper", ledgers=ledgers,
                          allow_uncertified=True, random_state=0)
    with pytest.raises(ProtocolAborted) as info:
        est.fit(list(d.blocks), d.y)
    assert not any(m.kind == "coefficients" for m in info.value.messages)
    # write-ahead: the aborting step was charged; the abort depends on that step's noise, so party0 is charged its
    # whole part (5 steps of 1e-7) at close; party1 released nothing and gets its reservation back
    assert ledgers["party0"].spent.epsilon == pytest.approx(5e-7)
    assert ledgers["party1"].spent.epsilon == 0.0
    # the gamma_min pre-check (eq. 14) aborts before the step is charged
    fresh = {"party0": Ledger(Budget(1.0, 0.0), "basic"), "party1": Ledger(Budget(1.0, 0.0), "basic")}
    with pytest.raises(ProtocolAborted, match="gamma_min"):
        DPBCDRegression("paper", budget=Budget(1.0, 0.0), gamma=1.000001, abort_check="gamma_min", accounting="paper",
                        ledgers=fresh, allow_uncertified=True, random_state=0).fit(list(d.blocks), d.y)
    assert fresh["party0"].spent.epsilon == 0.0 and fresh["party1"].spent.epsilon == 0.0


def test_o_d10_zero_residual_is_refused_before_spending_or_floored():
    rng = np.random.default_rng(10)
    Xa, Xb = rng.standard_normal((200, 3)), rng.standard_normal((200, 2))
    y = Xa @ np.array([1.0, -2.0, 0.5])  # y in col(X_a): xi = 0 at the first step
    ledger = Ledger(Budget(1.0, 0.0), "basic")
    with pytest.raises(DegenerateResidualError):
        paper(1.0, ledgers={"party0": ledger}).fit([Xa, Xb], y)
    assert ledger.spent.epsilon == 0.0 and not ledger.runs
    floored = paper(1.0, xi_floor=0.5, random_state=0).fit([Xa, Xb], y)
    assert np.all(np.isfinite(floored.coef_))
    assert np.abs(floored.coef_[:3] - [1.0, -2.0, 0.5]).max() > 1e-9  # noise was added


def test_o_u2_provable_bound_holds_for_every_non_aborted_run():
    checked = 0
    for seed in range(12):
        d = data(300, seed=100 + seed)
        try:
            est = paper(2.0 if seed % 2 else 10.0, abort_check="post", random_state=seed).fit(list(d.blocks), d.y)
        except ProtocolAborted:
            continue  # the bound is about non-aborted runs
        v_final = d.y - d.X @ est.coef_
        Q = np.linalg.qr(d.blocks[0])[0]
        assert v_final @ v_final <= 1.2 ** (2 * 2 * 5) * np.sum(local_residual(Q, d.y) ** 2)
        checked += 1
    assert checked >= 6


def test_o_u3_the_paper_bound_is_not_a_theorem():
    """Orthogonal blocks, y in their span: BCD has R^2 = 1, so the paper's bound says R^2_DP >= 1; DP-BCD misses it."""
    rng = np.random.default_rng(11)
    Q = np.linalg.qr(rng.standard_normal((400, 6)))[0] * 20
    Xa, Xb = Q[:, :3], Q[:, 3:]
    y = Q @ rng.standard_normal(6)
    fit = np.hstack([Xa, Xb]) @ bcd([Xa, Xb], y, 5).coef
    assert r_squared(y, fit) == pytest.approx(1.0, abs=1e-12)
    est = paper(0.2, abort_check="none", random_state=0).fit([Xa, Xb], y)
    sse_bcd, sse_dp = np.sum((y - fit) ** 2), np.sum((y - est.predict([Xa, Xb])) ** 2)
    # R^2_DP >= 1 - gamma^(2kT) (1 - R^2_BCD) is SSE_DP <= gamma^(2kT) SSE_BCD, and SSE_BCD = 0 up to rounding
    assert paper_utility_bound(1.2, 2, 5, 1.0) == 1.0
    assert sse_dp > 1e6 * 1.2**20 * sse_bcd


def test_o_p1_the_zero_row_distinguisher_breaks_the_claim():
    d = data(300, seed=3)
    for zero_label in (False, True):
        small = zero_row_audit(d.blocks[0], d.y, eps_step=0.2, samples=100, zero_label=zero_label)
        large = zero_row_audit(d.blocks[0], d.y, eps_step=0.2, samples=1000, zero_label=zero_label)
        for r in (small, large):
            assert r.false_positives == 0 and r.false_negatives == 0  # TPR 1, FPR 0
            assert not r.passed and r.epsilon_lower > 0.2
        assert large.epsilon_lower > small.epsilon_lower + 1.5  # grows like log n
    # through the protocol: the first remainder keeps y_r exactly where the row is zero-filled
    X0 = d.blocks[0].copy()
    X0[7] = 0.0
    est = paper(2.0, random_state=1).fit([X0, d.blocks[1]], d.y)
    first = est.messages_[0].arrays["remainder"]
    assert first[7] == d.y[7] and np.all(first[:7] != d.y[:7])


def test_o_p2_advanced_composition_helper_and_break_even():
    for N, expected in ((4, 0.966), (5, 1.024), (1000, 1.884)):
        assert drv_epsilon([0.2] * 5, 1.0 / N) == pytest.approx(expected, abs=1e-3)
    assert [N for N in range(2, 50) if drv_epsilon([0.2] * 5, 1.0 / N) < 1.0] == [2, 3, 4]


def test_o_p3_posterior_bound():
    assert posterior_bound(1.0) == pytest.approx(0.731, abs=1e-3)


def test_paper_mode_needs_the_opt_in_and_refuses_bad_input_before_spending():
    d = data(300)
    ledger = Ledger(Budget(5.0, 0.0), "basic")
    with pytest.raises(UncertifiedPlanError):
        DPBCDRegression("paper", budget=Budget(1.0, 0.0), ledgers={"party0": ledger}).fit(list(d.blocks), d.y)
    bad = [
        ([d.blocks[0], d.blocks[1][:-1]], d.y, "row counts differ"),
        ([np.column_stack([d.blocks[0], d.blocks[0][:, :1]]), d.blocks[1]], d.y, "rank-deficient"),
    ]
    for blocks, y, match in bad:
        with pytest.raises(ValidationError, match=match):
            paper(1.0, ledgers={"party0": ledger}).fit(blocks, y)
    with pytest.raises(ValidationError, match="exactly one party"):
        paper(1.0, ledgers={"party0": ledger}).fit([Party("a", d.blocks[0], d.y), Party("b", d.blocks[1], d.y)])
    with pytest.raises(ValidationError, match="delta"):
        DPBCDRegression("paper", budget=Budget(1.0, 1e-5), allow_uncertified=True, ledgers={"party0": ledger}).fit(list(d.blocks), d.y)
    with pytest.raises(ValidationError, match="ridge"):
        paper(1.0, ridge=1.0).fit(list(d.blocks), d.y)
    assert ledger.spent.epsilon == 0.0 and not ledger.runs


def test_gaussian_noise_option_is_the_remark_1_comparison():
    d = data(1000)
    ref = bcd(list(d.blocks), d.y, 5).coef
    radial = [np.median(np.abs(paper(2.0, random_state=s).fit(list(d.blocks), d.y).coef_ - ref) / np.abs(ref)) for s in range(8)]
    gauss = [np.median(np.abs(paper(2.0, noise="gaussian", random_state=s).fit(list(d.blocks), d.y).coef_ - ref) / np.abs(ref)) for s in range(8)]
    assert np.median(gauss) > 5 * np.median(radial)  # ||P b||^2 ~ sigma^2 chi2_m vs sigma^2 Z^2 m/N: sqrt(N) times more noise
