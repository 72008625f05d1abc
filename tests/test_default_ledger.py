"""The process-wide default ledger (issue 25, item 2): fits without ``ledger=`` accumulate in one place."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.model_selection import cross_val_score

import privsdr
from privsdr import DPPLS, DPSIR, Budget, BudgetExceededError, DPMeanCovariance, Ledger
from privsdr.errors import FreshBudgetWarning, ValidationError, WholeBudgetWarning


def _data(n=400, p=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, p))
    return X, X[:, 0] + 0.1 * rng.normal(size=n)


def _as_replace_one(cost, relation):
    """Independent recomputation of one fit's entry: group privacy for two changes under add/remove."""
    eps, delta = cost["epsilon"], cost["delta"]
    if relation == "add_remove":
        return 2 * eps, (1 + math.exp(eps)) * delta
    return eps, delta


def test_cross_val_score_accumulates_in_the_default_ledger_and_warns_from_the_second_fit():
    X, y = _data()
    model = DPPLS(n_components=1, bound_x=1.0, bound_y=2.0, budget=Budget(0.5, 1e-6), random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cross_val_score(model, X, y, cv=3)
    fresh = [w for w in caught if issubclass(w.category, FreshBudgetWarning)]
    assert len(fresh) == 2  # fits 2 and 3: the first fit's fresh budget is the one it was given
    assert "fit number 3" in str(fresh[-1].message) and fresh[-1].filename == __file__
    tracker = privsdr.default_ledger()
    assert len(tracker.runs) == 3 and tracker.summary()["tracking"]
    assert tracker.tracked_fits == sum(1 for run in tracker.runs if run.charged) == 3  # the count the warning reads
    eps, delta = _as_replace_one({"epsilon": 0.5, "delta": 1e-6}, "add_remove")
    # each fit spends its budget up to the tight calibration's rounding (inward), never more
    assert 3 * eps * (1 - 1e-3) <= tracker.spent.epsilon <= 3 * eps * (1 + 1e-9)
    assert 3 * delta * (1 - 1e-3) <= tracker.spent.delta <= 3 * delta * (1 + 1e-9)
    text = privsdr.ledger_to_markdown(tracker.summary())
    assert "tracking ledger" in text and "no total" in text


def test_three_methods_without_a_ledger_total_the_independent_recomputation():
    X, y = _data()
    fits = [
        DPSIR(n_directions=1, bound=1.0, n_slices=4, cut_points=[-0.5, 0.0, 0.5], budget=Budget(0.7, 1e-6), random_state=1),
        DPPLS(n_components=1, bound_x=1.0, bound_y=2.0, budget=Budget(0.4, 1e-6), random_state=2),
        DPMeanCovariance(clip=2.0, budget=Budget(0.3, 1e-7), random_state=3),
    ]
    expected_eps = expected_delta = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FreshBudgetWarning)
        for model in fits:
            model.fit(X, y) if not isinstance(model, DPMeanCovariance) else model.fit(X)
            report = model.privacy_report_
            e, d = _as_replace_one(report.budget["spent_by_run"], report.relation)
            expected_eps, expected_delta = expected_eps + e, expected_delta + d
    spent = privsdr.default_ledger().spent
    assert spent.epsilon == pytest.approx(expected_eps, rel=1e-9)
    assert spent.delta == pytest.approx(expected_delta, rel=1e-9)


def test_a_configured_default_ledger_is_charged_like_ledger_and_refuses_what_does_not_fit():
    X, y = _data()
    ledger = Ledger(Budget(1.0, 1e-5), accountant="basic")
    privsdr.set_default_ledger(ledger)
    assert privsdr.default_ledger() is ledger

    def sir(budget):
        return DPSIR(n_directions=1, bound=1.0, n_slices=4, cut_points=[-0.5, 0.0, 0.5], budget=budget, random_state=0)

    sir(Budget(0.6, 1e-6)).fit(X, y)
    assert len(ledger.runs) == 1 and ledger.spent.epsilon > 0.5
    before = ledger.spent
    with pytest.raises(BudgetExceededError):
        sir(Budget(0.6, 1e-6)).fit(X, y)
    assert ledger.spent == before and len(ledger.runs) == 1  # nothing spent, nothing reserved
    with pytest.warns(WholeBudgetWarning):
        sir(None).fit(X, y)  # budget=None takes what is left of the configured ledger, and says so
    assert ledger.remaining.epsilon == pytest.approx(0.0, abs=1e-6)


def test_noise_off_baselines_and_refused_fits_are_not_entered():
    X, y = _data()
    DPPLS(n_components=1, bound_x=1.0, bound_y=2.0, budget=Budget.infinite()).fit(X, y)
    with pytest.raises(ValidationError):
        DPPLS(n_components=1, bound_x=-1.0, bound_y=2.0, budget=Budget(1.0, 1e-6)).fit(X, y)
    assert privsdr.default_ledger().runs == []


def test_set_default_ledger_checks_its_argument_and_returns_the_previous_one_and_keeps_the_tracking_ledger():
    X, y = _data()
    with pytest.raises(ValidationError, match="privsdr.Ledger"):
        privsdr.set_default_ledger("budget.jsonl")  # type: ignore[arg-type]
    DPPLS(n_components=1, bound_x=1.0, bound_y=2.0, budget=Budget(0.5, 1e-6)).fit(X, y)
    first, second = Ledger(Budget(1.0, 1e-6)), Ledger(Budget(2.0, 1e-6))
    assert privsdr.set_default_ledger(first) is None
    assert privsdr.set_default_ledger(second) is first
    assert privsdr.set_default_ledger(None) is second  # the restore pattern: the tracked total is kept
    assert privsdr.default_ledger().summary().get("tracking") and len(privsdr.default_ledger().runs) == 1


def test_a_plan_or_forecast_is_not_a_fit_and_does_not_warn():
    model = DPPLS(n_components=1, bound_x=1.0, bound_y=2.0, budget=Budget(0.5, 1e-6))
    X, y = _data()
    model.fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FreshBudgetWarning)
        model.plan(400, 4)
    assert len(privsdr.default_ledger().runs) == 1


def test_every_estimator_without_ledger_obeys_the_configured_default_ledger():
    """DP-BCD, PRIDE and DPPLS paper mode used to bypass it (review of issue 25)."""
    from privsdr import DPBCDRegression, PRIDERegressor

    X, y = _data(n=300, p=4)
    ledger = Ledger(Budget(1.0, 1e-5), relation="replace_one")
    privsdr.set_default_ledger(ledger)
    with pytest.raises(BudgetExceededError):
        DPBCDRegression(n_parties=2, row_bound=2.0, label_bound=3.0, coef_bound=2.0, budget=Budget(5.0, 1e-6), random_state=0).fit(X, y)
    with pytest.raises(privsdr.RelationMismatchError):  # as published: add/remove noise, not converted
        DPPLS(n_components=1, mode="paper", budget=Budget(5.0, 1e-6), allow_uncertified=True).fit(X, y)
    with pytest.raises(privsdr.RelationMismatchError):  # PRIDE's cell-level unit cannot enter a row-level account
        PRIDERegressor(n_parties=2, bounds=(-1.0, 1.0), budget=Budget(0.5, 1e-6), random_state=0).fit(X, y)
    assert ledger.spent.epsilon == 0


def test_a_configured_in_memory_ledger_never_lets_another_process_spend_a_fresh_budget():
    """An estimator pickled to a worker carries the configured ledger, which arrives as a copy that refuses to spend;
    a forked child refuses to spend its inherited in-memory copy (review of issue 25)."""
    import multiprocessing
    import pickle

    from privsdr import AdaSSPRegression
    from privsdr.errors import DetachedLedgerError

    X, y = _data()
    privsdr.set_default_ledger(Ledger(Budget(1.0, 1e-5)))
    model = AdaSSPRegression(bound_x=2.0, bound_y=2.0, budget=Budget(0.5, 1e-6), random_state=0)
    in_worker = pickle.loads(pickle.dumps(model))
    privsdr.set_default_ledger(None)  # a spawned worker has no configured ledger of its own
    with pytest.raises(DetachedLedgerError):
        in_worker.fit(X, y)
    privsdr.set_default_ledger(Ledger(Budget(1.0, 1e-5)))
    context = multiprocessing.get_context("fork")
    answers = context.SimpleQueue()
    child = context.Process(target=_fit_in_child, args=(model, X, y, answers))  # forked: nothing is pickled on the way
    child.start()
    try:
        child.join(60)
        assert not answers.empty() and answers.get() == "DetachedLedgerError"
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def _fit_in_child(model, X, y, answers) -> None:
    try:
        model.fit(X, y)
        answers.put("fitted")
    except privsdr.PrivsdrError as exc:
        answers.put(type(exc).__name__)


def test_a_journal_backed_default_ledger_is_shared_with_a_worker(tmp_path):
    import pickle

    from privsdr import AdaSSPRegression

    X, y = _data()
    ledger = Ledger(Budget(2.0, 1e-5), journal=tmp_path / "j.jsonl")
    privsdr.set_default_ledger(ledger)
    in_worker = pickle.loads(pickle.dumps(AdaSSPRegression(bound_x=2.0, bound_y=2.0, budget=Budget(0.5, 1e-6), random_state=0)))
    privsdr.set_default_ledger(None)
    in_worker.fit(X, y)
    assert len(Ledger.open(tmp_path / "j.jsonl").runs) == 1 and ledger.spent.epsilon > 0


def test_a_huge_add_remove_epsilon_is_entered_without_overflow():
    """Group privacy's (1 + e^eps) delta saturates at delta = 1 instead of overflowing (edPLS at eps = 1000)."""
    from privsdr.accounting import Cost, Relation, Status
    from privsdr.accounting.default import FitEntry

    [charge] = FitEntry("x", Cost(1000.0, 1e-6), Relation.ADD_REMOVE, Status.CLAIMED).charges()
    assert charge.events[0].epsilon == 2000.0 and charge.events[0].delta == 1.0
    [cell] = FitEntry("x", Cost(1.0, 1e-6), Relation.REPLACE_ENTRY, Status.CERTIFIED).charges()
    assert type(cell.events[0]).__name__ == "NonPrivateEvent"  # a cell-level guarantee says nothing about a row
