"""``DPBCDRegression``: linear regression on vertically partitioned data (DP-BCD, spec dpbcd_002.md).

``fit(parties)`` takes ``privsdr.vertical.Party`` objects (each a column block of the same N rows,
exactly one with y); ``fit([X_1, ..., X_k], y)`` is a shortcut in which the first block's party holds
y; ``fit(X, y)`` with ``n_parties=K`` splits a pooled X into K contiguous column blocks (a simulation,
as scikit-learn's tools call ``fit``). The fit runs the DP-BCD protocol among the parties (``privsdr.vertical.run_protocol``): in
process or on ``executor`` (any ``concurrent.futures`` executor or a Dask ``distributed.Client``),
with the same result on all of them.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.base import RegressorMixin

from ..accounting import Budget, Ledger, as_budget
from ..accounting.default import ledger_for
from ..algorithms._base import PrivateEstimator, check_matrix
from ..core import split_columns
from ..errors import ValidationError
from ..parties.engine import run_protocol
from ..parties.layout import Layout, Party, PartyInfo, is_block_list, pooled_label
from ..persistence import model_class
from ..plan import CalibratedPlan
from .dpbcd import DPBCDConfig, DPBCDProtocol, diagnosed


class VerticalModel:
    """Model files of the vertical estimators (``privsdr.persistence``): ``layout_`` and ``config_`` (the class's
    ``model_config_type``) are restored to their records; one report per party is kept (``privacy_reports_``). The
    messages and plans of the run are not kept (FederatedSIR's messages are not either)."""

    model_config_type: Any = None

    @classmethod
    def restore_attribute(cls, name: str, value: Any) -> Any:
        if name == "layout_":
            return Layout.from_dict(value)
        if name == "config_" and cls.model_config_type is not None:
            return cls.model_config_type(**value)
        return value


@model_class
class DPBCDRegression(VerticalModel, RegressorMixin, PrivateEstimator):
    """Least squares on column blocks held by different parties, by (DP) block coordinate descent.

    Parameters
    ----------
    mode: ``"certified"`` (default: replace-one DP, public bounds), ``"paper"`` (Algorithm 2 as
        published: eps-LSDP claimed, not standard DP; needs ``allow_uncertified=True``) or ``"none"``
        (Algorithm 1, raw remainders; needs ``allow_uncertified=True`` and no budget).
    n_rounds: T, the rounds of BCD (each party updates T times). Paper: 5.
    budget: per-record total over every party's releases. Certified: (eps, delta > 0). Paper:
        (eps, 0) with eps what the run spends (the paper's eps for ``accounting="paper"``).
    ledgers: optional mapping party name -> that party's own ``Ledger`` (fresh ledgers otherwise).
    ledger: optional project ledger: the per-record account of the rows the parties share. Every party's part
        of each run is charged to it too (one batch per run), so it composes every run on these rows. Party
        ledgers that already hold charges are refused under a row-level relation without it.
    accountant: of the global calibration and the fresh ledgers (default ``"best"``; paper: ``"basic"``).
    row_bound, label_bound, coef_bound: certified mode's public bounds: C_i on every row of a
        party's block (a number or a mapping party -> number), C_y on |y|, B_i on each increment.
    ridge, remainder_clip, split, calibration: certified mode (see ``DPBCDConfig``).
    shrinkage: certified mode's post-processing of each step: ``"james_stein"`` (default) shrinks the step towards 0
        by the share of its predicted change that the released noise alone explains (``dpbcd_shrinkage.certified_increment``),
        so a step whose statistic is noise adds nothing, and a fit that warns ``NoiseDominatesWarning`` sets every
        coefficient to 0 (with ``dp_intercept``: it predicts the DP mean, issue 33); ``"none"``: the unshrunk step
        (issue 23's fit).
    y_center: a public centre c of y (e.g. the middle of the label's public range, never read off the data): labels
        are clipped to c +- label_bound.
    dp_intercept: certified mode (default True): the label holder also releases the sum of its clipped labels once
        (a small share of the budget), the model is y - c - mu~ = X beta with mu~ the DP mean, and ``intercept_`` is
        c + mu~: the trivial model (every coefficient 0) predicts the DP mean. False: ``intercept_`` = c.
    gamma, abort_check, gamma_min_variant, accounting, noise, xi_floor: paper mode (spec §6, §9).
    n_parties: with a pooled ``X``, the number of contiguous column blocks (the first holds y).
    executor, random_state, allow_uncertified, message_reports: execution.

    After ``fit``: ``coef_`` (all columns, in the order of the parties given), ``intercept_`` (c + the DP mean, or c),
    ``noise_ratio_`` (certified: about how far the noise alone moves the predictions, relative to their spread; over
    1/2 the fit warns ``NoiseDominatesWarning``; the reports carry it), ``coef_blocks_``,
    ``privacy_`` (what each party revealed to whom, costs, per-record composition),
    ``privacy_reports_`` (one ``PrivacyReport`` per party), ``messages_``, ``plans_``, ``layout_``.
    """

    model_attributes = ("coef_", "intercept_", "coef_blocks_", "noise_ratio_", "layout_", "config_", "privacy_")
    model_required = ("coef_", "layout_")
    model_config_type = DPBCDConfig

    def __init__(self, mode: str = "certified", *, n_rounds: int = 5, budget: Budget | tuple[float, float] | None = None,
                 ledgers: Mapping[str, Ledger] | None = None, ledger: Ledger | None = None, accountant: str | None = None,
                 row_bound: Any = None, label_bound: float | None = None, coef_bound: Any = None, ridge: float = 0.0,
                 remainder_clip: float = 4.0, split: Sequence[float] = (0.5, 0.5, 1.0), calibration: str = "analytic",
                 shrinkage: str = "james_stein", y_center: float = 0.0, dp_intercept: bool = True,
                 gamma: float = 1.2, abort_check: str = "both", gamma_min_variant: str = "keep_label",
                 accounting: str = "conservative", noise: str = "radial", xi_floor: float | None = None,
                 n_parties: int | None = None, executor: Any = None, random_state: Any = None, allow_uncertified: bool = False,
                 message_reports: bool = True) -> None:
        self.mode = mode
        self.n_rounds = n_rounds
        self.budget = budget
        self.ledgers = ledgers
        self.ledger = ledger
        self.accountant = accountant
        self.row_bound = row_bound
        self.label_bound = label_bound
        self.coef_bound = coef_bound
        self.ridge = ridge
        self.remainder_clip = remainder_clip
        self.split = split
        self.calibration = calibration
        self.shrinkage = shrinkage
        self.y_center = y_center
        self.dp_intercept = dp_intercept
        self.gamma = gamma
        self.abort_check = abort_check
        self.gamma_min_variant = gamma_min_variant
        self.accounting = accounting
        self.noise = noise
        self.xi_floor = xi_floor
        self.n_parties = n_parties
        self.executor = executor
        self.random_state = random_state
        self.allow_uncertified = allow_uncertified
        self.message_reports = message_reports

    def config(self) -> DPBCDConfig:
        return DPBCDConfig(mode=self.mode, n_rounds=self.n_rounds, gamma=self.gamma, abort_check=self.abort_check,
                           gamma_min_variant=self.gamma_min_variant, accounting=self.accounting, noise=self.noise,
                           xi_floor=self.xi_floor, row_bound=self.row_bound, label_bound=self.label_bound,
                           coef_bound=self.coef_bound, ridge=self.ridge, remainder_clip=self.remainder_clip, split=tuple(self.split),
                           calibration=self.calibration, shrinkage=self.shrinkage, y_center=self.y_center,
                           dp_intercept=self.dp_intercept)

    def _budget(self) -> Budget:
        if self.mode == "none":
            if self.budget is not None and not as_budget(self.budget).is_infinite:
                raise ValidationError("mode 'none' is the non-private baseline: give no budget (or Budget.infinite())")
            return Budget.infinite()
        if self.budget is None:
            raise ValidationError("give budget=Budget(epsilon, delta): the per-record total over every party's releases")
        return as_budget(self.budget)

    def _accountant(self) -> str:
        return self.accountant or ("basic" if self.mode == "paper" else "best")

    _requires_y = True

    def _parties(self, X: Any, y: Any) -> list[Party]:
        return as_parties(X, y, self.n_parties, type(self).__name__)

    def plan(self, n_rows: int, widths: Sequence[int] | Mapping[str, int], label_party: int | str = 0) -> CalibratedPlan:
        """The global calibrated plan for N rows and these block widths (a list, parties named party0, party1,
        ...; or a mapping party name -> width, in party order): ``.cost()`` prices it without data."""
        named = list(widths.items()) if isinstance(widths, Mapping) else [(f"party{i}", w) for i, w in enumerate(widths)]
        label = named[label_party][0] if isinstance(label_party, int) else label_party
        layout = Layout(int(n_rows), tuple(PartyInfo(name, int(w), name == label) for name, w in named))
        budget = self._budget()
        protocol = DPBCDProtocol(self.config())
        from ..accounting import make_accountant

        calibrated = protocol.build_plan(layout, budget).allocate(budget, accountant=make_accountant(self._accountant(), budget.delta),
                                                                  **protocol.allocation())
        if self.mode == "certified" and label_party in (0, named[0][0]):  # the forecast's fits give y to the first block
            from functools import partial

            from ..algorithms.forecast import forecast_regression

            calibrated.forecaster = partial(forecast_regression, self, int(n_rows), sum(int(w) for _, w in named),
                                            problem=self._forecast_problem(named), budget=budget)
        return calibrated

    def _forecast_problem(self, named: Sequence[tuple[str, int]]) -> Any:
        """The public synthetic problem at this layout: party k's columns with sd C_k / (2 sqrt(m_k)) (rows inside
        their bound on average), y centred at ``y_center`` with sd C_y / 3, the pooled X split into the blocks."""
        from ..algorithms.forecast import RegressionProblem

        config = self.config()
        sds = [np.full(int(w), config.bound("row_bound", name) / (2.0 * np.sqrt(int(w)))) for name, w in named]
        x_sd = np.concatenate(sds)
        label_bound = config.label_bound
        assert label_bound is not None  # certified mode's config requires it
        return RegressionProblem(np.zeros(x_sd.size), x_sd, float(self.y_center or 0.0), float(label_bound) / 3.0,
                                 tuple(int(w) for _, w in named))

    def fit(self, X: Any, y: Any = None) -> DPBCDRegression:
        X_raw = X
        parties = self._parties(X, y)
        config = self.config()
        budget = self._budget()
        outcome = run_protocol(DPBCDProtocol(config), parties, budget, ledgers=self.ledgers, accountant=self._accountant(),
                               executor=self.executor, random_state=self.random_state, allow_uncertified=self.allow_uncertified,
                               message_reports=self.message_reports, project=ledger_for(self))
        result = outcome.result
        self.config_ = config
        self.layout_ = outcome.layout
        self.coef_blocks_ = dict(result.coef_blocks)
        self.coef_ = result.coef
        self.intercept_ = float(result.intercept)
        self._record_features(X_raw, int(self.coef_.shape[0]))
        self.messages_ = outcome.messages
        self.privacy_ = outcome.privacy
        self.privacy_reports_ = diagnosed(outcome.reports, result)
        self.noise_ratio_ = result.noise_ratio
        if result.noise_ratio is not None:
            from ..released import regression

            regression.warn_if_noise_wins(result.noise_ratio, stacklevel=2, fallback=regression.ZEROED_NOTE if result.fell_back else None)
        self.plans_ = dict(outcome.plans)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """X @ coef_ + intercept_ for the pooled columns (N x m) or a list of the parties' blocks (the paper's model
        has no intercept, A21: in paper and none mode ``intercept_`` is the public y_center, 0 by default)."""
        self._check_fitted("coef_")
        X_raw = X
        if is_block_list(X):
            X_raw = X = np.hstack([np.asarray(getattr(b, "X", b), dtype=float) for b in X])
        X = check_matrix(X, "X")
        self._check_features(X_raw, X.shape[1])
        return X @ self.coef_ + getattr(self, "intercept_", 0.0)

    @staticmethod
    def paper_budget(per_party_epsilon: float, n_parties: int = 2) -> Budget:
        """The paper's experiments quote a per-party eps (spec A4): the total is k times it."""
        if not (math.isfinite(per_party_epsilon) and per_party_epsilon > 0):
            raise ValidationError("per_party_epsilon must be positive and finite")
        return Budget(per_party_epsilon * n_parties, 0.0)


def as_parties(X: Any, y: Any, n_parties: Any, who: str) -> list[Party]:
    """The parties of a vertical fit: ``Party`` objects; or column blocks and y (the first block's party holds y);
    or a pooled X and y split into ``n_parties`` contiguous column blocks (the simulation scikit-learn's tools need)."""
    if isinstance(X, (list, tuple)) and X and all(isinstance(p, Party) for p in X):
        if y is not None:
            raise ValidationError("with Party objects, y belongs to its party: do not pass y to fit")
        return list(X)
    if not is_block_list(X):
        X = _pooled_blocks(X, n_parties)
    y = pooled_label(y)
    if not X:
        raise ValidationError("fit takes a list of Party objects, or a list of column blocks and y")
    if y is None:
        raise ValidationError(f"fit([X_1, ..., X_k], y): y is required (the first block's party holds it): {who} "
                              "requires y to be passed, but the target y is None")
    return [Party(f"party{i}", block, y if i == 0 else None) for i, block in enumerate(X)]


def _pooled_blocks(X: Any, k: Any) -> list[np.ndarray]:
    if k is None:
        raise ValidationError("fit takes a list of Party objects, a list of column blocks and y, or a pooled X and y with n_parties=K")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise ValidationError(f"n_parties must be an integer >= 2, got {k!r}")
    arr = check_matrix(X, "X", min_rows=2)
    if arr.shape[1] < k:
        raise ValidationError(f"X has {arr.shape[1]} feature(s) (n_features = {arr.shape[1]}), fewer than n_parties = {k}: "
                              "every party needs a column")
    return split_columns(arr, int(k))
