"""Secure horizontal fits (``privsdr.federated.SecureSites``, issue 34 item 4): AdaSSP's certified default, DPPLS S2 and
DPMeanCovariance as the secure sum of K sites' block sums.

Most tests run the party program in this process (``privsdr.audit.secure_probe.run_in_process``: the parties' own
input and computation, without MPC processes); two start real MPyC processes (loopback, bounded, ended)."""
from __future__ import annotations

import functools
import math

import attrs
import numpy as np
import pytest
from conftest import gone

from privsdr import DPPLS, AdaSSPRegression, Budget, DPMeanCovariance, Ledger
from privsdr.audit import probe_sensitivity
from privsdr.audit.secure_probe import in_process as stand_in
from privsdr.audit.secure_probe import opened_sensitivity, run_in_process, share_counts, zero_shares
from privsdr.errors import ValidationError
from privsdr.federated import SecureSites
from privsdr.secure import aggregate

BX, BY = 4.0, 6.0
MECHANISM = {"xtx": "symmetric_gaussian", "second_moment": "symmetric_gaussian"}


def _data(n=300, p=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X @ np.linspace(1.0, -0.5, p) + 0.3 * rng.normal(size=n) + 1.0
    cuts = [0, n // 3, n // 3 + n // 4, n]
    return X, y, [(X[a:b], y[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


CELLS = {
    "adassp": (lambda b, led=None: AdaSSPRegression(bound_x=BX, bound_y=BY, budget=b, ledger=led, random_state=0),
               ("coef_", "intercept_")),
    "dppls": (lambda b, led=None: DPPLS(2, bound_x=BX, bound_y=BY, budget=b, ledger=led, random_state=0), ("coef_", "intercept_", "x_weights_")),
    "mean_covariance": (lambda b, led=None: DPMeanCovariance(3.0, budget=b, ledger=led, random_state=0), ("mean_", "covariance_")),
}


@pytest.fixture
def in_process(monkeypatch):
    """Every secure release runs the party program in this process (real shares unless a test draws them as 0)."""
    seen: list[dict] = []

    def run(job, inputs, share=None, **kw):
        seen.append({"job": job, "inputs": inputs})
        return run_in_process(job, inputs, share=share, **kw)

    stand_in(monkeypatch.setattr, run)
    return seen


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_noise_off_each_cell_is_the_estimator_on_the_pooled_rows(monkeypatch, cell):
    """Noise off, the secure sum over three sites of unequal size gives the estimator's own fit on the concatenated rows
    (up to the public grid's rounding), and the opened sums are the pooled statistics."""
    stand_in(monkeypatch.setattr, functools.partial(run_in_process, share=zero_shares))
    make, attributes = CELLS[cell]
    X, y, sites = _data()
    pooled = make(Budget.infinite()).fit(X, y)
    secure = SecureSites(make(Budget.infinite()), colluders=1).fit(sites)
    for name in attributes:
        np.testing.assert_allclose(getattr(secure, name), getattr(pooled, name), rtol=1e-3, atol=1e-3, err_msg=name)
    assert secure.released_.source == "secure sum over sites"
    if cell != "mean_covariance":
        assert secure.released_.n == 0  # add/remove: N is not public, the count is a release
        np.testing.assert_allclose(secure.released_["count"], [len(y)], atol=1e-3)
        rounding = len(sites) * secure.released_.grid["xtx"] / 2  # each site rounds its sum to the public grid
        np.testing.assert_allclose(secure.released_["xtx"], pooled.released_["xtx"] if cell == "adassp" else pooled.statistics_["xtx"],
                                   rtol=0, atol=rounding)


def _extremes(p: int, bound: float) -> list[np.ndarray]:
    eye = np.eye(p)
    return [bound * eye[0], -bound * np.ones(p) / np.sqrt(p), 10.0 * bound * eye[-1]]


@pytest.mark.filterwarnings("ignore::privsdr.errors.NoiseDominatesWarning")
@pytest.mark.parametrize("cell", ["adassp", "mean_covariance"])
def test_the_opened_sums_stay_within_their_declared_sensitivities_on_extreme_neighbours(in_process, monkeypatch, cell):
    """The noise-free opening (every share drawn as 0, the grid of a real budget) of neighbouring site data: AdaSSP one
    extreme row added to site 1 (add/remove), mean-covariance site 1's row 0 replaced (replace-one, N public). Its
    change stays within each node's declared sensitivity (plus the rounding), and comes close to it (not vacuous)."""
    stand_in(monkeypatch.setattr, functools.partial(run_in_process, share=zero_shares))
    make, _ = CELLS[cell]
    _, _, sites = _data(n=30, seed=1)
    p = sites[0][0].shape[1]
    variants = [sites]
    for row in _extremes(p, BX if cell == "adassp" else 3.0):
        for label in (BY, -10.0 * BY):
            changed = [(X.copy(), y.copy()) for X, y in sites]
            if cell == "adassp":
                changed[1] = (np.vstack([changed[1][0], row]), np.append(changed[1][1], label))
            else:
                changed[1][0][0] = row
            variants.append(changed)
    fits = [SecureSites(make(Budget(1.0, 1e-6), Ledger(Budget(100.0, 1e-3)))).fit(v) for v in variants]
    specs = fits[0].plan_.specs
    pairs = [(0, i) for i in range(1, len(fits))] if cell == "adassp" else [(a, b) for a in range(len(fits)) for b in range(a + 1, len(fits))]
    for node in specs:
        sens = opened_sensitivity(specs[node])
        result = probe_sensitivity(lambda i, node=node: fits[i].released_[node], pairs, sens, mechanism=MECHANISM.get(node, "gaussian"))
        assert result.passed, (node, result.summary())
        assert result.max_change >= 0.6 * sens.value, (node, result.summary())


@pytest.mark.filterwarnings("ignore::privsdr.errors.NoiseDominatesWarning")
def test_every_site_adds_exactly_one_noise_share_and_the_calibration_counts_them(in_process):
    """Marked shares (``share_counts``): the opening holds one share of each of the K sites the calibration counted
    (K - t honest) and none of the server; a site that sent its unnoised sum, or a calibration for more shares than
    the sites add (each share then too small), fails here."""
    _, _, sites = _data(n=60)
    est = SecureSites(CELLS["adassp"][0](Budget(1.0, 1e-6)), colluders=1).fit(sites)
    job, inputs = in_process[-1]["job"], in_process[-1]["inputs"]
    counts = share_counts(job, inputs)
    assert job.parties == ("server", "site-0", "site-1", "site-2")
    assert np.all(counts[0] == 0)
    assert np.all(counts[1:] == 1)
    for name, spec in est.plan_.specs.items():
        assert int(spec.params["parties"]) == len(sites) and int(spec.params["colluders"]) == 1, name
        assert spec.mechanism.startswith("distributed_"), name
    # what the parties draw meets the calibration: the K - t honest shares alone have variance >= (z (Delta / gamma +
    # ceil(sqrt(d))))^2 in grid steps (a halved share variance fails here)
    honest = len(sites) - 1
    for node in job.nodes:
        spec = est.plan_.specs[node.name]
        needed = spec.noise_multiplier * (spec.sensitivity.value / node.gamma + math.isqrt(node.dimension - 1) + 1)
        assert honest * node.sigma_local2[0] / node.sigma_local2[1] >= needed**2 * (1 - 1e-9), node.name


@pytest.mark.filterwarnings("ignore::privsdr.errors.NoiseDominatesWarning")
def test_no_part_of_an_add_remove_report_but_its_noisy_diagnostics_depends_on_N(in_process):
    """Under add/remove N is not public: sites of 100 and of 1000 rows each give the same report (plan, trust model,
    field size, notes) but for the run's id, its timestamps and the diagnostics read off the noisy release."""
    X, y, _ = _data(n=3000)
    reports = []
    for n in (300, 3000):
        cuts = np.array_split(np.arange(n), 3)
        est = SecureSites(CELLS["adassp"][0](Budget(1.0, 1e-6))).fit([(X[i], y[i]) for i in cuts])
        reports.append({k: v for k, v in est.privacy_report_.to_dict().items() if k not in ("run_id", "timestamps", "diagnostics")})
    assert reports[0] == reports[1]
    jobs = [attrs.evolve(seen["job"], addresses=()) for seen in in_process]  # the ports are free ones, picked per run
    assert jobs[0].digest() == jobs[1].digest()  # the public job the parties agree on (bounds, grids, field) too


def _bad(case: str):
    X, y, sites = _data(n=60)
    make = CELLS["adassp"][0]
    if case == "nan":
        bad = sites[1][0].copy()
        bad[0, 0] = np.nan
        return make, [sites[0], (bad, sites[1][1]), sites[2]], {}
    if case == "width":
        return make, [sites[0], (sites[1][0][:, :2], sites[1][1]), sites[2]], {}
    if case == "one_site":
        return make, [(X, y)], {}
    if case == "colluders":
        return make, sites, {"colluders": 2}
    if case == "max_rows":
        return make, sites, {"max_rows": 10}
    if case == "lambda_min":
        return (lambda b, led: AdaSSPRegression(bound_x=BX, bound_y=BY, shrinkage="none", budget=b, ledger=led)), sites, {}
    if case == "dppls_iterative":
        return (lambda b, led: DPPLS(1, bound_x=BX, bound_y=BY, mode="certified_iterative", budget=b, ledger=led)), sites, {}
    return (lambda b, led: DPMeanCovariance(3.0, calibration="classical", budget=b, ledger=led)), sites, {}


@pytest.mark.parametrize("case", ["nan", "width", "one_site", "colluders", "max_rows", "lambda_min", "dppls_iterative", "calibration"])
def test_bad_input_is_refused_before_anything_is_charged(in_process, case):
    make, sites, kw = _bad(case)
    ledger = Ledger(Budget(10.0, 1e-5))
    est = make(Budget(1.0, 1e-6), ledger)
    with pytest.raises(ValidationError):
        SecureSites(est, **kw).fit(sites)
    assert ledger.spent.epsilon == 0.0 and not ledger.charges
    assert not in_process  # no party ran
    assert not hasattr(est, "privacy_report_")


# -- real MPyC processes ----------------------------------------------------------------------------------------------
def test_a_real_secure_adassp_fit_is_charged_once_and_its_trust_model_is_what_the_processes_received(monkeypatch):
    """Four real party processes (three sites and the server): the fit is charged its budget once, for all N rows; the
    report is CERTIFIED with the secure trust model, and every party's sentence is ``describe`` of what its process
    recorded receiving (the server: shares of every site's vector, no data of its own)."""
    pytest.importorskip("mpyc")
    from test_secure_views import recorded_view

    from privsdr.secure.launch import Parties
    from privsdr.secure.trust import describe

    runs = []

    class Recording(Parties):  # the real processes, each recording what it receives
        def finish(self, charge=None):
            opened = super().finish(charge)
            runs.append((self.job, opened))
            return opened

    monkeypatch.setattr(aggregate, "start_parties", lambda job, inputs, *, certificates=None, record_view=False:
                        Recording(job, inputs, job.parties, certificates=certificates, record_view=True))
    X, y, sites = _data(n=3000)
    ledger = Ledger(Budget(1.0, 1e-6))  # exactly the fit's budget: charged once, for all N rows
    est = SecureSites(CELLS["adassp"][0](Budget(1.0, 1e-6), ledger), colluders=1, timeout=60.0).fit(sites)
    job, opened = runs[0]
    assert gone(opened.pids)
    assert ledger.spent.epsilon == pytest.approx(1.0, rel=1e-3)
    report = est.privacy_report_
    assert report.status_line.startswith("CERTIFIED (secure aggregation, <= 1 colluding parties)")
    seen = report.trust_model["what_each_party_sees"]
    for party in job.parties:
        assert seen[party] == describe(job, party, recorded_view(job, party, opened)), party
    assert "Shamir shares (uniformly random field elements) of site-0's vector" in seen["server"]
    assert "nothing of its own" in seen["server"]
    assert est.score(X, y) > 0.8  # 3000 rows at epsilon = 1: the fit is useful


def test_a_real_noise_off_secure_dppls_fit_is_the_pooled_fit():
    """Real processes, noise off: DPPLS S2 over three sites equals DPPLS on the pooled rows."""
    pytest.importorskip("mpyc")
    X, y, sites = _data(n=120)
    make, attributes = CELLS["dppls"]
    pooled = make(Budget.infinite()).fit(X, y)
    secure = SecureSites(make(Budget.infinite()), colluders=1, timeout=60.0).fit(sites)
    for name in attributes:
        np.testing.assert_allclose(getattr(secure, name), getattr(pooled, name), rtol=1e-3, atol=1e-3, err_msg=name)
