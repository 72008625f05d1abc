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

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from .. import core
from ..accounting import Budget, Ledger
from ..errors import ValidationError
from ..mechanisms.collusion import honest_majority
from ..plan import Plan, Run
from ..released import from_run
from ..released.moments import MomentRelease, add_moment_nodes, noise_error, random_subspace_error, with_diagnostics
from ..secure.aggregate import agreed_parties, release_job, secure_release
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
    """Fit by secure aggregation (module docstring), every party a process on this machine. ``clients``: each
    client's (truncated X, slice labels); ``addresses`` (server first), ``tls``, ``certificates``: the channels
    (``secure.aggregate.secure_release``). Every party agrees on the public job before the run is opened, so a
    failure before that point leaves ``ledger``'s journal as it was (issue 36)."""
    p = clients[0][0].shape[1]
    N = int(sum(X.shape[0] for X, _ in clients))
    check_secure_config(config, len(clients), colluders)
    calibrated = secure_plan(config, N, p, len(clients), colluders).allocate(budget, accountant=ledger.accountant, tight=True)
    contributions = {cid: client_statistics(X, labels, config.n_slices, N) for cid, (X, labels) in zip(ids, clients, strict=True)}
    job = release_job(calibrated, NODES, ids, party_bounds(config, p), parties=[SERVER, *ids], threshold=int(colluders),
                      timeout=timeout, addresses=addresses, tls=tls)
    session = agreed_parties(job, contributions, certificates=certificates)
    return _release_and_fit(config, calibrated, ledger, session, contributions, list(ids), N, p, colluders=colluders, timeout=timeout,
                            random_state=random_state, n_directions=n_directions, allow_uncertified=allow_uncertified, tls=tls)


def site_rows(sites: Mapping[str, int]) -> dict[str, int]:
    """The public row count of every site (the shared configuration of a per-host run), checked."""
    rows = {str(name): n for name, n in sites.items()}
    if not rows or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 for n in rows.values()):
        raise ValidationError(f"every site needs a public row count >= 1, got {sites!r}")
    if SERVER in rows:
        raise ValidationError(f"{SERVER!r} names the server, not a site")
    return rows


def party_job(config: FSIRConfig, sites: Mapping[str, int], p: int, budget: Budget, accountant: Any, *, colluders: int,
              timeout: float, addresses: Sequence[str], tls: bool) -> tuple[Any, Any]:
    """(calibrated plan, public job) of a per-host run (``fit_secure_party``): every party computes the same two from
    the shared configuration alone (public parameters; the sites' row counts give N)."""
    from ..network.addresses import check_addresses

    rows = site_rows(sites)
    ids = list(rows)
    check_secure_config(config, len(ids), colluders)
    calibrated = secure_plan(config, sum(rows.values()), p, len(ids), colluders).allocate(budget, accountant=accountant, tight=True)
    job = release_job(calibrated, NODES, ids, party_bounds(config, p), parties=[SERVER, *ids], threshold=int(colluders),
                      timeout=timeout, addresses=check_addresses(list(addresses), [SERVER, *ids]), tls=tls)
    return calibrated, job


def decline_secure_party(config: FSIRConfig, own: str, sites: Mapping[str, int], p: int, budget: Budget, accountant: str, why: str, *,
                         colluders: int, timeout: float, addresses: Sequence[str], tls: bool, certificates: Any = None,
                         progress: Any = None) -> None:
    """Take part in the agreement of a per-host run as party ``own``, not ready (``why``: which option and the kind of
    failure, never data), so that every party stops at once with nothing charged (``privsdr fsir party``: a CSV,
    report path or journal that cannot be used). No ledger of this party's is read."""
    from ..secure.aggregate import decline_own_party

    _, job = party_job(config, sites, p, budget, Ledger(budget, accountant=accountant).accountant, colluders=colluders,
                       timeout=timeout, addresses=addresses, tls=tls)
    if own not in job.parties:
        raise ValidationError(f"{own!r} is not one of the parties {list(job.parties)}")
    decline_own_party(job, own, why, progress, certificates)


def fit_secure_party(config: FSIRConfig, own: str, data: tuple[np.ndarray, np.ndarray] | None, sites: Mapping[str, int],
                     p: int, budget: Budget, ledger: Ledger, *, colluders: int, timeout: float, addresses: Sequence[str],
                     tls: bool = True, certificates: Any = None, random_state: Any = None, n_directions: Any = 1,
                     allow_uncertified: bool = False, progress: Any = None) -> SecureFSIRResult:
    """Run one party of the secure fit in this process (``privsdr fsir party``): the server (``own == "server"``,
    ``data`` None) or site ``own`` with its own (truncated X, slice labels) (``checks.check_client_data``).
    ``sites``: every site's public row count (N their sum), in MPyC's order after the server; ``addresses``: every
    party's host:port, the server first; ``certificates``: this party's own folder (required with TLS). The other
    parties run the same call elsewhere with the same public configuration, and every one ends with the same opened
    sums and directions.

    Agreement (issue 36): this party's data (its row count and width) and its ledger (``preflight``) are checked
    first; a refusal tells the others it is not ready, and every party stops with nothing charged. Only once every
    party has agreed on the public job (one digest) is this party's run opened and charged."""
    from ..network.certificates import load_credentials
    from ..secure.aggregate import agreed_own_party, declining

    rows = site_rows(sites)
    ids = list(rows)
    if own not in (SERVER, *ids):
        raise ValidationError(f"{own!r} is not one of the parties {[SERVER, *ids]}")
    if (own == SERVER) != (data is None):
        raise ValidationError("the server holds no data" if own == SERVER else f"site {own!r} needs its rows")
    calibrated, job = party_job(config, rows, p, budget, ledger.accountant, colluders=colluders, timeout=timeout,
                                addresses=addresses, tls=tls)
    if tls:  # this party's own key and certificate first: without them it cannot connect
        if certificates is None:
            raise ValidationError(f"this run uses TLS: party {own!r} needs its certificate folder (`privsdr secure keys`), or "
                                  "plaintext asked for explicitly in the shared configuration; nothing was charged")
        load_credentials(certificates, job.index(own))
    N = sum(rows.values())
    contributions: dict[str, dict[str, np.ndarray]] = {}
    with declining(job, own, progress, certificates):  # this party's data and ledger: a refusal stops every party
        if data is not None:
            X, labels = data
            if X.shape != (rows[own], p):
                raise ValidationError(f"site {own!r} must hold {rows[own]} rows and {p} columns (the shared configuration), "
                                      f"got {X.shape[0]} x {X.shape[1]}")
            contributions[own] = client_statistics(X, labels, config.n_slices, N)
        ledger.preflight(calibrated, allow_uncertified=allow_uncertified)
    session = agreed_own_party(job, own, contributions.get(own), progress, certificates)
    return _release_and_fit(config, calibrated, ledger, session, contributions, ids, N, p, colluders=colluders, timeout=timeout,
                            random_state=random_state, n_directions=n_directions, allow_uncertified=allow_uncertified, tls=tls)


def _release_and_fit(config: FSIRConfig, calibrated: Any, ledger: Ledger, session: Any, contributions: Mapping[str, Any],
                     ids: list[str], N: int, p: int, *, colluders: int, timeout: float, random_state: Any, n_directions: Any,
                     allow_uncertified: bool, tls: bool) -> SecureFSIRResult:
    """Open the run (every party has agreed: ``session``), release the moments, and post-process them."""
    H = config.n_slices
    try:
        with Run(calibrated, ledger, random_state=random_state, data_shape=(N, p), algorithm="FederatedSIR (secure aggregation)",
                 allow_uncertified=allow_uncertified,
                 notes=["the clients' sums were added inside a secure computation (MPyC) and released once for all N rows; each "
                        "client added its own discrete Gaussian share (distributed DP)"]) as run:
            done = secure_release(run, NODES, contributions, party_bounds(config, p), parties=[SERVER, *ids], threshold=int(colluders),
                                  timeout=timeout, server=SERVER, addresses=list(session.job.addresses), tls=tls, session=session,
                                  contributors=ids)
    finally:
        session.__exit__(None, None, None)
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
