"""The PRIDE protocol (Heinze-Deml, McWilliams & Meinshausen; spec pride_004.md) on the party layer.

K parties hold column blocks X_k (n x tau_k) of the same n rows; the parties that hold y estimate
their own coefficients in a global ridge regression while adjusting for the others' columns.

* Stage 0 (``sketch``): every party releases once, to every other party, the perturbed sketch
  Z_k = X_k Pi_k + W_k (``core.SRHT``, W_k ~ N(0, sigma_k^2) entrywise) -- one plan node per party.
* Stage 1 (``fit``): every label holder fits ridge on [X_k, Z_j (j != k)] and keeps its raw
  coefficients (A4). lambda is fixed, chosen by local CV on the party's own view (post-processing,
  free), or -- ``cv="global"`` -- by global CV, where the parties exchange held-out predictions of
  their raw blocks (status ``none``: not covered, spec A7/G10) and stage 2 (``refit``) refits at the
  lambda that minimises the global held-out error.

Modes and relations:

* ``certified``: public per-column ranges [lo_j, hi_j] (clipped), theta_k = max_j (hi_j - lo_j),
  Gaussian with ``calibration="analytic"`` (default, tight) or the paper's ``"kenthapadi"``.
  ``relation="entry"`` (S-DP, replace one attribute value of one person): the sketch node of party k
  reads only party k's attributes (a stable ``party`` partition), so the parties compose in parallel
  (max). ``relation="row"`` (A9.3): one person's whole row, replace-one, the K releases compose in
  sequence, each with the row sensitivity of ``pride_steps``.
* ``paper``: Theorem 1 as published: standardised columns, theta_k read off them (data-derived:
  status ``claimed`` with the paper's (eps, delta) as the claim), Kenthapadi calibration, delta =
  0.05 allowed (with a warning: delta >= 1/n).
* ``none``: DUAL-LOCO (sigma = 0): raw sketches of the standardised columns, status ``none``, only
  with ``Budget.infinite()``.

Coefficients are on the raw scale of the parties' columns in every mode: a label holder fits b on its design
D_k = (clip(X_k) - m_k) / s_k (s_k = 1 unless standardised, m_k = 0 unless centred) and reports b / s_k, and its
part of the intercept m_k^T (b / s_k), so that sum_k x_k^T b_k + mean(y) - sum_k m_k^T b_k predicts on raw rows
(its own data, never sent: post-processing).

What S-DP protects and what it does not is in every party's report (``notes``).
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from .._json import parse_json
from ..accounting import Budget
from ..core import SRHT, LocalDesign, default_lambdas, kfold, party_sketch, ridge_alpha
from ..errors import ValidationError
from ..mechanisms import Sensitivity
from ..parties.engine import Action, ActionResult, Outgoing, Stage, VerticalProtocol
from ..parties.layout import Layout, Party
from ..parties.messages import PartyMessage, message_id
from ..plan import NoiseTicket, Plan
from ..released.regression import PRETEST_LEVEL, with_noise_message
from . import pride_steps as steps

MODES = ("certified", "paper", "none")
RELATIONS = {"entry": "replace_entry", "row": "replace_one"}
CVS = ("local", "global", "none")
CALIBRATIONS = ("analytic", "kenthapadi")
LOSS_SCALES = ("half", "paper_eq1")
SHRINKAGES = ("held_out", "none")


@functools.lru_cache(maxsize=64)
def shared_sketch(n_features: int, sketch_dim: int, seed: int, index: int) -> SRHT:
    """``core.party_sketch``, drawn once per argument tuple: the SRHT is a function of these public values alone, and
    an audit re-runs the sketch action thousands of times (one draw costs ~0.4 ms). Shared, so its arrays are read-only."""
    srht = party_sketch(n_features, sketch_dim, seed, index)
    srht.signs.flags.writeable = False
    srht.columns.flags.writeable = False
    return srht


class LargeDeltaWarning(UserWarning):
    """delta >= 1/n: a mechanism may then reveal a whole record with probability delta (the paper uses 0.05)."""


def _number_or_tuple(value: Any) -> tuple[float, ...]:
    arr = np.atleast_1d(np.asarray(value, dtype=float))
    if arr.ndim != 1 or arr.size == 0:
        raise ValidationError(f"a bound must be a number or a list of numbers, got {value!r}")
    return tuple(float(v) for v in arr)


def _bounds(value: Any) -> Any:
    """Public column ranges: ``(lo, hi)`` for every column of every party, or a mapping party -> ``(lo, hi)``
    (each a number or one number per column). Normalised to ``((party or "*", lo_tuple, hi_tuple), ...)``."""
    if value is None:
        return None
    if isinstance(value, tuple) and value and all(isinstance(v, tuple) and len(v) == 3 and isinstance(v[0], str) for v in value):
        return value
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        items = [("*", value)]
    else:
        raise ValidationError(f"bounds must be (lo, hi) or a mapping party -> (lo, hi), got {value!r}")
    out = []
    for party, spec in items:
        if isinstance(spec, Mapping):
            lo, hi = spec.get("lo"), spec.get("hi")
        elif isinstance(spec, (tuple, list)) and len(spec) == 2:
            lo, hi = spec
        else:
            raise ValidationError(f"bounds of {party!r} must be (lo, hi), got {spec!r}")
        out.append((str(party), _number_or_tuple(lo), _number_or_tuple(hi)))
    return tuple(sorted(out))


def _sketch_dim(value: Any) -> Any:
    """A fraction in (0, 1), an integer >= 1, ``"full"`` (tau'), or a mapping party -> one of those."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _sketch_dim(v)) for k, v in value.items()))
    if isinstance(value, tuple) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return value
    if value == "full":
        return "full"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(f"sketch_dim must be a fraction in (0, 1), an integer >= 1, 'full' or a mapping, got {value!r}")
    if float(value) == int(value) and float(value) >= 1:
        return int(value)
    if 0 < float(value) < 1:
        return float(value)
    raise ValidationError(f"sketch_dim must be a fraction in (0, 1), an integer >= 1 or 'full', got {value!r}")


def _lambdas(value: Any) -> Any:
    if value is None:
        return None
    arr = np.atleast_1d(np.asarray(value, dtype=float))
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValidationError("lambdas must be a non-empty list of positive numbers")
    return tuple(float(v) for v in arr)


@attrs.frozen
class PRIDEConfig:
    """Every public choice of one PRIDE run (its digest travels with each message)."""

    mode: str = "certified"
    sketch_dim: Any = attrs.field(default=0.2, converter=_sketch_dim)
    relation: str = "entry"
    calibration: str | None = None
    bounds: Any = attrs.field(default=None, converter=_bounds)
    center: bool = True
    standardize: bool | None = None
    lam: float | None = None
    cv: str | None = None
    lambdas: Any = attrs.field(default=None, converter=_lambdas)
    n_folds: int = 5
    cv_seed: int = 0
    loss_scale: str = "half"
    bias_correction: bool | None = None
    shrinkage: str = "held_out"
    sketch_seed: int = 0

    def __attrs_post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValidationError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.relation not in RELATIONS:
            raise ValidationError(f"relation must be one of {tuple(RELATIONS)}, got {self.relation!r}")
        if self.relation == "row" and self.mode != "certified":
            raise ValidationError("relation='row' (A9.3) is a certified-mode extension; the paper's guarantee is entry-level (S-DP)")
        if self.calibration is not None and self.calibration not in CALIBRATIONS:
            raise ValidationError(f"calibration must be one of {CALIBRATIONS}, got {self.calibration!r}")
        if self.mode == "certified":
            if self.bounds is None:
                raise ValidationError("certified mode needs public column ranges bounds=(lo, hi) (never read off the data)")
            if self.standardize:
                raise ValidationError("certified mode cannot standardise with the data's own sd (it breaks the entry relation, "
                                      "spec G5): standardise with public constants first and give bounds on that scale")
            for party, lo, hi in self.bounds:
                if len(lo) != len(hi) or any(not (math.isfinite(a) and math.isfinite(b) and a < b) for a, b in zip(lo, hi, strict=True)):
                    raise ValidationError(f"bounds of {party!r}: need finite lo < hi for every column")
        if self.loss_scale not in LOSS_SCALES:
            raise ValidationError(f"loss_scale must be one of {LOSS_SCALES}, got {self.loss_scale!r}")
        if self.shrinkage not in SHRINKAGES:
            raise ValidationError(f"shrinkage must be one of {SHRINKAGES}, got {self.shrinkage!r}")
        if self.bias_correction is not None and not isinstance(self.bias_correction, (bool, np.bool_)):
            raise ValidationError(f"bias_correction must be True, False or None (on in certified mode), got {self.bias_correction!r}")
        cv = self.cv_mode
        if cv not in CVS:
            raise ValidationError(f"cv must be one of {CVS}, got {self.cv!r}")
        if cv == "none":
            if self.lam is None or isinstance(self.lam, bool) or not (math.isfinite(self.lam) and self.lam > 0):
                raise ValidationError(f"a fixed lambda must be positive and finite, got {self.lam!r}")
        elif self.lam is not None:
            raise ValidationError(f"give either lam (fixed) or cv={cv!r}, not both")
        if isinstance(self.n_folds, bool) or not isinstance(self.n_folds, int) or self.n_folds < 2:
            raise ValidationError(f"n_folds must be an integer >= 2, got {self.n_folds!r}")
        for name in ("sketch_seed", "cv_seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValidationError(f"{name} must be a non-negative integer (public), got {value!r}")

    # -- derived public choices ----------------------------------------------------------------
    @property
    def cv_mode(self) -> str:
        return self.cv or ("none" if self.lam is not None else "local")

    @property
    def calibration_used(self) -> str:
        return self.calibration or ("analytic" if self.mode == "certified" else "kenthapadi")

    @property
    def corrects_bias(self) -> bool:
        """The errors-in-variables correction (A9.2): on by default in certified mode. Without it each party's block
        absorbs the others' effects that their noisy sketches cannot carry, and the global prediction counts them once
        per party (a normalised error ~10^3 on the paper's Figure 4 design at eps <= 2; test R^2 -1 on three parties
        of correlated columns). Its cost: where the blocks are independent, the corrected fit at small eps shrinks the
        party's own block too. Off with a fixed lambda (the corrected Gram of noisy features is nearly singular, and
        only a lambda chosen on it keeps their coefficients bounded: 36x the uncorrected error at eps = 0.1 with the
        pooled fit's lambda) and, as published, in the paper's modes."""
        if self.bias_correction is not None:
            return bool(self.bias_correction)
        return self.mode == "certified" and self.cv_mode != "none"

    @property
    def tests_held_out(self) -> bool:
        """Certified local CV with ``shrinkage="held_out"``: a block whose held-out errors cannot tell it from the
        constant prediction falls back to 0 (``pride_steps.held_out_test``)."""
        return self.mode == "certified" and self.shrinkage == "held_out" and self.cv_mode == "local"

    @property
    def standardizes(self) -> bool:
        return bool(self.standardize) if self.standardize is not None else self.mode != "certified"

    def column_bounds(self, party: str, n_columns: int) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) arrays of one party's columns (certified mode)."""
        found = {p: (lo, hi) for p, lo, hi in (self.bounds or ())}
        if party in found:
            lo, hi = found[party]
        elif "*" in found:
            lo, hi = found["*"]
        else:
            raise ValidationError(f"bounds has no range for party {party!r}")
        lo_a, hi_a = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
        if lo_a.size == 1:
            lo_a, hi_a = np.full(n_columns, lo_a[0]), np.full(n_columns, hi_a[0])
        if lo_a.size != n_columns:
            raise ValidationError(f"bounds of {party!r} give {lo_a.size} ranges for {n_columns} columns")
        return lo_a, hi_a

    def sketch_dim_of(self, party: str, n_columns: int) -> int:
        spec = self.sketch_dim
        if isinstance(spec, tuple):
            found = dict(spec)
            if party not in found:
                raise ValidationError(f"sketch_dim has no value for party {party!r}")
            spec = found[party]
        value = steps.sketch_dim_for(spec, n_columns)
        padded = 1 << (int(n_columns) - 1).bit_length()
        if not 1 <= value <= padded:
            raise ValidationError(f"party {party!r}: sketch_dim {value} must lie in [1, tau' = {padded}] for {n_columns} columns")
        return value

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        if self.bounds is not None:
            data["bounds"] = {p: {"lo": list(lo), "hi": list(hi)} for p, lo, hi in self.bounds}
        if isinstance(self.sketch_dim, tuple):
            data["sketch_dim"] = dict(self.sketch_dim)
        if self.lambdas is not None:
            data["lambdas"] = list(self.lambdas)
        return data

    def to_json(self) -> str:
        return json.dumps({"protocol": PRIDEProtocol.name, "version": PRIDEProtocol.version, "config": self.to_dict()}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> PRIDEConfig:
        try:
            data = parse_json(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"not a PRIDE configuration: {exc}") from None
        if not isinstance(data, dict) or data.get("protocol") != PRIDEProtocol.name or data.get("version") != PRIDEProtocol.version:
            raise ValidationError("not a PRIDE configuration of this protocol version")
        config = dict(data["config"])
        if isinstance(config.get("bounds"), dict) and set(config["bounds"]) == {"*"}:
            star = config["bounds"]["*"]
            config["bounds"] = (star["lo"], star["hi"])
        return cls(**config)


@attrs.frozen(eq=False)
class PRIDEResult:
    """Each label holder's coefficients of its own columns on their raw scale (never sent), its lambda, and what
    was released. ``offsets[k] = m_k^T b_k`` (column means m_k, zero when not centred): its part of the intercept
    ``mean(y) - sum_k offsets[k]`` (0 when nothing is centred; module docstring). ``sketch_coef``: the
    coefficients of the others' sketches."""

    coef_blocks: Mapping[str, np.ndarray]
    lambdas: Mapping[str, float]
    sketch_coef: Mapping[str, np.ndarray]
    noise_sd: Mapping[str, float]
    sketch_dims: Mapping[str, int]
    order: tuple[str, ...]
    clipped_eigenvalues: Mapping[str, int] = attrs.field(factory=dict)
    held_out_p: Mapping[str, float] = attrs.field(factory=dict)
    trivial: Mapping[str, bool] = attrs.field(factory=dict)
    held_out_gain: Mapping[str, float] = attrs.field(factory=dict)
    offsets: Mapping[str, float] = attrs.field(factory=dict)

    @property
    def fell_back(self) -> list[str]:
        """The label holders whose block fell back to 0 (``shrinkage="held_out"``), sorted."""
        return sorted(name for name, flag in self.trivial.items() if flag)

    @property
    def coef(self) -> np.ndarray:
        """All columns in party order; only when every party estimated its block."""
        missing = [n for n in self.order if n not in self.coef_blocks]
        if missing:
            raise ValidationError(f"parties {missing} hold no y and estimate nothing: there is no global coefficient vector")
        return np.concatenate([self.coef_blocks[n] for n in self.order])


def fallback_message(parties: Sequence[str]) -> str:
    return (f"the held-out errors of {', '.join(parties)} cannot tell the fit from the constant prediction (the mean of y): "
            f"significantly and by {steps.NEGLIGIBLE_GAIN:.0%} of the variance of y or more; its coefficients are set to 0: "
            "more data or more budget is needed")


def warn_if_fell_back(result: PRIDEResult, stacklevel: int = 3) -> None:
    """``NoiseDominatesWarning`` naming the label holders whose block fell back to 0 (none: no warning)."""
    if result.fell_back:
        import warnings

        from ..errors import NoiseDominatesWarning

        warnings.warn(fallback_message(result.fell_back), NoiseDominatesWarning, stacklevel=stacklevel)


def fallback_diagnosed(reports: Mapping[str, Any], result: PRIDEResult) -> dict[str, Any]:
    """Every label holder's report with its held-out test attached (``shrinkage="held_out"``; no cost: its own view)."""
    out = dict(reports)
    for name, p_value in result.held_out_p.items():
        if name in out:
            trivial, gain = bool(result.trivial.get(name)), result.held_out_gain.get(name)
            verdict = ("cannot tell the fit from the constant prediction: the coefficients are set to 0" if trivial else
                       "tells the fit from the constant prediction")
            message = (f"held-out test of the party's own part of the prediction against the mean of y: one-sided p = "
                       f"{p_value:.2g}, gain {gain:.3g} of the variance of y; it {verdict}")
            out[name] = with_noise_message(out[name], message, "held_out", held_out_p=p_value, held_out_gain=gain,
                                           fell_back=trivial)
    return out


class PRIDEProtocol(VerticalProtocol):
    """PRIDE on the party layer (module docstring). Picklable: it only holds the public config."""

    name = "privsdr.pride"
    version = 1

    def __init__(self, config: PRIDEConfig) -> None:
        self.config = config

    # -- public structure ----------------------------------------------------------------------
    @property
    def relation(self) -> str:
        return RELATIONS[self.config.relation]

    def digest(self, layout: Layout) -> str:
        text = json.dumps({"config": self.config.to_dict(), "layout": layout.to_dict(), "protocol": self.name,
                           "version": self.version}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def allocation(self) -> dict[str, Any]:
        return {"tight": self.config.mode == "certified" and self.config.calibration_used == "analytic"}

    def estimators(self, layout: Layout) -> tuple[str, ...]:
        """The parties that estimate coefficients (those holding y)."""
        return layout.label_holders

    def sketch_dims(self, layout: Layout) -> dict[str, int]:
        return {p.name: self.config.sketch_dim_of(p.name, p.n_columns) for p in layout.parties}

    def check_budget(self, budget: Budget, layout: Layout) -> None:
        mode = self.config.mode
        if mode == "none":
            if not budget.is_infinite:
                raise ValidationError("mode 'none' (DUAL-LOCO, noise-free sketches) runs only with Budget.infinite()")
            return
        if budget.is_infinite:
            return
        if budget.delta <= 0.0:
            raise ValidationError("PRIDE releases Gaussian noise: it needs delta > 0")
        if self.config.calibration_used == "kenthapadi" and not budget.delta < 0.5:
            raise ValidationError(f"the Kenthapadi calibration (Theorem 1) needs delta < 1/2, got {budget.delta}")
        if budget.delta >= 1.0 / layout.n_rows:
            warnings.warn(f"delta = {budget.delta:g} >= 1/n = {1.0 / layout.n_rows:.3g}: a release may then expose some person's "
                          "value outright with probability about delta (the paper's 0.05 is such a delta)", LargeDeltaWarning,
                          stacklevel=3)

    def check_layout(self, layout: Layout) -> None:
        """Public rules (before anything is spent): K >= 2, someone holds y, sketch dims, bounds, folds."""
        c = self.config
        if len(layout.parties) < 2:
            raise ValidationError("PRIDE needs at least two parties (with one party it is plain ridge: privsdr.core.ridge)")
        if not layout.label_holders:
            raise ValidationError("at least one party must hold y (the parties that hold y estimate their coefficients)")
        if c.cv_mode == "global" and set(layout.label_holders) != set(layout.names):
            raise ValidationError("cv='global' needs y at every party (every party contributes held-out predictions)")
        if c.cv_mode != "none" and layout.n_rows < c.n_folds:
            raise ValidationError(f"{c.n_folds}-fold CV needs at least {c.n_folds} rows, got {layout.n_rows}")
        for info in layout.parties:
            c.sketch_dim_of(info.name, info.n_columns)
            if c.mode == "certified":
                c.column_bounds(info.name, info.n_columns)

    def check(self, parties: Sequence[Party], layout: Layout) -> None:
        self.check_layout(layout)
        holders = [p for p in parties if p.holds_label]
        for other in holders[1:]:
            if not np.array_equal(np.asarray(other.y, dtype=float), np.asarray(holders[0].y, dtype=float)):
                raise ValidationError(f"parties {holders[0].name!r} and {other.name!r} hold different y; PRIDE assumes one shared response")
        if self.config.standardizes:
            for party in parties:
                sd = np.asarray(party.X, dtype=float).std(axis=0)
                if np.any(sd <= 0):
                    raise ValidationError(f"party {party.name!r}: column(s) {np.flatnonzero(sd <= 0).tolist()} are constant and "
                                          "cannot be standardised")

    # -- the plan ------------------------------------------------------------------------------
    def build_plan(self, layout: Layout, budget: Budget) -> Plan:
        self.check_layout(layout)
        self.check_budget(budget, layout)
        c = self.config
        rel = self.relation
        dims = self.sketch_dims(layout)
        plan = Plan("pride_" + c.mode, rel, {
            "mode": c.mode, "relation": c.relation, "n_rows": layout.n_rows, "order": list(layout.names),
            "widths": {p.name: p.n_columns for p in layout.parties}, "sketch_dims": dims, "sketch_seed": c.sketch_seed,
            "calibration": c.calibration_used if c.mode != "none" else "none", "cv": c.cv_mode,
            **({"bounds": c.to_dict()["bounds"], "center": c.center} if c.mode == "certified" else {"standardize": c.standardizes}),
        })
        scopes = plan.partition("party", layout.names, stable=True) if c.relation == "entry" else [None] * len(layout.names)
        for info, scope in zip(layout.parties, scopes, strict=True):
            name, node = info.name, f"{info.name}/sketch"
            description = (f"Z = X Pi + W: the {info.n_columns}-column block sketched to {dims[name]} random features (SRHT, "
                           f"w2(Pi) = 1), sent once to every other party")
            if c.mode == "none":
                plan.add(node, "non_private", Sensitivity(1.0, "l2", rel, "none: the noise-free sketch (DUAL-LOCO)"), status="none",
                         scope=scope, description=description + " WITHOUT noise (NOT private)")
            elif c.mode == "paper":
                share = Budget.infinite() if budget.is_infinite else budget
                plan.add(node, "gaussian", Sensitivity(1.0, "l2", rel, "w2(Pi) theta_k, theta_k = the largest range of the standardised "
                                                      "private columns (data-derived, spec G4)"),
                         share=share, calibration=c.calibration_used, status="claimed", adaptive=True, scope=scope,
                         description=description + "; Theorem 1 as published (theta_k read off the data: claimed)")
            else:
                lo, hi = c.column_bounds(name, info.n_columns)
                if c.relation == "entry":
                    sens = Sensitivity(steps.entry_sensitivity(lo, hi), "l2", rel,
                                       "theta_k w2(Pi): one entry moves within its public range [lo_j, hi_j]; theta_k = max_j (hi_j - lo_j), "
                                       "w2(SRHT) = 1; centring multiplies by sqrt(1 - 1/n) <= 1")
                else:
                    sens = Sensitivity(steps.row_sensitivity(lo, hi, (info.n_columns, dims[name])), "l2", rel,
                                       "min(||w||_2 sqrt(tau'/tau_subs), ||w||_1): one person's whole row of the block moves, w = hi - lo")
                plan.add(node, "gaussian", sens, weight=1.0, calibration=c.calibration_used, scope=scope, description=description)
        if c.cv_mode == "global":
            for info, scope in zip(layout.parties, scopes, strict=True):
                plan.add(f"{info.name}/cv_predictions", "non_private",
                         Sensitivity(1.0, "l2", rel, "none: held-out predictions of the raw block (global CV)"), status="none",
                         scope=scope, parents=(f"{info.name}/sketch",),
                         description="global CV: x_ik^T b_k(lambda) for every held-out row and lambda, sent to every other party "
                                     "(NOT private, not covered: spec A7, G10)")
        return plan

    # -- the schedule --------------------------------------------------------------------------
    def schedule(self, layout: Layout) -> list[Stage]:
        names = layout.names
        sketch = Stage(0, "sketch", tuple(Action(n, "sketch", (f"{n}/sketch",)) for n in names))
        reads = {n: tuple(message_id(0, o, "sketch") for o in names if o != n) for n in names}
        holders = self.estimators(layout)
        if self.config.cv_mode != "global":
            return [sketch, Stage(1, "fit", tuple(Action(n, "fit", (), reads[n]) for n in holders))]
        predict = Stage(1, "cv predictions", tuple(Action(n, "cv", (f"{n}/cv_predictions",), reads[n]) for n in holders))
        refit = Stage(2, "refit", tuple(Action(n, "refit", (), tuple(message_id(1, o, "cv_predictions") for o in holders if o != n))
                                        for n in holders))
        return [sketch, predict, refit]

    def initial_state(self, party: str, layout: Layout) -> dict[str, Any]:
        others = tuple(n for n in layout.names if n != party)
        return {"index": layout.index(party), "others": others, "n_columns_total": sum(p.n_columns for p in layout.parties),
                "sketch_dims": self.sketch_dims(layout), "n_estimators": len(self.estimators(layout))}

    # -- the actions -----------------------------------------------------------------------------
    def design(self, party: Party) -> np.ndarray:
        """The party's design after the mode's preprocessing (``pride_steps.design``)."""
        c = self.config
        lo = hi = None
        if c.mode == "certified":
            lo, hi = c.column_bounds(party.name, party.X.shape[1])
        return steps.design(party.X, lo=lo, hi=hi, center=c.center, standardize=c.standardizes)

    def column_transform(self, party: Party) -> dict[str, Any]:
        """The affine map of the design, ``D = (clip(X, lo, hi) - mean) / scale`` (lo, hi: certified only; mean = 0
        unless centred, scale = 1 unless standardised), from the party's own columns."""
        c = self.config
        X = np.asarray(party.X, dtype=float)
        lo = hi = None
        if c.mode == "certified":
            lo, hi = c.column_bounds(party.name, X.shape[1])
            X = steps.clip_columns(X, lo, hi)
        mean, sd = steps.column_scale(X)
        if not c.standardizes:
            sd = np.ones_like(sd)
            if not c.center:
                mean = np.zeros_like(mean)
        return {"lo": lo, "hi": hi, "mean": mean, "scale": sd}

    def response(self, party: Party) -> np.ndarray:
        """y centred (the model has no intercept; y is not protected, spec A0.2)."""
        y = np.asarray(party.y, dtype=float)
        return y - y.mean() if self.config.center or self.config.standardizes else y

    def act(self, action: Action, party: Party, state: Any, inbox: Mapping[str, PartyMessage],
            tickets: Mapping[str, NoiseTicket]) -> ActionResult:
        if action.step == "sketch":
            return self._sketch(action, party, state, tickets)
        if action.step == "fit":
            return self._fit(party, state, inbox)
        if action.step == "cv":
            return self._cv_predictions(action, party, state, inbox, tickets)
        if action.step == "refit":
            return self._refit(party, state, inbox)
        raise ValidationError(f"unknown PRIDE step {action.step!r}")

    def _sketch(self, action: Action, party: Party, state: Any, tickets: Mapping[str, NoiseTicket]) -> ActionResult:
        (node,) = action.nodes
        D = self.design(party)
        srht = shared_sketch(D.shape[1], state["sketch_dims"][party.name], self.config.sketch_seed, state["index"])
        value = srht.apply(D)
        if self.config.mode == "paper":
            out, spec = tickets[node].release(value, sensitivity=steps.data_theta(D) * srht.row_norm)
        else:
            out, spec = tickets[node].release(value)
        meta = {"noise_sd": float(spec.scale), "sketch_dim": int(srht.sketch_dim), "calibration": spec.calibration,
                "noise_multiplier": float(spec.noise_multiplier)}
        new_state = {**state, "noise_sd": float(spec.scale), "design": D}  # the party's own design, kept for its fit
        return ActionResult(new_state, {node: (out, spec)}, (Outgoing("sketch", state["others"], {"sketch": out}, meta, (node,)),))

    def _view(self, party: Party, state: Any, inbox: Mapping[str, PartyMessage]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """(X_k design, the others' sketches side by side, centred y, noise variances per random feature or None)."""
        n = party.X.shape[0]
        blocks, variances = [], []
        for other in state["others"]:
            message = inbox[message_id(0, other, "sketch")]
            Z = np.asarray(message.arrays["sketch"], dtype=float)
            if Z.ndim != 2 or Z.shape[0] != n or not np.all(np.isfinite(Z)):
                raise ValidationError(f"message {message.id}: the sketch must be a finite matrix with {n} rows")
            blocks.append(Z)
            variances.append(np.full(Z.shape[1], float(message.meta["noise_sd"]) ** 2))
        Z = np.hstack(blocks)
        noise_var = np.concatenate(variances) if self.config.corrects_bias else None
        return self._design_of(party, state), Z, self.response(party), noise_var

    def _design_of(self, party: Party, state: Any) -> np.ndarray:
        """The design this party sketched (kept in its state), or computed anew (e.g. when an action is probed alone)."""
        D = state.get("design")
        return D if D is not None and D.shape == party.X.shape else self.design(party)

    def _folds(self, n: int) -> tuple[np.ndarray, ...]:
        return kfold(n, self.config.n_folds, self.config.cv_seed)

    def _finish_fit(self, party: Party, state: Any, view: LocalDesign, y: np.ndarray, noise_var: Any, lam: float,
                    cv_mse: Any = None) -> dict[str, Any]:
        """The fit on the design (``coef``) and the design's column map (``finish`` reports the raw scale)."""
        fit = view.fit(y, ridge_alpha(lam, len(y), self.config.loss_scale), noise_var)
        kept = {k: v for k, v in state.items() if k not in ("design", "sketches")}  # the heavy arrays are not needed any more
        t = self.column_transform(party)
        return {**kept, "coef": fit.coef, "sketch_coef": fit.sketch_coef, "lam": float(lam), "cv_mse": cv_mse,
                "clipped_eigenvalues": fit.clipped_eigenvalues, "column_mean": t["mean"], "column_scale": t["scale"]}

    def _fit(self, party: Party, state: Any, inbox: Mapping[str, PartyMessage]) -> ActionResult:
        D, Z, y, noise_var = self._view(party, state, inbox)
        view = LocalDesign(D, Z)
        c = self.config
        if c.cv_mode == "none":
            assert c.lam is not None
            return ActionResult(self._finish_fit(party, state, view, y, noise_var, c.lam))
        grid = np.asarray(c.lambdas) if c.lambdas is not None else default_lambdas(view.top_eigenvalue())
        folds = self._folds(len(y))
        path = view.cv_path(y, grid, folds, c.loss_scale, noise_var)
        mse = path.mse(y)
        best = int(np.argmin(mse))
        fitted = self._finish_fit(party, state, view, y, noise_var, float(grid[best]), mse.tolist())
        if not c.tests_held_out:
            return ActionResult(fitted)
        # its own part of the global prediction, at the fit-level 0.05 split over the label holders and over the grid
        # (lambda was chosen by these held-out errors: Bonferroni over the candidates keeps the test honest)
        p_value, gain = steps.held_out_test(y, path.raw[best])
        trivial = p_value > PRETEST_LEVEL / (max(int(state.get("n_estimators", 1)), 1) * len(grid)) or gain < steps.NEGLIGIBLE_GAIN
        if trivial:
            fitted = {**fitted, "coef": np.zeros_like(fitted["coef"]), "sketch_coef": np.zeros_like(fitted["sketch_coef"])}
        return ActionResult({**fitted, "held_out_p": p_value, "held_out_gain": gain, "trivial": trivial})

    def global_lambdas(self, state: Any) -> np.ndarray:
        """Global CV's grid, public and common to every party: ``lambdas`` or 1e-4 .. 1e2 x p (the total column count)."""
        return np.asarray(self.config.lambdas) if self.config.lambdas is not None else default_lambdas(float(state["n_columns_total"]))

    def _cv_predictions(self, action: Action, party: Party, state: Any, inbox: Mapping[str, PartyMessage],
                        tickets: Mapping[str, NoiseTicket]) -> ActionResult:
        (node,) = action.nodes
        D, Z, y, noise_var = self._view(party, state, inbox)
        grid = self.global_lambdas(state)
        path = LocalDesign(D, Z).cv_path(y, grid, self._folds(len(y)), self.config.loss_scale, noise_var)
        out, spec = tickets[node].release(path.raw)
        recipients = state["others"]
        message = Outgoing("cv_predictions", recipients, {"predictions": out}, {"status": "none (not covered: global CV)"}, (node,))
        return ActionResult({**state, "own_predictions": path.raw, "sketches": Z, "noise_var": noise_var}, {node: (out, spec)}, (message,))

    def _refit(self, party: Party, state: Any, inbox: Mapping[str, PartyMessage]) -> ActionResult:
        D, y, Z, noise_var = self._design_of(party, state), self.response(party), state["sketches"], state["noise_var"]
        grid = self.global_lambdas(state)
        total = np.array(state["own_predictions"], copy=True)
        for message in inbox.values():
            preds = np.asarray(message.arrays["predictions"], dtype=float)
            if preds.shape != total.shape:
                raise ValidationError(f"message {message.id}: predictions of shape {preds.shape}, expected {total.shape}")
            total += preds
        mse = np.mean((total - y[None, :]) ** 2, axis=1)
        return ActionResult(self._finish_fit(party, state, LocalDesign(D, Z), y, noise_var, float(grid[int(np.argmin(mse))]),
                                             mse.tolist()))

    def finish(self, layout: Layout, states: Mapping[str, Any], messages: Sequence[PartyMessage]) -> PRIDEResult:
        fitted = {n: s for n, s in states.items() if s is not None and "coef" in s}
        noise = {m.sender: float(m.meta["noise_sd"]) for m in messages if m.kind == "sketch"}
        dims = self.sketch_dims(layout)
        raw = {n: np.asarray(s["coef"], dtype=float) / np.asarray(s["column_scale"], dtype=float) for n, s in fitted.items()}
        offsets = {n: float(np.asarray(fitted[n]["column_mean"], dtype=float) @ b) for n, b in raw.items()}
        return PRIDEResult(raw, {n: s["lam"] for n, s in fitted.items()},
                           {n: np.asarray(s["sketch_coef"]) for n, s in fitted.items()}, noise, dims, layout.names,
                           {n: int(s.get("clipped_eigenvalues", 0)) for n, s in fitted.items()},
                           {n: float(s["held_out_p"]) for n, s in fitted.items() if "held_out_p" in s},
                           {n: bool(s["trivial"]) for n, s in fitted.items() if "trivial" in s},
                           {n: float(s["held_out_gain"]) for n, s in fitted.items() if "held_out_gain" in s}, offsets)

    def notes(self, party: str) -> list[str]:
        c = self.config
        notes = []
        if c.relation == "entry":
            notes.append("S-DP (entry level): protects any single attribute value of one person in this party's columns against every "
                         "other party, which sees only this party's one perturbed sketch. It does NOT protect: y (every estimating "
                         "party holds it), a party's own block from itself, or the coefficients a party computes (the protocol never "
                         "sends them; publishing them is outside the guarantee). It is not record-level DP: a person's whole row is "
                         "covered only under relation='row'")
        else:
            notes.append("row level (A9.3): protects one person's whole row across every party's block (the K sketches compose in "
                         "sequence); y and the coefficients a party computes are not protected")
        if c.mode == "paper":
            notes.append("paper mode: theta_k is read off the standardised private columns, so the noise scale depends on the data "
                         "(claimed, not certified; an outlier in one entry changes theta_k and the noise scale with it)")
        if c.mode == "none":
            notes.append("DUAL-LOCO: the sketches are sent without noise; nothing is private")
        if c.cv_mode == "global":
            notes.append("global CV: held-out predictions of every party's raw block are exchanged (status none): not covered by any "
                         "guarantee")
        return notes

    def coverage(self) -> str | None:
        """PRIDE's guarantee covers what a party sends (its perturbed sketch); each party computes its coefficients
        from its own raw columns and y, so the published estimate is outside it."""
        if self.config.mode == "none":
            return None
        return ("the messages between parties (each party's perturbed sketch); not the coefficients, the intercept or the "
                "column means, which each party computes from its own raw columns and y")

