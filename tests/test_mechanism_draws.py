"""Every registered mechanism charges an event for every round of noise it draws (issue 33, item 7).

``privsdr.audit.draws`` runs a mechanism's ``sample`` with an instrumented generator and counted exact samplers and
compares the events ``events(spec)`` charges with the rule for that mechanism (``DRAW_RULES``: one selection event
per noisy-max round, one Gaussian or Laplace event per noise vector, one Laplace event per coordinate peeling
releases, ...). A registered mechanism without a rule fails here: whoever adds one writes its rule.
"""
from __future__ import annotations

import numpy as np
import pytest

from privsdr import DPSIR, Budget, SparseDPSIR
from privsdr.audit.draws import DRAW_RULES, count_draws, events_match_draws, fit_events_match_draws
from privsdr.mechanisms import Sensitivity, available_mechanisms, get_mechanism

SHARE = Budget(1.0, 1e-6)


def releases(name: str):
    """(sampler, sensitivity norm, params, value, size) of one release of ``name`` per sampler it implements."""
    vector = np.linspace(-1.0, 1.0, 5)
    matrix = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 3.0]])
    scores = np.array([0.1, 0.9, 0.3, 0.8, 0.2, 0.5])
    cases = {
        "gaussian": ("l2", {}, vector, 5),
        "shaped_gaussian": ("l2", {}, vector, 5),
        "symmetric_gaussian": ("l2", {}, matrix, 6),
        "laplace": ("l1", {}, vector, 5),
        "report_noisy_max": ("linf", {}, scores, 6),
        "noisy_top": ("linf", {"s": 3, "delta": 1e-6}, scores, 6),
        # 7 columns: a selection round draws 7 numbers, the value release d s = 6 (the rule tells them apart by size)
        "peeling": ("linf", {"s": 3, "d": 2, "delta": 1e-6}, np.vstack([np.append(scores, 0.4), np.append(scores[::-1], 0.6)]), 7),
        "distributed_gaussian": ("l2", {"parties": 4, "colluders": 1, "dimension": 5}, vector, 5),
        "distributed_symmetric_gaussian": ("l2", {"parties": 3, "colluders": 1, "dimension": 6}, matrix, 6),
        "opaque": ("l2", {}, lambda rng: float(rng.laplace()), 1),
        "non_private": ("l2", {}, vector, 5),
    }
    norm, params, value, size = cases[name]
    mech = get_mechanism(name)
    return [(sampler, norm, params, value, size) for sampler in mech.samplers]


@pytest.mark.parametrize("name", available_mechanisms())
def test_every_registered_mechanism_has_a_draw_rule(name):
    assert name in DRAW_RULES, f"add the draw rule of {name!r} to privsdr.audit.draws.DRAW_RULES"


@pytest.mark.parametrize("name", available_mechanisms())
def test_the_events_a_mechanism_charges_match_the_noise_it_draws(name):
    for sampler, norm, params, value, size in releases(name):
        spec = get_mechanism(name).calibrate(Sensitivity(1.0, norm), SHARE, params=params, sampler=sampler)
        ok, charged, needed = events_match_draws(name, value, spec, size)
        assert ok, (name, sampler, dict(charged), dict(needed))


def test_the_counts_see_each_kind_of_draw():
    """The instrument is not blind: each kind of draw is counted where it happens."""
    spec = get_mechanism("noisy_top").calibrate(Sensitivity(1.0, "linf"), SHARE, params={"s": 3, "delta": 1e-6})
    draws, out = count_draws("noisy_top", np.arange(6.0), spec)
    assert draws.calls == [("laplace", 6)] * 3 and len(out) == 3
    spec = get_mechanism("gaussian").calibrate(Sensitivity(1.0, "l2"), SHARE, sampler="secure")
    draws, _ = count_draws("gaussian", np.zeros(4), spec)
    assert spec.secure and draws.gaussian == 4 and draws.laplace == 0 and draws.calls == []
    spec = get_mechanism("distributed_gaussian").calibrate(Sensitivity(1.0, "l2"), SHARE,
                                                           params={"parties": 3, "colluders": 1, "dimension": 2})
    draws, _ = count_draws("distributed_gaussian", np.zeros(2), spec)
    assert draws.gaussian == 6


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("make", [
    lambda: SparseDPSIR(1, sparsity=2, bound=1.0, cut_points=[-0.5, 0.5], n_slices=3, budget=Budget(1.0, 1e-6), diagnose_noise=False,
                        random_state=0),
    lambda: DPSIR(1, bound=1.0, cut_points=[-0.5, 0.5], n_slices=3, budget=Budget(1.0, 1e-6), diagnose_noise=False, random_state=0),
], ids=["sparse_sir_moments", "dpsir"])
def test_every_release_of_a_fit_charges_the_rounds_its_run_draws(make):
    """The same rule inside whole fits: each node's generator (``Run``) counted, each node's spec from its release."""
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (300, 6)), rng.choice([-1.0, 0.0, 1.0], 300)
    results = fit_events_match_draws(lambda: make().fit(X, y))
    assert len(results) >= 3, sorted(results)
    bad = {name: (dict(c), dict(n)) for name, (ok, c, n) in results.items() if not ok}
    assert not bad, bad
