"""``FederatedSIR``: the in-process simulation API of the FSIR protocol (K clients, one server)."""
from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any

import attrs
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin

from .._sklearn import SklearnEstimator
from .._validation import check_matrix, check_positive
from ..accounting import Budget, Ledger, as_budget
from ..accounting.default import fresh_ledger, ledger_for, remaining_budget
from ..errors import ValidationError
from ..execution import client_seeds, run_clients
from ..persistence import model_class
from ..plan import Plan, Run
from .client import (
    add_client_nodes,
    check_client_data,
    client_budget,
    client_message,
    client_plan,
    client_public_params,
    screening_message,
)
from .protocol import FSIRConfig
from .server import majority_vote, merge, without_guarantee

RELATION = "replace_one"


@model_class
class FederatedSIR(ClassNamePrefixFeaturesOutMixin, TransformerMixin, SklearnEstimator):
    """Federated, differentially private SIR (He, Zhang & Chen; spec fsir_000.md).

    ``fit(clients)`` takes a sequence of ``(X_k, y_k)``, one per client; ``fit(X, y)`` with ``n_clients=K``
    splits pooled rows into K contiguous clients (a simulation, as scikit-learn's tools call ``fit``). Each client spends ``budget``
    on its own records (split ``cov_share`` : 1 - ``cov_share`` between covariance and slice means,
    minus ``screen_share`` for a screening round); the server merges. The guarantee per record is
    the max over clients (parallel composition). ``executor``: None, a ``concurrent.futures``
    executor, or a ``dask.distributed.Client``. Results do not depend on it (per-client seeds).

    Defaults are those of ``privsdr fsir config``: i.i.d. Gaussian slice means, Analyze-Gauss second
    moment, analytic calibration (the paper's MOD-SULQ + classical choice ruins the covariance:
    ``docs/algorithms/fsir.md``). ``bound``: R, or one R_j per column (``norm="linf"``).

    ``ledger`` (optional, e.g. with a journal): the account the whole simulation is charged to.
    Every client's nodes are charged to it *before* any client draws noise, each client's in its own
    cell of a stable "client" partition, so the ledger composes clients in parallel (per record:
    the max over clients) and the rounds of one client sequentially. Without a ledger a fresh one
    of ``budget`` is used; with only a ledger, each client spends what remains of it.

    Uncertified configurations (``mechanism="vgm"``: the noise shape reads the private data;
    ``screening="ccmd"``: a raw index upload; ``mechanism="none"``: no noise) need ``allow_uncertified=True``.

    ``aggregation``: ``"local"`` (default: each client noises its own statistics and uploads them, the paper's
    protocol) or ``"secure"``: the clients' sums are added inside a secure computation (MPyC, one process per client
    plus the server, on 127.0.0.1) and released once for all N rows with distributed discrete Gaussian noise, at the
    central rate (``federated.secure_fit``, ``docs/secure.md``); ``colluders`` is the collusion threshold t (the
    noise of the clients outside any t meets the calibration; t < (K + 1) / 2), ``timeout`` the seconds a party
    waits for the others. The secure path needs ``mechanism="iid"`` and no screening. ``addresses``: one
    ``host:port`` per party, the server first, then the clients in order (default: free ports on 127.0.0.1);
    ``tls``: mutual TLS between the parties (default; ``False``: plaintext, asked for explicitly, and the report says
    so); ``certificates``: the folder ``privsdr secure keys`` wrote (needed with TLS to a non-loopback address; made
    for the run otherwise).

    ``center`` (default ``"dp"``, as ``privsdr fsir config``): each client also releases its slice
    proportions (``center_share`` of its budget) and the server centres at the DP mean read off the
    merged slice means (free); a public vector is subtracted from the rows before truncation (and
    the DP correction still applies); ``"none"`` assumes centred data (the paper; no proportions).

    After ``fit``: ``directions_`` (p x d, unit-length columns), ``n_directions_``, ``active_``
    (screened columns), ``center_`` (public centre + DP mean: where the rows were centred),
    ``public_center_``, ``privacy_`` (per-client costs and the per-record guarantee),
    ``privacy_report_`` (the run on the ledger), ``messages_``; ``transform(X)`` projects rows
    shifted and truncated as the clients do it, then centred at the DP mean. A secure fit also sets
    ``released_`` (the released moments: ``privsdr.released.Released``), ``eigenvalues_``, ``noise_error_``
    and ``random_error_`` (DPSIR's moments diagnostics) and has no ``messages_`` (nothing is uploaded).
    """

    model_attributes = ("directions_", "n_directions_", "active_", "privacy_", "config_", "n_features_in_", "center_",
                        "public_center_")
    model_required = ("directions_", "config_")

    def __init__(self, n_directions: int | str = 1, *, bound: Any = None, norm: str = "linf", cut_points: Any = None, classes: Any = None,
                 mechanism: str = "iid", cov_mechanism: str = "analyze_gauss", calibration: str = "analytic",
                 budget: Budget | tuple[float, float] | None = None, ledger: Ledger | None = None, accountant: str = "best",
                 cov_share: float = 0.5, screening: str | None = None,
                 screen_size: int = 5, screen_share: float = 0.2, ccmd_threshold: float | None = None, ccmd_rule: str = "threshold",
                 server_vote: str | None = None, basis: Any = None,
                 spectrum: Any = None, two_stage_share: float = 0.3, psd_floor: float | None = None, center: Any = "dp",
                 center_share: float = 0.1, allow_uncertified: bool = False, n_clients: int | None = None, executor: Any = None,
                 random_state: Any = None, aggregation: str = "local", colluders: int = 1, timeout: float = 60.0,
                 addresses: Any = None, tls: bool = True, certificates: Any = None) -> None:
        self.n_directions = n_directions
        self.bound = bound
        self.norm = norm
        self.cut_points = cut_points
        self.classes = classes
        self.mechanism = mechanism
        self.cov_mechanism = cov_mechanism
        self.calibration = calibration
        self.budget = budget
        self.ledger = ledger
        self.accountant = accountant
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
        self.center = center
        self.center_share = center_share
        self.allow_uncertified = allow_uncertified
        self.n_clients = n_clients
        self.executor = executor
        self.random_state = random_state
        self.aggregation = aggregation
        self.colluders = colluders
        self.timeout = timeout
        self.addresses = addresses
        self.tls = tls
        self.certificates = certificates

    _requires_y = True

    @classmethod
    def restore_attribute(cls, name: str, value: Any) -> Any:
        if name == "config_":
            return FSIRConfig(**{"center": "none", **value})  # files from before centring: fitted uncentred
        if name == "active_" and value is not None:
            return tuple(int(v) for v in value)
        return value

    def config(self) -> FSIRConfig:
        if self.bound is None:
            raise ValidationError("bound (R, a public truncation level) is required")
        return FSIRConfig(bound=self.bound, norm=self.norm, cut_points=self.cut_points, classes=self.classes, mechanism=self.mechanism,
                          cov_mechanism=self.cov_mechanism, calibration=self.calibration, cov_share=self.cov_share,
                          n_directions=self.n_directions, two_stage_share=self.two_stage_share, basis=self.basis,
                          spectrum=self.spectrum, screening=self.screening, screen_size=self.screen_size,
                          screen_share=self.screen_share, ccmd_threshold=self.ccmd_threshold, ccmd_rule=self.ccmd_rule,
                          server_vote=self.server_vote or ("top_s" if self.screening == "private" else "majority"),
                          center=self.center, center_share=self.center_share)

    def _budget_and_ledger(self, config: FSIRConfig) -> tuple[Budget, Ledger]:
        if self.ledger is not None and not isinstance(self.ledger, Ledger):
            raise ValidationError(f"ledger must be a privsdr.Ledger, got {type(self.ledger).__name__}")
        ledger = ledger_for(self)
        if config.mechanism == "none":
            budget = Budget.infinite()
        elif self.budget is not None and not (isinstance(self.budget, str) and self.budget == "remaining"):
            budget = as_budget(self.budget)
        elif ledger is not None:
            budget = remaining_budget(ledger, "FederatedSIR")
        else:
            raise ValidationError("give budget=Budget(epsilon, delta) (what each client spends on its own records) or ledger=")
        if ledger is None:
            ledger = fresh_ledger(budget, self.accountant, "FederatedSIR")
        return budget, ledger

    def _round_plan(self, config: FSIRConfig, sizes: Sequence[int], p: int, ids: Sequence[str],
                    rounds: Sequence[tuple[bool, Budget, Sequence[int] | None]]) -> Any:
        """All clients' nodes of the given rounds ``(screening_round, budget, active)``, each client in
        its own cell of a stable partition. Nodes are share-calibrated, so their cost does not depend
        on the number of columns a round releases."""
        screening = [r for r in rounds if r[0]]
        name = "fsir" + ("_screening" if screening and len(rounds) == 1 else "")
        active = rounds[-1][2]
        q = len(active) if active is not None else p
        plan = Plan(name, RELATION, {**client_public_params(config, sum(sizes), q, active), "clients": len(sizes),
                                     "client_sizes": [int(n) for n in sizes]})
        scopes = plan.partition("client", ids, stable=True)
        for screening_round, budget, act in rounds:
            tag = "screening/" if screening_round and len(rounds) > 1 else ""
            width = len(act) if act is not None else p
            for cid, n_k, scope in zip(ids, sizes, scopes, strict=True):
                add_client_nodes(plan, config, int(n_k), width, budget, screening_round=screening_round, active=act,
                                 prefix=f"{tag}{cid}/", scope=scope)
        main = [r for r in rounds if not r[0]]
        return plan.allocate(client_budget(config, (main or rounds)[0][1], not main))

    def _run(self, plan: Any, ledger: Ledger, shape: tuple[int, int]) -> Run:
        return Run(plan, ledger, random_state=None, allow_uncertified=self.allow_uncertified,
                   data_shape=shape, algorithm="FederatedSIR",
                   notes=["every client node was charged here before any client drew its noise from its own records"])

    def _check_params(self) -> None:
        if not isinstance(self.allow_uncertified, (bool, np.bool_)):
            raise ValidationError(f"allow_uncertified must be True or False, got {self.allow_uncertified!r}")
        if self.psd_floor is not None:
            check_positive(self.psd_floor, "psd_floor")
        if self.executor is not None and not (isinstance(self.executor, Executor) or hasattr(self.executor, "submit")):
            raise ValidationError(f"executor must be None, a concurrent.futures.Executor or a dask.distributed.Client, "
                                  f"got {type(self.executor).__name__}")
        rs = self.random_state
        if not (rs is None or isinstance(rs, (np.random.Generator, np.random.SeedSequence))
                or (isinstance(rs, (int, np.integer)) and not isinstance(rs, bool) and rs >= 0)):
            raise ValidationError(f"random_state must be None, a non-negative int, a SeedSequence or a Generator, got {rs!r}")

    def _pooled_clients(self, X: Any, y: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        """Pooled rows split into ``n_clients`` contiguous clients (the simulation scikit-learn's tools need)."""
        k = self.n_clients
        if k is None:
            raise ValidationError("fit(X, y) with pooled rows needs n_clients=K; or call fit([(X_1, y_1), ..., (X_K, y_K)])")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValidationError(f"n_clients must be an integer >= 1, got {k!r}")
        X = check_matrix(X, "X", min_rows=2)
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValidationError(f"y must be 1-D with one value per row of X ({X.shape[0]}), got shape {y.shape}")
        parts = np.array_split(np.arange(X.shape[0]), int(k))
        return [(X[idx], y[idx]) for idx in parts]

    def fit(self, clients: Any, y: Any = None) -> FederatedSIR:
        """``fit([(X_1, y_1), ..., (X_K, y_K)])``, or ``fit(X, y)`` with ``n_clients=K`` (pooled rows, split)."""
        self._check_params()
        config = self.config()
        budget, ledger = self._budget_and_ledger(config)
        X_raw = clients if y is not None else None
        if y is not None:
            clients = self._pooled_clients(clients, y)
        elif self.n_clients is not None and not isinstance(clients, (list, tuple)):
            raise ValidationError("fit(X, y): y is required (the response of every row): FederatedSIR requires y to be passed, "
                                  "but the target y is None")
        if clients is None or not len(clients):
            raise ValidationError("no clients")
        checked = []
        for k, pair in enumerate(clients):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValidationError(f"client {k}: give (X, y) pairs")
            checked.append((check_matrix(pair[0], f"X of client {k}", min_rows=2), pair[1]))
        p_values = {X.shape[1] for X, _ in checked}
        if len(p_values) != 1:
            raise ValidationError(f"all clients must hold 2-D X with the same number of columns, got {sorted(p_values)}")
        p = p_values.pop()
        K = len(checked)
        ids = [f"client-{k}" for k in range(K)]
        for cid, (X, y) in zip(ids, checked, strict=True):  # every client's data checked before anything is charged
            check_client_data(X, y, config, cid)
        sizes = [X.shape[0] for X, _ in checked]
        if self.aggregation not in ("local", "secure"):
            raise ValidationError(f"aggregation must be 'local' or 'secure', got {self.aggregation!r}")
        if self.aggregation == "local" and (self.addresses is not None or self.certificates is not None):
            raise ValidationError("addresses and certificates are for aggregation='secure' (the local protocol sends upload files)")
        if self.aggregation == "secure":
            return self._fit_secure(config, checked, ids, budget, ledger, X_raw, p)
        if config.mechanism == "vgm_public":
            floor = client_plan(config, min(sizes), p, budget).specs["slice_means"].scale
            if np.any(np.asarray(config.spectrum) < floor**2):
                raise ValidationError(f"vgm_public spectrum must be >= the floor variance {floor**2:.3g}")
        seeds = client_seeds(self.random_state, 2 * K)
        main_budget, screen_budget = budget, None
        if config.screening is not None and not budget.is_infinite:
            screen_budget = Budget(budget.epsilon * config.screen_share, 0.0)
            main_budget = Budget(budget.epsilon * (1 - config.screen_share), budget.delta)
        elif config.screening is not None:
            screen_budget = Budget.infinite()
        active = None
        self.screening_messages_ = None
        allow = self.allow_uncertified
        if screen_budget is not None:
            # price both rounds before anything runs (the main round's cost does not depend on the screened p)
            both = self._round_plan(config, sizes, p, ids, [(True, screen_budget, None), (False, main_budget, None)])
            ledger.preflight(both, allow_uncertified=allow)
            with self._run(self._round_plan(config, sizes, p, ids, [(True, screen_budget, None)]), ledger, (sum(sizes), p)) as run:
                for name in run.plan.nodes:
                    run.delegate(name)  # write-ahead: charged before any client draws noise
                votes = run_clients(screening_message, [
                    {"X": X, "y": y, "config": config, "budget": screen_budget, "client_id": ids[k], "random_state": seeds[K + k],
                     "allow_uncertified": self.allow_uncertified} for k, (X, y) in enumerate(checked)], self.executor)
            self.screening_report_ = run.report
            active = majority_vote(votes, p, config.server_vote, config.screen_size)
            if len(active) < max(int(config.n_directions) if config.n_directions != "auto" else 1, 1):
                raise ValidationError(f"screening kept {len(active)} coordinates: too few for the requested directions")
            self.screening_messages_ = votes
        screening_messages = self.screening_messages_ or []
        with self._run(self._round_plan(config, sizes, p, ids, [(False, main_budget, active)]), ledger, (sum(sizes), p)) as run:
            for name in run.plan.nodes:
                run.delegate(name)
            messages = run_clients(client_message, [
                {"X": X, "y": y, "config": config, "budget": main_budget, "client_id": ids[k], "random_state": seeds[k], "active": active,
                 "allow_uncertified": self.allow_uncertified} for k, (X, y) in enumerate(checked)], self.executor)
        result = merge(messages, config, psd_floor=self.psd_floor, p_original=p, allow_uncertified=self.allow_uncertified)
        if result.released is not None:
            self.released_ = result.released
        if config.screening is not None:
            for m in screening_messages:  # a client's two rounds compose sequentially (basic)
                entry = result.privacy["per_client"][m.client_id]
                eps, delta = m.report.spent
                entry["epsilon"] += eps
                entry["delta"] += delta
                entry["screening_status"] = m.report.status
            per = result.privacy["per_client"].values()
            result.privacy["per_record"] = {"epsilon": max(c["epsilon"] for c in per), "delta": max(c["delta"] for c in per)}
        if (config.screening == "ccmd" or config.mechanism == "none" or budget.is_infinite
                or result.privacy["status"] == "none"):  # CCMD screening, or the non-private baseline: no guarantee
            result = attrs.evolve(result, privacy=without_guarantee(result.privacy))
        return self._store(config, result, messages=messages, active=active, privacy=result.privacy, report=run.report,
                           ledger=ledger, X_raw=X_raw, p=p)

    def _store(self, config: FSIRConfig, result: Any, *, messages: list[Any], active: Any, privacy: dict[str, Any], report: Any,
               ledger: Ledger, X_raw: Any, p: int) -> FederatedSIR:
        """The fitted attributes both aggregations set (``result``: the local merge's or the secure release's)."""
        self.config_ = config
        self.messages_ = messages
        self.directions_ = result.directions
        self.n_directions_ = result.n_directions
        self.active_ = active
        self.public_center_ = config.public_center(p)
        self.center_ = result.center
        self.privacy_ = privacy
        self.privacy_report_ = report
        self._record_features(X_raw, p)
        self.ledger_ = ledger
        return self

    def _fit_secure(self, config: FSIRConfig, checked: list[tuple[np.ndarray, Any]], ids: list[str], budget: Budget, ledger: Ledger,
                    X_raw: Any, p: int) -> FederatedSIR:
        """``aggregation="secure"``: the central release by secure aggregation (``secure_fit``)."""
        from ..network.addresses import check_addresses
        from ..released.moments import warn_if_noise_wins
        from .secure_fit import SERVER, check_secure_config, fit_secure

        check_secure_config(config, len(checked), self.colluders)
        if not isinstance(self.tls, (bool, np.bool_)):
            raise ValidationError(f"tls must be True or False (False: plaintext channels, asked for explicitly), got {self.tls!r}")
        addresses = None if self.addresses is None else check_addresses(self.addresses, [SERVER, *ids])
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or not 0 < self.timeout < 3600:
            raise ValidationError(f"timeout must be a number of seconds in (0, 3600), got {self.timeout!r}")
        clients = [check_client_data(X, y, config, cid) for cid, (X, y) in zip(ids, checked, strict=True)]
        result = fit_secure(config, clients, ids, budget, ledger, colluders=int(self.colluders), timeout=float(self.timeout),
                            accountant=self.accountant, random_state=self.random_state, n_directions=config.n_directions,
                            allow_uncertified=self.allow_uncertified, addresses=addresses, tls=bool(self.tls),
                            certificates=self.certificates)
        self.screening_messages_ = None
        self.eigenvalues_ = result.eigenvalues
        self.noise_error_ = result.noise_error
        self.random_error_ = result.random_error
        self.released_ = result.released
        warn_if_noise_wins(result.noise_error, result.random_error, stacklevel=4)  # DPSIR's rule, read off the release
        report = result.report
        spent = report.budget["spent_by_run"]
        privacy = {"status": report.status, "aggregation": "secure", "clients": list(ids),
                   "per_record": {"epsilon": spent["epsilon"], "delta": spent["delta"]}, "trust_model": report.trust_model,
                   "field_bits": result.bits}  # the run's duration is in the report's timestamps
        # nothing is uploaded (messages_ = []): the clients took part in the secure computation
        return self._store(config, result, messages=[], active=None, privacy=privacy, report=report, ledger=ledger, X_raw=X_raw, p=p)

    def transform(self, X: Any) -> np.ndarray:
        """Project rows on ``directions_``: (truncate(X - public centre) - DP mean) @ directions_, the rows
        shifted and truncated as the clients do it (public bounds), then centred where the fit centred."""
        self._check_fitted("directions_", "config_")
        X_raw, X = X, check_matrix(X, "X")
        p = self.directions_.shape[0]
        self._check_features(X_raw, X.shape[1])
        if X.shape[1] != p:
            raise ValidationError(f"X has {X.shape[1]} features, but FederatedSIR is expecting {p} features as input")
        public = getattr(self, "public_center_", None)  # absent from model files written before centring
        public = np.zeros(p) if public is None else np.asarray(public, dtype=float)
        center = getattr(self, "center_", None)
        center = public if center is None else np.asarray(center, dtype=float)
        return self.config_.truncate(X - public) @ self.directions_ - (center - public) @ self.directions_


    @property
    def _n_features_out(self) -> int:
        """Output columns of ``transform`` (``get_feature_names_out``: federatedsir0, ...)."""
        return int(self.directions_.shape[1])
