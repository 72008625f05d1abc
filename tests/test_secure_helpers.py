"""Helpers of a secure vertical Gram (issue 34): parties that hold no data and add only a noise share. With m parties
and t colluders the noise is calibrated so that the m - t shares outside any coalition meet the budget, so the opened
noise sd is sqrt(m / (m - t)) times the calibrated one: ``helper=k`` adds k helpers and brings it towards 1. Checked
here without processes: the parties and their order, refusals, the calibration and the opened sd for each m, that
every helper's share reaches the opening exactly once (the party program in this process), and what the report
says for that m and t."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from privsdr import Budget, ValidationError
from privsdr.audit.secure_probe import in_process as stand_in
from privsdr.audit.secure_probe import run_in_process, share_counts
from privsdr.mechanisms.distributed import share_noise
from privsdr.vertical import Party
from privsdr.vertical.secure_moments import SecureVerticalMeanCovariance, SecureVerticalSIR
from privsdr.vertical.secure_parties import helper_count, mpc_parties
from privsdr.vertical.secure_regression import helpers_of

CUTS = [-0.25, 0.0, 0.25]


def test_a_number_of_helpers_comes_first_in_mpyc_order_with_names_of_their_own():
    assert mpc_parties(["alice", "bob"], 1, 3, ()) == (["helper", "helper2", "helper3", "alice", "bob"], 1)
    assert mpc_parties(["alice", "bob"], 1, "auto", ()) == (["helper", "alice", "bob"], 1)
    assert mpc_parties(["a", "b", "c"], 1, "auto", ())[0] == ["a", "b", "c"]
    assert mpc_parties(["a", "b", "c"], 1, 0, ())[0] == ["a", "b", "c"]
    assert mpc_parties(["alice", "bob"], 2, 3, ())[1] == 2  # 5 parties tolerate 2 colluders
    assert helper_count(True, 5) == 1 and helper_count(False, 2) == 0 and helper_count(np.int64(2), 2) == 2
    assert helpers_of(["helper", "helper2", "alice"], ["alice"]) == "helper, helper2" and helpers_of(["alice", "bob", "c"], ["alice", "bob", "c"]) is None
    # a data party may be called "helper2" when one helper runs: it is not reported as a helper
    assert helpers_of(*[mpc_parties(["helper2", "bob"], 1, "auto", ())[0], ["helper2", "bob"]]) == "helper"


@pytest.mark.parametrize("helper", [-1, 9, 1.5, "two", None])
def test_a_bad_number_of_helpers_is_refused(helper):
    with pytest.raises(ValidationError, match="helper must be"):
        mpc_parties(["alice", "bob"], 1, helper, ())


def test_a_data_party_named_as_a_helper_and_too_few_parties_are_refused():
    with pytest.raises(ValidationError, match="'helper2' names a helper"):
        mpc_parties(["alice", "helper2"], 1, 2, ())
    with pytest.raises(ValidationError, match="tolerate t < 2"):
        mpc_parties(["alice", "bob"], 2, 2, ())  # 4 parties: t = 2 is no honest majority


def test_each_helper_brings_the_opened_noise_towards_the_calibrated_sd():
    """The m - t honest shares meet the calibration whatever m (the same total sd), and the opened sd is
    sqrt(m / (m - t)) of it: sqrt(3/2), sqrt(4/3), sqrt(5/4) with 1, 2, 3 helpers and t = 1."""
    opened, calibrated = {}, {}
    for k in (1, 2, 3):
        plan = SecureVerticalSIR(1, cut_points=CUTS, row_bound=1.0, budget=Budget(1.0, 1e-6), helper=k).plan({"a": 2, "b": 2}, 10_000)
        for name, spec in plan.specs.items():
            assert (int(spec.params["parties"]), int(spec.params["colluders"])) == (2 + k, 1)
            noise = share_noise(spec)
            opened[(k, name)], calibrated[(k, name)] = noise.opened_sd, noise.sigma_total * noise.gamma
    for (k, name), sd in opened.items():
        assert sd == pytest.approx(calibrated[(k, name)] * math.sqrt((2 + k) / (1 + k)), rel=1e-9)
        assert calibrated[(k, name)] == pytest.approx(calibrated[(1, name)], rel=1e-6)  # (its search tolerance)
    assert opened[(3, "second_moment")] < opened[(2, "second_moment")] < opened[(1, "second_moment")]


def data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-0.5, 0.5, (n, 2)), rng.uniform(-0.5, 0.5, (n, 1))]


def test_every_helpers_share_reaches_the_opening_once_and_the_report_states_m_and_t(monkeypatch):
    """The party program in this process, with each party's share draws marked: the opening holds exactly one share
    of each of the 2 data parties and 3 helpers; the report names 5 parties and t = 1, what each helper sees, and the
    helpers as the parties that hold no data."""
    seen = []

    def counting(job, inputs, **kwargs):
        seen.append(share_counts(job, inputs))
        return run_in_process(job, inputs, **kwargs)

    stand_in(monkeypatch.setattr, counting)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = SecureVerticalMeanCovariance(row_bound=1.0, budget=Budget(1.0, 1e-6), helper=3, random_state=0).fit(
            [Party("alice", data()[0]), Party("bob", data()[1])])
    assert est.parties_ == ["helper", "helper2", "helper3", "alice", "bob"]
    assert len(seen) == 1 and np.array_equal(seen[0], np.ones_like(seen[0]))
    trust = est.privacy_report_.trust_model
    assert trust["parties"] == est.parties_ and trust["collusion_threshold"] == 1 and trust["server"] == "helper, helper2, helper3"
    assert "at most t = 1 of the 5 parties collude" in " ".join(trust["assumptions"])
    assert "sqrt(5/4)" in trust["noise"]
    for helper in ("helper", "helper2", "helper3"):
        assert trust["what_each_party_sees"][helper].startswith("nothing of its own (it holds no data and adds a noise share)")
