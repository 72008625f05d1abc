"""SecureVerticalRegression (issue 23): X^T X and X^T y of vertically partitioned columns computed inside MPyC (real
party processes on 127.0.0.1, started and ended by the tests), the central calibration, what each party sees,
bad input and failures.

The noise-off fits, the views, the noise shares, the charge and the timeout start real party processes: they show that
the processes open exactly the integer Gram of the rounded columns, plus every party's share. The tests of what happens
before the opening (each party's clipping and rounding, in the launcher) and after it (PLS, the fallback, the
sensitivity of the opened sums) run the party program in this process (``parties_here``: the parties' own input and
computation on plain integers, ``privsdr.audit.secure_probe``), which opens that same sum."""
from __future__ import annotations

import functools
import math
import warnings

import attrs
import numpy as np
import pytest
from conftest import gone
from scipy import stats
from sklearn.base import clone
from sklearn.cross_decomposition import PLSRegression

from privsdr import Budget, Chunks, Ledger, SecureVerticalRegression, ValidationError, load_model
from privsdr.audit import GDP, audit_estimator
from privsdr.audit.secure_probe import in_process, run_in_process
from privsdr.parties.layout import Layout, PartyInfo
from privsdr.secure import SecureAggregationError
from privsdr.secure.aggregate import node_job
from privsdr.secure.crossproducts import grid_exponent, label_vector, party_block
from privsdr.secure.job import AggregationJob, NodeJob
from privsdr.secure.launch import run_parties
from privsdr.secure.party import with_shares
from privsdr.vertical import Party
from privsdr.vertical.secure_regression import gram_layout, label_scale

pytest.importorskip("mpyc")

ALPHA = 1e-3


def data(n=400, widths=(3, 2), seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, sum(widths))) * 0.4
    y = X @ np.linspace(1.0, -1.0, X.shape[1]) + 0.2 * rng.normal(size=n) + 0.7
    return np.split(X, np.cumsum(widths)[:-1], axis=1), y


def exact(**kw):
    return SecureVerticalRegression(**{"row_bound": 20.0, "label_bound": 50.0, "budget": Budget.infinite(), "timeout": 60.0, **kw})


@pytest.fixture
def parties_here(monkeypatch):
    """Every secure release runs the party program in this process (module docstring; real noise shares)."""
    in_process(monkeypatch.setattr, run_in_process)


# -- noise off: the pooled least-squares fit -----------------------------------------------------------------------
@pytest.mark.parametrize("widths", [(3, 2), (2, 2, 2)])
def test_noise_off_it_is_pooled_ols_to_the_fixed_point_resolution_for_two_and_three_parties(widths):
    blocks, y = data(widths=widths)
    est = exact().fit(blocks, y)
    X = np.hstack(blocks)
    theta = np.linalg.lstsq(np.column_stack([X, np.ones(len(y))]), y, rcond=None)[0]
    assert np.allclose(est.coef_, theta[:-1], atol=1e-3) and est.intercept_ == pytest.approx(theta[-1], abs=1e-3)
    assert est.ridge_ == 0.0 and est.privacy_report_.status == "none"
    assert est.parties_ == (["helper", "party0", "party1"] if len(widths) == 2 else ["party0", "party1", "party2"])
    # the opened statistics are exactly the integer Gram of the rounded columns (the secure products lose nothing)
    e = est.privacy_report_.public_parameters["grid_exponent"]
    C = 20.0 * math.sqrt(len(widths))  # the label bound 50 is rescaled by a public power of two to within sqrt(2) of C
    assert e == grid_exponent(2**24, max(C, 50.0 * label_scale(C, 50.0)), len(est.parties_))  # public bounds and max_rows, never N
    Q = np.column_stack([party_block(b, 20.0, e) for b in blocks] + [np.full(len(y), math.floor(20.0 * math.sqrt(len(widths)) / 2.0**e))])
    gram = np.array(Q.astype(object).T @ Q.astype(object), dtype=float) * 4.0**e
    assert np.array_equal(est.released_["xtx"], gram)
    cost = est.secure_cost_
    assert set(cost["bytes_sent"]) == set(est.parties_) and cost["seconds"] > 0 and cost["field_bits"] <= 62


def test_noise_off_with_components_it_is_pls_on_the_pooled_rows(tmp_path, parties_here):
    blocks, y = data()
    X = np.hstack(blocks)
    est = exact(n_components=2).fit(blocks, y)
    reference = PLSRegression(2, scale=False).fit(X, y)
    assert np.allclose(est.predict(X), reference.predict(X).ravel(), atol=2e-3)
    est.save(tmp_path / "model.json")  # a fitted model is kept without pickle and predicts the same after loading
    assert np.array_equal(load_model(tmp_path / "model.json").predict(X), est.predict(X))


def test_with_components_a_release_that_is_noise_gives_the_dp_mean_and_warns(parties_here):
    """Issue 24: DPPLS's rule on the secure release. At n = 200 and eps = 0.1 the centred X^T y cannot be told from
    its noise: every slope is 0, the prediction is the DP mean of y the constant column carries, and the fit warns."""
    from privsdr import NoiseDominatesWarning

    blocks, y = data(n=200)
    with pytest.warns(NoiseDominatesWarning):
        est = SecureVerticalRegression(row_bound=2.0, label_bound=3.0, n_components=2, budget=Budget(0.1, 1e-6), timeout=60.0,
                                       random_state=0).fit(blocks, y)
    assert est.shrinkage_factor_ == 0.0 and np.all(est.coef_ == 0.0)
    assert np.allclose(est.predict(np.hstack(blocks)), est.intercept_) and abs(est.intercept_) <= 3.0  # the clamped DP mean


def test_rows_beyond_a_partys_bound_are_clipped_by_that_party_never_refused(parties_here):
    blocks, y = data(n=200)
    blocks[1][:5] *= 1e4  # five rows far beyond party1's bound
    y = y.copy()
    y[:3] = 1e6
    est = exact(row_bound={"party0": 20.0, "party1": 1.0}, label_bound=3.0).fit(blocks, y)
    clipped = [blocks[0], blocks[1] * np.minimum(1.0, 1.0 / np.linalg.norm(blocks[1], axis=1))[:, None]]
    Z = np.column_stack([*clipped, np.ones(len(y))])
    theta = np.linalg.lstsq(Z, np.clip(y, -3.0, 3.0), rcond=None)[0]
    assert np.allclose(est.coef_, theta[:-1], atol=2e-3)


def test_parties_reading_their_rows_as_chunks_open_what_their_arrays_open(parties_here):
    """Issue 34: a ``Chunks`` party (the label holder too) is checked in a first pass and streamed after the charge;
    the opened statistics are exactly those of the same rows as arrays."""
    blocks, y = data(n=300)

    def chunks(block):
        return Chunks(lambda: (block[i:i + 70] for i in range(0, len(block), 70)), n_rows=len(block), n_features=block.shape[1])

    whole = exact(n_components=1).fit([Party("party0", blocks[0], y), Party("party1", blocks[1])])
    chunked = exact(n_components=1).fit([Party("party0", chunks(blocks[0]), y), Party("party1", chunks(blocks[1]))])
    for name in ("xtx", "xty"):
        assert np.array_equal(whole.released_[name], chunked.released_[name]), name
    assert np.array_equal(whole.coef_, chunked.coef_) and whole.intercept_ == chunked.intercept_


def test_a_chunks_party_is_held_to_its_public_shape_before_anything_is_charged(tmp_path):
    blocks, y = data(n=200)
    journal = tmp_path / "budget.jsonl"
    ledger = Ledger(Budget(1.0, 1e-6), journal=journal)
    est = SecureVerticalRegression(row_bound=1.0, label_bound=2.0, budget=Budget(1.0, 1e-6), ledger=ledger)
    cases = [(Chunks([blocks[1][:150]], n_rows=200, n_features=2), "declared n_rows"),
             (Chunks([blocks[1]]), "n_rows and n_features"),
             (Chunks([blocks[1][:, :1]], n_rows=200, n_features=2), "columns")]
    for rows, match in cases:
        with pytest.raises(ValidationError, match=match):
            est.fit([Party("party0", blocks[0], y), Party("party1", rows)])
    assert ledger.spent.epsilon == 0.0 and not Ledger.open(journal).charges
    # one party's own run (``fit_party``) holds its Chunks to the public layout's rows and columns alike
    layout = Layout(200, (PartyInfo("party0", 3, True), PartyInfo("party1", 2)))
    assert est._own_data(layout, "party1", Party("party1", Chunks([blocks[1]], n_rows=200, n_features=2))).X.n_rows == 200
    with pytest.raises(ValidationError, match="must hold 200 rows and 2 columns"):
        est._own_data(layout, "party1", Party("party1", Chunks([blocks[1]], n_rows=199, n_features=2)))


def test_the_fixed_point_grid_keeps_every_sum_inside_the_field_up_to_max_rows():
    e = grid_exponent(2**24, 5.0, 3)
    assert 3 * 2**24 * (5.0 / 2.0**e) ** 2 <= 2.0**54 < 3 * 2**24 * (5.0 / 2.0 ** (e - 1)) ** 2  # the finest grid that fits
    Q = party_block(np.array([[1e9, -1e9, 3.0]]), 5.0, e)
    assert np.linalg.norm(Q * 2.0**e) <= 5.0  # clipped, then rounded, still within the bound
    assert np.abs(label_vector(np.array([-1e9]), 2.0, e) * 2.0**e).max() <= 2.0


# -- privacy: the declared sensitivity holds for the parties' computation; the opened noise passes its audit --------
KW = dict(row_bound=1.0, label_bound=2.0, fit_intercept=False, diagnose_noise=False)


def test_one_added_row_moves_the_opened_statistics_by_at_most_the_declared_sensitivity(parties_here):
    """Parties of 2 and 1 columns with bound 1 each (C = sqrt(2)): the added row is clipped to (a, a | 1) with
    a = 1/sqrt(2) - its rounding room, then rounded: it must stay within the declared sensitivities (a party that
    clipped to its bound and then rounded could land above it), and z y moves by ||z|| C_y = 2 sqrt(2), the
    declaration itself."""
    rng = np.random.default_rng(3)
    X0, y0 = rng.uniform(-0.5, 0.5, (30, 3)), rng.uniform(-1.0, 1.0, 30)
    X1, y1 = np.vstack([X0, [1e3, 1e3, 1e3]]), np.r_[y0, 50.0]
    fits = [SecureVerticalRegression(**KW, budget=Budget.infinite()).fit([X[:, :2], X[:, 2:]], y) for X, y in ((X0, y0), (X1, y1))]
    plan = SecureVerticalRegression(**KW, budget=Budget(1.0, 1e-6)).build_plan({"party0": 2, "party1": 1})
    for name, expected in (("xtx", math.sqrt(2.75)), ("xty", 2.0 * math.sqrt(2.0))):  # upper triangle of z z^T: 3/4 + 1 + 1
        change = fits[1].released_[name] - fits[0].released_[name]
        if name == "xtx":
            change = change[np.triu_indices(3)]
        norm = float(np.linalg.norm(change))
        assert norm <= plan.nodes[name].sensitivity.value  # rounding included: never above the declaration
        assert norm == pytest.approx(expected, rel=1e-3)


def tight_pair():
    """D0: two parties of one column each; D1 adds a row far beyond both bounds (clipped to them) and |y| at its bound."""
    rng = np.random.default_rng(3)
    X0 = rng.uniform(-0.5, 0.5, (30, 2))
    y0 = rng.uniform(-1.0, 1.0, 30)
    return (X0, y0), (np.vstack([X0, [1e3, 1e3]]), np.r_[y0, 50.0])


AUDIT_BUDGET = Budget(8.0, 1e-5)


@functools.cache
def audit_job(n, noise_scale=1.0):
    """The public side of ``simulated_opened`` for n rows: the grid exponent, the job whose nodes carry the
    calibrated share variances (times 1 / noise_scale^2) and the public opened sds. It is a function of public
    parameters only, so it is computed once per (n, noise_scale), not once per audit sample."""
    est = SecureVerticalRegression(**KW, budget=AUDIT_BUDGET)
    plan = est.plan({"party0": 1, "party1": 1})
    c = est._checked(["party0", "party1"], [1, 1])
    e = c["exponent"]
    products = gram_layout(n, [("party0", 1), ("party1", 1)], "party0", e, 0)
    nodes = tuple(node_job(plan, name, 256.0) for name in ("xtx", "xty"))
    sds = [math.sqrt(3 * n.variance) for n in nodes]  # three shares of sigma_local^2 each, in grid steps
    scaled = tuple(attrs.evolve(n, sigma_local2=(n.sigma_local2[0], n.sigma_local2[1] * round(1 / noise_scale**2))) for n in nodes)
    return e, AggregationJob(c["parties"], c["parties"], 1, scaled, 60.0, products), sds


def simulated_opened(D, noise_scale=1.0, noise=True):
    """The opened vector as the parties compute it: each party's ``with_shares`` (the code the party processes run)
    on its statistics, summed (the secure sum is exact: the noise-off tests); whitened by the public opened sds."""
    X, y = D
    e, job, sds = audit_job(len(y), noise_scale)
    Z = np.column_stack([party_block(X[:, :1], 1.0, e), party_block(X[:, 1:], 1.0, e)]).astype(object)
    yq = label_vector(y, 2.0, e).astype(object)
    plain = np.concatenate([(Z.T @ Z)[np.triu_indices(2)], Z.T @ yq]).astype(np.int64)
    total = plain
    if noise:
        total = with_shares(job, plain) + sum(with_shares(job, np.zeros_like(plain)) for _ in job.parties[1:])
    return np.concatenate([total[:3] / sds[0], total[3:] / sds[1]]).astype(float)


def test_the_opened_statistics_pass_their_audit_at_the_central_calibration_and_half_noise_fails():
    D0, D1 = tight_pair()
    plan = SecureVerticalRegression(**KW, budget=AUDIT_BUDGET).plan({"party0": 1, "party1": 1})
    claim = GDP.composed([plan.specs[n].noise_multiplier * math.sqrt(3 / 2) for n in ("xtx", "xty")], 1e-5)  # three shares, t = 1

    def reference(D):
        return simulated_opened(D, noise=False)

    def fit(scale):
        return lambda D, rng: simulated_opened(D, scale)

    worst = float(np.linalg.norm(reference(D1) - reference(D0)))
    assert 0.8 * claim.mu < worst <= claim.mu  # the pair is close to the worst case the calibration covers
    ok = audit_estimator(fit(1.0), D0, D1, reference=reference, claim=claim, samples=50, alpha=ALPHA, seed=4)
    assert ok.passed, ok.summary()
    bad = audit_estimator(fit(0.5), D0, D1, reference=reference, claim=claim, samples=250, alpha=ALPHA, seed=5)
    assert not bad.passed, bad.summary()


# -- what each party sees ------------------------------------------------------------------------------------------
def test_a_data_party_and_the_helper_see_only_uniform_shares_of_another_partys_columns():
    """party0's and the helper's views of party1's block are Shamir shares: two runs with very different columns for
    party1 give views a two-sample test cannot tell apart (low 8 bits, 256 numbers each)."""
    e = -10
    products = gram_layout(128, [("party0", 1), ("party1", 2)], "party0", e, 0)
    nodes = (NodeJob("xtx", 6, 4.0**e, (0, 1), 128.0, 3), NodeJob("xty", 3, 4.0**e, (0, 1), 128.0))
    job = AggregationJob(["helper", "party0", "party1"], ["helper", "party0", "party1"], 1, nodes, 60.0, products)
    q0, y = np.zeros((128, 1), dtype=np.int64), np.zeros(128, dtype=np.int64)
    views = {"party0": [], "helper": []}
    for value in (np.zeros((128, 2), dtype=np.int64), np.arange(256, dtype=np.int64).reshape(128, 2) * 3 - 300):
        opened = run_parties(job, {"party0": {"block": q0, "label": y}, "party1": {"block": value}}, record_view=True)
        assert gone(opened.pids)
        for who in views:
            views[who].append(np.array([int(x) % 256 for x in opened.views[who]["block:party1"]]))
    for who, (a, b) in views.items():
        table = np.array([np.bincount(v // 32, minlength=8) for v in (a, b)])
        assert stats.chi2_contingency(table).pvalue > 1e-6, (who, table)  # CSPRNG shares: 1e-6 keeps false alarms out
        for v in (a, b):
            assert stats.chisquare(np.bincount(v // 32, minlength=8)).pvalue > 1e-6, (who, np.bincount(v // 32, minlength=8))


def test_every_party_the_helper_included_adds_its_noise_share():
    """The opened noise of zero data has the declared sd sqrt(3 sigma_local^2): three shares, none missing (two shares
    would give 0.82 of it). 1034 numbers: the sd is estimated within ~2 %; the bounds are 4.5 of its sds."""
    e = -10
    products = gram_layout(4, [("party0", 30), ("party1", 14)], "party0", e, 0)
    nodes = (NodeJob("xtx", 990, 4.0**e, (10**6, 1), 64.0, 44), NodeJob("xty", 44, 4.0**e, (10**6, 1), 64.0))
    job = AggregationJob(["helper", "party0", "party1"], ["helper", "party0", "party1"], 1, nodes, 60.0, products)
    zeros = {"party0": {"block": np.zeros((4, 30), dtype=np.int64), "label": np.zeros(4, dtype=np.int64)},
             "party1": {"block": np.zeros((4, 14), dtype=np.int64)}}
    opened = run_parties(job, zeros)
    assert gone(opened.pids)
    ratio = float(np.std(opened.aggregate.astype(float))) / math.sqrt(3 * 10**6)
    assert 0.9 < ratio < 1.1, ratio


def test_with_noise_the_fit_is_charged_once_and_the_report_states_the_trust_model():
    blocks, y = data(n=3000)
    ledger = Ledger(Budget(2.0, 1e-6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = SecureVerticalRegression(row_bound=1.5, label_bound=3.0, y_center=0.7, ledger=ledger, random_state=1).fit(blocks, y)
    report = est.privacy_report_
    assert report.status_line.startswith("CERTIFIED (secure aggregation, <= 1 colluding parties)")
    assert ledger.spent.epsilon == pytest.approx(2.0, rel=1e-3)
    trust = report.trust_model
    assert trust["parties"] == ["helper", "party0", "party1"] and trust["contributors"] == ["helper", "party0", "party1"]
    assert "holds no data" in trust["what_each_party_sees"]["helper"] and "its own columns, the label" in trust["what_each_party_sees"]["party0"]
    assert "X^T y are opened" in trust["setting"]
    assert "n" not in report.public_parameters and report.data_shape is None  # add/remove: N is not published
    X = np.hstack(blocks)
    assert est.score(X, y) > 0.5 * PLSRegression(5, scale=False).fit(X, y).score(X, y)


def test_clone_and_parameters_follow_scikit_learn():
    est = SecureVerticalRegression(row_bound={"a": 1.0}, label_bound=2.0, n_components=2, budget=Budget(1.0, 1e-6))
    assert clone(est).get_params() == est.get_params()


# -- bad input: refused before anything is charged, or failures that leave the journal as it says ------------------
@pytest.mark.parametrize("kw, blocks_of, match", [
    (dict(row_bound=None), None, "row_bound"),
    (dict(label_bound=-1.0), None, "label_bound"),
    (dict(helper=False), None, "add a helper"),
    (dict(colluders=2), None, "tolerate"),
    (dict(colluders=0), None, "colluders"),
    (dict(n_components=9), None, "n_components"),
    (dict(max_rows=100), None, "max_rows"),
    (dict(row_bound={"party0": 1.0}), None, "no bound"),
    (dict(x_center=[0.0]), None, "x_center"),
    (dict(timeout=0.0), None, "timeout"),
    (dict(), "misaligned", "same N aligned rows"),
    (dict(), "two labels", "exactly one party"),
])
def test_bad_input_is_refused_before_anything_is_charged(kw, blocks_of, match, tmp_path):
    blocks, y = data(n=200)
    journal = tmp_path / "budget.jsonl"
    ledger = Ledger(Budget(1.0, 1e-6), journal=journal)
    est = SecureVerticalRegression(**{"row_bound": 1.0, "label_bound": 2.0, "ledger": ledger, **kw})
    X = blocks
    if blocks_of == "misaligned":
        X, y = [Party("a", blocks[0], y), Party("b", blocks[1][:-1])], None
    elif blocks_of == "two labels":
        X, y = [Party("a", blocks[0], y), Party("b", blocks[1], y)], None
    with pytest.raises(ValidationError, match=match):
        est.fit(X, y)
    assert ledger.spent.epsilon == 0.0 and not Ledger.open(journal).charges


def test_a_timeout_before_the_parties_agree_ends_every_party_process_with_nothing_charged(tmp_path):
    blocks, y = data(n=200)
    journal = tmp_path / "budget.jsonl"
    ledger = Ledger(Budget(1.0, 1e-6), journal=journal)
    est = SecureVerticalRegression(row_bound=1.0, label_bound=2.0, ledger=ledger, timeout=0.01)
    with pytest.raises(SecureAggregationError, match="nothing was charged") as info:
        est.fit(blocks, y)
    assert gone(info.value.pids) and len(info.value.pids) == 3
    # the nodes are charged only once every party process has agreed on the public job (issue 33), and none did
    assert not info.value.charged and not Ledger.open(journal).charges
    assert not hasattr(est, "coef_")


def test_a_party_of_a_secure_run_is_given_the_run_s_budget_not_what_its_ledger_holds():
    """Issue 33: one party's share of a run is calibrated for the configured budget; ``budget=None`` would take what
    its own ledger holds (and calibrate its share for that), so ``fit_party`` refuses it before anything starts."""
    from privsdr.parties.layout import check_parties

    blocks, y = data(n=50)
    layout = check_parties([Party("a", blocks[0], y), Party("b", blocks[1])])[1]
    ledger = Ledger(Budget(10.0, 1e-6))
    est = SecureVerticalRegression(row_bound=1.0, label_bound=2.0, ledger=ledger)
    with pytest.raises(ValidationError, match="configured budget"):
        est.fit_party(layout, "b", Party("b", blocks[1]), [1, 2, 3])
    assert ledger.spent.epsilon == 0.0
