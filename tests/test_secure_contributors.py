"""A secure opening holds exactly the noise shares its calibration counted (issue 33, item 7).

The distributed mechanisms calibrate each party's share so that the K - t shares outside any coalition of t meet the
budget (``mechanisms.distributed``). An opening with fewer shares than K -- a contributor left out, a party that
inputs no share, a run with more colluders than calibrated -- leaves fewer honest shares than counted. Here every
share a party draws is a marker of its index (``privsdr.audit.secure_probe.share_counts``) and the parties run in this
process through the party program's own functions, so the opening says exactly whose shares it holds.
"""
from __future__ import annotations

import numpy as np
import pytest

from privsdr import Budget, FederatedSIR, Ledger, SecureVerticalRegression, ValidationError
from privsdr.audit.secure_probe import in_process, run_in_process, share_counts, zero_shares
from privsdr.federated.secure_fit import NODES, SERVER, client_statistics, party_bounds, secure_plan
from privsdr.plan import Run
from privsdr.secure import aggregate, secure_release
from privsdr.vertical import Party


@pytest.fixture
def openings(monkeypatch):
    """Run every secure release in this process; record, per opening, the calibrated (parties, colluders) of its nodes
    and how many shares of each party it holds."""
    seen: list[dict] = []
    build = aggregate.build_job

    def recording_build_job(plan, names, bounds, **kw):
        job = build(plan, names, bounds, **kw)
        if seen and "job" not in seen[-1]:  # the same job built again (agreed before the run, then released in it)
            seen.pop()
        seen.append({"calibrated": {n: (int(plan.specs[n].params["parties"]), int(plan.specs[n].params["colluders"]))
                                    for n in names}})
        return job

    def recording_run_parties(job, inputs, charge=None, record_view=False, certificates=None):
        seen[-1].update(job=job, counts=share_counts(job, inputs))
        return run_in_process(job, inputs, charge=charge, share=zero_shares)

    monkeypatch.setattr(aggregate, "build_job", recording_build_job)
    in_process(monkeypatch.setattr, recording_run_parties)
    return seen


def check_opening(opening: dict, sharers: list[str]) -> None:
    """Every coordinate of every node holds one share of each of ``sharers``, nobody else's, and as many as calibrated."""
    job, counts = opening["job"], opening["counts"]
    at = 0
    for node in job.nodes:
        K, t = opening["calibrated"][node.name]
        block = counts[:, at:at + node.dimension]
        at += node.dimension
        held = {name: set(block[job.index(name)].tolist()) for name in job.parties}
        assert all(held[name] == {1} for name in sharers), (node.name, held)
        assert all(held[name] == {0} for name in job.parties if name not in sharers), (node.name, held)
        assert len(sharers) == K and t == job.threshold, (node.name, K, t, job.threshold)


def clients(k=3, n=8, p=3, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.uniform(-1, 1, (n, p)), rng.choice([-1.0, 0.0, 1.0], n)) for _ in range(k)]


def fsir(**kw):
    return FederatedSIR(1, bound=1.0, cut_points=[-0.5, 0.5], aggregation="secure", budget=Budget(1.0, 1e-6),
                        ledger=Ledger(Budget(10.0, 1e-5)), random_state=0, **kw)


@pytest.mark.filterwarnings("ignore::privsdr.errors.NoiseDominatesWarning")
@pytest.mark.parametrize("k, t", [(3, 1), (4, 2)])
def test_the_secure_fsir_opening_holds_one_share_of_every_client_and_none_of_the_server(openings, k, t):
    fsir(colluders=t).fit(clients(k))
    (opening,) = openings
    job = opening["job"]
    assert set(job.inputs) == set(job.parties) - {SERVER} and len(job.inputs) == k  # every client contributes, the server not
    check_opening(opening, list(job.inputs))


@pytest.mark.parametrize("helper", ["auto", True])
def test_the_secure_gram_opening_holds_one_share_of_every_party_the_helper_included(openings, helper):
    rng = np.random.default_rng(1)
    parties = [Party("a", rng.uniform(-1, 1, (6, 2))), Party("b", rng.uniform(-1, 1, (6, 1)), rng.uniform(-1, 1, 6))]
    if helper is True:
        parties.append(Party("c", rng.uniform(-1, 1, (6, 1))))
    est = SecureVerticalRegression(row_bound=1.0, label_bound=1.0, helper=helper, diagnose_noise=False, budget=Budget(1.0, 1e-6),
                                   ledger=Ledger(Budget(10.0, 1e-5))).fit(parties)
    (opening,) = openings
    assert "helper" in est.parties_
    check_opening(opening, list(est.parties_))


def _calibrated_run(n_clients: int, colluders: int, ledger: Ledger):
    config = fsir().config()
    plan = secure_plan(config, 24, 3, n_clients, colluders).allocate(Budget(1.0, 1e-6), accountant=ledger.accountant, tight=True)
    return config, Run(plan, ledger)


def test_an_opening_with_a_contributor_fewer_than_calibrated_is_refused_before_any_charge(openings):
    ledger = Ledger(Budget(10.0, 1e-5))
    config, run = _calibrated_run(3, 1, ledger)
    data = clients(3)
    stats = {f"c{i}": client_statistics(config.truncate(X), config.slice_labels(y), 3, 24) for i, (X, y) in enumerate(data)}
    two = {name: stats[name] for name in ("c0", "c1")}  # c2 drops out: 2 shares, K - t = 1 honest, calibrated for 2
    with run, pytest.raises(ValidationError, match="calibrated for 3 noise shares"):
        secure_release(run, NODES, two, party_bounds(config, 3), parties=[SERVER, "c0", "c1", "c2"], threshold=1)
    assert ledger.spent.epsilon == 0 and openings == []


def test_an_opening_with_more_colluders_than_calibrated_is_refused_before_any_charge(openings):
    ledger = Ledger(Budget(10.0, 1e-5))
    config, run = _calibrated_run(4, 1, ledger)
    data = clients(4)
    stats = {f"c{i}": client_statistics(config.truncate(X), config.slice_labels(y), 3, 32) for i, (X, y) in enumerate(data)}
    with run, pytest.raises(ValidationError, match="colluders"):  # t = 2 leaves K - t = 2 honest shares, calibrated for 3
        secure_release(run, NODES, stats, party_bounds(config, 3), parties=[SERVER, "c0", "c1", "c2", "c3"], threshold=2)
    assert ledger.spent.epsilon == 0 and openings == []


def test_the_calibrated_opening_runs_and_holds_every_share(openings):
    """The same release with every contributor runs (the refusals above are about the count, not the path)."""
    ledger = Ledger(Budget(10.0, 1e-5))
    config, run = _calibrated_run(3, 1, ledger)
    stats = {f"c{i}": client_statistics(config.truncate(X), config.slice_labels(y), 3, 24) for i, (X, y) in enumerate(clients(3))}
    with run:
        secure_release(run, NODES, stats, party_bounds(config, 3), parties=[SERVER, "c0", "c1", "c2"], threshold=1)
    check_opening(openings[-1], ["c0", "c1", "c2"])
    assert ledger.spent.epsilon > 0


def test_the_stand_in_opens_the_sum_of_the_contributions():
    """The in-process run is the party program's arithmetic: noise-free, the opening is the rounded sum."""
    ledger = Ledger(Budget(10.0, 1e-5))
    config, run = _calibrated_run(3, 1, ledger)
    stats = {f"c{i}": client_statistics(config.truncate(X), config.slice_labels(y), 3, 24) for i, (X, y) in enumerate(clients(3))}
    with run:
        job = aggregate.build_job(run.plan, NODES, party_bounds(config, 3), parties=[SERVER, "c0", "c1", "c2"],
                                  contributors=["c0", "c1", "c2"], threshold=1, timeout=10.0)
    opened = run_in_process(job, stats, share=zero_shares).aggregate
    at = 0
    for node in job.nodes:
        total = sum(np.asarray(s[node.name], dtype=float) for s in stats.values())
        coords = total[np.triu_indices(node.square)] if node.square is not None else total.ravel()
        assert np.allclose(opened[at:at + node.dimension] * node.gamma, coords, atol=3 * node.gamma)
        at += node.dimension
    counts = share_counts(job, stats)
    assert np.array_equal(counts, np.vstack([np.zeros(job.dimension, dtype=int)] + [np.ones(job.dimension, dtype=int)] * 3))
    with pytest.raises(ValueError, match="no views"):
        run_in_process(job, stats, record_view=True)
