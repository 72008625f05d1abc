"""pytest assertions: ``assert_dp(...)``, ``assert_mechanism_dp(...)``, ``assert_sensitivity(...)``."""
from __future__ import annotations

from typing import Any

from .core import AuditResult, audit
from .mechanisms import audit_mechanism
from .probe import ProbeResult, probe_sensitivity


def assert_dp(mechanism: Any, D0: Any, D1: Any, **kwargs: Any) -> AuditResult:
    """Audit and fail the test (with the counts) if the claim is rejected. Arguments as ``audit``."""
    result = audit(mechanism, D0, D1, **kwargs)
    if not result.passed:
        raise AssertionError(result.summary())
    return result


def assert_mechanism_dp(name: str, **kwargs: Any) -> AuditResult:
    result = audit_mechanism(name, **kwargs)
    if not result.passed:
        raise AssertionError(result.summary())
    return result


def assert_sensitivity(query: Any, pairs: Any, sensitivity: Any, **kwargs: Any) -> ProbeResult:
    result = probe_sensitivity(query, pairs, sensitivity, **kwargs)
    if not result.passed:
        raise AssertionError(result.summary())
    return result
