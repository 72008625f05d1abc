"""The audit: sample a mechanism (or a whole fit) on a neighbouring pair, threshold a scalar
statistic, and turn the counts into a lower confidence bound on epsilon (spec/auditing.md §2.2).

The threshold is either pre-registered (from the claim and the noise-free outputs, before any
sample is drawn) or chosen on a held-out selection split: never on the counts it reports.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import attrs
import numpy as np

from .._progress import progress
from .claims import GDP, Claim, rejects
from .stats import cp_upper, epsilon_lower_bound, mu_lower_bound


@attrs.frozen
class AuditResult:
    """What an audit found. ``epsilon_lower`` holds with probability >= ``confidence``.

    For a GDP claim the bound goes through mu (``mu_lower``) and is valid against Gaussian-shaped
    mechanisms; for an (eps, delta) claim it is the Clopper-Pearson threshold bound, valid for any
    mechanism. ``passed`` is False when the claim is rejected at level ``1 - confidence``.
    """

    epsilon_lower: float
    confidence: float
    samples: int
    false_positives: int
    false_negatives: int
    threshold: float
    threshold_policy: str
    claim: dict[str, Any]
    claimed_epsilon: float
    passed: bool
    method: str
    mu_lower: float | None = None
    fpr_upper: float = 1.0
    fnr_upper: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        for k, v in data.items():
            if isinstance(v, float) and math.isinf(v):
                data[k] = "inf"
        return data

    def summary(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED"
        mu = "" if self.mu_lower is None else f", mu >= {self.mu_lower:.4g}"
        return (
            f"audit {verdict}: epsilon >= {self.epsilon_lower:.4g}{mu} with confidence {self.confidence:g} "
            f"(claimed epsilon {self.claimed_epsilon:.4g}; {self.method}); {self.samples} samples per side, "
            f"FP={self.false_positives}, FN={self.false_negatives}, threshold {self.threshold:.6g} ({self.threshold_policy})"
        )


def evaluate(
    scores0: np.ndarray,
    scores1: np.ndarray,
    claim: Claim,
    threshold: float,
    alpha: float,
    threshold_policy: str = "preregistered",
    inclusive: bool = False,
) -> AuditResult:
    """Counts -> bounds -> verdict for statistics oriented so that D' gives larger values.

    The test says D' when ``score > threshold`` (``score >= threshold`` if ``inclusive``); the tie
    rule is part of the pre-registration.
    """
    s0, s1 = np.asarray(scores0, dtype=float).ravel(), np.asarray(scores1, dtype=float).ravel()
    if s0.size != s1.size or s0.size == 0:
        raise ValueError("need the same positive number of samples on each side")
    if not (np.all(np.isfinite(s0)) and np.all(np.isfinite(s1))):
        raise ValueError("the statistic produced NaN or inf")
    n = s0.size
    positive = np.greater_equal if inclusive else np.greater
    fp = int(np.count_nonzero(positive(s0, threshold)))
    fn = int(s1.size - np.count_nonzero(positive(s1, threshold)))
    fpr_u, fnr_u = cp_upper(fp, n, alpha / 2.0), cp_upper(fn, n, alpha / 2.0)
    if isinstance(claim, GDP):
        mu_lb = mu_lower_bound(fpr_u, fnr_u)
        eps_lb = GDP(mu_lb, claim.delta).epsilon if claim.delta > 0 and mu_lb > 0 else (0.0 if mu_lb == 0 else math.inf)
        method, claimed = "gaussian-dp (mu) route, Clopper-Pearson rates", claim.epsilon
    else:
        mu_lb = None
        eps_lb = epsilon_lower_bound(fpr_u, fnr_u, claim.delta)
        method, claimed = "Clopper-Pearson threshold test", claim.epsilon
    return AuditResult(
        epsilon_lower=float(eps_lb),
        confidence=1.0 - alpha,
        samples=n,
        false_positives=fp,
        false_negatives=fn,
        threshold=float(threshold),
        threshold_policy=threshold_policy,
        claim=claim.to_dict(),
        claimed_epsilon=float(claimed),
        passed=not rejects(claim, fpr_u, fnr_u),
        method=method,
        mu_lower=mu_lb,
        fpr_upper=fpr_u,
        fnr_upper=fnr_u,
    )


def choose_threshold(scores0: np.ndarray, scores1: np.ndarray, claim: Claim, min_count: int = 30) -> float:
    """On a *selection* split: the threshold with the largest point estimate of the bound."""
    candidates = np.quantile(np.concatenate([scores0, scores1]), np.linspace(0.02, 0.98, 97))
    n = len(scores0)
    best_t, best = float(np.median(candidates)), -math.inf
    for t in candidates:
        fp = np.count_nonzero(scores0 > t)
        fn = np.count_nonzero(scores1 <= t)
        if min(fp, fn) < min(min_count, n // 10):
            continue
        fpr, fnr = fp / n, fn / n
        value = mu_lower_bound(fpr, fnr) if isinstance(claim, GDP) else epsilon_lower_bound(fpr, fnr, claim.delta)
        if value > best:
            best_t, best = float(t), value
    return best_t


Sampler = Callable[[Any, int, np.random.Generator], Any]


def audit(
    mechanism: Callable[..., Any],
    D0: Any,
    D1: Any,
    *,
    claim: Claim,
    statistic: Callable[[Any], np.ndarray],
    threshold: float | Literal["split"] = "split",
    samples: int = 10_000,
    alpha: float = 1e-3,
    seed: int = 0,
    batched: bool = False,
    selection_samples: int | None = None,
    inclusive: bool = False,
) -> AuditResult:
    """Audit ``mechanism`` on the neighbouring pair (D0, D1).

    ``mechanism(D, rng)`` returns one output (or, with ``batched=True``, ``mechanism(D, n, rng)``
    returns n outputs stacked on axis 0). ``statistic(outputs)`` maps a list (or the batch) of
    outputs to scores, larger under D1. ``threshold``: a float fixed before sampling
    (pre-registered), or ``"split"`` to choose it on separate selection samples. ``inclusive``
    counts ``score == threshold`` as "D'" (pre-register it, e.g. for a Laplace region y >= Delta).
    """
    if samples < 10:
        raise ValueError("an audit needs at least 10 samples per side")
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
    sel_rng0, sel_rng1, rng0, rng1 = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))

    def draw(D: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        outputs = mechanism(D, n, rng) if batched else [mechanism(D, rng) for _ in progress(range(n), n, "audit samples")]
        scores = np.asarray(statistic(outputs), dtype=float).ravel()
        if scores.size != n:
            raise ValueError(f"statistic returned {scores.size} scores for {n} outputs")
        return scores

    policy = "preregistered"
    if threshold == "split":
        m = selection_samples or max(samples // 4, 200)
        threshold = choose_threshold(draw(D0, m, sel_rng0), draw(D1, m, sel_rng1), claim)
        policy = f"chosen on a held-out split of {m} samples per side"
    s0, s1 = draw(D0, samples, rng0), draw(D1, samples, rng1)
    return evaluate(s0, s1, claim, float(threshold), alpha, policy, inclusive)
