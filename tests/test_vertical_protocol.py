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


def gaussian_plan():
    plan = Plan("tickets", "replace_one")
    plan.add("a", "gaussian", Sensitivity(1.0, "l2"), weight=1.0)
    plan.add("b", "gaussian", Sensitivity(1.0, "l2", derivation="adaptive"), weight=1.0, parents=("a",), adaptive=True)
    return plan.allocate(Budget(1.0, 1e-6))


def test_tickets_charge_first_and_release_exactly_what_run_release_would():
    import pickle

    plan = gaussian_plan()
    with Run(plan, Ledger(Budget(1.0, 1e-6)), random_state=5) as direct:
        a = direct.release("a", np.ones(3))
        b = direct.release("b", np.zeros(2), sensitivity=0.5)
    ledger = Ledger(Budget(1.0, 1e-6))
    with Run(plan, ledger, random_state=5) as run:
        tickets = run.issue("a", "b")  # a parent may be issued in the same call
        assert [c.label for c in run._reservation.charged] == ["a", "b"]  # charged before any noise exists
        remote = pickle.loads(pickle.dumps(tickets))  # as if shipped to another process
        out_a, spec_a = remote["a"].release(np.ones(3))
        out_b, spec_b = remote["b"].release(np.zeros(2), sensitivity=0.5)
        run.accept("a", out_a, spec_a)
        run.accept("b", out_b, spec_b)
    assert np.array_equal(a, out_a) and np.array_equal(b, out_b)
    assert run.report.nodes[1].sensitivity["value"] == 0.5 == direct.report.nodes[1].sensitivity["value"]


def test_tickets_refuse_misuse():
    plan = gaussian_plan()
    with Run(plan, Ledger(Budget(1.0, 1e-6)), random_state=1) as run:
        with pytest.raises(PlanError, match="parents"):
            run.issue("b")
        t = run.issue("a")["a"]
        with pytest.raises(PlanError, match="already released"):
            run.issue("a")
        out, spec = t.release(np.ones(2))
        import attrs

        with pytest.raises(PlanError, match="another noise spec"):
            run.accept("a", out, attrs.evolve(spec, noise_multiplier=spec.noise_multiplier / 2))
        run.accept("a", out, spec)
        with pytest.raises(PlanError, match="not issued"):
            run.accept("a", out, spec)
        tb = run.issue("b")["b"]
        with pytest.raises(PlanError, match="needs sensitivity"):
            tb.release(np.ones(2))
