"""What makes every privsdr estimator a scikit-learn estimator (``BaseEstimator`` + tags + input bookkeeping).

Contract:

* Parameters are stored exactly as given in ``__init__`` and validated in ``fit`` (``clone`` checks that
  the clone's parameters are the very objects it passed).
* ``clone(est).ledger is est.ledger``: a ledger is an account, and ``Ledger.__deepcopy__`` returns the
  ledger itself (``privsdr.accounting.ledger``, "copies"), so GridSearchCV and ``cross_validate`` charge
  every fit to the one account. A mapping of ledgers (``ledgers=``) keeps its ledgers the same way. An
  ``executor`` (thread pool, Dask client) is machinery and is passed to the clone by reference too.
* Tags: dense 2-D float input, no NaN, ``y`` required by the supervised estimators; with an integer
  ``random_state`` a fit is deterministic (its noise is drawn from that seed), so the estimators are not
  tagged ``non_deterministic``. ``__sklearn_tags__`` (scikit-learn >= 1.6) and ``_more_tags`` (older) say
  the same thing.
* Feature bookkeeping: ``n_features_in_`` always, ``feature_names_in_`` when ``fit`` saw a DataFrame
  with string column names; ``transform``/``predict`` check both with scikit-learn's messages (a model file keeps
  both, so a loaded model checks them too).
* A fit inside a scikit-learn ``Pipeline`` after a step fitted on the rows without noise warns
  ``NonPrivatePreprocessingWarning`` (``privsdr._pipeline``; ``privsdr.check_pipeline`` is the full check),
  and its privacy records (``privacy_report_``, ``privacy_reports_``, ``privacy_``) are stored relabelled NOT PRIVATE
  (status ``none``, the reason in the status line): every fit sets them through ``PrivacyRecord``, whatever its order.
"""
from __future__ import annotations

import copy
import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from ._pipeline import PrivacyRecord, warn_if_behind_reading_steps
from .errors import NotFittedError, ValidationError
from .persistence import PersistentModel


def input_feature_names(X: Any) -> np.ndarray | None:
    """The column names of a DataFrame-like X when they are all strings (scikit-learn's rule), else None."""
    columns = getattr(X, "columns", None)
    if columns is None or isinstance(X, np.ndarray):
        return None
    names = np.asarray(list(columns), dtype=object)
    if names.size and all(isinstance(n, str) for n in names):
        return names
    return None


class SklearnEstimator(BaseEstimator, PersistentModel):
    """Base of every privsdr estimator: scikit-learn's ``BaseEstimator`` plus privsdr model files."""

    _requires_y = False  #: the supervised estimators set True
    privacy_report_ = PrivacyRecord()
    privacy_reports_ = PrivacyRecord()
    privacy_ = PrivacyRecord()

    # -- tags ------------------------------------------------------------------------------------
    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self._requires_y
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        return tags

    def _more_tags(self) -> dict[str, Any]:  # scikit-learn < 1.6
        return {"requires_y": self._requires_y, "allow_nan": False, "X_types": ["2darray"]}

    # -- pickling ---------------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """scikit-learn's state plus, for an estimator without ``ledger=`` in a process with a configured default
        ledger, that ledger: a worker it is sent to (joblib, Dask) charges the same account or refuses to spend
        (``accounting.default.set_default_ledger``), never a fresh budget of its own."""
        state: dict[str, Any] = super().__getstate__()
        if getattr(self, "ledger", None) is None:
            from .accounting.default import CARRIED, configured_ledger

            configured = configured_ledger()
            if configured is not None and CARRIED not in state:
                state = {**state, CARRIED: configured}
        return state

    # -- clone -----------------------------------------------------------------------------------
    def __sklearn_clone__(self) -> Any:
        """scikit-learn's clone, with an ``executor`` passed by reference (ledgers are by their own deepcopy)."""
        executor = getattr(self, "executor", None)
        if executor is None:
            return super().__sklearn_clone__()
        twin = copy.copy(self)
        twin.executor = None
        new = super(SklearnEstimator, twin).__sklearn_clone__()
        new.executor = executor
        return new

    # -- input bookkeeping -----------------------------------------------------------------------
    def _record_features(self, X_raw: Any, n_features: int) -> None:
        """At the end of fit: ``n_features_in_`` and (for a DataFrame with string columns) ``feature_names_in_``."""
        self.n_features_in_ = int(n_features)
        names = input_feature_names(X_raw)
        if names is not None and names.size == n_features:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        warn_if_behind_reading_steps(self)  # a fit in a Pipeline after a non-private step

    def _check_fitted(self, *attributes: str) -> None:
        missing = [a for a in attributes if not hasattr(self, a)]
        if missing:
            raise NotFittedError(f"{type(self).__name__} is not fitted: call fit() (or load a saved model) first")

    def _check_features(self, X_raw: Any, n_features: int) -> None:
        """New rows against the fitted columns: their number (an error) and names (as scikit-learn checks them)."""
        fitted = getattr(self, "feature_names_in_", None)
        given = input_feature_names(X_raw)
        name = type(self).__name__
        if fitted is not None and given is not None:
            if len(fitted) != len(given) or np.any(fitted != given):
                raise ValidationError(f"The feature names should match those that were passed during fit: {name} was fitted "
                                      f"on {list(fitted)}, got {list(given)}")
        elif fitted is not None:
            warnings.warn(f"X does not have valid feature names, but {name} was fitted with feature names", UserWarning, stacklevel=3)
        elif given is not None:
            warnings.warn(f"X has feature names, but {name} was fitted without feature names", UserWarning, stacklevel=3)
        expected = getattr(self, "n_features_in_", None)
        if expected is not None and n_features != expected:
            raise ValidationError(f"X has {n_features} features, but {name} is expecting {expected} features as input")
