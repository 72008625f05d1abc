"""Federated SIR by secure aggregation (``FederatedSIR(aggregation="secure")``): the central release for all N rows.

Each client computes, from its own truncated rows, the sums SIR needs -- slice sums (p x H), slice counts (H) and
X^T X (p x p), each divided by the public total N -- and the clients add them inside a secure computation
(``privsdr.secure``: one MPyC process per client plus the server, which contributes nothing and learns only the
opened sums). Each client adds its own discrete Gaussian share; the shares of the clients outside any coalition of
t meet the calibration. The three releases are exactly DPSIR's moments at N rows (``released.moments``: one
calibration for N, not K calibrations for n_k), so the local price of privacy is gone: the secure FSIR pays the
central rate, plus a factor sqrt(K / (K - t)) on the noise for tolerating t colluders.

The server's post-processing is SIR's generalized eigenproblem on the released moments (the DPSIR moments
estimator: noise bias removed from the kernel, the covariance floored at its noise level, the mean read off the
slice sums), which with the noise off is classical SIR on the pooled rows with the same slices.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from .. import core
from ..accounting import Budget, Ledger
from ..errors import ValidationError
from ..mechanisms.distributed import honest_majority
from ..plan import Plan, Run
from ..released import from_run
from ..released.moments import MomentRelease, add_moment_nodes, noise_error, random_subspace_error, with_diagnostics
from ..secure import secure_release
from .protocol import FSIRConfig

RELATION = "replace_one"
NODES = ("slice_sums", "slice_counts", "second_moment")
SERVER = "server"


@attrs.frozen(eq=False)
class SecureFSIRResult:
    directions: np.ndarray
    n_directions: int
    eigenvalues: np.ndarray
    center: np.ndarray
    mu: np.ndarray
    report: Any
    release: MomentRelease
    released: Any  #: the ``Released`` record (arrays, public noise sds, grid)
    seconds: float
    bits: int
    noise_error: float
    random_error: float


def check_secure_config(config: FSIRConfig, n_clients: int, colluders: int) -> None:
    """What the secure path supports, refused before anything is charged."""
    if config.mechanism != "iid":
        raise ValidationError(f"aggregation='secure' releases i.i.d. Gaussian sums; mechanism {config.mechanism!r} shapes each "
                              "client's own noise and has no secure form (use mechanism='iid')")
    if config.screening is not None:
        raise ValidationError("aggregation='secure' does not screen columns (screening uploads per-client votes)")
    if isinstance(colluders, bool) or not isinstance(colluders, (int, np.integer)) or colluders < 1:
        raise ValidationError(f"colluders (the collusion threshold t) must be an integer >= 1, got {colluders!r}")
    m = n_clients + 1  # the clients and the server
    if not honest_majority(m, int(colluders)):
        raise ValidationError(f"{n_clients} clients and a server are {m} parties: an honest majority tolerates t < {m / 2:g} "
                              f"colluders, not {colluders} (more clients, or a smaller t)")
    if n_clients < 2:
        raise ValidationError("secure aggregation needs at least 2 clients")


def secure_plan(config: FSIRConfig, N: int, p: int, n_clients: int, colluders: int) -> Plan:
    """The central moments plan at N rows with distributed noise (public parameters only)."""
    H = config.n_slices
    plan = Plan("fsir_secure", RELATION, {"n": N, "p": p, "n_slices": H, "norm": config.norm, "clients": n_clients,
                                          "colluders": int(colluders), "aggregation": "secure", "config": config.digest(),
                                          "bound": list(config.bound) if isinstance(config.bound, tuple) else config.bound,
                                          "center": list(config.center) if isinstance(config.center, tuple) else config.center})
    bounds = config.column_bounds(p) if config.norm != "l2" else None
    add_moment_nodes(plan, N, p, bounds if bounds is not None else np.zeros(p), (), n_slices=H,
                     distributed=(n_clients, int(colluders)), row_bound=config.row_bound(p))
    return plan


def client_statistics(Xt: np.ndarray, labels: np.ndarray, H: int, N: int) -> dict[str, np.ndarray]:
    """One client's contribution (its rows already truncated): its sums, each divided by the public N."""
    sums, counts = core.slice_sums(Xt, labels, H)
    return {"slice_sums": sums / N, "slice_counts": counts / N, "second_moment": (Xt.T @ Xt) / N}


def party_bounds(config: FSIRConfig, p: int) -> dict[str, float]:
    """Public bounds on every coordinate of one client's statistics (its n_k <= N rows, each truncated)."""
    entry = float(config.entry_bounds(p).max())
    return {"slice_sums": entry, "slice_counts": 1.0, "second_moment": entry * entry}


def fit_secure(config: FSIRConfig, clients: Sequence[tuple[np.ndarray, np.ndarray]], ids: Sequence[str], budget: Budget,
               ledger: Ledger, *, colluders: int, timeout: float, accountant: Any, random_state: Any, n_directions: Any,
               allow_uncertified: bool, addresses: Sequence[str] | None = None, tls: bool = True,
               certificates: Any = None) -> SecureFSIRResult:
    """Fit by secure aggregation (module docstring). ``clients``: each client's (truncated X, slice labels);
    ``addresses`` (server first), ``tls``, ``certificates``: the channels (``secure.aggregate.secure_release``)."""
    p = clients[0][0].shape[1]
    N = int(sum(X.shape[0] for X, _ in clients))
    H = config.n_slices
    check_secure_config(config, len(clients), colluders)
    calibrated = secure_plan(config, N, p, len(clients), colluders).allocate(budget, accountant=ledger.accountant, tight=True)
    contributions = {cid: client_statistics(X, labels, H, N) for cid, (X, labels) in zip(ids, clients, strict=True)}
    with Run(calibrated, ledger, random_state=random_state, data_shape=(N, p), algorithm="FederatedSIR (secure aggregation)",
             allow_uncertified=allow_uncertified,
             notes=["the clients' sums were added inside a secure computation (MPyC) and released once for all N rows; each "
                    "client added its own discrete Gaussian share (distributed DP)"]) as run:
        done = secure_release(run, NODES, contributions, party_bounds(config, p), parties=[SERVER, *ids], threshold=int(colluders),
                              timeout=timeout, server=SERVER, addresses=addresses, tls=tls, certificates=certificates)
    released = from_run(run, {"slice_sums": "slice_sums", "slice_counts": "slice_counts", "second_moment": "second_moment"},
                        n=N, source="secure aggregation")
    released = attrs.evolve(released, arrays={**released.arrays, "slice_sums": released["slice_sums"].reshape(p, H)})
    release = MomentRelease.from_released(released)
    centred = config.centred
    B_all, eigenvalues, mu = release.directions(max(H - 1, 1), centred)
    d = _n_directions(n_directions, eigenvalues, H)
    directions = core.orthonormalize(B_all[:, :d])
    center = config.public_center(p) + mu
    rng = np.random.default_rng(None if random_state is None or isinstance(random_state, np.random.Generator)
                                else np.random.SeedSequence(int(random_state)).spawn(2)[1])
    error, random = noise_error(release, directions, d, centred, rng), random_subspace_error(p, d)
    report = with_diagnostics(run.report, error, random, d, p)  # post-processing: free
    return SecureFSIRResult(directions, d, eigenvalues[: max(H - 1, 1)], center, mu, report, release, released, done.opened.seconds,
                            done.job.bits, error, random)


def _n_directions(requested: Any, eigenvalues: np.ndarray, H: int) -> int:
    if requested != "auto":
        return int(requested)
    top = np.asarray(eigenvalues[: max(H - 1, 1)], dtype=float)
    gaps = top[:-1] - top[1:] if top.size > 1 else np.array([top[0]])
    return int(np.argmax(gaps)) + 1
