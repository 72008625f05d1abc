"""``SecureVerticalRegression``: linear regression on vertically partitioned data at the central rate (issue 23), as a
scikit-learn estimator. The run itself (public parameters, checks, plan, the secure computation of X^T X and X^T y,
the post-processing ``secure_regression_from_released``) is ``secure_run.SecureRegressionRun``, which imports no
scikit-learn: a party process (``privsdr vertical party --secure``) builds that one (its module docstring: the
method, its calibration and trust model)."""
from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import RegressorMixin

from ..algorithms._base import PrivateEstimator, check_matrix
from ..errors import ValidationError
from ..parties.layout import is_block_list
from ..persistence import model_class
from .secure_rows import checked_parties
from .secure_run import (  # noqa: F401 (the run's names, importable from here as before)
    MAX_ROWS,
    NODES,
    RELATION,
    SecureRegressionRun,
    _gram_shape,
    _is_party_list,
    centred_xty_variance,
    column_scales,
    gram_layout,
    helpers_of,
    label_scale,
    party_bounds,
    released_constant,
    secure_regression_from_released,
)


@model_class
class SecureVerticalRegression(RegressorMixin, SecureRegressionRun, PrivateEstimator):
    """Ridge/OLS (or PLS) on vertically partitioned data from securely computed X^T X and X^T y (module docstring).

    Parameters
    ----------
    row_bound: public bound C_i on the norm of every row of a party's block (one number for every party, or a mapping
        party -> number); rows beyond it are scaled down by their party. Required. Bounds far apart are fine: every
        block and the label are rescaled by public powers of two (``column_scales``, ``label_scale``) and back.
    label_bound: public bound C_y on |y - y_center| (clipped by the label holder). Required.
    x_center: public centres of the columns (pooled order; default 0); y_center: public centre of y.
    fit_intercept: the constant column c (its coefficient times c is the intercept).
    n_components: None (ridge, AdaSSP's rule) or k >= 1 (PLS with at most k components, DPPLS S2's post-processing
        with its ``shrinkage="snr"`` rule, issue 24: the components above the noise, none when the centred X^T y is
        noise, slopes scaled by ``shrinkage_factor_`` = max(0, 1 - noise_ratio_^2)). Ridge with an intercept
        gets the same factor (``released.regression.fallback_factor``, issue 33): the prediction moves towards the
        DP mean of y the constant column carries, and is that mean when the noise explains all of its spread.
    colluders: t, the collusion threshold (MPyC's Shamir threshold; the noise is calibrated without t shares).
    helper: add a helper party that holds no data ("auto": when fewer than 3 data parties, for an honest majority),
        or a number k of helpers ("helper", "helper2", ...): each adds only a noise share, and with m parties and t
        colluders the opened noise sd is sqrt(m / (m - t)) times the calibrated one (``helper_count``).
    timeout: seconds a party process waits for the others. max_rows: the public cap on N that sets the grid.
    addresses: one ``host:port`` per party in ``parties_for`` order (helper first), each party listening on its own
        (default: free ports on 127.0.0.1). tls: mutual TLS between the parties (default); False: plaintext, asked
        for explicitly, and the report says so. certificates: the folder ``privsdr secure keys`` wrote (or a mapping
        party -> its folder); needed with TLS to any non-loopback address, made for the run otherwise.
    failure_probability: rho of AdaSSP's ridge rule. weights: budget weights of ``xtx`` and ``xty`` (default equal).
    n_parties: with a pooled X, the number of contiguous column blocks (the first holds y).
    diagnose_noise, budget, ledger, accountant, tight, random_state: as for ``AdaSSPRegression``.

    After ``fit``: ``coef_`` (pooled column order), ``coef_blocks_``, ``intercept_``, ``ridge_``, ``released_``
    (the opened statistics and their public noise sds), ``privacy_report_`` (with ``trust_model``), ``secure_cost_``
    (the secure computation's seconds, bytes each party sent, field size), ``noise_ratio_``.
    """

    model_attributes = ("coef_", "intercept_", "ridge_", "x_center_", "y_center_", "noise_ratio_", "shrinkage_factor_",
                        "n_features_in_")
    coef_: np.ndarray
    intercept_: float
    ridge_: float
    model_required = ("coef_", "intercept_")
    _requires_y = True

    # -- fit ---------------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> SecureVerticalRegression:
        """Fit on ``Party`` objects, a list of column blocks and y, or a pooled X and y with ``n_parties``: every party
        runs as its own process on 127.0.0.1. Everything is checked before anything is charged; the nodes are charged
        when every party process has agreed on the public job, before any noise share exists. A ``Party`` whose X is
        ``Chunks`` (with its public ``n_rows`` and ``n_features``) is read chunk by chunk: checked in a first pass,
        then streamed to its party process after the charge (``secure_rows.read_block``), so its memory stays flat
        in N (the label holder's y stays an array)."""
        from .estimator import as_parties

        X_raw = X
        parties, layout = checked_parties(as_parties(X, y, self.n_parties, type(self).__name__), min_rows=1)
        self._fit_layout(layout, {p.name: p for p in parties}, None, None, None)
        self._record_features(X_raw if not is_block_list(X_raw) and not _is_party_list(X_raw) else None,
                              sum(p.n_columns for p in layout.parties))
        return self

    # -- prediction --------------------------------------------------------------------------------
    def predict(self, X: Any) -> np.ndarray:
        """x^T coef_ + intercept_ for the pooled columns (N x m) or a list of the parties' blocks."""
        self._check_fitted("coef_", "intercept_")
        X_raw = X
        if is_block_list(X) or _is_party_list(X):
            X_raw = X = np.hstack([np.asarray(getattr(b, "X", b), dtype=float) for b in X])
        X = check_matrix(X, "X")
        self._check_features(X_raw, X.shape[1])
        if X.shape[1] != self.coef_.shape[0]:
            raise ValidationError(f"X has {X.shape[1]} features, but SecureVerticalRegression is expecting {self.coef_.shape[0]}")
        return X @ self.coef_ + float(self.intercept_)
