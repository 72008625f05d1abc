"""What the FSIR server can check about an upload, from public information only (trust model:
``docs/algorithms/fsir.md``).

Clients are semi-honest: the server cannot see their records, so it cannot prove that an upload
was computed as specified. It refuses what public information contradicts:

* structure: protocol, version, configuration digest, p, H, shapes, finite values, integer n >= 2H
  (``protocol.check_compatible``), and the same upload sent twice under two client ids (payload digest);
* the report inside the upload: its n, p, configuration and status must be those of the message,
  and its noise scales those the configuration gives for that n, p and the client's declared budget
  (the server recomputes the client's plan);
* plausibility: every entry of M~, Sigma~ and the slice proportions w~ must lie within what the
  public bounds allow plus ``z`` noise standard deviations, with ``z`` set so that an honest upload
  is refused with probability below 1e-9 (union bound over its entries): |M_jh| <= R_j, and with
  proportions |M_jh| <= R_j w_h; |Sigma_jk| <= R_j R_k, Sigma_jj >= 0; 0 <= w_h <= 1 and
  sum_h w_h = 1 (the sum's noise has sd sqrt(H) times a proportion's).

What a lying client can still do is bias the estimate within those limits (scale its statistics
a little, claim a slightly different n, send data of another population). It can never weaken
another client's privacy: each upload is noised by its own client before it leaves.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..accounting import Budget
from ..errors import UncertifiedPlanError, ValidationError
from .client import client_plan
from .protocol import ClientMessage, FSIRConfig, check_compatible

FALSE_REFUSAL = 1e-9  #: probability that the plausibility check refuses an honest upload (at most)


def _report(m: ClientMessage) -> Any:
    try:
        return m.report
    except (ValueError, TypeError) as exc:
        raise ValidationError(f"client {m.client_id!r}: its privacy report is unreadable ({exc})") from None


def _declared_budget(m: ClientMessage, report: Any) -> Budget:
    requested = report.budget.get("requested", {}) if isinstance(report.budget, dict) else {}
    try:
        eps, delta = float(requested["epsilon"]), float(requested["delta"])
        return Budget.infinite() if math.isinf(eps) else Budget(eps, delta)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValidationError(f"client {m.client_id!r}: its report declares no valid budget ({exc})") from None


def expected_plan(m: ClientMessage, config: FSIRConfig, report: Any = None) -> Any:
    """The client's plan as the configuration defines it for the message's n, p, active set and budget."""
    report = report if report is not None else _report(m)
    budget = _declared_budget(m, report)
    try:
        return client_plan(config, m.n, m.p, budget, active=m.active)
    except ValidationError as exc:
        raise ValidationError(f"client {m.client_id!r}: {exc}") from None


def check_report(m: ClientMessage, config: FSIRConfig, report: Any = None) -> Any:
    """The message's report must describe this message under this configuration; returns the recomputed plan."""
    report = report if report is not None else _report(m)
    params = report.public_parameters
    for key, value in (("n", m.n), ("p", m.p), ("n_slices", m.n_slices), ("config", config.digest())):
        if params.get(key) != value:
            raise ValidationError(f"client {m.client_id!r}: its report says {key} = {params.get(key)!r}, the message {value!r}")
    if report.data_shape is not None and list(report.data_shape) != [m.n, m.p]:
        raise ValidationError(f"client {m.client_id!r}: its report was made on data of shape {report.data_shape}, not ({m.n}, {m.p})")
    plan = expected_plan(m, config, report)
    expected_status = "none" if plan.budget.is_infinite else plan.status.value
    if report.status != expected_status:
        raise ValidationError(f"client {m.client_id!r}: its report says status {report.status!r}; this configuration gives {expected_status!r}")
    nodes = {node.name: node for node in report.nodes}
    if set(nodes) != set(plan.nodes):
        raise ValidationError(f"client {m.client_id!r}: its report lists releases {sorted(nodes)}, the configuration {sorted(plan.nodes)}")
    for name, spec in plan.specs.items():
        got = nodes[name]
        if not math.isclose(got.noise_scale, spec.scale, rel_tol=1e-9, abs_tol=1e-300) or \
                not math.isclose(got.sensitivity["value"], spec.sensitivity.value, rel_tol=1e-9):
            raise ValidationError(f"client {m.client_id!r}: release {name!r} has noise scale {got.noise_scale:.6g} and sensitivity "
                                  f"{got.sensitivity['value']:.6g}; n = {m.n} and its budget give {spec.scale:.6g} and "
                                  f"{spec.sensitivity.value:.6g}")
    return plan


def _z(count: int) -> float:
    from scipy import special  # -ndtri(q) is the normal quantile function's upper tail, as scipy.stats.norm.isf computes it

    return float(-special.ndtri(FALSE_REFUSAL / (2.0 * max(count, 1))))


def _mean_noise_sd(config: FSIRConfig, plan: Any, p: int, H: int, bound_l2: float, z: float,
                   proportions: np.ndarray | None = None) -> float:
    """An upper bound on the standard deviation of each entry of the slice-mean noise."""
    if plan.budget.is_infinite:
        return 0.0
    floor = plan.specs["slice_means"].scale
    if config.mechanism == "iid":
        return floor
    if config.mechanism == "vgm_public":
        basis, spectrum = np.asarray(config.basis, dtype=float), np.asarray(config.spectrum, dtype=float)
        return math.sqrt(float(np.max((basis**2) @ spectrum)))
    # boost variance per entry <= sum of the gaps <= s_1 of the shaping matrix: the private M
    # (s_1 <= ||M||_F <= ||x||_max) or the stage-1 release (plus its noise's spectral norm, w.h.p.),
    # times ||I - 1 w~^T||_2 <= 1 + sqrt(H) ||w~||_2 when it is centred with the released proportions
    s1 = bound_l2
    if config.mechanism == "vgm_two_stage":
        s1 += plan.specs["slice_means_stage1"].scale * (math.sqrt(p) + math.sqrt(H) + z)
    if proportions is not None:
        s1 *= 1.0 + math.sqrt(H) * float(np.linalg.norm(proportions))
    return math.sqrt(floor**2 + s1)


def check_plausible(m: ClientMessage, config: FSIRConfig, plan: Any) -> None:
    """Refuse statistics outside what the public bounds allow (plus z noise standard deviations)."""
    if m.slice_means is None or m.second_moment is None:
        return
    p, H = m.p, m.n_slices
    entry = config.entry_bounds(p, m.active)
    w = m.proportions
    z = _z(p * H + p * (p + 1) // 2 + (H + 1 if w is not None else 0))
    sd_M = _mean_noise_sd(config, plan, p, H, config.row_bound(p, m.active), z, w)
    sd_S = 0.0 if plan.budget.is_infinite else plan.specs["second_moment"].scale
    slack = 1e-9 * (1.0 + float(entry.max()) ** 2)  # float rounding of a noise-free upload
    share = np.ones(H)  # |M_jh| <= R_j w_h, and w_h <= 1
    if w is not None:
        sd_w = 0.0 if plan.budget.is_infinite else plan.specs["slice_proportions"].scale
        bad = (w < -(z * sd_w + slack)) | (w > 1.0 + z * sd_w + slack)
        if np.any(bad):
            h = int(np.argmax(bad))
            raise ValidationError(f"client {m.client_id!r}: slice proportion {h} = {w[h]:.6g} is impossible (a share in [0, 1]) "
                                  f"under its noise (sd {sd_w:.3g}): refused as implausible")
        if abs(float(w.sum()) - 1.0) > z * sd_w * math.sqrt(H) + slack:
            raise ValidationError(f"client {m.client_id!r}: its slice proportions sum to {float(w.sum()):.6g}, not 1 within their "
                                  f"noise (sd {sd_w * math.sqrt(H):.3g}): refused as implausible")
        share = np.clip(w + z * sd_w, 0.0, 1.0)
    limit_M = entry[:, None] * share[None, :] + z * sd_M + slack
    over = np.abs(m.slice_means) > limit_M
    if np.any(over):
        j, h = np.argwhere(over)[0]
        raise ValidationError(f"client {m.client_id!r}: slice mean ({j}, {h}) = {m.slice_means[j, h]:.6g} is impossible under the "
                              f"public bound {entry[j]:.6g}, the slice's share and its noise (sd <= {sd_M:.3g}): refused as implausible")
    limit_S = np.outer(entry, entry) + z * sd_S + slack
    over = np.abs(m.second_moment) > limit_S
    diag = np.diag(m.second_moment) < -(z * sd_S + slack)
    if np.any(over) or np.any(diag):
        j, k = np.argwhere(over)[0] if np.any(over) else (int(np.argmax(diag)),) * 2
        raise ValidationError(f"client {m.client_id!r}: second moment ({j}, {k}) = {m.second_moment[j, k]:.6g} is impossible under "
                              f"the public bounds and its noise (sd {sd_S:.3g}): refused as implausible")


def check_messages(messages: Sequence[ClientMessage], config: FSIRConfig, *, allow_uncertified: bool = False,
                   reports: bool = False) -> list[Any]:
    """Every check above, in order; returns the clients' statuses (``reports=True``: their parsed
    reports). Uncertified uploads (``claimed`` or ``none``) are refused unless ``allow_uncertified=True``:
    the merged estimate would carry them."""
    check_compatible(messages, config)
    statuses, parsed = [], []
    for m in messages:
        report = _report(m)  # parsed once per message
        plan = check_report(m, config, report)
        check_plausible(m, config, plan)
        statuses.append(report.status)
        parsed.append(report)
    bad = [f"{m.client_id} ({s})" for m, s in zip(messages, statuses, strict=True) if s != "certified"]
    if bad and not allow_uncertified:
        raise UncertifiedPlanError(f"uploads without a certified guarantee: {', '.join(bad)}; pass allow_uncertified=True "
                                   "(CLI: --allow-uncertified) to merge them anyway; the result will say so")
    return parsed if reports else statuses
