"""The memos that keep a fit's fixed costs (pricing, reserving, reporting) low never go stale.

A plan's hash, its charges and a ledger's derived state (spent, remaining, composition) are memoised; each test
changes what a memo reads in a way the code does (a node replaced, a public parameter list edited, a process that
dies holding a charged run) and checks the answer against a fresh computation.
"""
from __future__ import annotations

import hashlib
import json

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privsdr.accounting.ledger as ledger_module
from privsdr import Budget, BudgetExceededError, Ledger, Plan, Run, Sensitivity
from privsdr.accounting import BasicAccountant, Charge
from privsdr.accounting.events import PureEvent
from privsdr.plan import graph

UNIT = 1 / 128


def _fresh_hash(plan: Plan) -> str:
    """The plan hash's definition, computed without any memo."""
    return hashlib.sha256(json.dumps(plan.public_dict(), sort_keys=True, default=str).encode()).hexdigest()[:16]


def _plan(cut_points: list[float] | None = None) -> Plan:
    p = Plan("memo", "replace_one", {"cut_points": cut_points or [0.0, 1.0]})
    p.add("a", "laplace", Sensitivity(1.0, "l1"), share=Budget(UNIT, 0.0))
    p.add("b", "laplace", Sensitivity(1.0, "l1"), share=Budget(UNIT, 0.0))
    return p


def test_the_plan_hash_follows_every_change_of_what_it_hashes():
    p = _plan()
    seen = {p.plan_hash()}
    assert p.plan_hash() == _fresh_hash(p)
    p.public_params["cut_points"].append(2.0)  # a list inside the public parameters edited in place
    assert p.plan_hash() == _fresh_hash(p) and p.plan_hash() not in seen
    seen.add(p.plan_hash())
    p.nodes["b"] = attrs.evolve(p.nodes["b"], sensitivity=Sensitivity(2.0, "l1"))  # a node replaced (parties.engine does)
    assert p.plan_hash() == _fresh_hash(p) and p.plan_hash() not in seen
    seen.add(p.plan_hash())
    p.add("c", "laplace", Sensitivity(1.0, "l1"), share=Budget(UNIT, 0.0))
    assert p.plan_hash() == _fresh_hash(p) and p.plan_hash() not in seen
    seen.add(p.plan_hash())
    p.partition("site", ["x", "y"])
    assert p.plan_hash() == _fresh_hash(p) and p.plan_hash() not in seen
    seen.add(p.plan_hash())
    p.name = "renamed"
    assert p.plan_hash() == _fresh_hash(p) and p.plan_hash() not in seen


def test_a_calibrated_plans_charges_follow_a_replaced_node_and_are_a_fresh_list():
    cp = _plan().allocate(Budget(2 * UNIT, 0.0))
    first = cp.charges()
    assert cp.charges() == first and cp.charges() is not first
    first.clear()  # the caller's list: the plan's charges are unchanged
    assert [c.label for c in cp.charges()] == ["a", "b"]
    before = cp.charges()[1]
    cp.plan.nodes["b"] = attrs.evolve(cp.plan.nodes["b"], status="claimed", share=Budget(UNIT, 0.0))
    after = cp.charges()[1]
    assert after.status.value == "claimed" and before.status.value == "certified"


def test_an_in_memory_ledger_keeps_what_a_journal_reads_back(tmp_path):
    """A reservation's charges are kept as objects in memory and as dicts in a journal: both give the same state."""
    cp = _plan().allocate(Budget(2 * UNIT, 0.0))
    memory, journal = Ledger(Budget(8 * UNIT, 0.0), accountant="basic"), Ledger(Budget(8 * UNIT, 0.0), accountant="basic",
                                                                               journal=tmp_path / "j.jsonl")
    for ledger in (memory, journal):
        for seed in range(2):
            with Run(cp, ledger, random_state=seed) as run:
                run.release("a", 0.0)
    reopened = Ledger.open(tmp_path / "j.jsonl")
    for ledger in (journal, reopened):
        assert ledger.spent == memory.spent and ledger.remaining == memory.remaining
        assert ledger.composition == memory.composition and ledger.charges == memory.charges
        assert [r.charges for r in ledger.runs] == [r.charges for r in memory.runs]


def test_spent_and_remaining_follow_a_run_whose_process_died_without_any_new_record(tmp_path, monkeypatch):
    """A run of another process that charged one node counts its whole plan once that process is dead, with no new
    journal record: the memo of the ledger's derived state is keyed by which runs have ended, not by the records only."""
    path = tmp_path / "j.jsonl"
    ledger = Ledger(Budget(8 * UNIT, 0.0), accountant="basic", journal=path)
    cp = _plan().allocate(Budget(2 * UNIT, 0.0))
    reservation = ledger.reserve(cp)
    reservation.charge("a")
    alive = {"other": True}
    monkeypatch.setattr(ledger_module, "process_alive", lambda pid: alive["other"])
    ledger._runs[reservation.run_id].pid = -12345  # as if another process on this host had reserved it
    assert ledger.spent == (UNIT, 0.0)
    assert ledger.remaining == (7 * UNIT, 0.0)
    composition = ledger.composition
    alive["other"] = False  # the other process dies: no record is written
    assert ledger.spent == (2 * UNIT, 0.0)
    assert ledger.remaining == (6 * UNIT, 0.0)
    assert ledger.composition == composition  # one run: non-adaptive either way
    assert ledger.reserved == {}


@pytest.mark.parametrize("accountant", ["basic", "best"])
def test_a_refused_plan_leaves_the_memoised_state_as_it_was(accountant):
    ledger = Ledger(Budget(3 * UNIT, 1e-6), accountant=accountant)
    cp = _plan().allocate(Budget(2 * UNIT, 0.0))
    with Run(cp, ledger, random_state=0) as run:
        run.release("a", 0.0)
    spent, remaining = ledger.spent, ledger.remaining
    with pytest.raises(BudgetExceededError, match="nothing was spent"):
        ledger.reserve(cp)
    assert ledger.spent == spent and ledger.remaining == remaining and ledger.reserved == {}


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(st.lists(st.floats(1e-300, 1e300, allow_subnormal=False), min_size=1, max_size=12), st.booleans())
def test_the_worst_path_of_whole_scope_nodes_is_the_basic_accountants_answer_exactly(values, partitioned):
    """The allocation's shortcut for plans whose nodes all read every record (the exact sum, rounded up) gives the
    basic accountant's answer bit for bit; with a partition the general path runs and still agrees with it."""
    p = Plan("w", "replace_one")
    scopes = p.partition("site", ["a", "b"]) if partitioned else [None, None]
    for i, v in enumerate(values):
        p.add(f"n{i}", "laplace", Sensitivity(1.0, "l1"), weight=v, scope=scopes[i % 2] if partitioned and i % 3 else None)
    nodes = list(p.nodes.values())
    charges = [Charge(n.name, (PureEvent(v),), p.relation, n.scope) for n, v in zip(nodes, values, strict=True)]
    assert graph._worst_path(nodes, values, p.relation) == BasicAccountant().cost(charges).epsilon


def test_the_reports_one_pass_dict_is_what_asdict_and_the_float_tags_give():
    """``PrivacyReport.to_dict`` in one pass equals the two-pass definition (``attrs.asdict``, then ``_num`` tagging inf
    and nan), key order included, on a report whose diagnostics hold inf, nan, tuples and nested dicts."""
    from privsdr.report.report import _num

    cp = _plan().allocate(Budget(2 * UNIT, 0.0))
    with Run(cp, Ledger(Budget(8 * UNIT, 0.0)), random_state=0) as run:
        run.release("a", 0.0)
    report = attrs.evolve(run.report, diagnostics={"x": float("inf"), "y": [float("nan"), (1.0, -float("inf"))],
                                                   "z": {"w": (1, "v", None, True)}})
    data = attrs.asdict(report, recurse=True)
    for optional in ("model", "coverage", "trust_model", "filing"):
        if data[optional] is None:
            del data[optional]
    order = ["schema", "schema_version", "status", "status_line"]
    expected = _num({**{k: data[k] for k in order}, **{k: v for k, v in data.items() if k not in order}})
    assert json.dumps(report.to_dict()) == json.dumps(expected)
    assert report.from_json(report.to_json(indent=None)).to_json() == report.to_json()


@settings(max_examples=8, derandomize=True, database=None, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["gaussian", "laplace", "approx"]), st.sampled_from([1.0, 2.0, 4.0]),
                          st.sampled_from([None, "a", "b"])), min_size=1, max_size=4))
def test_a_best_ledger_leaves_each_members_own_answer_in_the_memo(nodes):
    """``best`` keeps each member's answer in the cost memo as it prices (``BestAccountant._cost_afresh``): a member's
    ``cost`` read afterwards (the report's per-accountant totals) is what that member computes afresh, bit for bit,
    and the ledger's price is the accountant's."""
    from privsdr.accounting.events import ApproxEvent, GaussianEvent, LaplaceEvent
    from privsdr.accounting.scope import Scope

    events = {"gaussian": lambda z: GaussianEvent(z, 1e-7), "laplace": lambda z: LaplaceEvent(z),
              "approx": lambda z: ApproxEvent(0.1 * z, 1e-8)}
    charges = [Charge(f"n{i}", (events[kind](z),), "replace_one", Scope.whole() if cell is None else Scope.whole().cell("site", cell))
               for i, (kind, z, cell) in enumerate(nodes)]
    ledger = Ledger(Budget(1.0, 1e-6), accountant="best")
    assert ledger.cost_of(charges) == ledger.accountant.cost(charges)
    for member in ledger.accountant.members:
        assert ledger.accountant.cost_by_member(charges)[member.name] == member.cost(charges)
