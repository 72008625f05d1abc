"""One budget for a vertical project (issue 21, item 4): party ledgers see only their own part, so a row-level
run on party ledgers that already hold charges is refused unless a project ledger composes every party's part
per record; entry-level runs (each party's entries in its own releases only) may reuse party ledgers."""
import numpy as np
import pytest

import privsdr
from privsdr import Budget, BudgetExceededError, Ledger, ValidationError
from privsdr.accounting import make_accountant

KW = dict(row_bound=1.5, label_bound=3.0, coef_bound=3.0, n_rounds=2, message_reports=False)


def data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 4))
    return [X[:, :2], X[:, 2:]], X @ [1.0, -0.5, 0.3, 0.2] + 0.1 * rng.standard_normal(n)


def bcd(**kw):
    return privsdr.DPBCDRegression("certified", budget=Budget(1.0, 1e-6), **KW, **kw)


def test_party_ledgers_that_hold_charges_are_refused_for_a_row_level_run_without_a_project_ledger():
    blocks, y = data()
    ledgers = {"party0": Ledger(Budget(5.0, 1e-5)), "party1": Ledger(Budget(5.0, 1e-5))}
    bcd(ledgers=ledgers, random_state=0).fit(blocks, y)  # fresh party ledgers: a one-off run is fine
    before = {k: v.spent for k, v in ledgers.items()}
    with pytest.raises(ValidationError, match="project ledger"):
        bcd(ledgers=ledgers, random_state=1).fit(blocks, y)
    assert {k: v.spent for k, v in ledgers.items()} == before  # refused before anything was charged


def test_a_project_ledger_composes_every_partys_part_per_record_over_runs():
    blocks, y = data()
    project = Ledger(Budget(2.5, 1e-5), accountant="pld")
    first = bcd(ledger=project, random_state=0).fit(blocks, y)
    parts = [c for plan in first.plans_.values() for c in plan.charges()]
    # one run: every party's part composed non-adaptively, as the global plan was calibrated (a committed batch)
    assert project.spent == make_accountant("pld", 1e-5).retarget(1e-5).cost(parts)
    assert project.composition["rule"] == "non_adaptive"
    bcd(ledger=project, random_state=1).fit(blocks, y)
    assert project.composition["groups"] == 2 and project.spent.epsilon > first.privacy_["per_record"]["pld"]["epsilon"]
    spent = project.spent
    with pytest.raises(BudgetExceededError):  # the third run does not fit: refused before any party is charged
        bcd(ledger=project, random_state=2, ledgers={"party0": (lone := Ledger(Budget(9.0, 1e-5)))}).fit(blocks, y)
    assert project.spent == spent and lone.spent.epsilon == 0.0


def test_entry_level_runs_may_reuse_party_ledgers():
    blocks, y = data(n=60)
    lo_hi = dict(bounds=(-1.0, 1.0), lam=0.1, message_reports=False)
    ledgers = {"party0": Ledger(Budget(5.0, 1e-3)), "party1": Ledger(Budget(5.0, 1e-3))}
    for seed in range(2):  # a party's entries appear in its own sketch only: its ledger is their whole account
        privsdr.PRIDERegressor("certified", budget=Budget(1.0, 1e-4), ledgers=ledgers, random_state=seed, **lo_hi).fit(blocks, y)
    with pytest.raises(ValidationError, match="project ledger"):  # row level: a person's row spans both sketches
        privsdr.PRIDERegressor("certified", relation="row", budget=Budget(1.0, 1e-4), ledgers=ledgers, **lo_hi).fit(blocks, y)
