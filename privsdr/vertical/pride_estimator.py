"""``PRIDERegressor``: ridge regression on vertically partitioned data with perturbed random sketches
between the parties (PRIDE, spec pride_004.md).

``fit(parties)`` takes ``privsdr.vertical.Party`` objects (column blocks of the same n rows; the
parties holding y estimate their coefficients, the others only send sketches); ``fit([X_1, ...,
X_K], y)`` gives y to every party; ``fit(X, y)`` with ``n_parties=K`` splits the columns into K
contiguous blocks (the paper's tau = p / K). The fit runs the PRIDE protocol
(``privsdr.vertical.run_protocol``) in process or on ``executor``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.base import RegressorMixin

from ..accounting import Budget, Ledger, as_budget, make_accountant
from ..accounting.default import ledger_for
from ..algorithms._base import PrivateEstimator, check_matrix
from ..core import split_columns
from ..errors import ValidationError
from ..parties.engine import run_protocol
from ..parties.layout import Layout, Party, PartyInfo, is_block_list, pooled_label
from ..persistence import model_class
from ..plan import CalibratedPlan
from . import pride_steps as steps
from .estimator import VerticalModel
from .pride import PRIDEConfig, PRIDEProtocol, fallback_diagnosed, warn_if_fell_back


@model_class
class PRIDERegressor(VerticalModel, RegressorMixin, PrivateEstimator):
    """Ridge on column blocks held by different parties, each adjusting for the others through one
    perturbed SRHT sketch per party (PRIDE).

    Parameters
    ----------
    mode: ``"certified"`` (default: public column ranges ``bounds``, clipped; entry-level or row-level
        DP), ``"paper"`` (Theorem 1 as published: theta_k read off the standardised data, claimed;
        needs ``allow_uncertified=True``) or ``"none"`` (DUAL-LOCO, noise-free sketches; needs
        ``allow_uncertified=True`` and no budget).
    sketch_dim: tau_subs per party: a fraction of tau_k (rounded as in Table D.1), an integer,
        ``"full"`` (tau', the exact case) or a mapping party -> one of those. Default 0.2.
    budget: (eps, delta) of the protocol. Under ``relation="entry"`` every party's sketch gets all of it
        (disjoint attributes compose in parallel); under ``"row"`` the K sketches share it.
    ledgers: optional mapping party name -> that party's own ``Ledger`` (fresh ledgers otherwise).
    ledger: optional project ledger: the per-record account of the rows the parties share. Every party's part
        of each run is charged to it too (one batch per run), so it composes every run on these rows. Party
        ledgers that already hold charges are refused under a row-level relation without it.
    accountant: of the calibration and fresh ledgers (default ``"best"``).
    bounds: certified mode's public column ranges: ``(lo, hi)`` for every column, or a mapping party ->
        ``(lo, hi)`` with numbers or one number per column.
    relation: ``"entry"`` (S-DP, default) or ``"row"`` (certified only, A9.3).
    calibration: ``"analytic"`` (certified default) or ``"kenthapadi"`` (paper default, Theorem 1).
    lam, cv, lambdas, n_folds, cv_seed: a fixed lambda (``lam``), or ``cv="local"`` (default: each
        party by CV on its own view, free) or ``"global"`` (held-out predictions exchanged: not
        covered, needs ``allow_uncertified=True``) over ``lambdas`` (default: a log grid).
    loss_scale: ``"half"`` (b = (X^T X + n lam I)^-1 X^T y) or ``"paper_eq1"`` (n lam / 2).
    bias_correction: the errors-in-variables correction of A9.2 (beyond the paper); ``None`` (default): on in
        certified mode (consistent: without it each block absorbs the effects the others' noisy sketches cannot carry,
        and the global prediction counts them twice), off in the paper's modes.
    shrinkage: certified mode with local CV: ``"held_out"`` (default) sets a party's coefficients to 0 (the
        constant prediction) when the held-out errors of its own part of the prediction at the chosen lambda cannot
        tell it from the mean of y (one-sided paired test at 0.05 over the label holders and the lambda grid, and a
        gain of at least 1 % of var(y)) and warns ``NoiseDominatesWarning``; ``"none"``.
    center, standardize: preprocessing (certified: clip, then centre; paper/none: standardise).
    sketch_seed: public seed of the parties' SRHTs (default: derived from ``random_state``).
    n_parties: with a pooled ``X``, the number of contiguous column blocks.
    executor, random_state, allow_uncertified, message_reports: execution.

    After ``fit``: ``coef_`` (every column, when every party holds y) and ``intercept_``, on the raw scale of the
    columns in every mode: ``predict(X) = X @ coef_ + intercept_`` (certified mode clips new rows to ``bounds`` first;
    on a standardised design, paper and none, the fitted coefficients are ``coef_`` times the columns' sd in
    ``transforms_``), ``coef_blocks_`` (the same per party), ``lambdas_``, ``sketch_coef_blocks_``, ``noise_sd_``
    (sigma_k per party), ``sketch_dims_``,
    ``held_out_p_values_``, ``held_out_gains_`` and ``trivial_blocks_`` (``shrinkage="held_out"``: the parties whose
    block fell back to 0 -- its held-out gain was not significant or under 1 % of var(y) -- and the fit warns),
    ``privacy_``, ``privacy_reports_``, ``messages_``, ``plans_``, ``layout_``, ``config_``.
    """

    model_attributes = ("coef_", "intercept_", "coef_blocks_", "lambdas_", "sketch_coef_blocks_", "noise_sd_", "sketch_dims_",
                        "clipped_eigenvalues_", "held_out_p_values_", "held_out_gains_", "trivial_blocks_", "transforms_",
                        "layout_", "config_", "privacy_")
    model_required = ("coef_blocks_", "layout_", "transforms_")
    model_config_type = PRIDEConfig

    def __init__(self, mode: str = "certified", *, sketch_dim: Any = 0.2, budget: Budget | tuple[float, float] | None = None,
                 ledgers: Mapping[str, Ledger] | None = None, ledger: Ledger | None = None, accountant: str | None = None, bounds: Any = None,
                 relation: str = "entry", calibration: str | None = None, lam: float | None = None, cv: str | None = None,
                 lambdas: Any = None, n_folds: int = 5, cv_seed: int = 0, loss_scale: str = "half", bias_correction: bool | None = None,
                 shrinkage: str = "held_out",
                 center: bool = True, standardize: bool | None = None, sketch_seed: int | None = None, n_parties: int | None = None,
                 executor: Any = None, random_state: Any = None, allow_uncertified: bool = False, message_reports: bool = True) -> None:
        self.mode = mode
        self.sketch_dim = sketch_dim
        self.budget = budget
        self.ledgers = ledgers
        self.ledger = ledger
        self.accountant = accountant
        self.bounds = bounds
        self.relation = relation
        self.calibration = calibration
        self.lam = lam
        self.cv = cv
        self.lambdas = lambdas
        self.n_folds = n_folds
        self.cv_seed = cv_seed
        self.loss_scale = loss_scale
        self.bias_correction = bias_correction
        self.shrinkage = shrinkage
        self.center = center
        self.standardize = standardize
        self.sketch_seed = sketch_seed
        self.n_parties = n_parties
        self.executor = executor
        self.random_state = random_state
        self.allow_uncertified = allow_uncertified
        self.message_reports = message_reports

    _requires_y = True

    def _sketch_seed(self) -> int:
        if self.sketch_seed is not None:
            return self.sketch_seed
        rs = self.random_state
        entropy = int(rs) if isinstance(rs, (int, np.integer)) and not isinstance(rs, bool) else None
        return int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint32)[0])

    def config(self) -> PRIDEConfig:
        return PRIDEConfig(mode=self.mode, sketch_dim=self.sketch_dim, relation=self.relation, calibration=self.calibration,
                           bounds=self.bounds, center=self.center, standardize=self.standardize, lam=self.lam, cv=self.cv,
                           lambdas=self.lambdas, n_folds=self.n_folds, cv_seed=self.cv_seed, loss_scale=self.loss_scale,
                           bias_correction=self.bias_correction, shrinkage=self.shrinkage, sketch_seed=self._sketch_seed())

    def _budget(self) -> Budget:
        if self.mode == "none":
            if self.budget is not None and not as_budget(self.budget).is_infinite:
                raise ValidationError("mode 'none' is DUAL-LOCO (noise-free sketches): give no budget (or Budget.infinite())")
            return Budget.infinite()
        if self.budget is None:
            raise ValidationError("give budget=Budget(epsilon, delta): the protocol's (eps, delta)")
        return as_budget(self.budget)

    def _parties(self, X: Any, y: Any) -> list[Party]:
        if isinstance(X, (list, tuple)) and X and all(isinstance(p, Party) for p in X):
            if y is not None:
                raise ValidationError("with Party objects, y belongs to the parties: do not pass y to fit")
            return list(X)
        if y is None:
            raise ValidationError("fit(blocks, y) or fit(X, y): y is required (every party holds it): PRIDERegressor requires y "
                                  "to be passed, but the target y is None")
        y = pooled_label(y)
        if is_block_list(X):
            blocks = list(X)
        else:
            if self.n_parties is None:
                raise ValidationError("a pooled X needs n_parties=K (or give a list of column blocks)")
            if isinstance(self.n_parties, bool) or not isinstance(self.n_parties, int) or self.n_parties < 2:
                raise ValidationError(f"n_parties must be an integer >= 2, got {self.n_parties!r}")
            arr = check_matrix(X, "X", min_rows=2)
            if arr.shape[1] < self.n_parties:
                raise ValidationError(f"X has {arr.shape[1]} feature(s) (n_features = {arr.shape[1]}), fewer than n_parties = "
                                      f"{self.n_parties}: every party needs a column")
            blocks = split_columns(arr, self.n_parties)
        return [Party(f"party{i}", block, y) for i, block in enumerate(blocks)]

    def plan(self, n_rows: int, widths: Sequence[int] | Mapping[str, int], label_parties: Any = None) -> CalibratedPlan:
        """The calibrated global plan for n rows and these block widths (a list: parties party0, party1, ...;
        or a mapping name -> width); ``.cost()`` prices it without data. Every party holds y unless
        ``label_parties`` names the ones that do."""
        named = list(widths.items()) if isinstance(widths, Mapping) else [(f"party{i}", w) for i, w in enumerate(widths)]
        holders = set(label_parties) if label_parties is not None else {name for name, _ in named}
        layout = Layout(int(n_rows), tuple(PartyInfo(name, int(w), name in holders) for name, w in named))
        budget = self._budget()
        protocol = PRIDEProtocol(self.config())
        acct = make_accountant(self.accountant or "best", budget.delta)
        return protocol.build_plan(layout, budget).allocate(budget, accountant=acct, **protocol.allocation())

    def fit(self, X: Any, y: Any = None) -> PRIDERegressor:
        X_raw = X
        parties = self._parties(X, y)
        config = self.config()
        protocol = PRIDEProtocol(config)
        outcome = run_protocol(protocol, parties, self._budget(), ledgers=self.ledgers, accountant=self.accountant or "best",
                               executor=self.executor, random_state=self.random_state, allow_uncertified=self.allow_uncertified,
                               message_reports=self.message_reports, project=ledger_for(self))
        result = outcome.result
        self.config_ = config
        self.layout_ = outcome.layout
        self.coef_blocks_ = dict(result.coef_blocks)
        self.lambdas_ = dict(result.lambdas)
        self.sketch_coef_blocks_ = dict(result.sketch_coef)
        self.noise_sd_ = dict(result.noise_sd)
        self.sketch_dims_ = dict(result.sketch_dims)
        self.clipped_eigenvalues_ = dict(result.clipped_eigenvalues)
        self.messages_ = outcome.messages
        self.privacy_ = outcome.privacy
        self.held_out_p_values_ = dict(result.held_out_p)
        self.held_out_gains_ = dict(result.held_out_gain)
        self.trivial_blocks_ = result.fell_back
        self.privacy_reports_ = fallback_diagnosed(outcome.reports, result)
        self.plans_ = dict(outcome.plans)
        # evaluation only (A8): every party's preprocessing and coefficients together, as the simulation knows them
        self.transforms_ = {p.name: protocol.column_transform(p) for p in parties}
        if len(self.coef_blocks_) == len(parties):
            self.coef_ = result.coef
            self._record_features(X_raw, int(self.coef_.shape[0]))
            label = next(p for p in parties if p.holds_label)
            y_mean = float(np.mean(np.asarray(label.y, dtype=float))) if (config.center or config.standardizes) else 0.0
            self.intercept_ = y_mean - sum(result.offsets.values())  # mean(y) - sum_k m_k^T b_k: the raw-scale intercept
        warn_if_fell_back(result)
        return self

    def design_of(self, name: str, X: np.ndarray) -> np.ndarray:
        """New rows of party ``name``'s block on the model's scale (the training preprocessing)."""
        t = self.transforms_[name]
        X = np.asarray(X, dtype=float)
        if t["lo"] is not None:
            X = steps.clip_columns(X, t["lo"], t["hi"])
        return (X - t["mean"]) / t["scale"]

    def predict(self, X: Any) -> np.ndarray:
        """Global prediction sum_k x_k^T b_k + intercept on the raw columns (certified: clipped to ``bounds``), an
        evaluation device (spec A8: it combines every party's columns and coefficients). X: the pooled columns or a
        list of the parties' blocks."""
        self._check_fitted("layout_")
        if not hasattr(self, "coef_"):
            raise ValidationError("predict needs every party's coefficients (every party must hold y)")
        names = self.layout_.names
        if is_block_list(X):
            blocks = [np.asarray(getattr(b, "X", b), dtype=float) for b in X]
        else:
            arr = check_matrix(X, "X")
            self._check_features(X, arr.shape[1])
            widths = np.cumsum([self.layout_.party(n).n_columns for n in names])[:-1]
            blocks = np.split(arr, widths, axis=1)
        if len(blocks) != len(names):
            raise ValidationError(f"expected {len(names)} blocks, got {len(blocks)}")
        total = np.full(blocks[0].shape[0], self.intercept_)
        for name, block in zip(names, blocks, strict=True):
            t = self.transforms_[name]
            raw = np.asarray(block, dtype=float)
            total += (raw if t["lo"] is None else steps.clip_columns(raw, t["lo"], t["hi"])) @ self.coef_blocks_[name]
        return total
