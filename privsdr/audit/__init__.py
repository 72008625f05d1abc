"""Empirical DP audits: lower confidence bounds on epsilon from samples, and a deterministic
sensitivity probe. See docs/audit.md and spec/auditing.md."""
from .claims import GDP, ZCDP, ApproxDP, rejects
from .core import AuditResult, audit, choose_threshold, evaluate
from .estimators import audit_estimator, claim_from_report, membership_statistic, projection_statistic, subspace_statistic
from .mechanisms import DEFAULT_SAMPLES, audit_mechanism
from .neighbours import (
    add_record_pair,
    add_remove_neighbours,
    adversarial_neighbours,
    canary_pair,
    clip_bound_pair,
    label_flip_pair,
    replacement_rows,
    slice_change_pair,
)
from .probe import ProbeResult, norm_of, probe_releases, probe_sensitivity, recorded_releases, released_coordinates
from .reconstruction import AttackResult, hit_rate, reconstruction_attack, residual_components
from .stats import approx_dp_tradeoff, cp_lower, cp_upper, epsilon_lower_bound, gdp_tradeoff, mu_lower_bound
from .testing import assert_dp, assert_mechanism_dp, assert_sensitivity

__all__ = [
    "add_record_pair", "add_remove_neighbours", "adversarial_neighbours", "approx_dp_tradeoff", "ApproxDP",
    "assert_dp", "assert_mechanism_dp", "assert_sensitivity", "AttackResult", "audit", "audit_estimator",
    "audit_mechanism", "AuditResult", "canary_pair", "choose_threshold", "claim_from_report",
    "clip_bound_pair", "cp_lower", "cp_upper", "DEFAULT_SAMPLES", "epsilon_lower_bound", "evaluate", "GDP",
    "gdp_tradeoff", "hit_rate", "label_flip_pair", "membership_statistic", "mu_lower_bound", "norm_of",
    "probe_releases", "probe_sensitivity", "ProbeResult", "recorded_releases", "projection_statistic", "reconstruction_attack", "rejects",
    "released_coordinates", "replacement_rows", "residual_components", "slice_change_pair",
    "subspace_statistic", "ZCDP",
]
