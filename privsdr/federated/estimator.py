"""``FederatedSIR``: the in-process simulation API of the FSIR protocol (K clients, one server)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..accounting import Budget, as_budget
from ..errors import UncertifiedPlanError, ValidationError
from .client import client_message, screening_message
from .execution import client_seeds, run_clients
from .protocol import FSIRConfig
from .server import majority_vote, merge


class FederatedSIR:
    """Federated, differentially private SIR (He, Zhang & Chen; spec fsir_000.md).

    ``fit(clients)`` takes a sequence of ``(X_k, y_k)``, one per client. Each client spends ``budget``
    on its own records (split ``cov_share`` : 1 - ``cov_share`` between covariance and slice means,
    minus ``screen_share`` for a screening round); the server merges. The guarantee per record is
    the max over clients (parallel composition). ``executor``: None, a ``concurrent.futures``
    executor, or a ``dask.distributed.Client``. Results do not depend on it (per-client seeds).

    Uncertified configurations (``mechanism="vgm"``: the noise shape reads the private data;
    ``screening="ccmd"``: a raw index upload) need ``allow_uncertified=True``.
    """

    def __init__(self, n_directions: "int | str" = 1, *, bound: float | None = None, norm: str = "linf", cut_points: Any = None, classes: Any = None,
                 mechanism: str = "iid", cov_mechanism: str = "modsulq", calibration: str = "classical",
                 budget: "Budget | tuple[float, float] | None" = None, cov_share: float = 0.5, screening: str | None = None,
                 screen_size: int = 5, screen_share: float = 0.2, ccmd_threshold: float | None = None, ccmd_rule: str = "threshold",
                 server_vote: str | None = None, basis: Any = None,
                 spectrum: Any = None, two_stage_share: float = 0.3, psd_floor: float | None = None,
                 allow_uncertified: bool = False, executor: Any = None, random_state: Any = None) -> None:
        self.n_directions = n_directions
        self.bound = bound
        self.norm = norm
        self.cut_points = cut_points
        self.classes = classes
        self.mechanism = mechanism
        self.cov_mechanism = cov_mechanism
        self.calibration = calibration
        self.budget = budget
        self.cov_share = cov_share
        self.screening = screening
        self.screen_size = screen_size
        self.screen_share = screen_share
        self.ccmd_threshold = ccmd_threshold
        self.ccmd_rule = ccmd_rule
        self.server_vote = server_vote
        self.basis = basis
        self.spectrum = spectrum
        self.two_stage_share = two_stage_share
        self.psd_floor = psd_floor
        self.allow_uncertified = allow_uncertified
        self.executor = executor
        self.random_state = random_state

    def config(self) -> FSIRConfig:
        if self.bound is None:
            raise ValidationError("bound (R, a public truncation level) is required")
        return FSIRConfig(bound=self.bound, norm=self.norm, cut_points=self.cut_points, classes=self.classes, mechanism=self.mechanism,
                          cov_mechanism=self.cov_mechanism, calibration=self.calibration, cov_share=self.cov_share,
                          n_directions=self.n_directions, two_stage_share=self.two_stage_share, basis=self.basis,
                          spectrum=self.spectrum, screening=self.screening, screen_size=self.screen_size,
                          screen_share=self.screen_share, ccmd_threshold=self.ccmd_threshold, ccmd_rule=self.ccmd_rule,
                          server_vote=self.server_vote or ("top_s" if self.screening == "private" else "majority"))

    def fit(self, clients: Sequence[tuple[Any, Any]]) -> "FederatedSIR":
        config = self.config()
        if config.mechanism == "none":
            budget = Budget.infinite()
        elif self.budget is None:
            raise ValidationError("give budget=Budget(epsilon, delta): what each client spends on its own records")
        else:
            budget = as_budget(self.budget)
        if not clients:
            raise ValidationError("no clients")
        p_values = {np.shape(X)[1] if np.ndim(X) == 2 else None for X, _ in clients}
        if len(p_values) != 1 or None in p_values:
            raise ValidationError(f"all clients must hold 2-D X with the same number of columns, got {sorted(map(str, p_values))}")
        uncertified = [why for cond, why in ((config.mechanism == "vgm", "mechanism='vgm' (noise shape from the private data)"),
                                            (config.screening == "ccmd", "screening='ccmd' (raw index upload)")) if cond]
        if uncertified and not self.allow_uncertified:
            raise UncertifiedPlanError(f"uncertified configuration: {', '.join(uncertified)}; pass allow_uncertified=True")
        K = len(clients)
        seeds = client_seeds(self.random_state, 2 * K)
        ids = [f"client-{k}" for k in range(K)]
        active = None
        main_budget, screen_budget = budget, None
        if config.screening is not None and not budget.is_infinite:
            screen_budget = Budget(budget.epsilon * config.screen_share, 0.0)
            main_budget = Budget(budget.epsilon * (1 - config.screen_share), budget.delta)
        elif config.screening is not None:
            screen_budget = Budget.infinite()
        if config.screening is not None:
            votes = run_clients(screening_message, [
                {"X": X, "y": y, "config": config, "budget": screen_budget, "client_id": ids[k], "random_state": seeds[K + k]}
                for k, (X, y) in enumerate(clients)], self.executor)
            active = majority_vote(votes, next(iter(p_values)), config.server_vote, config.screen_size)
            if len(active) < max(int(config.n_directions) if config.n_directions != "auto" else 1, 1):
                raise ValidationError(f"screening kept {len(active)} coordinates: too few for the requested directions")
            self.screening_messages_ = votes
        messages = run_clients(client_message, [
            {"X": X, "y": y, "config": config, "budget": main_budget, "client_id": ids[k], "random_state": seeds[k], "active": active}
            for k, (X, y) in enumerate(clients)], self.executor)
        result = merge(messages, config, psd_floor=self.psd_floor, p_original=next(iter(p_values)))
        if config.screening is not None:
            for m in self.screening_messages_:  # a client's two rounds compose sequentially (basic)
                entry = result.privacy["per_client"][m.client_id]
                eps, delta = m.report.spent
                entry["epsilon"] += eps
                entry["delta"] += delta
                entry["screening_status"] = m.report.status
            per = result.privacy["per_client"].values()
            result.privacy["per_record"] = {"epsilon": max(c["epsilon"] for c in per), "delta": max(c["delta"] for c in per)}
            if config.screening == "ccmd":
                result.privacy["status"] = "none"
        if config.mechanism == "none":
            result.privacy["status"] = "none"  # the non-private baseline: no noise at all
        self.config_ = config
        self.messages_ = messages
        self.directions_ = result.directions
        self.n_directions_ = result.n_directions
        self.active_ = active
        self.privacy_ = result.privacy
        return self
