"""Every certified estimator, mode and path, registered once for the replay harness (``privsdr.audit.replay``).

A new estimator, mode or path is covered by adding a ``Case`` here; ``tests/test_replay.py`` runs every case
through (a) attributes from the releases alone, (b) messages, (c) row-local inputs (cases that give
``references``), (d) row scopes, and the data-dependent-refusal check; ``test_every_certified_path_is_registered``
fails when a public estimator or one of its certified modes has no case.

Data are small (the checks are exact, not statistical). ``D`` is a dict: ``X``, ``y`` and, for vertical
cases, ``blocks``; ``fit(est, D)`` fits on it the way the path does (in memory, ``Chunks``, dask, clients,
parties).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import replay_consumers as consumers

import privsdr
from privsdr import Budget
from privsdr.audit.replay import Recorder, Released
from privsdr.federated import SecureSites
from privsdr.vertical import SecureVerticalMeanCovariance, SecureVerticalSIR

N, P = 240, 4
BUDGET = Budget(2.0, 1e-5)
WIDTHS = (2, 2)  # vertical cases: two parties of two columns


def make_data(seed: int = 0, n: int = N, p: int = P) -> dict[str, Any]:
    """A linear-index model with |x_ij| <= 1 (the bound every case declares) and one block per party."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, p))
    y = X @ np.linspace(1.0, -0.5, p) + 0.3 * rng.standard_normal(n)
    return with_blocks({"X": X, "y": y})


def with_blocks(D: dict[str, Any]) -> dict[str, Any]:
    D["blocks"] = np.split(D["X"], np.cumsum(WIDTHS)[:-1], axis=1) if D["X"].shape[1] == sum(WIDTHS) else None
    return D


def garbage(D: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """Data of the same shape and kind, unrelated to D (the replay must not read it)."""
    X = rng.uniform(-1.5, 1.5, D["X"].shape)
    y = rng.uniform(-3.0, 3.0, D["y"].shape)
    return with_blocks({"X": X, "y": y})


def replace_rows(D: dict[str, Any], rows: np.ndarray, rng: np.random.Generator | None = None) -> dict[str, Any]:
    """D with ``rows`` replaced by garbage (the scope check: a release must not read them)."""
    rng = rng or np.random.default_rng(12345)
    X, y = D["X"].copy(), D["y"].copy()
    X[rows] = rng.uniform(-1.5, 1.5, (len(rows), X.shape[1]))
    y[rows] = rng.uniform(-3.0, 3.0, len(rows))
    return with_blocks({"X": X, "y": y})


def fit_xy(est: Any, D: dict[str, Any]) -> Any:
    return est.fit(D["X"], D["y"])


def fit_sites(est: Any, D: dict[str, Any]) -> Any:
    """Three sites, each a third of the rows (``SecureSites``)."""
    parts = np.array_split(np.arange(len(D["y"])), 3)
    return est.fit([(D["X"][i], D["y"][i]) for i in parts])


def fit_x(est: Any, D: dict[str, Any]) -> Any:
    return est.fit(D["X"])


def fit_chunks(est: Any, D: dict[str, Any], with_y: bool = True) -> Any:
    X, y = D["X"], D["y"]
    parts = np.array_split(np.arange(len(y)), 3)
    source = (lambda: [(X[i], y[i]) for i in parts]) if with_y else (lambda: [X[i] for i in parts])
    return est.fit(privsdr.Chunks(source))


def fit_dask(est: Any, D: dict[str, Any]) -> Any:
    import dask
    import dask.array as da

    with dask.config.set(scheduler="synchronous"):  # the taps see this process only
        return est.fit(da.from_array(D["X"], chunks=(80, D["X"].shape[1])), da.from_array(D["y"], chunks=80))


def fit_blocks(est: Any, D: dict[str, Any]) -> Any:
    return est.fit(list(D["blocks"]), D["y"])


def parties_here(fit: Callable[[Any, dict[str, Any]], Any]) -> Callable[[Any, dict[str, Any]], Any]:
    """``fit`` with the secure paths' parties run as the party program in this process
    (``privsdr.audit.secure_probe.run_in_process``: each party's own input checks and input, its real noise shares,
    the opened sum computed on plain integers) instead of as MPyC processes. What the replay and the refusal checks
    read happens in this process either way: the launcher's checks and plan before the parties run, the tap on the
    opened values and the post-processing after; that the processes open exactly that sum is tested with real
    processes in ``tests/test_secure*.py``."""
    import pytest

    from privsdr.audit.secure_probe import in_process, run_in_process

    def run(est: Any, D: dict[str, Any]) -> Any:
        with pytest.MonkeyPatch.context() as patch:
            in_process(patch.setattr, run_in_process)
            return fit(est, D)

    return run


#: PRIDE's held-out test reads the party's own rows (its coefficients are outside the guarantee), so do its report entries
PRIDE_HELD_OUT_KEYS = ("held_out_p", "held_out_gain", "fell_back", "held_out")


@dataclass(frozen=True)
class Case:
    """One certified path. ``covers``: (class name, mode) it stands for in the registry check;
    ``uncovered``: attributes outside the guarantee (the report must say so, ``uncovered_said``), with
    ``uncovered_keys`` (report diagnostics computed from them) and ``uncovered_warnings`` (the leading words of
    warnings about them);
    ``references``: (c), ``references(D, est)`` -> {node pattern: reference(release, recording)}."""

    name: str
    make: Callable[[], Any]
    fit: Callable[[Any, dict[str, Any]], Any] = fit_xy
    covers: tuple[str, str] = ("", "")
    uncovered: tuple[str, ...] = ()
    uncovered_said: str = ""
    uncovered_keys: tuple[str, ...] = ()
    uncovered_warnings: tuple[str, ...] = ()
    references: Callable[[dict[str, Any], Any], Mapping[str, Callable[[Released, Recorder], Any]]] | None = None
    data: Callable[[int], dict[str, Any]] = make_data
    scopes: bool = False  #: (d): the case has nodes charged to cells of a row partition
    #: (e): ``consumer(est, released)`` -> ``privsdr.released.fitted.Fitted``: the estimator's ``*_from_released`` on its
    #: ``released_`` record with its public parameters (the fitted state must follow from the record alone)
    consumer: Callable[[Any, Any], Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name


# -- (c) references: each release's noise-free input from the raw rows and the *released* earlier outputs ----
def _outputs(recording: Recorder, node: str, before: Released) -> list[Any]:
    """Released outputs of nodes named ``node`` (suffix match) recorded before ``before``."""
    out = []
    for r in recording.releases:
        if r is before:
            break
        if r.key[1] == node or r.key[1].endswith("/" + node):
            out.append(r.output)
    return out


def s1_references(D: dict[str, Any], est: Any) -> dict[str, Callable[[Released, Recorder], Any]]:
    """DPPLS S1: u_a = E^T f, g_a = E^T (E w), h_a = |E w|^2, r_a = f^T (E w), where E, f are the clipped rows
    deflated with the RELEASED p, c of earlier components (w from the released u_a)."""
    Cx, Cy = est.bound_x, est.bound_y
    h_floor = est.plan_.specs["h_1"].scale

    def clip_x(E: np.ndarray) -> np.ndarray:
        norms = np.sqrt(np.sum(E * E, axis=1, keepdims=True))
        return E * np.minimum(1.0, Cx / np.maximum(norms, 1e-300))

    def state(a: int, rec: Recorder, before: Released) -> tuple[np.ndarray, np.ndarray]:
        E = clip_x(D["X"] - est.x_mean_)
        f = np.clip(D["y"] - est.y_mean_, -Cy, Cy)
        for b in range(1, a):
            u = _outputs(rec, f"u_{b}", before)[-1]
            w = u / np.linalg.norm(u)
            g = _outputs(rec, f"g_{b}", before)[-1]
            h = max(float(_outputs(rec, f"h_{b}", before)[-1][0]), h_floor, 1e-300)
            r = float(_outputs(rec, f"r_{b}", before)[-1][0])
            s = E @ w
            E = clip_x(E - np.outer(s, g / h))
            f = np.clip(f - s * (r / h), -Cy, Cy)
        return E, f

    def reference(kind: str) -> Callable[[Released, Recorder], Any]:
        def compute(r: Released, rec: Recorder) -> Any:
            a = int(r.key[1].split("_")[1])
            E, f = state(a, rec, r)
            if kind == "u":
                return E.T @ f
            u = _outputs(rec, f"u_{a}", r)[-1]
            s = E @ (u / np.linalg.norm(u))
            return {"g": E.T @ s, "h": np.array([s @ s]), "r": np.array([f @ s])}[kind]
        return compute

    return {f"{k}_*": reference(k) for k in ("u", "g", "h", "r")}


def dpbcd_references(D: dict[str, Any], est: Any) -> dict[str, Callable[[Released, Recorder], Any]]:
    """Certified DP-BCD: stat = X_i^T u with u = clip(clip(y) - DP mean) first, then clip(RELEASED incoming remainder, C_v);
    remainder = u - X_i d with d the increment the party sends (a function of released values: check (b))."""
    names = list(est.layout_.names)
    blocks = dict(zip(names, D["blocks"], strict=True))
    C, Cy, kappa = est.row_bound, est.label_bound, est.remainder_clip

    def clipped(name: str) -> np.ndarray:
        X = blocks[name]
        norms = np.sqrt(np.sum(X * X, axis=1, keepdims=True))
        return X * np.minimum(1.0, C / np.maximum(norms, 1e-300))

    def incoming(r: Released, rec: Recorder) -> Any:
        party = r.key[1].split("/")[0]
        sent = [m for m in rec.messages if party in m.recipients and m.kind == "remainder" and m.after <= rec.releases.index(r)]
        return sent[-1] if sent else None

    def u_of(r: Released, rec: Recorder) -> np.ndarray:
        message = incoming(r, rec)
        if message is None:  # the label holder's first step: the clipped labels less the (published, shrunk) DP mean
            shift = next((float(m.meta["y_shift"]) for m in rec.messages if m.kind == "coefficients" and "y_shift" in m.meta), 0.0)
            return np.clip(np.clip(D["y"], -Cy, Cy) - shift, -Cy, Cy)
        C_v = float(message.meta["signal_bound"]) + kappa * float(message.meta["noise_sd_accumulated"])
        return np.clip(np.asarray(message.arrays["remainder"]), -C_v, C_v)

    def stat(r: Released, rec: Recorder) -> Any:
        return clipped(r.key[1].split("/")[0]).T @ u_of(r, rec)

    def remainder(r: Released, rec: Recorder) -> Any:
        party = r.key[1].split("/")[0]
        stat_release = next(s for s in reversed(rec.releases[: rec.releases.index(r)]) if s.key[1].startswith(party + "/stat"))
        outgoing = next(m for m in rec.messages if m.sender == party and m.after > rec.releases.index(r))
        return u_of(stat_release, rec) - clipped(party) @ np.asarray(outgoing.arrays["increment"])

    return {"stat*": stat, "remainder*": remainder}


def sir_step_references(D: dict[str, Any], est: Any, kind: str) -> dict[str, Callable[[Released, Recorder], Any]]:
    """DPSIR onepass / SparseDPSIR / DPSparsePCA steps t >= 1: the update on batch t (its declared rows, checked
    by (d)) from the RELEASED step t-1, projected on the public radius; rows centred at the released DP mean."""
    from privsdr import core

    hyper = est.hyperparameters_
    C, L = hyper["radius"], hyper["tau"] * hyper["radius"]
    bounds = est.bounds_

    def compute(r: Released, rec: Recorder) -> Any:
        t = int(r.key[1].split("_")[1])
        if t == 0:
            return None  # the start is post-processing of B.1 (checked by (a)); the steps after it read released steps
        previous = _outputs(rec, f"step_{t - 1}", r)[-1]
        A_prev = previous[0].T if kind in ("sparse", "pca") else previous
        B = core.project_columns(np.asarray(A_prev, dtype=float), C)
        if kind == "pca":
            Xb = np.clip(D["X"][r.rows], -bounds, bounds)
            return core.pca_update(Xb, B, L, hyper["eta"], hyper["lambda_pen"]).T
        mean = _outputs(rec, "mean", r)
        shift = np.asarray(est.public_center_) + (np.asarray(mean[-1]) if mean else 0.0)
        Xb = np.clip(D["X"][r.rows] - shift, -bounds, bounds)
        labels = core.slice_by_cut_points(D["y"][r.rows], est.cut_points_)
        kern, A, G = core.batch_terms(Xb, labels, B, L, len(est.cut_points_) + 1)
        U = core.sir_update(B, kern, A, G, hyper["eta"], hyper["lambda_pen"])
        return U.T if kind == "sparse" else U

    return {"step_*": compute}


# -- the registry ----------------------------------------------------------------------------------------------
CUTS = [-1.0, 0.0, 1.0]
SIR = dict(bound=1.0, budget=BUDGET, random_state=3)


def _dask_available() -> bool:
    """Whether dask is installed, found without importing it (0.5 s of each worker's collection): ``fit_dask`` imports
    it at first use."""
    import importlib.util

    return importlib.util.find_spec("dask") is not None


CASES: list[Case] = [
    Case("DPSIR moments", lambda: privsdr.DPSIR(1, cut_points=CUTS, **SIR), covers=("DPSIR", "moments"), consumer=consumers.sir),
    Case("DPSIR moments, DP quantile slices", lambda: privsdr.DPSIR(1, y_grid=np.linspace(-3, 3, 25), **SIR),
         covers=("DPSIR", "moments"), consumer=consumers.sir),
    Case("DPSIR moments, public centre", lambda: privsdr.DPSIR(1, cut_points=CUTS, center=np.full(P, 0.1), **SIR),
         covers=("DPSIR", "moments"), consumer=consumers.sir),
    Case("DPSIR moments, Chunks", lambda: privsdr.DPSIR(1, cut_points=CUTS, **SIR), fit=fit_chunks, covers=("DPSIR", "chunked"),
         consumer=consumers.sir),
    Case("DPSIR onepass", lambda: privsdr.DPSIR(1, algorithm="onepass", cut_points=CUTS, eta=0.05, **SIR), covers=("DPSIR", "onepass"),
         scopes=True, references=lambda D, est: sir_step_references(D, est, "dense")),
    Case("SparseDPSIR onepass", lambda: privsdr.SparseDPSIR(1, algorithm="onepass", sparsity=2, cut_points=CUTS, **SIR),
         covers=("SparseDPSIR", "onepass"), scopes=True, references=lambda D, est: sir_step_references(D, est, "sparse")),
    Case("SparseDPSIR moments", lambda: privsdr.SparseDPSIR(1, sparsity=2, cut_points=CUTS, **SIR), covers=("SparseDPSIR", "certified"),
         consumer=consumers.sparse_sir),
    Case("DPSparsePCA moments", lambda: privsdr.DPSparsePCA(1, sparsity=2, bound=1.0, budget=BUDGET, random_state=3), fit=fit_x,
         covers=("DPSparsePCA", "certified"), consumer=consumers.sparse_pca),
    Case("DPSparsePCA onepass", lambda: privsdr.DPSparsePCA(1, algorithm="onepass", sparsity=2, bound=1.0, budget=BUDGET,
                                                             random_state=3), fit=fit_x, covers=("DPSparsePCA", "onepass"),
         scopes=True, references=lambda D, est: sir_step_references(D, est, "pca")),
    Case("DPMeanCovariance", lambda: privsdr.DPMeanCovariance(clip=2.0, budget=BUDGET, random_state=3), fit=fit_x,
         covers=("DPMeanCovariance", "certified"), consumer=consumers.mean_covariance),
    Case("DPMeanCovariance, Chunks", lambda: privsdr.DPMeanCovariance(clip=2.0, budget=BUDGET, random_state=3),
         fit=lambda est, D: fit_chunks(est, D, with_y=False), covers=("DPMeanCovariance", "chunked"),
         consumer=consumers.mean_covariance),
    Case("DPStandardScaler", lambda: privsdr.DPStandardScaler(bound=1.0, center=0.1, budget=BUDGET, random_state=3), fit=fit_x,
         covers=("DPStandardScaler", "certified"), consumer=consumers.standard_scaler),
    Case("DPPLS certified (S2)", lambda: privsdr.DPPLS(2, bound_x=2.0, bound_y=3.0, budget=BUDGET, random_state=3),
         covers=("DPPLS", "certified"), consumer=consumers.pls),
    Case("DPPLS certified (S2), auto components", lambda: privsdr.DPPLS("auto", bound_x=2.0, bound_y=3.0, budget=BUDGET,
                                                                         random_state=3), covers=("DPPLS", "certified"),
         consumer=consumers.pls),
    Case("DPPLS certified (S2), Chunks", lambda: privsdr.DPPLS(2, bound_x=2.0, bound_y=3.0, budget=BUDGET, random_state=3),
         fit=fit_chunks, covers=("DPPLS", "chunked"), consumer=consumers.pls),
    Case("DPPLS certified_iterative (S1)", lambda: privsdr.DPPLS(2, mode="certified_iterative", bound_x=2.0, bound_y=3.0,
                                                                  budget=BUDGET, random_state=3),
         covers=("DPPLS", "certified_iterative"), references=s1_references),
    Case("AdaSSPRegression", lambda: privsdr.AdaSSPRegression(bound_x=2.0, bound_y=3.0, budget=BUDGET, random_state=3),
         covers=("AdaSSPRegression", "certified"), consumer=consumers.adassp),
    Case("AdaSSPRegression, Chunks", lambda: privsdr.AdaSSPRegression(bound_x=2.0, bound_y=3.0, x_center=0.1, budget=BUDGET,
                                                                      random_state=3),
         fit=fit_chunks, covers=("AdaSSPRegression", "chunked"), consumer=consumers.adassp),
    Case("AdaSSPRegression, as published", lambda: privsdr.AdaSSPRegression(bound_x=2.0, bound_y=3.0, shrinkage="none",
                                                                             budget=BUDGET, random_state=3),
         covers=("AdaSSPRegression", "published"), consumer=consumers.adassp),
    Case("SecureSites, AdaSSPRegression", lambda: SecureSites(privsdr.AdaSSPRegression(bound_x=2.0, bound_y=3.0, budget=BUDGET,
                                                                                      random_state=3), timeout=60.0),
         fit=parties_here(fit_sites), covers=("SecureSites", "AdaSSPRegression"), consumer=consumers.adassp),
    Case("MSC dp_mean", lambda: _msc(), fit=fit_x, covers=("MSC", "dp_mean"), consumer=consumers.msc),
    Case("FederatedSIR iid", lambda: privsdr.FederatedSIR(1, bound=1.0, cut_points=CUTS, n_clients=3, budget=BUDGET,
                                                          random_state=3), covers=("FederatedSIR", "iid"), consumer=consumers.fsir,
         extra={"pooled": True}),
    Case("FederatedSIR two-stage VGM", lambda: privsdr.FederatedSIR(1, bound=1.0, cut_points=CUTS, n_clients=3, budget=BUDGET,
                                                                    mechanism="vgm_two_stage", random_state=3),
         covers=("FederatedSIR", "vgm_two_stage"), consumer=consumers.fsir,
         extra={"pooled": True, "outside_record": ("slice_means_stage1",)}),  # a client's first stage shapes its own noise; never uploaded
    Case("FederatedSIR private screening", lambda: privsdr.FederatedSIR(1, bound=1.0, cut_points=CUTS, n_clients=3, budget=BUDGET,
                                                                        screening="private", screen_size=2, random_state=3),
         covers=("FederatedSIR", "screening")),
    Case("FederatedSIR secure aggregation", lambda: privsdr.FederatedSIR(1, bound=1.0, cut_points=CUTS, n_clients=3, budget=BUDGET,
                                                                         aggregation="secure", timeout=30.0, random_state=3),
         fit=parties_here(fit_xy), covers=("FederatedSIR", "secure")),
    Case("DPBCDRegression certified", lambda: privsdr.DPBCDRegression("certified", budget=BUDGET, row_bound=1.5, label_bound=3.0,
                                                                      coef_bound=3.0, n_rounds=2, random_state=3,
                                                                      message_reports=False),
         fit=fit_blocks, covers=("DPBCDRegression", "certified"), references=dpbcd_references),
    Case("SecureVerticalRegression", lambda: privsdr.SecureVerticalRegression(row_bound=1.5, label_bound=3.0, budget=BUDGET, timeout=60.0,
                                                                              random_state=3),
         fit=parties_here(fit_blocks), covers=("SecureVerticalRegression", "certified"),
         consumer=consumers.secure_vertical),
    Case("SecureVerticalRegression, PLS", lambda: privsdr.SecureVerticalRegression(row_bound=1.5, label_bound=3.0, n_components=2,
                                                                                   budget=BUDGET, timeout=60.0, random_state=3),
         fit=parties_here(fit_blocks), covers=("SecureVerticalRegression", "pls"),
         consumer=consumers.secure_vertical),
    Case("SecureVerticalSIR", lambda: SecureVerticalSIR(1, cut_points=CUTS, row_bound=1.5, budget=BUDGET, timeout=60.0,
                                                        random_state=3),
         fit=parties_here(fit_blocks), covers=("SecureVerticalSIR", "certified"), consumer=consumers.secure_vertical_sir),
    Case("SecureVerticalMeanCovariance", lambda: SecureVerticalMeanCovariance(2, row_bound=1.5, budget=BUDGET, timeout=60.0,
                                                                              random_state=3),
         fit=parties_here(fit_blocks), covers=("SecureVerticalMeanCovariance", "certified"), consumer=consumers.secure_vertical_mean_covariance),
    Case("PRIDERegressor certified, entry", lambda: privsdr.PRIDERegressor("certified", budget=BUDGET, bounds=(-1.0, 1.0), lam=0.1,
                                                                           random_state=3, message_reports=False),
         fit=fit_blocks, covers=("PRIDERegressor", "certified"),
         uncovered=("coef_", "coef_blocks_", "intercept_", "lambdas_", "sketch_coef_blocks_", "transforms_"),
         uncovered_said="not the coefficients"),
    Case("PRIDERegressor certified, row, local CV", lambda: privsdr.PRIDERegressor(
        "certified", budget=BUDGET, bounds=(-1.0, 1.0), relation="row", random_state=3, message_reports=False),
         fit=fit_blocks, covers=("PRIDERegressor", "certified"),
         uncovered=("coef_", "coef_blocks_", "intercept_", "lambdas_", "sketch_coef_blocks_", "transforms_", "held_out_p_values_",
                    "held_out_gains_", "trivial_blocks_"),
         uncovered_said="not the coefficients", uncovered_keys=PRIDE_HELD_OUT_KEYS, uncovered_warnings=("the held-out errors",)),
]

if _dask_available():
    CASES.append(Case("DPSIR moments, dask array", lambda: privsdr.DPSIR(1, cut_points=CUTS, **SIR), fit=fit_dask,
                      covers=("DPSIR", "dask"), consumer=consumers.sir))


def _msc() -> Any:
    from privsdr.algorithms.spectral import MSC

    return MSC("dp_mean", bound=3.0, budget=BUDGET, random_state=3)
