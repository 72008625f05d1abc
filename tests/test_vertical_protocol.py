"""The vertical party layer: the LSDP relation, noise tickets, messages, sessions, executors."""
import numpy as np
import pytest

from privsdr import Budget, Ledger, PlanError, Relation, RelationMismatchError, Sensitivity
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


# -- the party layer with a toy one-shot protocol (the shape PRIDE has: entry-level, parallel) -----
from privsdr import ValidationError  # noqa: E402
from privsdr.vertical import (  # noqa: E402
    Action,
    ActionResult,
    Mailbox,
    Outgoing,
    Party,
    PartyMessage,
    Stage,
    VerticalProtocol,
    message_id,
    run_protocol,
)

BOUND = 1.0


class NoisyColumnSums(VerticalProtocol):
    """Every party broadcasts the noisy column sums of its clipped block once (one entry moves a sum
    by at most 2 * BOUND); then every party adds up what it received (post-processing)."""

    name = "test.colsums"
    version = 1

    def digest(self, layout):
        return layout.digest()

    def build_plan(self, layout, budget):
        plan = Plan("colsums", "replace_entry")
        scopes = plan.partition("party", layout.names, stable=True)  # disjoint attribute sets: parallel composition
        for name, scope in zip(layout.names, scopes, strict=True):
            plan.add(f"{name}/sums", "gaussian", Sensitivity(2 * BOUND, "l2", "replace_entry", "one entry, |x| <= 1"), weight=1.0,
                     scope=scope)
        return plan

    def schedule(self, layout):
        names = layout.names
        broadcast = Stage(0, "broadcast", [Action(n, "broadcast", (f"{n}/sums",)) for n in names])
        combine = Stage(1, "combine", [Action(n, "combine", reads=[message_id(0, o, "sums") for o in names if o != n]) for n in names])
        return [broadcast, combine]

    def act(self, action, party, state, inbox, tickets):
        if action.step == "broadcast":
            node = action.nodes[0]
            out, spec = tickets[node].release(np.clip(party.X, -BOUND, BOUND).sum(axis=0))
            others = [n for n in self.names if n != party.name]
            return ActionResult(None, {node: (out, spec)}, [Outgoing("sums", others, {"sums": out}, {}, (node,))])
        total = sum(float(m.arrays["sums"].sum()) for m in inbox.values())
        return ActionResult({"others_total": total})

    def __init__(self, names):
        self.names = names


def toy_parties(n=50):
    rng = np.random.default_rng(0)
    return [Party(name, rng.uniform(-1, 1, (n, w)), rng.normal(size=n) if name == "a" else None) for name, w in (("a", 2), ("b", 3), ("c", 1))]


def test_a_one_shot_entry_level_protocol_composes_in_parallel_across_parties():
    parties = toy_parties()
    ledgers = {p.name: Ledger(Budget(1.0, 1e-5)) for p in parties}
    run = run_protocol(NoisyColumnSums(["a", "b", "c"]), parties, Budget(1.0, 1e-5), ledgers=ledgers, random_state=3)
    assert run.privacy["relation"] == "replace_entry" and "parallel" in run.privacy["composition"]
    per_record = run.privacy["per_record"]
    for ledger in ledgers.values():
        assert ledger.spent.epsilon == pytest.approx(per_record["basic"]["epsilon"], rel=1e-9)  # each party spends it all ...
    assert per_record["basic"]["epsilon"] <= 1.0  # ... and a record's entry is in one party's block only: max, not sum
    assert [m.id for m in run.messages] == [message_id(0, n, "sums") for n in "abc"]
    assert set(run.messages[0].recipients) == {"b", "c"}
    clean = {p.name: np.clip(p.X, -1, 1).sum() for p in parties}
    exact = run_protocol(NoisyColumnSums(["a", "b", "c"]), parties, Budget.infinite())
    assert exact.result["a"]["others_total"] == pytest.approx(clean["b"] + clean["c"], rel=1e-12)
    assert run.result["a"]["others_total"] != exact.result["a"]["others_total"]
    assert all(m.report.status == "certified" for m in run.messages)


def test_the_layer_refuses_bad_parties_before_spending():
    parties = toy_parties()
    ledgers = {p.name: Ledger(Budget(1.0, 1e-5)) for p in parties}
    proto = NoisyColumnSums(["a", "b", "c"])
    bad_sets = [
        [parties[0], Party("b", parties[1].X[:-1]), parties[2]],
        [parties[0], Party("a", parties[1].X), parties[2]],
        [parties[0], Party("b/x", parties[1].X), parties[2]],
        [parties[0], Party("b", parties[1].X, np.ones(3)), parties[2]],
        [parties[0], Party("b", np.where(parties[1].X > 0.9, np.inf, parties[1].X)), parties[2]],
    ]
    for bad in bad_sets:
        with pytest.raises(ValidationError):
            run_protocol(proto, bad, Budget(1.0, 1e-5), ledgers=ledgers)
    with pytest.raises(ValidationError, match="unknown parties"):
        run_protocol(proto, parties, Budget(1.0, 1e-5), ledgers={"z": Ledger(Budget(1.0, 1e-5))})
    assert all(ledger.spent == (0.0, 0.0) and not ledger.runs for ledger in ledgers.values())


def test_messages_round_trip_refuse_tampering_and_travel_through_a_mailbox(tmp_path):
    parties = toy_parties()
    run = run_protocol(NoisyColumnSums(["a", "b", "c"]), parties, Budget(1.0, 1e-5), random_state=1)
    m = run.messages[0]
    again = PartyMessage.from_bytes(m.to_bytes(), protocol="test.colsums", version=1)
    assert np.array_equal(again.arrays["sums"], m.arrays["sums"]) and again.recipients == m.recipients
    assert again.report.to_json() == m.report.to_json() and again.payload_bytes == m.payload_bytes == 16
    with pytest.raises(ValidationError, match="readable"):
        PartyMessage.from_bytes(m.to_bytes()[:-30])
    with pytest.raises(ValidationError, match="protocol"):
        PartyMessage.from_bytes(m.to_bytes(), protocol="privsdr.dpbcd")
    with pytest.raises(ValidationError, match="version"):
        PartyMessage.from_bytes(m.to_bytes(), protocol="test.colsums", version=2)
    box = Mailbox(tmp_path / "box", poll=0.01, timeout=0.2)
    box.post(m)
    assert np.array_equal(box.fetch(m.id).arrays["sums"], m.arrays["sums"])
    assert not list((tmp_path / "box").glob(".*.tmp"))  # atomic writes leave no temporaries
    with pytest.raises(TimeoutError):
        box.fetch("9999-nobody-nothing")
