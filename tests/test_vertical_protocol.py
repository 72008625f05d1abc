"""The vertical party layer: the LSDP relation, noise tickets, messages, sessions, executors."""
import numpy as np
import pytest

from privsdr import Budget, Ledger, PlanError, RelationMismatchError, Relation, Sensitivity
from privsdr.algorithms import DPMeanCovariance
from privsdr.plan import Plan, Run

LSDP = "lsdp_zero_row"


def lsdp_plan(eps=0.5):
    plan = Plan("lsdp_demo", LSDP)
    plan.add("step", "opaque", Sensitivity(1.0, "l2", LSDP, "none: local sensitivity"), share=(eps, 0.0), status="claimed")
    return plan.allocate(Budget(eps, 0.0))


def test_lsdp_relation_is_not_standard_and_takes_only_claimed_nodes():
    assert not Relation.LSDP_ZERO_ROW.standard and Relation.REPLACE_ONE.standard
    plan = Plan("bad", LSDP)
    with pytest.raises(PlanError, match="not standard DP"):
        plan.add("g", "gaussian", Sensitivity(1.0, "l2", LSDP), weight=1.0)


def test_lsdp_claims_never_compose_with_standard_dp_on_one_ledger():
    ledger = Ledger(Budget(10.0, 1e-5))
    with Run(lsdp_plan(), ledger, allow_uncertified=True) as run:
        run.release("step", lambda rng: 1.0)
    assert "LSDP" in run.report.status_line and "not standard DP" in run.report.status_line
    before = ledger.spent
    X = np.random.default_rng(0).standard_normal((50, 2))
    with pytest.raises(RelationMismatchError):
        DPMeanCovariance(clip=1.0, budget=Budget(1.0, 1e-6), ledger=ledger).fit(X)
    assert ledger.spent == before
    # and the other way round: a standard-DP ledger refuses an LSDP claim
    standard = Ledger(Budget(10.0, 1e-5))
    DPMeanCovariance(clip=1.0, budget=Budget(1.0, 1e-6), ledger=standard).fit(X)
    spent = standard.spent
    with pytest.raises(RelationMismatchError):
        with Run(lsdp_plan(), standard, allow_uncertified=True):
            pass
    assert standard.spent == spent
