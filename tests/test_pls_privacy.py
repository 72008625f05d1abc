"""DPPLS privacy: sensitivity probes of every certified node, end-to-end audits (the canary audit of
spec §6.7, O-20, and tight GDP audits with a halved-noise mutant), the reconstruction attack
(Algorithm K, O-19), and utility trends (O-6, O-18). Fixed seeds, alpha = 1e-3, thresholds fixed
before sampling."""
from __future__ import annotations

import warnings
from typing import ClassVar

import numpy as np
import pytest

from privsdr import DPPLS, Budget, core
from privsdr.algorithms import pls as pls_module
from privsdr.algorithms._pls_queries import (
    clip_x,
    clip_y,
    iterative_deflate,
    iterative_statistics,
    ssp_statistics,
    weight_statistic,
)
from privsdr.algorithms.spectral import clipped_sum
from privsdr.audit import (
    GDP,
    ApproxDP,
    add_record_pair,
    add_remove_neighbours,
    audit,
    audit_estimator,
    claim_from_report,
    hit_rate,
    probe_sensitivity,
    reconstruction_attack,
)
from privsdr.datasets import load_corn, two_holders
from privsdr.mechanisms import Sensitivity
from privsdr.plan import Run

ALPHA = 1e-3
CX, CY = 2.0, 3.0


def base_data(n: int = 12, m: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, (n, m)), rng.uniform(-2.0, 2.0, n)


def probe(query, declared: float, mechanism: str = "gaussian", pairs=None) -> float:
    X, y = base_data()
    pairs = list(pairs if pairs is not None else add_remove_neighbours(X, y, CX, CY))
    result = probe_sensitivity(query, pairs, Sensitivity(declared, "l2", "add_remove"), mechanism=mechanism)
    assert result.passed, result.summary()
    # not vacuous: half the declaration fails
    assert not probe_sensitivity(query, pairs, Sensitivity(declared / 2, "l2", "add_remove"), mechanism=mechanism).passed
    return result.max_change / declared


# ==================================================================================================
# sensitivity probes: every certified node against its declared value (add/remove)
# ==================================================================================================
@pytest.mark.parametrize("center", [0.0, 0.4])
def test_probe_ssp_nodes(center):
    declared = {"count": 1.0, "x_sum": CX, "y_sum": CY, "xtx": CX * CX, "xty": CX * CY}
    plan = DPPLS(2, bound_x=CX, bound_y=CY, x_center=center, y_center=center, budget=Budget(1.0, 1e-5)).plan(12, 4)
    for name, value in declared.items():
        assert plan.specs[name].sensitivity.value == pytest.approx(value)  # the estimator declares these
        mech = "symmetric_gaussian" if name == "xtx" else "gaussian"
        tight = probe(lambda D, name=name: ssp_statistics(D[0], D[1], np.full(4, center), center, CX, CY)[name], value, mech)
        assert tight > 0.99  # the extreme rows reach the bound


def test_probe_iterative_nodes_first_and_later_components():
    rng = np.random.default_rng(1)
    w1 = rng.standard_normal(4)
    w1 /= np.linalg.norm(w1)
    w2 = rng.standard_normal(4)
    w2 /= np.linalg.norm(w2)
    p1, c1 = rng.standard_normal(4), 0.7  # released values of component 1: public from then on
    centre = np.array([0.1, -0.2, 0.0, 0.3])

    def rows(D):
        return clip_x(D[0], centre, CX), clip_y(D[1], 0.5, CY)

    def deflated(D):
        return iterative_deflate(*rows(D), w1, p1, c1, CX, CY)

    plan = DPPLS(2, mode="certified_iterative", bound_x=CX, bound_y=CY, budget=Budget(1.0, 1e-5)).plan(12, 4)
    for a, source, w in ((1, rows, w1), (2, deflated, w2)):
        probe(lambda D, source=source: weight_statistic(*source(D)), plan.specs[f"u_{a}"].sensitivity.value)
        for name in ("g", "h", "r"):
            probe(lambda D, name=name, source=source, w=w: iterative_statistics(*source(D), w)[name], plan.specs[f"{name}_{a}"].sensitivity.value)
    assert plan.specs["u_1"].sensitivity.value == CX * CY and plan.specs["g_2"].sensitivity.value == CX * CX


def test_probe_dp_msc_reference():
    X, _ = base_data()
    pairs = [((np.vstack([X, row[None]]), None), (X, None)) for row in
             [np.zeros(4), CX * np.eye(4)[0], -10 * CX * np.ones(4), np.full(4, CX / 2)]]
    assert probe(lambda D: clipped_sum(D[0], np.full(4, 0.2), CX), CX, pairs=pairs) > 0.99
    assert probe(lambda D: np.array([float(len(D[0]))]), 1.0, pairs=pairs) == 1.0


# ==================================================================================================
# the canary audit of spec §6.7 (O-20): the paper mode fails, the certified modes pass
# ==================================================================================================
def canary_pair():
    rng = np.random.default_rng(2)
    X = 0.01 * rng.standard_normal((50, 20))
    y = X @ rng.standard_normal(20) + 0.001 * rng.standard_normal(50)
    return add_record_pair(X, y, 50.0 * np.eye(20)[0], float(y.mean()))  # D = D' + canary, D'


def weight_cosine(reference_weight: np.ndarray):
    """|cos(w~_1, w(D'))|: larger without the canary; threshold 0.9 fixed in advance."""
    return lambda outputs: np.array([abs(o @ reference_weight) / np.linalg.norm(o) for o in outputs])


@pytest.fixture(scope="module")
def canary():
    with_canary, without = canary_pair()
    w_ref = core.nipals_pls1(*without, 1).weights[:, 0]
    assert np.allclose(core.nipals_pls1(*with_canary, 1).weights[:, 0], w_ref)  # y* = mean(y): w does not move
    return with_canary, without, w_ref


def test_paper_mode_fails_the_canary_audit(canary):
    with_canary, without, w_ref = canary
    report = DPPLS(1, mode="paper", budget=Budget(1.0, 0.01), allow_uncertified=True, random_state=0).fit(*without).privacy_report_
    claim = ApproxDP(report.spent[0], 0.01)  # the composed claim of the 4 releases, 2.52
    assert claim.epsilon == pytest.approx(2.523, abs=0.01)

    def fit(D, rng):
        return DPPLS(1, mode="paper", budget=Budget(1.0, 0.01), allow_uncertified=True, random_state=rng).fit(*D).x_weights_[:, 0]

    result = audit(fit, with_canary, without, claim=claim, statistic=weight_cosine(w_ref), threshold=0.9, samples=250,
                   alpha=ALPHA, seed=1)
    assert not result.passed, result.summary()
    assert result.epsilon_lower > 3.0  # perfectly distinguishable: limited only by the sample size (3.5 with no error in 250)


@pytest.mark.parametrize("mode", ["certified", "certified_iterative"])
def test_certified_modes_pass_the_canary_audit(canary, mode):
    with_canary, without, w_ref = canary
    # the audit observes the first PLS weight of the release (shrinkage="none": the default may drop the component,
    # post-processing that cannot add to the privacy loss)
    kw = dict(mode=mode, bound_x=1.0, bound_y=1.0, budget=Budget(1.0, 0.01), diagnose_noise=False, shrinkage="none")
    report = DPPLS(1, random_state=0, **kw).fit(*without).privacy_report_
    assert report.status == "certified" and report.spent[0] <= 1.0 + 1e-9
    claim = claim_from_report(report)

    def fit(D, rng):
        return DPPLS(1, random_state=rng, **kw).fit(*D).x_weights_[:, 0]

    result = audit(fit, with_canary, without, claim=claim, statistic=weight_cosine(w_ref), threshold=0.9, samples=150,
                   alpha=ALPHA, seed=2)
    assert result.passed, result.summary()


# ==================================================================================================
# tight audits of the certified releases: the record moves every release by its full sensitivity
# ==================================================================================================
class HalvedNoiseRun(Run):
    """Mutant: every node draws half its calibrated noise (the claim is unchanged)."""

    def _spec_for(self, name, sensitivity):
        return super()._spec_for(name, sensitivity).scaled(0.5)


class RecordingRun(Run):
    """Keeps the released values of the last run (instrumentation; the algorithm is unchanged)."""

    last: ClassVar[dict] = {}

    def __exit__(self, *exc):
        RecordingRun.last = dict(self.outputs)
        return super().__exit__(*exc)


class HalvedRecordingRun(HalvedNoiseRun, RecordingRun):
    pass


def tight_pair():
    X, y = base_data(n=30, m=3, seed=3)
    X = 0.5 * X  # inside the ball of radius CX
    return add_record_pair(X, y, CX * np.eye(3)[0], CY)[::-1]  # (D', D' + record): larger statistic with the record


AUD_BUDGET = Budget(4.4, 1e-5)  # mu ~ 1


def test_ssp_releases_pass_a_tight_audit_and_the_halved_noise_mutant_fails(monkeypatch):
    D0, D1 = tight_pair()
    # the releases only: no diagnostic and no shrinkage (its parametric bootstrap is post-processing the audit does not
    # read; the releases and the random stream they consume are the same with it or without it)
    kw = dict(bound_x=CX, bound_y=CY, budget=AUD_BUDGET, diagnose_noise=False, shrinkage="none")
    report = DPPLS(1, random_state=0, **kw).fit(*D0).privacy_report_
    claim = claim_from_report(report)
    assert isinstance(claim, GDP) and 0.8 < claim.mu < 1.5
    scale = {n.name: n.noise_scale for n in report.nodes}
    iu = np.triu_indices(3)

    def whiten(stats):
        return np.concatenate([stats["xtx"][iu] / scale["xtx"], stats["xty"] / scale["xty"], stats["count"] / scale["count"],
                               stats["x_sum"] / scale["x_sum"], stats["y_sum"] / scale["y_sum"]])

    def fit(budget):
        return lambda D, rng: whiten(DPPLS(1, random_state=rng, **{**kw, "budget": budget}).fit(*D).statistics_)

    reference = lambda D: fit(Budget.infinite())(D, None)  # noqa: E731
    shift = np.linalg.norm(reference(D1) - reference(D0))
    assert shift == pytest.approx(claim.mu, rel=1e-6)  # the pair is worst case: every release moves by its sensitivity
    ok = audit_estimator(fit(AUD_BUDGET), D0, D1, reference=reference, claim=claim, samples=50, alpha=ALPHA, seed=4)
    assert ok.passed, ok.summary()
    monkeypatch.setattr(pls_module, "Run", HalvedNoiseRun)
    bad = audit_estimator(fit(AUD_BUDGET), D0, D1, reference=reference, claim=claim, samples=250, alpha=ALPHA, seed=5)
    assert not bad.passed, bad.summary()


def test_iterative_first_release_passes_a_tight_audit_and_the_mutant_fails(monkeypatch):
    D0, D1 = tight_pair()
    kw = dict(mode="certified_iterative", bound_x=CX, bound_y=CY, centering="public", budget=Budget(9.7, 1e-5))  # mu(u_1) ~ 1
    report = DPPLS(1, random_state=0, **kw).fit(*D0).privacy_report_
    node = {n.name: n for n in report.nodes}["u_1"]
    claim = GDP.gaussian(node.noise_multiplier, 1e-5)
    assert 0.8 < claim.mu < 1.5

    def fit(D, rng):
        DPPLS(1, random_state=rng, **kw).fit(*D)
        return RecordingRun.last["u_1"] / node.noise_scale

    monkeypatch.setattr(pls_module, "Run", RecordingRun)
    free = lambda D: DPPLS(1, **{**kw, "budget": Budget.infinite()}).fit(*D) and RecordingRun.last["u_1"] / node.noise_scale  # noqa: E731
    assert np.linalg.norm(free(D1) - free(D0)) == pytest.approx(claim.mu, rel=1e-9)
    ok = audit_estimator(fit, D0, D1, reference=free, claim=claim, samples=50, alpha=ALPHA, seed=6)
    assert ok.passed, ok.summary()
    monkeypatch.setattr(pls_module, "Run", HalvedRecordingRun)
    bad = audit_estimator(fit, D0, D1, reference=free, claim=claim, samples=250, alpha=ALPHA, seed=7)
    assert not bad.passed, bad.summary()


# ==================================================================================================
# the reconstruction attack (Algorithm K, O-19)
# ==================================================================================================
def test_noise_free_attack_always_hits():
    for shape in ("pdf", "height"):
        h = two_holders(seed=11, shape=shape)
        X, y = np.vstack([h.X1, h.X2]), np.r_[h.y1, h.y2]
        model = core.nipals_pls1(X, y, 3)
        for use, G in (("weights", model.weights), ("loadings", model.loadings)):
            r12 = reconstruction_attack(G, h.X1, h.y1, target_index=30, use=use, unique_signal=h.signals["s4"])
            r21 = reconstruction_attack(G, h.X2, h.y2, target_index=40, use=use, unique_signal=h.signals["s3"])
            assert r12.peak_index == 30 and r21.peak_index == 40 and r12.cosine > 0.999 and r21.cosine > 0.999


def attack_hits(make, eps: float, uses: tuple[str, ...], seeds: range) -> dict[str, float]:
    """The attack's hit rate per use (weights, loadings) of one fit per seed."""
    results: dict[str, list] = {use: [] for use in uses}
    for seed in seeds:
        h = two_holders(seed=seed)
        est = make(eps, seed).fit(np.vstack([h.X1, h.X2]), np.r_[h.y1, h.y2])
        for use in uses:
            G = est.x_weights_ if use == "weights" else est.x_loadings_
            results[use].append(reconstruction_attack(G, h.X1, h.y1, target_index=30, use=use))
    return {use: hit_rate(r) for use, r in results.items()}


def paper_model(eps: float, seed: int) -> DPPLS:
    return DPPLS(3, mode="paper", budget=Budget(eps, 0.01), allow_uncertified=True, random_state=seed)


def certified_model(eps: float, seed: int) -> DPPLS:
    # public bounds of the simulation model: concentrations in [0, 10), so ||x|| <= 10 sum_k ||s_k|| = 30.4; y in [0, 10)
    # shrinkage="none": the attack reads all three components of the release (the default may drop them)
    return DPPLS(3, bound_x=30.5, bound_y=5.0, y_center=5.0, budget=Budget(eps, 0.01), random_state=seed, diagnose_noise=False,
                 shrinkage="none")


def test_attack_on_the_paper_mode_succeeds_at_eps_100_and_is_blunted_at_eps_1():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert attack_hits(paper_model, 100.0, ("loadings",), range(50))["loadings"] >= 0.9
        assert attack_hits(paper_model, 1.0, ("loadings",), range(50))["loadings"] <= 0.4


def test_certified_release_defeats_the_attack_where_the_paper_mode_fails_to_protect():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hits = attack_hits(certified_model, 100.0, ("weights", "loadings"), range(30))  # one fit per seed, both attacks
        assert hits["weights"] <= 0.2 and hits["loadings"] <= 0.2, hits  # chance: 5/100


# ==================================================================================================
# utility trends (O-6, O-18)
# ==================================================================================================
def relative_errors(make, eps_grid, X, y, A, seeds) -> dict[float, float]:
    b = core.nipals_pls1(X, y, A).coef
    out = {}
    for eps in eps_grid:
        errs = [np.linalg.norm(make(eps, s).fit(X, y).coef_ - b) / np.linalg.norm(b) for s in seeds]
        out[eps] = float(np.median(errs))
    return out


def test_certified_error_falls_with_epsilon():
    rng = np.random.default_rng(12)
    X = rng.uniform(-1, 1, (5000, 8))
    y = X @ rng.standard_normal(8) + 0.1 * rng.standard_normal(5000)
    for mode in ("certified", "certified_iterative"):
        def make(eps, s, mode=mode):
            return DPPLS(3, mode=mode, bound_x=3.0, bound_y=8.0, budget=Budget(eps, 1e-6), random_state=s)
        err = relative_errors(make, (1.0, 10.0, 100.0, 1000.0), X, y, 3, range(8))
        assert err[1.0] > err[10.0] > err[100.0] > err[1000.0], err
        assert err[1000.0] < 0.01


def test_paper_mode_converges_slowly_on_corn():
    """O-6: raw corn, 10 LVs: the median relative error falls roughly 10x per 100x of eps (spec: 2.1e-2 at
    1e4, 2.1e-3 at 1e6)."""
    corn = load_corn()
    err = relative_errors(lambda eps, s: DPPLS(10, mode="paper", budget=Budget(eps, 0.01), allow_uncertified=True, random_state=s),
                          (1e3, 1e4, 1e5, 1e6), corn.X, corn.y, 10, range(10))
    assert 0.005 < err[1e4] < 0.08 and 0.0005 < err[1e6] < 0.008, err
    for lo, hi in ((1e3, 1e4), (1e4, 1e5), (1e5, 1e6)):
        assert 2.0 < err[lo] / err[hi] < 6.0, err  # sqrt(10) per 10x
