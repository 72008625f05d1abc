"""Issue 16 items 1-2: every estimator is a scikit-learn estimator (clone, Pipeline, set_output,
get_feature_names_out, check_estimator), and model selection pays for every fit it makes.

check_estimator runs with a seeded ``random_state`` and a generous *finite* budget (never
``Budget.infinite()``, whose runs are reported as not private); the one check expected to fail is
listed in ``EXPECTED_FAILED`` with its reason, and in docs/sklearn.md.
"""
from __future__ import annotations

import copy
import pickle
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

from privsdr import (
    DPPLS,
    DPSIR,
    AdaSSPRegression,
    Budget,
    BudgetExceededError,
    DetachedLedgerError,
    DPBCDRegression,
    DPMeanCovariance,
    DPSparsePCA,
    DPStandardScaler,
    FederatedSIR,
    Ledger,
    PRIDERegressor,
    PublicRangeScaler,
    SparseDPSIR,
)
from privsdr.algorithms import MSC
from privsdr.errors import InputTypeError, NotFittedError

CHECK_BUDGET = Budget(50.0, 1e-3)


def check_estimators():
    """One configuration per estimator for scikit-learn's checks (their data: tens to 200 rows, <= 10 columns,
    values within a few units; the bounds cover them, so clipping is rare)."""
    B = CHECK_BUDGET
    return [
        DPMeanCovariance(clip=10.0, budget=B, random_state=0),
        DPSIR(1, bound=10.0, cut_points=[0.5, 1.5], n_slices=3, budget=B, random_state=0, diagnose_noise=False),
        SparseDPSIR(1, sparsity=1, bound=10.0, cut_points=[0.5, 1.5], n_slices=3, budget=B, random_state=0),
        DPSparsePCA(1, sparsity=1, bound=10.0, budget=B, random_state=0),
        MSC(bound=100.0, budget=B, random_state=0),
        DPPLS(1, bound_x=6.0, bound_y=3.0, budget=B, random_state=0),
        AdaSSPRegression(bound_x=10.0, bound_y=10.0, budget=B, random_state=0),
        # check_regressors_train asks R^2 > 0.5 on 200 rows: DP-BCD gets there only with one round at a very large
        # epsilon (measured on that data set: eps=50 -> R^2 = -0.35 (T=1), -2.8 (T=5); eps=500 -> 0.76 (T=1), 0.10 (T=5))
        DPBCDRegression(n_parties=2, n_rounds=1, budget=Budget(1000.0, 1e-3), row_bound=5.0, label_bound=4.0, coef_bound=1.0,
                        random_state=0),
        PRIDERegressor(n_parties=2, budget=B, bounds=(-10.0, 10.0), random_state=0),
        FederatedSIR(1, n_clients=2, bound=10.0, cut_points=[0.5], budget=B, random_state=0),
        PublicRangeScaler(-10.0, 10.0),
        DPStandardScaler(bound=10.0, budget=B, random_state=0),
    ]


#: checks expected to fail, with the reason (also in docs/sklearn.md); each is run and must fail for that reason
EXPECTED_FAILED = {
    "check_dtype_object": "matches the wording of Python's float() error ('argument must be a string or a number'); privsdr "
                          "refuses a non-number with an InputTypeError (a TypeError, as the check wants) that names the "
                          "offending value instead (docs/errors.md)",
}


def _check_name(check):
    check = getattr(check, "func", check)
    return getattr(check, "__name__", str(check))


@parametrize_with_checks(check_estimators())
def test_scikit_learn_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # noise diagnostics on tiny data
        if _check_name(check) not in EXPECTED_FAILED:
            check(estimator)
            return
        # not an xfail (which passes on any error, and whose report parses scikit-learn's sources: ~1 s per check):
        # the check must fail on its wording alone, the refusal being privsdr's TypeError naming the value
        with pytest.raises(AssertionError, match="should contain one of the following patterns") as failed:
            check(estimator)
    assert isinstance(failed.value.__cause__, InputTypeError)
    assert "dict" in str(failed.value.__cause__)


def test_the_expected_failure_really_fails_for_its_reason():
    """The listed check fails only on its wording: the error is a TypeError naming the value."""
    X = np.random.default_rng(0).uniform(size=(20, 3)).astype(object)
    X[0, 0] = {"foo": "bar"}
    with pytest.raises(TypeError, match="found dict"):
        DPMeanCovariance(clip=1.0, budget=CHECK_BUDGET).fit(X)


# -- data for the API tests -------------------------------------------------------------------------------
def _data(n=400, p=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, p))
    y = X @ np.array([1.0, -1.0, 0.5, 0.0][:p]) + 0.1 * rng.standard_normal(n)
    return X, y


def _fitted_output(est, X, y):
    """What the estimator computes on new rows (transform or predict) after fitting on X, y."""
    est.fit(X, y)
    return est.transform(X) if hasattr(est, "transform") else (est.predict(X) if hasattr(est, "predict") else est.covariance_)


@pytest.mark.parametrize("est", check_estimators(), ids=lambda e: type(e).__name__)
def test_clone_pipeline_and_unfitted_errors(est):
    """clone gives an unfitted twin with the very same parameters; a Pipeline step behaves as the estimator
    alone (same seed: same noise, same output); transform/predict before fit raise NotFittedError."""
    X, y = _data()
    twin = clone(est)
    assert twin is not est and not hasattr(twin, "privacy_report_")
    assert twin.get_params().keys() == est.get_params().keys()
    for name, value in est.get_params(deep=False).items():
        assert repr(getattr(twin, name)) == repr(value), name
    method = "transform" if hasattr(est, "transform") else ("predict" if hasattr(est, "predict") else None)
    if method:
        with pytest.raises(NotFittedError):
            getattr(twin, method)(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = _fitted_output(clone(est), X, y)
        pipe = make_pipeline(FunctionTransformer(), clone(est))  # an identity step: row-local, reads nothing
        pipe.fit(X, y)
    if method:
        np.testing.assert_allclose(getattr(pipe, method)(X), alone, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_allclose(pipe[-1].covariance_, alone, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("est", [e for e in check_estimators() if hasattr(e, "transform")], ids=lambda e: type(e).__name__)
def test_set_output_and_feature_names(est):
    pd = pytest.importorskip("pandas")
    X, y = _data()
    frame = pd.DataFrame(X, columns=["age", "dose", "weight", "bmi"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = clone(est).set_output(transform="pandas").fit(frame, y)
    out = fitted.transform(frame)
    assert isinstance(out, pd.DataFrame)
    names = list(fitted.get_feature_names_out())
    assert list(out.columns) == names and len(names) == out.shape[1]
    assert list(fitted.feature_names_in_) == ["age", "dose", "weight", "bmi"]
    one_to_one = isinstance(est, (MSC, PublicRangeScaler, DPStandardScaler))  # column by column: the input names
    expected = ["age", "dose", "weight", "bmi"] if one_to_one else [f"{type(est).__name__.lower()}{k}" for k in range(out.shape[1])]
    assert names == expected
    with pytest.raises(ValueError, match="feature names should match"):
        fitted.transform(frame.rename(columns={"age": "height"}))


# -- ledgers are accounts: clone, deepcopy and pickle never create a second one ------------------------------
def test_clone_shares_the_ledger_and_a_deepcopy_is_the_ledger_itself(tmp_path):
    for ledger in (Ledger(Budget(1.0, 1e-5)), Ledger(Budget(1.0, 1e-5), journal=tmp_path / "j.jsonl")):
        assert copy.deepcopy(ledger) is ledger and copy.copy(ledger) is ledger
        est = DPSIR(1, bound=1.0, cut_points=[-1.0, 0.0, 1.0], ledger=ledger)
        assert clone(est).ledger is ledger
        assert copy.deepcopy(est).ledger is ledger
        assert clone(clone(est)).ledger is ledger
    ledgers = {"party0": Ledger(Budget(1.0, 1e-5)), "party1": Ledger(Budget(1.0, 1e-5))}
    est = PRIDERegressor(ledgers=ledgers, budget=Budget(1.0, 1e-5), bounds=(-1.0, 1.0))
    cloned = clone(est).ledgers
    assert all(cloned[name] is ledgers[name] for name in ledgers)


def test_clone_shares_the_executor():
    with ThreadPoolExecutor(2) as pool:
        for est in (FederatedSIR(1, bound=1.0, cut_points=[0.0], budget=Budget(1.0, 1e-5), executor=pool),
                    PRIDERegressor(budget=Budget(1.0, 1e-5), bounds=(-1.0, 1.0), executor=pool)):
            twin = clone(est)
            assert twin.executor is pool and est.executor is pool
            assert twin.get_params()["budget"] == est.get_params()["budget"]


def _plan_cost(ledger):
    return DPPLS(1, bound_x=2.0, bound_y=2.0, budget=Budget(0.5, 1e-6), ledger=ledger, random_state=0)


def test_an_unpickled_in_memory_ledger_is_a_detached_copy_that_cannot_spend():
    X, y = _data()
    ledger = Ledger(Budget(1.0, 1e-5), accountant="basic")
    _plan_cost(ledger).fit(X, y)
    copy_ = pickle.loads(pickle.dumps(ledger))
    assert copy_.detached and copy_.spent == ledger.spent and copy_.budget == ledger.budget
    with pytest.raises(DetachedLedgerError, match="journal"):
        _plan_cost(copy_).fit(X, y)
    assert copy_.spent == ledger.spent  # nothing was charged anywhere
    fitted = pickle.loads(pickle.dumps(_plan_cost(Ledger(Budget(1.0, 1e-5))).fit(X, y)))  # a fitted model pickles
    assert fitted.ledger_.detached and fitted.predict(X).shape == (len(y),)


def test_an_unpickled_journal_ledger_is_the_same_account(tmp_path):
    X, y = _data()
    ledger = Ledger(Budget(1.0, 1e-5), accountant="basic", journal=tmp_path / "j.jsonl")
    again = pickle.loads(pickle.dumps(ledger))
    assert again is not ledger and not again.detached
    _plan_cost(again).fit(X, y)  # charged through the copy ...
    assert ledger.spent.epsilon == pytest.approx(0.5)  # ... is seen by the original: one account
    _plan_cost(ledger).fit(X, y)
    with pytest.raises(BudgetExceededError):
        _plan_cost(again).fit(X, y)
    blob = pickle.dumps(ledger)
    for path in tmp_path.glob("j.jsonl*"):  # the journal, its sealed head and its lock file
        path.rename(tmp_path / ("moved-" + path.name))
    orphan = pickle.loads(blob)  # no journal where it arrives: a detached copy, never a fresh account
    assert not (tmp_path / "j.jsonl").exists()
    assert orphan.detached and "could not be reopened" in orphan.detached


# -- model selection pays for itself --------------------------------------------------------------------------
def test_grid_search_charges_every_fit_to_a_shared_ledger_and_stops_when_the_budget_is_gone():
    """GridSearchCV clones the estimator for every fit; each clone holds the same ledger, so every fit
    (2 candidates x 3 folds + the refit = 7) is charged to it, and a search the budget cannot pay for is
    refused fit by fit, never overspent.

    What is private here and what is not: each fit is a DP release charged to the ledger. The *choice* of the
    best candidate is not: GridSearchCV ranks candidates by their scores on held-out folds, computed on the
    raw rows without noise, so the selected parameter (and everything fitted with it) depends on the data
    through an un-noised channel. The ledger's total is the cost of the fits, not a guarantee for the
    selection. Cheaper, private routes choose from the released statistics as free post-processing (DPSIR
    n_directions='bic'; DPPLS n_components='auto' or predict(n_components=a) on one fit): docs/sklearn.md.
    """
    X, y = _data(600)
    ledger = Ledger(Budget(3.5, 7e-6), accountant="basic")
    est = DPPLS(1, bound_x=2.0, bound_y=3.0, budget=Budget(0.5, 1e-6), ledger=ledger, random_state=0)
    search = GridSearchCV(est, {"n_components": [1, 2]}, cv=3).fit(X, y)
    runs = [r for r in ledger.runs if r.charged]
    assert len(runs) == 7
    assert ledger.spent.epsilon == pytest.approx(3.5)
    assert search.best_estimator_.ledger is ledger and est.ledger is ledger
    with pytest.raises(BudgetExceededError):
        GridSearchCV(clone(est), {"n_components": [1, 2]}, cv=3, error_score="raise").fit(X, y)
    assert ledger.spent.epsilon == pytest.approx(3.5) and len([r for r in ledger.runs if r.charged]) == 7

    small = Ledger(Budget(1.0, 2e-6), accountant="basic")  # room for 2 of the 7 fits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GridSearchCV's FitFailedWarning for the refused fits
        with pytest.raises(BudgetExceededError):
            GridSearchCV(clone(est).set_params(ledger=small), {"n_components": [1, 2]}, cv=3).fit(X, y)
    assert len([r for r in small.runs if r.charged]) == 2
    assert small.spent.epsilon <= 1.0 + 1e-12


def test_grid_search_on_worker_processes_charges_one_journal(tmp_path):
    """With n_jobs=2 each fit runs in another process: the pickled journal ledger reattaches to the journal
    (one account for every process); an in-memory ledger would arrive as a detached copy and refuse."""
    X, y = _data(300)
    ledger = Ledger(Budget(3.5, 7e-6), accountant="basic", journal=tmp_path / "search.jsonl")
    est = DPPLS(1, bound_x=2.0, bound_y=3.0, budget=Budget(0.5, 1e-6), ledger=ledger, random_state=0)
    GridSearchCV(est, {"n_components": [1, 2]}, cv=3, n_jobs=2).fit(X, y)
    assert len([r for r in Ledger.open(tmp_path / "search.jsonl").runs if r.charged]) == 7
    assert ledger.spent.epsilon == pytest.approx(3.5)
    memory = Ledger(Budget(3.5, 7e-6), accountant="basic")
    with pytest.raises(DetachedLedgerError):
        GridSearchCV(clone(est).set_params(ledger=memory), {"n_components": [1, 2]}, cv=3, n_jobs=2,
                     error_score="raise").fit(X, y)
    assert memory.spent.epsilon == 0.0
