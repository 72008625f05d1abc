"""One journal for every method of a data set (issue 25, item 1): add/remove plans (DPPLS, AdaSSP, MSC) are converted
to a replace-one ledger with every sensitivity doubled (a replacement is a removal and an addition), so DPSIR, DPPLS,
AdaSSP and the mean/covariance share one budget; the conversion is named in each report; the reverse is refused."""
from __future__ import annotations

import numpy as np
import pytest

import privsdr
from privsdr import Budget, Ledger, RelationMismatchError
from privsdr.accounting.gaussian import gaussian_epsilon
from privsdr.errors import PlanError
from privsdr.plan import Plan


def table(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 4))
    return X, X @ np.array([1.0, -1.0, 0.5, 0.0]) + 0.2 * rng.standard_normal(n)


def test_dpsir_dppls_adassp_and_mean_covariance_on_one_journal_add_up_under_the_stated_conversion(tmp_path):
    X, y = table()
    journal = tmp_path / "budget.jsonl"
    ledger = Ledger.create(journal, Budget(10.0, 1e-4), accountant="basic")
    part = Budget(1.0, 1e-6)
    fits = [
        privsdr.DPSIR(1, bound=1.0, cut_points=[-0.5, 0.0, 0.5], budget=part, ledger=ledger, random_state=0).fit(X, y),
        privsdr.DPPLS(2, bound_x=2.0, bound_y=3.0, budget=part, ledger=ledger, random_state=0).fit(X, y),
        privsdr.AdaSSPRegression(2.0, 3.0, budget=part, ledger=ledger, random_state=0, diagnose_noise=False).fit(X, y),
        privsdr.DPMeanCovariance(clip=2.0, budget=part, ledger=ledger, random_state=0).fit(X),
    ]
    assert Ledger.open(journal).relation.value == "replace_one" and len(Ledger.open(journal).runs) == 4
    # the add/remove plans say what was done to them, node by node, and every report is replace-one
    unconverted = {"DPPLS": fits[1].build_plan(*X.shape, part), "AdaSSPRegression": fits[2].build_plan(X.shape[1])}
    total = 0.0
    for est in fits:
        report = est.privacy_report_
        assert report.relation == "replace_one" and report.status == "certified"
        base = unconverted.get(type(est).__name__)
        if base is not None:
            assert base.relation.value == "add_remove"
            assert "x 2" in report.public_parameters["relation_conversion"]
        for node in report.nodes:
            declared = node.sensitivity["value"]
            if base is not None:  # twice the add/remove sensitivity, derivation saying why
                assert declared == pytest.approx(2 * base.nodes[node.name].sensitivity.value, rel=1e-12)
                assert "x 2 under replace-one" in node.sensitivity["derivation"]
            # written out: every node is Gaussian noise sigma on sensitivity Delta; basic composition sums their costs
            total += gaussian_epsilon(node.noise_scale / declared, node.cost["delta"])
    assert Ledger.open(journal).spent.epsilon == pytest.approx(total, rel=1e-6)
    assert total <= 4.0 + 1e-6  # each fit met its own (1, 1e-6) in replace-one terms


def test_a_journal_created_replace_one_takes_an_add_remove_fit_first():
    X, y = table()
    ledger = Ledger(Budget(4.0, 1e-5), relation="replace_one")
    pls = privsdr.DPPLS(2, bound_x=2.0, bound_y=3.0, budget=Budget(1.0, 1e-6), ledger=ledger, random_state=0).fit(X, y)
    assert pls.privacy_report_.relation == "replace_one"
    privsdr.DPSIR(1, bound=1.0, cut_points=[-0.5, 0.0, 0.5], budget=Budget(1.0, 1e-6), ledger=ledger, random_state=0).fit(X, y)
    assert len(ledger.runs) == 2


def test_the_reverse_conversion_is_refused_with_a_way_out_and_nothing_is_charged():
    X, y = table()
    ledger = Ledger(Budget(4.0, 1e-5))
    privsdr.DPPLS(2, bound_x=2.0, bound_y=3.0, budget=Budget(1.0, 1e-6), ledger=ledger, random_state=0).fit(X, y)
    spent = ledger.spent
    with pytest.raises(RelationMismatchError, match="ledger init --relation replace_one"):
        privsdr.DPSIR(1, bound=1.0, cut_points=[-0.5, 0.0, 0.5], budget=Budget(1.0, 1e-6), ledger=ledger).fit(X, y)
    assert ledger.spent == spent


def test_only_add_remove_plans_without_partitions_convert():
    plan = Plan("p", "replace_one")
    with pytest.raises(PlanError, match="only add/remove plans convert"):
        plan.converted("add_remove")
    part = Plan("q", "add_remove")
    part.partition("half", ["a", "b"])
    with pytest.raises(PlanError, match="partitioned"):
        part.converted("replace_one")
    assert plan.converted("replace_one") is plan


def test_the_cli_creates_a_replace_one_journal_that_every_method_can_use(tmp_path):
    from conftest import run_cli

    X, y = table(600)
    data = tmp_path / "rows.csv"
    data.write_text("a,b,c,d,y\n" + "\n".join(",".join(f"{v:.5f}" for v in (*r, t)) for r, t in zip(X, y, strict=True)) + "\n")
    journal = tmp_path / "budget.jsonl"
    assert run_cli("ledger", "init", journal, "--epsilon", 6, "--delta", 1e-5, "--relation", "replace_one").returncode == 0
    pls = run_cli("fit", "pls", "--data", data, "--target", "y", "--bound-x", 2, "--bound-y", 3, "--epsilon", 1, "--delta", 1e-6,
                  "--journal", journal)
    assert pls.returncode == 0, pls.stderr
    sir = run_cli("fit", "dpsir", "--data", data, "--target", "y", "--bound", 1, "--cut-points", 0, "--epsilon", 1, "--delta", 1e-6,
                  "--journal", journal)
    assert sir.returncode == 0, sir.stderr
    assert len(Ledger.open(journal).runs) == 2
