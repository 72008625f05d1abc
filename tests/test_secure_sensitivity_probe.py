"""Sensitivity probes of the secure paths through production code, without MPC processes (issue 33, item 7).

Each fit runs whole -- the estimator's checks and plan, every party's clipping and rounding (``party_block``,
``label_vector``, ``FSIRConfig.truncate``), the party program's own input (``secure.party.party_statistics``, then ``with_shares``) and its
computation (``secure.party._aggregate``: sums and cross-products) -- with the parties run in this process by
``privsdr.audit.secure_probe.run_in_process`` and every noise share drawn as 0. What it opens is the noise-free sum
the parties secret-share; on extreme neighbours its change must stay within each node's declared sensitivity.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from privsdr import Budget, FederatedSIR, Ledger, SecureVerticalRegression
from privsdr.audit import probe_sensitivity, replacement_rows
from privsdr.audit.secure_probe import in_process, opened_sensitivity, run_in_process, zero_shares
from privsdr.federated.secure_fit import secure_plan
from privsdr.vertical import Party

MECHANISM = {"xtx": "symmetric_gaussian", "xty": "gaussian", "slice_sums": "gaussian", "slice_counts": "gaussian",
             "second_moment": "symmetric_gaussian"}


@pytest.fixture
def noise_free_parties(monkeypatch):
    """Every secure release runs the party program in this process with its shares drawn as 0."""
    in_process(monkeypatch.setattr, functools.partial(run_in_process, share=zero_shares))


def _extremes(width: int, bound: float) -> list[np.ndarray]:
    """A party's extreme rows: none, on an axis at the bound, on the diagonal at the bound, 10x outside."""
    eye = np.eye(width)
    return [np.zeros(width), bound * eye[0], -bound * np.ones(width) / np.sqrt(width), 10.0 * bound * eye[-1]]


# -- SecureVerticalRegression: add/remove one row ---------------------------------------------------------------------
BOUNDS = {"a": 1.5, "b": 0.8}
WIDTHS = {"a": 2, "b": 1}
CY = 2.0


def _vertical(blocks: dict[str, np.ndarray], y: np.ndarray, **kw) -> SecureVerticalRegression:
    parties = [Party("a", blocks["a"]), Party("b", blocks["b"], y)]
    est = SecureVerticalRegression(row_bound=BOUNDS, label_bound=CY, diagnose_noise=False, budget=Budget(1.0, 1e-6),
                                   ledger=Ledger(Budget(10.0, 1e-5)), **kw)
    return est.fit(parties)


def _vertical_datasets(n=5, seed=0):
    """A base data set and, for every combination of the parties' extreme rows and an extreme label, the base plus that
    row (add/remove neighbours of the base)."""
    rng = np.random.default_rng(seed)
    base = {name: rng.uniform(-1, 1, (n, w)) * BOUNDS[name] / np.sqrt(w) for name, w in WIDTHS.items()}
    y = rng.uniform(-CY, CY, n)
    added = []
    for ra, rb, label in itertools.product(_extremes(2, BOUNDS["a"]), _extremes(1, BOUNDS["b"]), (CY, -10 * CY)):
        added.append(({"a": np.vstack([base["a"], ra]), "b": np.vstack([base["b"], rb])}, np.append(y, label)))
    return (base, y), added


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_the_secure_gram_stays_within_its_declared_sensitivity_on_extreme_added_rows(noise_free_parties, fit_intercept):
    (base, y), added = _vertical_datasets()
    fits = [_vertical(base, y, fit_intercept=fit_intercept)] + [_vertical(b, yy, fit_intercept=fit_intercept) for b, yy in added]
    specs = fits[0].plan_.specs
    pairs = [(0, i) for i in range(1, len(fits))]
    for node in ("xtx", "xty"):
        sens = opened_sensitivity(specs[node])
        result = probe_sensitivity(lambda i, node=node: fits[i].released_[node], pairs, sens, mechanism=MECHANISM[node])
        assert result.passed, (node, result.summary())
        # the extreme rows come close to the declared bound (the Gram's is ||z||^2 = ||z z^T||_F, of which the upper
        # triangle the noise covers keeps >= 0.8 here): the probe is not vacuous
        assert result.max_change >= 0.8 * sens.value, (node, result.summary())


def test_the_opening_is_the_parties_integer_gram(noise_free_parties):
    """The stand-in opens exactly the Gram of the parties' rounded rows (so the probe above reads the real sum)."""
    (base, y), _ = _vertical_datasets()
    est = _vertical(base, y)
    e = est.privacy_report_.public_parameters["grid_exponent"]
    from privsdr.secure.crossproducts import label_vector, party_block

    c = est._checked(["a", "b"], [2, 1])  # the public parameters the fit used (with any public rescaling of blocks and label)
    scales = c.get("row_scales", {"a": 1.0, "b": 1.0})
    Z = np.column_stack([party_block(base[k] * scales[k], c["bounds"][k], e) for k in ("a", "b")]
                        + [np.full(len(y), c["constant"])]).astype(object)
    yq = label_vector(y * c.get("label_scale", 1.0), c["label_bound"], e).astype(object)
    assert np.array_equal(est.released_["xtx"], np.array(Z.T @ Z, dtype=float) * 4.0**e)
    assert np.array_equal(est.released_["xty"].ravel(), np.array(Z.T @ yq, dtype=float) * 4.0**e)


# -- FederatedSIR(aggregation="secure"): replace one row of one client ------------------------------------------------
CUTS = [-0.5, 0.5]


def _fsir(clients, **kw) -> FederatedSIR:
    est = FederatedSIR(1, bound=kw.pop("bound", 1.0), norm=kw.pop("norm", "linf"), cut_points=CUTS, aggregation="secure",
                       colluders=1, budget=Budget(1.0, 1e-6), ledger=Ledger(Budget(10.0, 1e-5)), random_state=0, **kw)
    return est.fit(clients)


def _fsir_datasets(p=3, n=6, bound=1.0, norm="linf", seed=1):
    """Three clients; client 1's row 0 replaced by every extreme row (inside and outside the bound) with a label in
    every slice: all pairs are replace-one neighbours."""
    rng = np.random.default_rng(seed)
    clients = [(rng.uniform(-bound, bound, (n, p)) / (np.sqrt(p) if norm == "l2" else 1.0), rng.choice([-1.0, 0.0, 1.0], n))
               for _ in range(3)]
    out = []
    corner = bound * np.where(np.arange(p) == 0, 1.0, -1.0) / (np.sqrt(p) if norm == "l2" else 1.0)  # x x^T far from (1..1)'s
    for row, label in itertools.product(replacement_rows(p, bound, norm=norm) + [corner], (-1.0, 1.0)):
        changed = [(X.copy(), y.copy()) for X, y in clients]
        changed[1][0][0], changed[1][1][0] = row, label
        out.append(changed)
    return out


@pytest.mark.filterwarnings("ignore::privsdr.errors.NoiseDominatesWarning")
@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_the_secure_fsir_moments_stay_within_their_declared_sensitivities_on_extreme_neighbours(noise_free_parties, norm):
    datasets = _fsir_datasets(norm=norm)
    fits = [_fsir(d, norm=norm) for d in datasets]
    N, p = sum(len(X) for X, _ in datasets[0]), datasets[0][0][0].shape[1]
    ledger = Ledger(Budget(10.0, 1e-5))  # the plan the fits calibrated (public parameters only)
    specs = secure_plan(fits[0].config_, N, p, 3, 1).allocate(Budget(1.0, 1e-6), accountant=ledger.accountant, tight=True).specs
    pairs = [(a, b) for a in range(len(fits)) for b in range(a + 1, len(fits))]
    for node in ("slice_sums", "slice_counts", "second_moment"):
        values = [np.asarray(f.released_[node], dtype=float) for f in fits]
        sens = opened_sensitivity(specs[node])
        result = probe_sensitivity(lambda i, values=values: values[i], pairs, sens, mechanism=MECHANISM[node])
        assert result.passed, (node, result.summary())
        assert result.max_change >= 0.6 * sens.value, (node, result.summary())

