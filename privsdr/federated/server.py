"""The FSIR server: merge client messages (post-processing only; spec fsir_000.md Algorithm 1).

    Sigma~ = sum_k n_k Sigma~_k / N,   M~ = sum_k n_k M~_k / N,   w~ = sum_k n_k w~_k / N,
    centred (``config.center`` not 'none'):  mu~ = sum_h M~[:, h],  M~ <- M~ - mu~ w~^T,  Sigma~ <- Sigma~ - mu~ mu~^T,
    U_d = top-d left singular vectors of M~,   beta~ = Sigma~^{-1} U_d

(a linear solve; Sigma~ optionally floored to be positive definite), each direction scaled to unit
length (the span, and each column's direction, are unchanged). Column h of the centred M~ is
w_h (m_h - mu), the centred slice mean weighted as in the paper, and Sigma~ - mu~ mu~^T the
covariance: with the noise off the estimate no longer depends on where the data sit. Without noise
this is exactly the pooled estimate: n_k M_k, n_k w_k and n_k Sigma_k are sums over records.
Before merging, ``checks.check_messages`` refuses what public information contradicts (trust model
in ``docs/algorithms/fsir.md``), and uncertified uploads unless ``allow_uncertified=True``.
The guarantee per record is the max over clients of their own costs (parallel composition: every
record lives on one client).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from ..core import eigen_floor
from ..errors import ValidationError
from ..released import Released
from ..released.fitted import Fitted
from .checks import check_messages
from .client import centred_slice_means
from .protocol import ClientMessage, FSIRConfig


@attrs.frozen(eq=False)
class FSIRResult:
    directions: np.ndarray
    n_directions: int
    singular_values: np.ndarray
    n_total: int
    clients: tuple[str, ...]
    active: tuple[int, ...] | None
    privacy: dict[str, Any]
    center: np.ndarray | None = None  #: where the rows were centred (all p columns): public centre + DP mean
    mean: np.ndarray | None = None  #: the DP mean of the truncated rows (released columns; zeros for center='none')
    released: Released | None = None  #: the pooled record the estimate was computed from


def majority_vote(messages: Sequence[ClientMessage], p: int, rule: str = "majority", size: int = 5) -> tuple[int, ...]:
    """CCMD server step: indices voted by more than half of the clients (strict majority), or the
    ``size`` most-voted indices (``rule="top_s"``; ties to the smaller index)."""
    votes = np.zeros(p, dtype=int)
    for m in messages:
        if m.votes is None:
            raise ValidationError(f"client {m.client_id!r} sent no screening votes")
        votes[list(m.votes)] += 1
    if rule == "top_s":
        order = np.lexsort((np.arange(p), -votes))[:size]
        return tuple(int(j) for j in np.sort(order))
    return tuple(int(j) for j in np.flatnonzero(votes > len(messages) / 2))


def privacy_summary(messages: Sequence[ClientMessage], reports: Sequence[Any] | None = None) -> dict[str, Any]:
    """Per-client costs and the per-record guarantee: the max over clients (parallel composition).
    ``reports``: the messages' parsed reports, if the caller has them already."""
    per_client = {}
    statuses = []
    for i, m in enumerate(messages):
        try:
            report = reports[i] if reports is not None else m.report
        except (ValueError, TypeError) as exc:
            raise ValidationError(f"client {m.client_id!r}: its privacy report is unreadable ({exc})") from None
        per_client[m.client_id] = {"epsilon": report.spent[0], "delta": report.spent[1], "status": report.status}
        statuses.append(report.status)
    worst = "none" if "none" in statuses else ("claimed" if "claimed" in statuses else "certified")
    summary = {
        "per_record": {"epsilon": max(c["epsilon"] for c in per_client.values()), "delta": max(c["delta"] for c in per_client.values())},
        "status": worst,
        "per_client": per_client,
        "composition": "parallel over clients (each record lives on one client); sequential within a client",
    }
    return without_guarantee(summary) if worst == "none" else summary


def without_guarantee(privacy: dict[str, Any]) -> dict[str, Any]:
    """A status-``none`` summary: no per-record guarantee (epsilon = inf), with what the noisy releases alone
    cost kept apart (``noisy_releases_per_record``) -- never a finite epsilon next to status none."""
    privacy = dict(privacy)
    if math.isfinite(privacy["per_record"]["epsilon"]):
        privacy["noisy_releases_per_record"] = privacy["per_record"]
    privacy["per_record"] = {"epsilon": math.inf, "delta": 1.0}
    privacy["status"] = "none"
    return privacy


#: a client's upload arrays -> the release (report node) each one is
CLIENT_ARRAYS = {"slice_means": "slice_means", "second_moment": "second_moment", "proportions": "slice_proportions"}


def client_released(message: ClientMessage, report: Any) -> Released:
    """What one client released, as a record: its upload's arrays (slice means p x H, second moment, and the slice
    proportions when centred) with the public noise sd its own report gives each release (the calibrated Gaussian's
    sd; a shaped release's floor), n = n_k (public in the protocol), replace-one. The uploads' checks
    (``checks.check_messages``) come first: they read the message and its report, not this record."""
    nodes = {node.name: node for node in report.nodes}
    arrays = {k: getattr(message, k) for k in CLIENT_ARRAYS if getattr(message, k) is not None}
    scales = {k: float(nodes[CLIENT_ARRAYS[k]].noise_scale) if CLIENT_ARRAYS[k] in nodes else 0.0 for k in arrays}
    return Released(arrays, scales, int(message.n), "replace_one", f"FSIR client {message.client_id}",
                    {k: CLIENT_ARRAYS[k] for k in arrays})


def merged_released(records: Sequence[Released]) -> Released:
    """The clients' records pooled: every array the n-weighted average sum_k n_k A_k / N (added in order), its noise sd
    sqrt(sum_k (n_k s_k)^2) / N (the clients draw independent noise); n = N. Post-processing of the records only."""
    sizes = [r.n for r in records]
    N = sum(sizes)
    arrays = {k: _weighted_sum(sizes, [r[k] for r in records]) / N for k in records[0].arrays}
    scales = {k: math.sqrt(sum((n * r.scales[k]) ** 2 for n, r in zip(sizes, records, strict=True))) / N for k in arrays}
    return Released(arrays, scales, N, "replace_one", f"FSIR merge of {len(records)} clients", records[0].nodes)


def fsir_from_released(released: Released, *, n_directions: int | str, centred: bool, center: np.ndarray,
                       active: Sequence[int] | None = None, psd_floor: float | None = None) -> Fitted:
    """The FSIR server's estimate (module docstring) from a merged record (``merged_released``) with arrays slice_means
    (p x H), second_moment and, when ``centred``, proportions: ``directions_`` (unit columns, placed on the ``active``
    columns of the public ``center``'s width when screening kept some), ``n_directions_``, ``singular_values_``,
    ``center_`` (the public centre plus the DP mean) and ``mean_``. Post-processing of the record and public parameters."""
    M = released["slice_means"]
    S = released["second_moment"]
    S = (S + S.T) / 2.0
    mu = np.zeros(M.shape[0])
    if centred:  # check_messages: every client released its proportions
        mu = M.sum(axis=1)
        M = centred_slice_means(M, released["proportions"])
        S = S - np.outer(mu, mu)
    if psd_floor is not None:
        S = eigen_floor(S, psd_floor)
    U, s, _ = np.linalg.svd(M, full_matrices=False)
    d = n_directions
    if d == "auto":
        q = min(M.shape)
        gaps = np.concatenate([s, [0.0]])[:q] - np.concatenate([s, [0.0]])[1 : q + 1]
        d = int(np.argmax(gaps[: max(q - 1, 1)])) + 1
    d = int(d)
    rank = min(M.shape[0], M.shape[1] - 1 if centred else M.shape[1])  # centred columns sum to ~0
    if not 1 <= d <= rank:
        raise ValidationError(f"cannot estimate {d} directions from a {M.shape} slice-mean matrix"
                              + (" once centred (rank <= H - 1)" if centred else ""))
    try:
        beta = np.linalg.solve(S, U[:, :d])
    except np.linalg.LinAlgError:
        raise ValidationError("the merged second moment is singular; pass psd_floor= to repair it (post-processing)") from None
    norms = np.linalg.norm(beta, axis=0)
    if not np.all(np.isfinite(beta)) or np.any(norms == 0):
        raise ValidationError("the merged estimate has a zero or non-finite direction; pass psd_floor= (post-processing)")
    beta = beta / norms
    center = np.array(center, dtype=float)
    if active is not None:
        full = np.zeros((center.shape[0], d))
        full[list(active)] = beta
        beta = full
        center[list(active)] += mu
    else:
        center = center + mu
    return Fitted({"directions_": beta, "n_directions_": d, "singular_values_": s, "center_": center, "mean_": mu,
                   "released_": released})


def _weighted_sum(weights: Sequence[int], arrays: Sequence[np.ndarray]) -> np.ndarray:
    """sum_i weights[i] * arrays[i], added in order (one array per message)."""
    total = weights[0] * arrays[0]
    for weight, array in zip(weights[1:], arrays[1:], strict=True):
        total = total + weight * array
    return total


def merge(messages: Sequence[ClientMessage], config: FSIRConfig, *, n_directions: int | str | None = None,
          psd_floor: float | None = None, p_original: int | None = None, allow_uncertified: bool = False) -> FSIRResult:
    """Check the clients' uploads, pool what each released (``client_released``, ``merged_released``) and estimate the
    SDR directions from the pooled record alone (``fsir_from_released``; unit-length columns)."""
    if any(not isinstance(m, ClientMessage) or m.slice_means is None or m.second_moment is None for m in messages):
        raise ValidationError("merge needs round-2 messages (slice means and second moments)")
    reports = check_messages(messages, config, allow_uncertified=allow_uncertified, reports=True)
    released = merged_released([client_released(m, r) for m, r in zip(messages, reports, strict=True)])
    active = messages[0].active
    width = p_original or (max(active) + 1 if active is not None else released["slice_means"].shape[0])
    if isinstance(config.center, tuple) and len(config.center) > 1:
        width = len(config.center)
    fitted = fsir_from_released(released, n_directions=n_directions if n_directions is not None else config.n_directions,
                                centred=config.centred, center=config.public_center(width), active=active, psd_floor=psd_floor)
    return FSIRResult(fitted["directions_"], fitted["n_directions_"], fitted["singular_values_"], released.n,
                      tuple(m.client_id for m in messages), active, privacy_summary(messages, reports), fitted["center_"],
                      fitted["mean_"], released)
