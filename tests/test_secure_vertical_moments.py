"""Vertical-secure DPSIR and mean / covariance / PCA (issue 34, item 4): the blocks of the augmented row
[x_1 ... x_k | e_h | 1] computed by the secure engine from declared blocks. Noise off, each equals the pooled
non-private reference on the same (per-party clipped) rows; the releases stay within their declared sensitivities
on extreme replace-one neighbours and hold one noise share of every party (the party program run in this process:
``privsdr.audit.secure_probe``); bad input is refused before anything is charged; two fits start real MPyC party
processes on 127.0.0.1 (the conftest ends them)."""
from __future__ import annotations

import functools
import itertools
import math
import warnings

import numpy as np
import pytest
from conftest import gone

from privsdr import Budget, Chunks, Ledger, ValidationError, core
from privsdr.audit import probe_sensitivity
from privsdr.audit.secure_probe import in_process as stand_in
from privsdr.audit.secure_probe import opened_sensitivity, run_in_process, share_counts, zero_shares
from privsdr.secure.crossproducts import Block, CrossProducts, Group
from privsdr.secure.job import AggregationJob, NodeJob
from privsdr.secure.launch import run_parties
from privsdr.vertical import Party
from privsdr.vertical.secure_moments import SecureVerticalMeanCovariance, SecureVerticalSIR

pytest.importorskip("mpyc")

CUTS = [-0.25, 0.0, 0.25]
BOUND = math.sqrt(0.5)  # two parties: the whole row has ||x|| <= 1, so the public unit scale is 1


@pytest.fixture
def in_process(monkeypatch):
    """Every secure release runs the party program in this process with its shares drawn as 0 (noise-free)."""
    stand_in(monkeypatch.setattr, functools.partial(run_in_process, share=zero_shares))


def data(n=240, p=(3, 2), seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, sum(p))) * 0.25
    y = X[:, 0] - 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return np.split(X, np.cumsum(p)[:-1], axis=1), y


def clipped(blocks, bound=BOUND):
    """The pooled rows as the parties clip them: each block to its own bound."""
    return np.hstack([core.clip_rows_l2(b, bound) for b in blocks])


def sir(**kw):
    return SecureVerticalSIR(**{"n_components": 2, "cut_points": CUTS, "row_bound": BOUND, "budget": Budget.infinite(), **kw})


def meancov(**kw):
    return SecureVerticalMeanCovariance(**{"n_components": 2, "row_bound": BOUND, "budget": Budget.infinite(), **kw})


def pooled_moments(blocks, y):
    X = clipped(blocks)
    n = X.shape[0]
    sums, counts = core.slice_sums(X, core.slice_by_cut_points(y, np.array(CUTS)), len(CUTS) + 1)
    return X, sums / n, counts / n, X.T @ X / n


# -- noise off: the pooled reference -------------------------------------------------------------------------------
def test_noise_off_sir_moments_and_directions_are_the_pooled_ones(in_process):
    blocks, y = data()
    est = sir().fit(blocks, y)
    X, sums, counts, second = pooled_moments(blocks, y)
    step = 2.0 ** est.privacy_report_.public_parameters["grid_exponent"]  # the rounding of each entry to the grid
    N = len(y)  # released_ holds the opened sums as released (unit scale 1 here); the fit divides them by the public N
    assert np.allclose(est.released_["slice_sums"].reshape(sums.shape) / N, sums, atol=3 * step)
    assert np.allclose(est.released_["second_moment"] / N, second, atol=3 * step)
    assert np.allclose(est.released_["slice_counts"].ravel() / N, counts, rtol=1e-12, atol=0)  # exact counts
    reference = core.sir_from_moments(sums, counts, second, 2, centred=True)[0]
    assert core.projection_distance(est.directions_, core.orthonormalize(reference[:, :2])) < 1e-3
    assert np.allclose(est.mean_, X.mean(axis=0), atol=1e-4)
    assert est.privacy_report_.status == "none"


def test_noise_off_mean_covariance_and_components_are_the_pooled_ones(in_process):
    """Row bounds of 3 (the whole row's 5.2 is put on the grid at the public unit scale 1/4 and scaled back)."""
    blocks, _ = data(p=(2, 2, 1))
    est = meancov(row_bound=3.0).fit([4 * b for b in blocks])
    assert est.privacy_report_.public_parameters["unit_scale"] == 0.25
    X = clipped([4 * b for b in blocks], 3.0)
    assert np.allclose(est.mean_, X.mean(axis=0), atol=1e-4)
    cov = np.cov(X.T, bias=True)
    assert np.allclose(est.covariance_, cov, atol=1e-4)
    top = np.linalg.eigh(cov)[1][:, ::-1][:, :2]
    assert core.projection_distance(est.components_.T, top) < 1e-3
    assert est.parties_ == ["party0", "party1", "party2"]  # three data parties: no helper


def test_a_party_reading_its_rows_as_chunks_releases_what_its_array_releases(in_process):
    blocks, y = data()
    whole = sir().fit(blocks, y)
    pieces = [blocks[1][i:i + 50] for i in range(0, len(y), 50)]
    parties = [Party("party0", blocks[0], y), Party("party1", Chunks(pieces, n_rows=len(y), n_features=2))]
    chunked = sir().fit(parties)
    for name in whole.released_.arrays:
        assert np.array_equal(whole.released_[name], chunked.released_[name]), name


# -- the releases' privacy: sensitivity and noise shares ----------------------------------------------------------
def _extremes(width):
    eye = np.eye(width)
    return [np.zeros(width), BOUND * eye[0], -BOUND * np.ones(width) / np.sqrt(width), 10.0 * eye[-1]]


@pytest.mark.filterwarnings("ignore::privsdr.errors.NoiseDominatesWarning")
def test_the_moment_blocks_stay_within_their_declared_sensitivities_on_extreme_replace_one_neighbours(in_process):
    """Row 0 replaced by every extreme row of both parties, with labels in the first and last slice: every opened sum
    (``released_``, the unit scale being 1) moves by at most its node's declared sensitivity plus the rounding, and
    the extreme rows come close to it (the probe is not vacuous)."""
    rng = np.random.default_rng(3)
    base = [rng.uniform(-0.3, 0.3, (8, 2)), rng.uniform(-0.3, 0.3, (8, 1))]
    y = np.linspace(-1, 1, 8)
    fits = []
    for ra, rb, label in itertools.product(_extremes(2), _extremes(1)[1::2], (-1.0, 1.0)):
        changed = [b.copy() for b in base]
        changed[0][0], changed[1][0] = ra, rb
        labels = y.copy()
        labels[0] = label
        fits.append(sir(n_components=1, budget=Budget(1.0, 1e-6), ledger=Ledger(Budget(100.0, 1e-3))).fit(changed, labels))
    specs = fits[0].plan_.specs
    pairs = [(a, b) for a in range(len(fits)) for b in range(a + 1, len(fits))]
    for node in ("slice_sums", "slice_counts", "second_moment"):
        sens = opened_sensitivity(specs[node])
        mechanism = "symmetric_gaussian" if node == "second_moment" else "gaussian"
        result = probe_sensitivity(lambda i, node=node: fits[i].released_[node], pairs, sens, mechanism=mechanism)
        assert result.passed, (node, result.summary())
        assert result.max_change >= 0.6 * sens.value, (node, result.summary())


@pytest.mark.filterwarnings("ignore::privsdr.errors.NoiseDominatesWarning")
def test_the_mean_covariance_blocks_stay_within_their_declared_sensitivities(in_process):
    rng = np.random.default_rng(4)
    base = [rng.uniform(-0.3, 0.3, (6, 2)), rng.uniform(-0.3, 0.3, (6, 1))]
    fits = []
    for ra, rb in itertools.product(_extremes(2), _extremes(1)):
        changed = [b.copy() for b in base]
        changed[0][0], changed[1][0] = ra, rb
        fits.append(meancov(budget=Budget(1.0, 1e-6), ledger=Ledger(Budget(100.0, 1e-3))).fit(changed))
    specs = fits[0].plan_.specs
    pairs = [(a, b) for a in range(len(fits)) for b in range(a + 1, len(fits))]
    for node in ("mean", "second_moment"):
        sens = opened_sensitivity(specs[node])
        mechanism = "symmetric_gaussian" if node == "second_moment" else "gaussian"
        result = probe_sensitivity(lambda i, node=node: fits[i].released_[node], pairs, sens, mechanism=mechanism)
        assert result.passed, (node, result.summary())
        assert result.max_change >= 0.6 * sens.value, (node, result.summary())


def slices_job(N=16, share_rows=5, noise=(0, 1)):
    """A secure Gram of the SIR blocks: party0 holds 1 column and the slice indicators (H = 2), party1 2 columns."""
    groups = [Group("party0", 1, "party0"), Group("party1", 2, "party1"), Group("e", 2, "party0", "slices", description="slice indicators"),
              Group("1", 1, value=4, description="constant")]
    blocks = [Block("slice_sums", ("party0", "party1"), ("e",)), Block("slice_counts", ("1",), ("e",)),
              Block("second_moment", ("party0", "party1"))]
    products = CrossProducts(N, groups, blocks, -2, share_rows)
    nodes = (NodeJob("slice_sums", 6, 1.0, noise, 4096.0), NodeJob("slice_counts", 2, 1.0, noise, 4096.0),
             NodeJob("second_moment", 6, 1.0, noise, 4096.0, 3))
    parties = ["helper", "party0", "party1"]
    return AggregationJob(parties, parties, 1, nodes, 30.0, products)


def slices_inputs(N=16, seed=0):
    rng = np.random.default_rng(seed)
    e = np.zeros((N, 2), dtype=np.int64)
    e[np.arange(N), rng.integers(0, 2, N)] = 4
    return {"party0": {"block": rng.integers(-4, 5, (N, 1)), "slices": e}, "party1": {"block": rng.integers(-4, 5, (N, 2))}}


def test_every_party_the_helper_included_adds_one_noise_share_to_every_moment():
    job = slices_job(noise=(9, 1))
    counts = share_counts(job, slices_inputs())
    assert np.array_equal(counts, np.ones_like(counts))


# -- real MPyC processes --------------------------------------------------------------------------------------------
def test_the_party_processes_open_the_declared_blocks_exactly_chunk_by_chunk():
    """Row chunks of 5 (16 rows: 4 chunks) of every group are secret-shared and their products summed: the opening
    is the integer Gram's declared blocks, exactly."""
    job, inputs = slices_job(), slices_inputs()
    opened = run_parties(job, inputs)
    assert gone(opened.pids)
    plain = job.products.plain(inputs)
    scale = 2.0 ** (2 * job.products.exponent)
    expected = np.concatenate([plain["slice_sums"], plain["slice_counts"], plain["second_moment"][np.triu_indices(3)]]) / scale
    assert np.array_equal(opened.aggregate, expected.astype(np.int64))


def test_a_secure_sir_fit_in_real_processes_is_charged_once_and_states_what_each_party_receives(tmp_path):
    """Three hosts (127.0.0.2-4, each party listening on its own address) over mutual TLS with the certificates of
    ``make_keys``, as across machines."""
    from privsdr.network.addresses import free_ports
    from privsdr.network.certificates import make_keys

    blocks, y = data(n=120, p=(2, 1))
    ledger = Ledger(Budget(2.0, 1e-5))
    make_keys(tmp_path / "keys", ["helper", "party0", "party1"])
    addresses = [f"127.0.0.{2 + i}:{port}" for i, port in enumerate(free_ports(3))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = SecureVerticalSIR(1, cut_points=CUTS, row_bound=BOUND, budget=Budget(1.0, 1e-6), ledger=ledger, timeout=60.0,
                                random_state=0, addresses=addresses, certificates=tmp_path / "keys").fit(blocks, y)
    assert est.secure_cost_["seconds"] > 0
    report = est.privacy_report_
    assert report.status_line.startswith("CERTIFIED (secure aggregation, <= 1 colluding parties)")
    assert ledger.spent.epsilon > 0 and len(ledger.charges) == 3  # the three moments, once
    trust = report.trust_model
    sees = trust["what_each_party_sees"]
    assert sees["party0"].startswith("its own columns, the slice indicators and noise share")
    assert "party0's vector (its own products plus its noise share) and rounded columns and rounded slice indicators" in sees["party1"]
    assert "holds no data" in sees["helper"] and "slice sums" in sees["helper"]
    assert "replace-one" in trust["own_values"] and trust["opened"] == ["slice_sums", "slice_counts", "second_moment"]
    assert est.directions_.shape == (3, 1)


# -- bad input: refused before anything is charged ------------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    ({"cut_points": None}, "cut_points"),
    ({"cut_points": [0.5, 0.1]}, "increasing"),
    ({"n_components": 4}, "n_components"),
    ({"row_bound": None}, "row_bound"),
    ({"colluders": 2}, "colluders"),
    ({"x_center": [0.0, 1.0]}, "x_center"),
    ({"addresses": ["127.0.0.2:7001", "127.0.0.3:70000", "127.0.0.4:7001"]}, "port"),
    ({"addresses": ["127.0.0.2:7001", "127.0.0.2:7001", "127.0.0.4:7001"]}, "address"),
])
def test_bad_public_parameters_are_refused_before_any_charge(kw, match):
    blocks, y = data(n=20)
    ledger = Ledger(Budget(1.0, 1e-6))
    with pytest.raises(ValidationError, match=match):
        sir(budget=None, ledger=ledger, **kw).fit(blocks, y)
    assert ledger.spent.epsilon == 0 and not ledger.charges and not ledger.runs


def test_bad_rows_are_refused_before_any_charge():
    blocks, y = data(n=20)
    ledger = Ledger(Budget(1.0, 1e-6))
    short = Party("party1", Chunks([blocks[1][:10]], n_rows=20, n_features=2))
    cases = [([Party("party0", blocks[0], y), short], "declared n_rows"),
             ([Party("e", blocks[0], y), Party("party1", blocks[1])], "rename that data party"),
             ([Party("party0", blocks[0], np.where(np.arange(20) == 3, np.nan, y)), Party("party1", blocks[1])], "NaN")]
    for parties, match in cases:
        with pytest.raises(ValidationError, match=match):
            sir(budget=Budget(1.0, 1e-6), ledger=ledger).fit(parties)
    with pytest.raises(ValidationError, match="n_rows and n_features"):
        meancov(budget=Budget(1.0, 1e-6), ledger=ledger).fit([Party("a", blocks[0]), Party("b", Chunks([blocks[1]]))])
    assert ledger.spent.epsilon == 0 and not ledger.charges and not ledger.runs
