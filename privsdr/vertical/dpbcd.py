"""The DP-BCD protocol (de Jong, Kamphorst & Kroes 2022; spec dpbcd_002.md) on the party layer.

k parties hold column blocks of the same N rows; one of them also holds y and moves first (ring
order: the label holder, then the others as given). For T rounds each party in turn updates its
coefficients from the incoming remainder and sends the outgoing remainder to the next party;
finally every party publishes its coefficients. Three modes:

* ``paper``: Algorithm 2 as published (radial half-normal objective perturbation, xi from the
  private local residual, abort rules). Every step is an opaque node with the paper's claimed
  (eps_step, 0), status ``claimed``, relation ``lsdp_zero_row`` ("eps-LSDP claimed, not standard
  DP"; the zero-row distinguisher O-P1 breaks it). ``budget.epsilon`` is what the run spends:
  with ``accounting="paper"`` the learning phase only (eps_step = eps / (kT), the paper's
  Theorem 1), with ``"conservative"`` learning and the coefficient reveal each get half (A5).
* ``certified``: record-level (replace-one) DP against the other parties and the publication,
  public bounds only: each party releases its clipped Gram once, then per step a Gaussian
  statistic X_i^T u and the outgoing remainder (Gaussian, sensitivity of one row); the increments
  and coefficients are post-processing. One tight calibration over every party's nodes.
* ``none``: Algorithm 1 as a protocol (raw remainders, status ``none``): the non-private baseline.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from .._json import parse_json
from ..accounting import Budget
from ..core import BlockSolver, gamma_min
from ..errors import ValidationError
from ..mechanisms import Sensitivity
from ..parties.engine import Action, ActionResult, Outgoing, ProtocolAbort, Stage, VerticalProtocol
from ..parties.layout import Layout, Party
from ..parties.messages import PartyMessage, message_id
from ..plan import NoiseTicket, Plan
from ..released.regression import NOISE_WARNING_SHARE
from . import dpbcd_shrinkage as shrinkage
from . import dpbcd_steps as steps

MODES = ("certified", "paper", "none")
#: certified mode's post-processing of each step: the noise-aware James-Stein factor (default) or none (issue 23's fit)
SHRINKAGES = ("james_stein", "none")
#: the DP label sum's weight, as a share of a statistic's: the DP mean is the fallback of every certified fit (issue 33), so it
#: gets more than a step (at eps = 1 on diabetes its sd falls from 0.35 to 0.1 sd(y))
Y_SUM_WEIGHT = 8.0
ABORT_CHECKS = ("both", "post", "gamma_min", "none")
ACCOUNTINGS = ("conservative", "paper")
NOISES = ("radial", "gaussian")
LSDP_NOTE = "eps-LSDP claimed, not standard DP"


def full_rank(X: np.ndarray) -> int:
    """The numerical rank of X from its R factor (same singular values, O(N m^2) without an N x N SVD)."""
    R = np.linalg.qr(X, mode="r")
    s = np.linalg.svd(R, compute_uv=False)
    return int(np.sum(s > s.max() * max(X.shape) * np.finfo(float).eps)) if s.size and s.max() > 0 else 0


def _bounds(value: Any) -> Any:
    """A public bound: one positive number for every party, or a mapping party -> number."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), float(v)) for k, v in value.items()))
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], (tuple, list)):
        return tuple(sorted((str(k), float(v)) for k, v in value))
    return float(value)


def _positive(name: str, value: Any) -> None:
    values = [v for _, v in value] if isinstance(value, tuple) else [value]
    for v in values:
        if not (isinstance(v, float) and math.isfinite(v) and v > 0):
            raise ValidationError(f"{name} must be positive and finite (a public bound), got {v!r}")


@attrs.frozen
class DPBCDConfig:
    """Every public choice of one DP-BCD run (its digest travels with each message)."""

    mode: str = "certified"
    n_rounds: int = 5
    gamma: float = 1.2
    abort_check: str = "both"
    gamma_min_variant: str = "keep_label"
    accounting: str = "conservative"
    noise: str = "radial"
    xi_floor: float | None = None
    row_bound: Any = attrs.field(default=None, converter=_bounds)
    label_bound: float | None = attrs.field(default=None, converter=lambda v: None if v is None else float(v))
    coef_bound: Any = attrs.field(default=None, converter=_bounds)
    ridge: float = 0.0
    remainder_clip: float = 4.0
    split: tuple[float, float, float] = attrs.field(default=(0.5, 0.5, 1.0), converter=lambda s: tuple(float(x) for x in s))
    calibration: str = "analytic"
    shrinkage: str = "james_stein"
    y_center: float = attrs.field(default=0.0, converter=float)
    dp_intercept: bool = True

    def __attrs_post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValidationError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.shrinkage not in SHRINKAGES:
            raise ValidationError(f"shrinkage must be one of {SHRINKAGES}, got {self.shrinkage!r}")
        if isinstance(self.n_rounds, bool) or not isinstance(self.n_rounds, int) or self.n_rounds < 1:
            raise ValidationError(f"n_rounds (T) must be an integer >= 1, got {self.n_rounds!r}")
        if not (isinstance(self.gamma, (int, float)) and math.isfinite(self.gamma) and self.gamma > 1):
            raise ValidationError(f"gamma must be > 1 (the paper: v_out is never shorter than the residual), got {self.gamma!r}")
        for name, value, allowed in (("abort_check", self.abort_check, ABORT_CHECKS), ("accounting", self.accounting, ACCOUNTINGS),
                                     ("noise", self.noise, NOISES), ("gamma_min_variant", self.gamma_min_variant, ("keep_label", "both"))):
            if value not in allowed:
                raise ValidationError(f"{name} must be one of {allowed}, got {value!r}")
        if self.xi_floor is not None and not (math.isfinite(self.xi_floor) and self.xi_floor > 0):
            raise ValidationError("xi_floor must be a positive public number")
        if not (math.isfinite(self.ridge) and self.ridge >= 0):
            raise ValidationError(f"ridge must be >= 0, got {self.ridge!r}")
        if self.mode == "paper" and self.ridge != 0.0:
            raise ValidationError("the paper's privacy argument does not cover ridge (spec A22): ridge > 0 only in certified or none mode")
        if self.mode == "certified":
            for name in ("row_bound", "label_bound", "coef_bound"):
                if getattr(self, name) is None:
                    raise ValidationError(f"certified mode needs the public {name} (never read off the data)")
                _positive(name, getattr(self, name))
            if len(self.split) != 3 or any(not (w > 0 and math.isfinite(w)) for w in self.split):
                raise ValidationError("split must be three positive weights (gram, statistic, remainder)")
            if not (math.isfinite(self.remainder_clip) and self.remainder_clip > 0):
                raise ValidationError("remainder_clip (kappa) must be positive")
        if not math.isfinite(self.y_center):
            raise ValidationError(f"y_center must be a finite public number, got {self.y_center!r}")

    @property
    def certified_label_bound(self) -> float:
        """The public label bound C_y, which certified mode requires (checked at construction)."""
        if self.label_bound is None:
            raise ValidationError("certified mode needs the public label_bound (never read off the data)")
        return self.label_bound

    def bound(self, name: str, party: str) -> float:
        value = getattr(self, name)
        if isinstance(value, tuple):
            found = dict(value)
            if party not in found:
                raise ValidationError(f"{name} has no value for party {party!r}")
            return found[party]
        return float(value)

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        for key in ("row_bound", "coef_bound"):
            if isinstance(data[key], (tuple, list)):
                data[key] = {k: v for k, v in data[key]}
        data["split"] = list(data["split"])
        return data

    def to_json(self) -> str:
        return json.dumps({"protocol": DPBCDProtocol.name, "version": DPBCDProtocol.version, "config": self.to_dict()}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> DPBCDConfig:
        try:
            data = parse_json(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"not a DP-BCD configuration: {exc}") from None
        if not isinstance(data, dict) or data.get("protocol") != DPBCDProtocol.name or data.get("version") != DPBCDProtocol.version:
            raise ValidationError("not a DP-BCD configuration of this protocol version")
        return cls(**data["config"])


def noise_ratio_of(published: Sequence[Mapping[str, Any]]) -> float:
    """sqrt(sum of the kept steps' noise energies / sum_i beta_i^T G~_i beta_i) over the published blocks: about the
    root-mean-square change of the predictions that the noise alone induces, relative to their own spread (the meaning
    of ``privsdr.released.regression``'s ratio; cross-block terms left out). inf when noise was added and every block
    shrank to 0: the fit is then the trivial model."""
    signal = sum(float(m.get("signal_energy", 0.0)) for m in published)
    noise = sum(float(m.get("noise_energy", 0.0)) for m in published)
    if not signal > 0:
        return math.inf if any(m.get("noisy") for m in published) else 0.0
    return math.sqrt(noise / signal)


def diagnosed(reports: Mapping[str, Any], result: DPBCDResult) -> dict[str, Any]:
    """The parties' reports with the certified fit's noise diagnostic attached (post-processing of published values)."""
    if result.noise_ratio is None:
        return dict(reports)
    from ..released import regression

    return {name: regression.with_diagnostics(report, result.noise_ratio) for name, report in reports.items()}


@attrs.frozen(eq=False)
class DPBCDResult:
    """The published coefficients per party (protocol order) and, in certified mode, the noise diagnostic
    ``noise_ratio`` (``noise_ratio_of``; None in the other modes)."""

    coef_blocks: Mapping[str, np.ndarray]
    order: tuple[str, ...]
    noise_ratio: float | None = None
    intercept: float = 0.0
    fell_back: bool = False  #: the fit warned and every coefficient was set to 0: it predicts the DP mean

    @property
    def coef(self) -> np.ndarray:
        return np.concatenate([self.coef_blocks[n] for n in self.order])


class DPBCDProtocol(VerticalProtocol):
    """DP-BCD on the party layer (module docstring). Picklable: it only holds the public config."""

    name = "privsdr.dpbcd"
    version = 1

    def __init__(self, config: DPBCDConfig) -> None:
        self.config = config

    # -- public structure ----------------------------------------------------------------------
    @property
    def relation(self) -> str:
        return "lsdp_zero_row" if self.config.mode == "paper" else "replace_one"

    def digest(self, layout: Layout) -> str:
        text = json.dumps({"config": self.config.to_dict(), "layout": layout.to_dict(), "protocol": self.name,
                           "version": self.version}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def order(self, layout: Layout) -> tuple[str, ...]:
        """Ring order: the label holder first, the others as given (spec A23)."""
        label = layout.label_holders[0]
        return (label,) + tuple(n for n in layout.names if n != label)

    def steps(self, layout: Layout) -> list[tuple[int, str]]:
        return [(t, name) for t in range(1, self.config.n_rounds + 1) for name in self.order(layout)]

    def allocation(self) -> dict[str, Any]:
        return {"tight": self.config.mode == "certified"}

    def check_budget(self, budget: Budget) -> None:
        mode = self.config.mode
        if mode == "none" and not budget.is_infinite:
            raise ValidationError("mode 'none' (Algorithm 1, raw remainders) runs only with Budget.infinite()")
        if mode == "paper" and budget.delta != 0.0:
            raise ValidationError("the paper's mechanism claims pure eps-LSDP: give Budget(epsilon, 0) (delta is unused, spec §6)")
        if mode == "certified" and not budget.is_infinite and budget.delta <= 0.0:
            raise ValidationError("certified DP-BCD releases Gaussian noise: it needs delta > 0")

    def prepare(self, party: Party) -> Party:
        """Certified mode clips once, up front (the actions clip again; on clipped data that is a no-op)."""
        y = party.y
        if y is not None and self.config.y_center != 0.0:
            y = np.asarray(y, dtype=float) - self.config.y_center  # the public centre: the model is y - c = X beta
        if self.config.mode != "certified":
            return party if y is party.y else Party(party.name, party.X, y, party.columns)
        X = steps.clip_block(party.X, self.config.bound("row_bound", party.name))
        y = None if y is None else steps.clip_label(y, self.config.certified_label_bound)
        return Party(party.name, X, y, party.columns)

    def check(self, parties: Sequence[Party], layout: Layout) -> None:
        holders = layout.label_holders
        if len(holders) != 1:
            raise ValidationError(f"exactly one party must hold y (DP-BCD has a single label owner); holders: {list(holders) or 'none'}")
        for party in parties:
            n, m = party.X.shape
            if n <= m:
                raise ValidationError(f"party {party.name!r} has N = {n} <= m = {m} columns (the paper needs N > m_i)")
            if self.config.mode != "certified" and full_rank(party.X) < m:
                # the published algorithm solves with the block itself; a certified fit solves with the noisy, floored
                # Gram, and one record can make a block full-rank: refusing would tell the two neighbours apart
                raise ValidationError(f"party {party.name!r}: its block is rank-deficient (rank < {m} columns); drop dependent columns")
            if self.config.mode == "certified":
                for name in ("row_bound", "coef_bound"):
                    self.config.bound(name, party.name)
        label = next(p for p in parties if p.holds_label)
        if self.config.mode == "paper" and self.config.xi_floor is None:
            steps.paper_xi(BlockSolver(label.X), np.asarray(label.y, dtype=float), self.config.gamma, None)  # A9 before spending

    # -- the plan ------------------------------------------------------------------------------
    def build_plan(self, layout: Layout, budget: Budget) -> Plan:
        self.check_budget(budget)
        c = self.config
        k, T = len(layout.names), c.n_rounds
        plan = Plan("dpbcd_" + c.mode, self.relation, {
            "mode": c.mode, "n_rounds": T, "n_parties": k, "n_rows": layout.n_rows, "order": list(self.order(layout)),
            "widths": {p.name: p.n_columns for p in layout.parties},
            **({"gamma": c.gamma, "abort_check": c.abort_check, "accounting": c.accounting, "noise": c.noise} if c.mode == "paper" else {}),
            **({"row_bound": c.to_dict()["row_bound"], "label_bound": c.label_bound, "coef_bound": c.to_dict()["coef_bound"],
                "ridge": c.ridge, "remainder_clip": c.remainder_clip, "split": list(c.split), "calibration": c.calibration}
               if c.mode == "certified" else {}),
        })
        if c.mode == "certified":
            self._certified_nodes(plan, layout)
        else:
            self._step_nodes(plan, layout, budget)
        return plan

    def _step_nodes(self, plan: Plan, layout: Layout, budget: Budget) -> None:
        c = self.config
        k, T = len(layout.names), c.n_rounds
        if c.mode == "none":
            sens = Sensitivity(1.0, "l2", "replace_one", "none: a raw remainder")
            kw: dict[str, Any] = {"status": "none"}
            mech = "non_private"
        else:
            reveal: Budget | None
            if budget.is_infinite:
                share = reveal = Budget.infinite()
            else:  # equal shares rounded down so that their exact sum never exceeds the budget
                reveals = [float(T)] * k if c.accounting == "conservative" else []
                shares = Budget(budget.epsilon, 0.0).split([1.0] * (k * T) + reveals)
                share, reveal = shares[0], (shares[-1] if reveals else None)
            sens = Sensitivity(1.0, "l2", "lsdp_zero_row", "none: xi is read off the private local residual (local sensitivity)")
            kw = {"status": "claimed", "share": share}
            mech = "opaque"
        previous: str | None = None
        for t, name in self.steps(layout):
            node = f"{name}/step{t}"
            plan.add(node, mech, sens, parents=(previous,) if previous else (), params={"round": t}, description=(
                f"round {t}: Algorithm 2 step (radial half-normal objective perturbation); {LSDP_NOTE}" if c.mode == "paper"
                else f"round {t}: Algorithm 1 step, the raw remainder (NOT private)"), **kw)
            previous = node
        if c.mode == "none" or c.accounting == "conservative":
            for name in layout.names:
                own = tuple(f"{name}/step{t}" for t in range(1, T + 1))
                if c.mode == "none":
                    plan.add(f"{name}/reveal", mech, sens, parents=own, status="none", description="the coefficients (NOT private)")
                else:
                    plan.add(f"{name}/reveal", mech, sens, parents=own, status="claimed", share=reveal,
                             description=f"revealing phase: the summed increments, T eps_step by the paper's per-step claim (spec A5); {LSDP_NOTE}")

    def _certified_nodes(self, plan: Plan, layout: Layout) -> None:
        c = self.config
        w_gram, w_stat, w_rem = c.split
        label = layout.label_holders[0]
        for name in layout.names:
            C = c.bound("row_bound", name)
            plan.add(f"{name}/gram", "symmetric_gaussian",
                     Sensitivity(steps.gram_sensitivity(C), "l2", "replace_one", "||xx^T - x'x'^T||_F <= sqrt(2) C_i^2"),
                     weight=w_gram, calibration=c.calibration, description="X_i^T X_i of the clipped block, released once")
        if c.dp_intercept:
            plan.add(f"{label}/y_sum", "gaussian",
                     Sensitivity(steps.label_sum_sensitivity(c.certified_label_bound), "l2", "replace_one",
                                 "|clip(y_r - c) - clip(y'_r - c)| <= 2 C_y"),
                     weight=Y_SUM_WEIGHT * w_stat, calibration=c.calibration,
                     description="the sum of the clipped, centred labels, released once: the DP mean (N is public) is the "
                                 "intercept and the trivial model's prediction")
        sequence = self.steps(layout)
        previous_remainder: str | None = None
        for index, (t, name) in enumerate(sequence):
            C = c.bound("row_bound", name)
            first = index == 0
            parents = (f"{name}/gram",) + ((previous_remainder,) if previous_remainder else ())
            if first:
                sens = Sensitivity(steps.label_statistic_sensitivity(C, c.certified_label_bound), "l2", "replace_one", "||x y - x'y'|| <= 2 C_i C_y")
            else:
                sens = Sensitivity(1.0, "l2", "replace_one", "2 C_i C_v, C_v = C_y + sum_j C_j ||beta_j|| + kappa sd(noise in the public remainder)")
            plan.add(f"{name}/stat{t}", "gaussian", sens, weight=w_stat, calibration=c.calibration, parents=parents,
                     adaptive=not first, description=f"round {t}: X_i^T u, u = " + ("clip(y)" if first else "clip(incoming remainder, C_v)"))
            if index == len(sequence) - 1:
                break
            derivation = "2 (C_y + C_i ||d~||), d~ public" if first else "2 C_i ||d~||, d~ public (one row changes)"
            plan.add(f"{name}/remainder{t}", "gaussian", Sensitivity(1.0, "l2", "replace_one", derivation), weight=w_rem,
                     calibration=c.calibration, parents=(f"{name}/stat{t}",) + parents, adaptive=True,
                     description=f"round {t}: the outgoing remainder u - X_i d~" + (" (carries y)" if name == label and first else ""))
            previous_remainder = f"{name}/remainder{t}"

    # -- the schedule --------------------------------------------------------------------------
    def schedule(self, layout: Layout) -> list[Stage]:
        c = self.config
        stages: list[Stage] = []
        if c.mode == "certified":
            label = layout.label_holders[0]
            stages.append(Stage(0, "gram", tuple(Action(n, "gram", (f"{n}/gram",) + ((f"{n}/y_sum",) if c.dp_intercept and n == label else ()))
                                                 for n in layout.names)))
        sequence = self.steps(layout)
        previous: str | None = None
        for index, (t, name) in enumerate(sequence):
            s = len(stages)
            last = index == len(sequence) - 1
            if c.mode == "certified":
                nodes = (f"{name}/stat{t}",) + (() if last else (f"{name}/remainder{t}",))
            else:
                nodes = (f"{name}/step{t}",)
            stages.append(Stage(s, f"round {t}: {name}", (Action(name, f"t{t}", nodes, (previous,) if previous else ()),)))
            previous = message_id(s, name, "remainder")
        s = len(stages)
        reveal = c.mode == "none" or (c.mode == "paper" and c.accounting == "conservative")
        stages.append(Stage(s, "publish", tuple(Action(n, "publish", (f"{n}/reveal",) if reveal else ()) for n in layout.names)))
        return stages

    def initial_state(self, party: str, layout: Layout) -> dict[str, Any]:
        return {"beta": np.zeros(layout.party(party).n_columns), "order": self.order(layout)}

    def has_precheck(self, action: Action) -> bool:
        return self.config.mode == "paper" and action.step.startswith("t") and self.config.abort_check in ("gamma_min", "both")

    def precheck(self, action: Action, party: Party, state: Any, inbox: Mapping[str, PartyMessage]) -> None:
        """Eq. (14): abort before the step is charged when gamma < gamma_min(X_i, v) (spec §3.5, A6)."""
        v = self._incoming(party, inbox)
        g = gamma_min(party.X, v)
        if self.config.gamma_min_variant == "both":
            g = max(g, gamma_min(party.X, v, zero_label=True))
        if self.config.gamma < g:
            raise ProtocolAbort(f"gamma = {self.config.gamma:g} < gamma_min = {g:.6g} (eq. 14)")

    # -- the actions -----------------------------------------------------------------------------
    def _incoming(self, party: Party, inbox: Mapping[str, PartyMessage]) -> np.ndarray:
        if inbox:
            (message,) = inbox.values()
            v = np.asarray(message.arrays["remainder"], dtype=float)
            if v.shape != (party.X.shape[0],) or not np.all(np.isfinite(v)):
                raise ValidationError(f"message {message.id}: the remainder must be a finite vector of length N")
            return v
        if party.y is None:
            raise ValidationError(f"party {party.name!r} starts the protocol but holds no y")
        return np.asarray(party.y, dtype=float)

    def _next(self, layout_order: tuple[str, ...], name: str) -> str:
        return layout_order[(layout_order.index(name) + 1) % len(layout_order)]

    def act(self, action: Action, party: Party, state: Any, inbox: Mapping[str, PartyMessage],
            tickets: Mapping[str, NoiseTicket]) -> ActionResult:
        if action.step == "gram":
            return self._gram(party, state, tickets)
        if action.step == "publish":
            return self._publish(action, party, state, tickets)
        if self.config.mode == "certified":
            return self._certified_step(action, party, state, inbox, tickets)
        return self._paper_step(action, party, state, inbox, tickets)

    def _paper_step(self, action: Action, party: Party, state: Any, inbox: Mapping[str, PartyMessage],
                    tickets: Mapping[str, NoiseTicket]) -> ActionResult:
        c = self.config
        (node,) = action.nodes
        ticket = tickets[node]
        v = self._incoming(party, inbox)
        solver = BlockSolver(party.X)
        if c.mode == "none":
            increment = solver.increment(v, np.zeros(party.X.shape[1]))
            v_out = v - party.X @ increment
            released = {node: ticket.release(v_out)}
        else:
            share = ticket.spec.share
            eps_step = math.inf if share is None or share.is_infinite else share.epsilon
            xi = steps.paper_xi(solver, v, c.gamma, c.xi_floor)
            post = c.abort_check in ("post", "both")

            def perturbed(rng: np.random.Generator) -> dict[str, np.ndarray]:
                try:
                    inc, out = steps.paper_step(solver, v, eps_step, c.gamma, xi, rng, post_check=post, noise=c.noise)
                except steps.PaperAbort as exc:
                    raise ProtocolAbort(str(exc)) from None
                return {"increment": inc, "remainder": out}

            out, spec = ticket.release(perturbed)
            increment, v_out = out["increment"], out["remainder"]
            released = {node: ({"remainder": v_out}, spec)}
        state = {**state, "beta": state["beta"] + increment}
        if self._is_last(action, state):
            return ActionResult(state, released)  # the final remainder is not needed: it is not sent
        message = Outgoing("remainder", (self._next(state["order"], party.name),), {"remainder": v_out}, {}, (node,))
        return ActionResult(state, released, (message,))

    def _is_last(self, action: Action, state: Any) -> bool:
        return action.step == f"t{self.config.n_rounds}" and action.party == state["order"][-1]

    def _gram(self, party: Party, state: Any, tickets: Mapping[str, NoiseTicket]) -> ActionResult:
        gram_node = f"{party.name}/gram"
        sum_node = next((n for n in tickets if n.endswith("/y_sum")), None)
        C = self.config.bound("row_bound", party.name)
        out, spec = tickets[gram_node].release(steps.gram_query(steps.clip_block(party.X, C)))
        gram = steps.floored_gram(out, spec.scale)
        new_state = {**state, "gram": gram, "gram_raw": out, "gram_scale": spec.scale}
        released: dict[str, tuple[Any, Any]] = {gram_node: (out, spec)}
        if sum_node is not None:
            assert party.y is not None
            total, sum_spec = tickets[sum_node].release(np.array([float(np.sum(steps.clip_label(party.y, self.config.certified_label_bound)))]))
            released[sum_node] = (total, sum_spec)
            new_state["y_shift"] = shrinkage.dp_label_mean(float(total[0]), party.X.shape[0], self.config.certified_label_bound)
        return ActionResult(new_state, released)

    def _pretests(self, state: Any) -> int:
        """The pre-tests of one certified fit (one per step): each runs at PRETEST_LEVEL / this, so that the fit keeps
        anything fitted to noise alone with probability at most PRETEST_LEVEL (Bonferroni)."""
        return self.config.n_rounds * len(state["order"])

    def _certified_step(self, action: Action, party: Party, state: Any, inbox: Mapping[str, PartyMessage],
                        tickets: Mapping[str, NoiseTicket]) -> ActionResult:
        c = self.config
        C = c.bound("row_bound", party.name)
        Xc = steps.clip_block(party.X, C)
        stat_node = action.nodes[0]
        released: dict[str, tuple[Any, Any]] = {}
        if inbox:
            (message,) = inbox.values()
            v = self._incoming(party, inbox)
            acc_sd = float(message.meta["noise_sd_accumulated"])
            signal = float(message.meta["signal_bound"])
            C_v = steps.remainder_bound(signal, c.remainder_clip, acc_sd)
            u = np.clip(v, -C_v, C_v)
            s, s_spec = tickets[stat_node].release(steps.statistic_query(Xc, u), sensitivity=steps.statistic_sensitivity(C, C_v))
            label_bound = None
            base = v
        else:
            acc_sd = 0.0
            signal = c.certified_label_bound
            u = steps.clip_label(self._incoming(party, inbox) - state.get("y_shift", 0.0), signal)
            s, s_spec = tickets[stat_node].release(steps.statistic_query(Xc, u))
            label_bound = signal
            base = u
        released[stat_node] = (s, s_spec)
        remainder_var = shrinkage.unabsorbed_variance(acc_sd**2, state.get("seen_var", 0.0), state.get("unabsorbed_var", 0.0),
                                                  state.get("factor", 0.0))
        d, kept = shrinkage.certified_increment(state["gram"], s, state["beta"], c.ridge, c.bound("coef_bound", party.name),
                                            shrinkage.StepNoise(float(s_spec.scale), math.sqrt(remainder_var)),
                                            shrink=c.shrinkage == "james_stein", n_steps=self._pretests(state))
        new_state = {**state, "beta": state["beta"] + d, "seen_var": acc_sd**2, "unabsorbed_var": remainder_var,
                     "factor": kept.factor, "noise_energy": state.get("noise_energy", 0.0) + kept.factor**2 * kept.noise_energy}
        # the noise-free remainder's entries stay within C_y + sum_j C_j ||beta_j||: swap in this party's new term
        signal = signal - C * float(np.linalg.norm(state["beta"])) + C * float(np.linalg.norm(new_state["beta"]))
        arrays = {"statistic": s, "increment": d, "shrinkage": np.array([kept.factor, kept.energy, kept.noise_energy])}
        if "gram_sent" not in state:
            arrays["gram"] = state["gram_raw"]
            new_state["gram_sent"] = True
        nodes = [stat_node] + ([f"{party.name}/gram"] if "gram" in arrays else [])
        meta: dict[str, Any] = {}
        if len(action.nodes) > 1:
            rem_node = action.nodes[1]
            sens = steps.remainder_sensitivity(C, float(np.linalg.norm(d)), label_bound)
            out, r_spec = tickets[rem_node].release(steps.remainder_query(base, Xc, d), sensitivity=sens)
            released[rem_node] = (out, r_spec)
            arrays["remainder"] = out
            nodes.append(rem_node)
            meta = {"noise_sd": r_spec.scale, "noise_sd_accumulated": math.hypot(acc_sd, r_spec.scale), "signal_bound": signal}
        recipients = (self._next(state["order"], party.name),)
        return ActionResult(new_state, released, (Outgoing("remainder", recipients, arrays, meta, nodes),))

    def _publish(self, action: Action, party: Party, state: Any, tickets: Mapping[str, NoiseTicket]) -> ActionResult:
        beta = np.asarray(state["beta"], dtype=float)
        others = tuple(n for n in state["order"] if n != party.name)
        released: dict[str, tuple[Any, Any]] = {}
        if action.nodes:
            (node,) = action.nodes
            ticket = tickets[node]
            out, spec = ticket.release(beta if self.config.mode == "none" else (lambda rng: beta))
            released[node] = (out, spec)
            meta: dict[str, Any] = {"charged": True}
        else:
            meta = {"charged": False, "why": ("post-processing of the released increments" if self.config.mode == "certified" else
                                              "accounting='paper': the coefficient reveal is not charged (the paper's Theorem 1 "
                                              "counts the learning phase only, spec A5)")}
            if self.config.mode == "paper":
                meta["status"] = "claimed, not charged (accounting='paper')"
        if self.config.mode == "certified" and "gram" in state:
            # the noise diagnostic's two sums for this block (post-processing of its released Gram and steps)
            meta["signal_energy"] = float(beta @ state["gram"] @ beta)
            meta["noise_energy"] = float(state.get("noise_energy", 0.0))
            meta["noisy"] = bool(state["gram_scale"] > 0)
            if "y_shift" in state:
                meta["y_shift"] = float(state["y_shift"])
        return ActionResult(state, released, (Outgoing("coefficients", others, {"coef": beta}, meta, action.nodes),))

    def final_reads(self, layout: Layout, party: str) -> tuple[str, ...]:
        publish = len(self.schedule(layout)) - 1
        return tuple(message_id(publish, n, "coefficients") for n in layout.names if n != party)

    def finish(self, layout: Layout, states: Mapping[str, Any], messages: Sequence[PartyMessage]) -> DPBCDResult:
        published = {m.sender: np.asarray(m.arrays["coef"]) for m in messages if m.kind == "coefficients"}
        metas = [m.meta for m in messages if m.kind == "coefficients"]
        ratio = noise_ratio_of(metas) if self.config.mode == "certified" else None
        shift = sum(float(m.get("y_shift", 0.0)) for m in metas)
        # never worse than the DP mean (issue 33): a warned fit is the DP mean (post-processing; its steps were shrunk
        # already, so an unwarned fit is kept as it is)
        fell_back = (ratio is not None and not ratio <= NOISE_WARNING_SHARE and self.config.shrinkage == "james_stein"
                     and self.config.dp_intercept)
        if fell_back:
            published = {name: np.zeros_like(coef) for name, coef in published.items()}
        return DPBCDResult(published, layout.names, ratio, self.config.y_center + shift, fell_back)

    def notes(self, party: str) -> list[str]:
        if self.config.mode == "paper":
            return [f"{LSDP_NOTE}: the paper's per-step guarantee is locally sensitive DP over zero-filled rows; the "
                    "zero-row distinguisher (spec O-P1) detects a zero-filled row with probability 1, so no finite "
                    "standard-DP epsilon holds"]
        if self.config.mode == "none":
            return ["Algorithm 1 without noise: every remainder is a raw release"]
        return []
