"""PrivacyReport: JSON round-trip, schema checks, contents, seed policy, status line first."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from privsdr import Budget, DPMeanCovariance, Ledger, Plan, PrivacyReport, Run, Sensitivity, execute
from privsdr.accounting import BasicAccountant
from privsdr.report.report import SCHEMA, SCHEMA_VERSION, NodeReport

SEED = 123456789
X = np.random.default_rng(0).standard_normal((60, 3))


def _strict_json(text: str) -> dict:
    """Parse as standard JSON: Infinity/NaN literals are not allowed."""

    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def noisy_fit():
    return DPMeanCovariance(clip=1.5, budget=Budget(1.0, 1e-6), random_state=SEED).fit(X)


@pytest.fixture(scope="module")
def baseline_fit():
    return DPMeanCovariance(clip=1.5, budget=Budget.infinite(), random_state=SEED).fit(X)


# --------------------------------------------------------------------------------------------------
# Round trip and schema
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["noisy_fit", "baseline_fit"])
def test_json_round_trip(which, request):
    report = request.getfixturevalue(which).privacy_report_
    text = report.to_json()
    data = _strict_json(text)
    back = PrivacyReport.from_json(text)
    assert back == report
    assert back.to_json() == text
    assert PrivacyReport.from_dict(data) == report
    assert all(isinstance(n, NodeReport) for n in back.nodes)
    assert PrivacyReport.from_json(report.to_json(indent=None)) == report


def test_infinite_values_survive_round_trip(baseline_fit):
    report = baseline_fit.privacy_report_
    assert math.isinf(report.budget["total"]["epsilon"])
    text = report.to_json()
    assert '"inf"' in text and "Infinity" not in text
    back = PrivacyReport.from_json(text)
    assert math.isinf(back.budget["total"]["epsilon"]) and back.budget["total"]["epsilon"] > 0
    assert math.isinf(back.totals["basic"]["epsilon"])
    assert all(math.isinf(n.cost["epsilon"]) for n in back.nodes)
    assert back == report


def test_schema_and_version_checked(noisy_fit):
    data = noisy_fit.privacy_report_.to_dict()
    assert data["schema"] == SCHEMA and data["schema_version"] == SCHEMA_VERSION
    for key, bad in (("schema", "some.other-report"), ("schema_version", SCHEMA_VERSION + 1), ("schema_version", "1")):
        broken = dict(data)
        broken[key] = bad
        with pytest.raises(ValueError):
            PrivacyReport.from_dict(broken)
    missing = {k: v for k, v in data.items() if k != "schema"}
    with pytest.raises(ValueError, match="schema"):
        PrivacyReport.from_dict(missing)
    with pytest.raises(ValueError):
        PrivacyReport.from_json(json.dumps({"hello": "world"}))
    # from_dict does not mutate its input
    snapshot = json.dumps(data, sort_keys=True)
    PrivacyReport.from_dict(data)
    assert json.dumps(data, sort_keys=True) == snapshot


def _plan_report(node_name: str, description: str, note: str) -> PrivacyReport:
    plan = Plan("user_plan", public_params={"label": description})
    plan.add(node_name, "gaussian", Sensitivity(1.0, "l2"), description=description)
    calibrated = plan.allocate(Budget(1.0, 1e-6))
    _, report = execute(calibrated, Ledger(Budget(1.0, 1e-6)), {node_name: lambda parents: np.zeros(2)}, random_state=1, notes=[note])
    return report


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1, max_size=8), st.text(max_size=12), st.text(max_size=12))
@example("inf", "nan", "-inf")
@example("mean", "inf", "note")
def test_round_trip_with_arbitrary_user_strings(node_name, description, note):
    """User-supplied strings (node names, descriptions, notes) must come back as the same strings."""
    report = _plan_report(node_name, description, note)
    back = PrivacyReport.from_json(report.to_json())
    assert back.nodes[0].name == node_name
    assert back.nodes[0].description == description
    assert back.notes == [note]
    assert back.public_parameters == {"label": description}
    assert back == report


# --------------------------------------------------------------------------------------------------
# Contents
# --------------------------------------------------------------------------------------------------
def test_report_lists_every_node_with_scale_sensitivity_and_cost(noisy_fit):
    report, plan = noisy_fit.privacy_report_, noisy_fit.plan_
    assert [n.name for n in report.nodes] == list(plan.nodes) == ["mean", "second_moment"]
    basic = BasicAccountant()
    for node in report.nodes:
        spec = plan.specs[node.name]
        assert node.mechanism == spec.mechanism
        assert node.noise_scale == spec.scale > 0
        assert node.noise_multiplier == spec.noise_multiplier
        assert node.sensitivity["value"] == spec.sensitivity.value
        assert node.sensitivity["norm"] == "l2"
        assert node.sensitivity["relation"] == "replace_one"
        assert node.sensitivity["derivation"]
        (charge,) = [c for c in plan.charges() if c.label == node.name]
        cost = basic.compose(list(charge.events))
        assert node.cost == cost.to_dict()
        assert 0 < node.cost["epsilon"] < math.inf and 0 < node.cost["delta"] <= 1e-6
        assert node.released and node.status == "certified"
    assert report.nodes[0].sensitivity["value"] == pytest.approx(2 * 1.5 / 60)
    assert report.nodes[1].sensitivity["value"] == pytest.approx(math.sqrt(2) * 1.5**2 / 60)
    assert report.public_parameters == {"clip": 1.5, "n_samples": 60, "n_features": 3}
    assert report.relation == "replace_one"


def test_report_totals_for_every_accountant(noisy_fit):
    report = noisy_fit.privacy_report_
    assert set(report.totals) >= {"basic", "advanced", "rdp", "pld"}
    for name in ("basic", "advanced", "rdp", "pld"):
        t = report.totals[name]
        assert t is not None, name
        assert 0 < t["epsilon"] < math.inf and 0 < t["delta"] < 1
    # basic is the sum of the per-node costs
    assert report.totals["basic"]["epsilon"] == pytest.approx(sum(n.cost["epsilon"] for n in report.nodes), rel=1e-12)
    assert report.totals["basic"]["delta"] == pytest.approx(sum(n.cost["delta"] for n in report.nodes), rel=1e-12)
    # tight Gaussian accounting beats basic composition, and the spent cost is the ledger's accountant's
    assert report.totals["pld"]["epsilon"] < report.totals["basic"]["epsilon"]
    assert report.spent == tuple(noisy_fit.ledger_.spent)
    assert report.spent[0] == pytest.approx(min(t["epsilon"] for t in report.totals.values() if t["delta"] <= 1e-6), rel=1e-9)


def test_budget_before_and_after_over_a_shared_ledger():
    ledger = Ledger(Budget(3.0, 3e-6))
    first = DPMeanCovariance(clip=1.0, budget=Budget(1.0, 1e-6), ledger=ledger, random_state=1).fit(X).privacy_report_
    after_first = ledger.remaining
    second = DPMeanCovariance(clip=1.0, budget=Budget(1.0, 1e-6), ledger=ledger, random_state=2).fit(X).privacy_report_
    assert first.budget["total"] == {"epsilon": 3.0, "delta": 3e-6}
    assert first.budget["before"] == {"epsilon": 3.0, "delta": 3e-6}
    assert first.budget["requested"] == {"epsilon": 1.0, "delta": 1e-6}
    assert first.budget["after"] == after_first.to_dict()
    assert second.budget["before"] == first.budget["after"]
    assert second.budget["after"] == ledger.remaining.to_dict()
    assert second.budget["after"]["epsilon"] < second.budget["before"]["epsilon"]
    assert first.run_id != second.run_id
    assert first.plan_hash == second.plan_hash  # same public plan


def test_unreleased_node_is_reported_and_charged_at_close():
    plan = Plan("two_nodes")
    plan.add("a", "gaussian", Sensitivity(1.0, "l2"))
    plan.add("b", "laplace", Sensitivity(1.0, "l1"))
    calibrated = plan.allocate(Budget(1.0, 1e-6))
    ledger = Ledger(Budget(1.0, 1e-6))
    with Run(calibrated, ledger, random_state=3) as run:
        run.release("a", np.zeros(3))
    report = run.report
    released = {n.name: n.released for n in report.nodes}
    assert released == {"a": True, "b": False}
    assert [c.label for c in ledger.charges] == ["a", "b"]  # b: charged at close, never released
    assert report.budget["spent_by_run"] == ledger.spent.to_dict()
    basic = sum(n.cost["epsilon"] for n in report.nodes)
    assert report.totals["basic"]["epsilon"] == pytest.approx(basic, rel=1e-12)
    assert report.status == "certified" and any("charged at close without being released: b" in n for n in report.notes)
    assert PrivacyReport.from_json(report.to_json()) == report


# --------------------------------------------------------------------------------------------------
# Seed policy, status line
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("random_state", [SEED, np.random.SeedSequence(SEED), np.random.default_rng(SEED), None])
def test_seed_never_recorded(random_state):
    model = DPMeanCovariance(clip=1.5, budget=Budget(1.0, 1e-6), random_state=random_state).fit(X)
    report = model.privacy_report_
    text = report.to_json() + report.summary() + repr(report)
    assert str(SEED) not in text
    assert "not recorded" in report.seed_policy
    # and the noise / released values are not in it either
    for value in list(model.mean_) + list(np.ravel(model.second_moment_)):
        assert repr(float(value)) not in text


def test_status_line_first(noisy_fit, baseline_fit):
    for model, head in ((noisy_fit, "CERTIFIED"), (baseline_fit, "NON-PRIVATE BASELINE")):
        report = model.privacy_report_
        assert report.status_line.startswith(head)
        assert report.summary().splitlines()[0] == report.status_line
        keys = list(report.to_dict())
        assert keys[:4] == ["schema", "schema_version", "status", "status_line"]
    line = noisy_fit.privacy_report_.status_line
    assert "replace_one" in line and "epsilon=" in line and "delta=" in line


def test_status_line_for_uncertified_plans():
    plan = Plan("mixed")
    plan.add("ok", "gaussian", Sensitivity(1.0, "l2"))
    plan.add("published", "opaque", Sensitivity(1.0, "l2"), share=(0.2, 1e-7), status="claimed")
    calibrated = plan.allocate(Budget(1.0, 1e-6))
    queries = {"ok": lambda parents: np.zeros(2), "published": lambda parents: (lambda rng: 42)}
    outputs, report = execute(calibrated, Ledger(Budget(1.0, 1e-6)), queries, random_state=0, allow_uncertified=True)
    assert outputs["published"] == 42
    assert report.status == "claimed"
    assert report.summary().splitlines()[0] == report.status_line
    assert report.status_line.startswith("CLAIMED, NOT CERTIFIED") and "published" in report.status_line
    assert PrivacyReport.from_json(report.to_json()) == report

    plan = Plan("leaky")
    plan.add("ok", "gaussian", Sensitivity(1.0, "l2"))
    plan.add("raw", "non_private", Sensitivity(1.0, "l2"), status="none")
    calibrated = plan.allocate(Budget(1.0, 1e-6))
    queries = {"ok": lambda parents: np.zeros(2), "raw": lambda parents: np.arange(3)}
    outputs, report = execute(calibrated, Ledger(Budget(1.0, 1e-6)), queries, random_state=0, allow_uncertified=True)
    assert np.array_equal(outputs["raw"], np.arange(3))
    assert report.status == "none"
    assert report.status_line.startswith("NOT PRIVATE") and "raw" in report.status_line
    assert PrivacyReport.from_json(report.to_json()) == report

    # a run with a claimed node and a non-private one names each for what it is
    plan = Plan("mixed")
    plan.add("published", "opaque", Sensitivity(1.0, "l2"), share=(0.5, 1e-6), status="claimed")
    plan.add("raw", "non_private", Sensitivity(1.0, "l2"), status="none")
    calibrated = plan.allocate(Budget(1.0, 1e-6))
    queries = {"published": lambda parents: (lambda rng: 42), "raw": lambda parents: np.arange(3)}
    _, report = execute(calibrated, Ledger(Budget(1.0, 1e-6)), queries, random_state=0, allow_uncertified=True)
    line = report.status_line
    assert line.startswith("NOT PRIVATE: raw release data without a DP guarantee; published carry only claimed"), line


def test_report_metadata(noisy_fit):
    report = noisy_fit.privacy_report_
    assert report.algorithm == "DPMeanCovariance"
    assert report.algorithm_version == report.library_versions["privsdr"]
    assert "numpy" in report.library_versions
    assert report.timestamps["started"] <= report.timestamps["finished"]
    assert report.data_shape == [60, 3]
    assert report.accountant["name"] == "best"
    assert report.spent == (report.budget["spent_by_run"]["epsilon"], report.budget["spent_by_run"]["delta"])


_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1e-300, 1.5]))
_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 5), _FLOATS, st.text(max_size=4)),
                       lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                               st.dictionaries(st.text(max_size=3), inner, max_size=3)), max_leaves=8)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(diagnostics=st.dictionaries(st.text(max_size=3), _VALUES, max_size=4), node_params=st.dictionaries(st.text(max_size=3), _VALUES, max_size=2),
       indent=st.sampled_from([None, 2]))
@example(diagnostics={"x": float("inf")}, node_params={}, indent=None)
@example(diagnostics={}, node_params={"y": (float("nan"), [1.0])}, indent=2)
def test_to_json_is_the_json_of_to_dict_byte_for_byte(noisy_fit, diagnostics, node_params, indent):
    """``to_json`` writes a report whose floats are all finite in one pass (the encoder meets the node records itself)
    and falls back to ``to_dict`` when one is inf or NaN: either way the text is ``json.dumps(to_dict())``, key order,
    the {"$float": ...} tags, tuples as lists and nested node records included."""
    import attrs

    report = noisy_fit.privacy_report_
    nodes = [attrs.evolve(report.nodes[0], params=node_params), *report.nodes[1:]]
    edited = attrs.evolve(report, diagnostics=diagnostics, nodes=nodes)
    assert edited.to_json(indent=indent) == json.dumps(edited.to_dict(), indent=indent, sort_keys=False)
    _strict_json(edited.to_json(indent=indent))


def test_the_totals_are_each_accountants_own_answer_at_the_ledgers_delta():
    """The report's per-accountant totals (memoised on the charges, the slack and the ledger's delta) are what each
    accountant computes afresh at that ledger's delta: the same plan on ledgers of two deltas gets two answers."""
    from privsdr.accounting import AdvancedAccountant, PldAccountant, RdpAccountant
    from privsdr.accounting.accountants import default_slack

    plan = Plan("totals", public_params={})
    plan.add("a", "gaussian", Sensitivity(1.0, "l2"))
    plan.add("b", "laplace", Sensitivity(1.0, "l1"))
    calibrated = plan.allocate(Budget(1.0, 1e-6))
    seen = []
    for delta in (1e-5, 1e-3):
        ledger = Ledger(Budget(10.0, delta), accountant="rdp")
        _, report = execute(calibrated, ledger, {"a": lambda parents: 0.0, "b": lambda parents: 0.0}, random_state=0)
        charges = calibrated.charges()
        fresh = {acc.name: acc._cost_afresh(charges).to_dict() for acc in (
            BasicAccountant(), AdvancedAccountant(default_slack(delta), delta), RdpAccountant(delta), PldAccountant(target_delta=delta))}
        assert report.totals == fresh
        seen.append(report.totals)
    assert seen[0]["rdp"] != seen[1]["rdp"] and seen[0]["advanced"] != seen[1]["advanced"]
