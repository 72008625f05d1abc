"""privsdr: differentially private dimension reduction and regression, privacy accounting first.

Public API (a contract): ``Budget``, ``Ledger``, ``BudgetExceededError``, ``PrivacyReport``, the
accountant names ``"basic"``, ``"advanced"``, ``"rdp"``, ``"pld"``, ``"best"``, and the estimators.

The names are loaded on first use (PEP 562), so ``import privsdr`` is cheap and a process that needs only
part of the library (the ledger commands, a secure-aggregation party) never imports scikit-learn;
dp-accounting is imported only when an RDP/PLD accountant runs.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

#: public name -> the module that defines it
_EXPORTS = {
    "ACCOUNTANT_NAMES": "privsdr.accounting.accountants",
    "Budget": "privsdr.accounting",
    "Cost": "privsdr.accounting",
    "Ledger": "privsdr.accounting",
    "Relation": "privsdr.accounting",
    "Scope": "privsdr.accounting",
    "Status": "privsdr.accounting",
    "default_ledger": "privsdr.accounting.default",
    "set_default_ledger": "privsdr.accounting.default",
    "ledger_to_markdown": "privsdr.report",
    "AdaSSPRegression": "privsdr.algorithms",
    "DPPLS": "privsdr.algorithms",
    "DPSIR": "privsdr.algorithms",
    "DPMeanCovariance": "privsdr.algorithms",
    "DPSparsePCA": "privsdr.algorithms",
    "SparseDPSIR": "privsdr.algorithms",
    "BudgetExceededError": "privsdr.errors",
    "DetachedLedgerError": "privsdr.errors",
    "NoiseDominatesWarning": "privsdr.errors",
    "NonPrivatePreprocessingWarning": "privsdr.errors",
    "WholeBudgetWarning": "privsdr.errors",
    "FreshBudgetWarning": "privsdr.errors",
    "NotIdentifiedWarning": "privsdr.errors",
    "PlanError": "privsdr.errors",
    "PrivsdrError": "privsdr.errors",
    "RelationMismatchError": "privsdr.errors",
    "UncertifiedPlanError": "privsdr.errors",
    "ValidationError": "privsdr.errors",
    "FederatedSIR": "privsdr.federated",
    "Sensitivity": "privsdr.mechanisms",
    "available_mechanisms": "privsdr.mechanisms",
    "get_mechanism": "privsdr.mechanisms",
    "register_mechanism": "privsdr.mechanisms",
    "load_model": "privsdr.persistence",
    "DPStandardScaler": "privsdr.preprocessing",
    "PublicRangeScaler": "privsdr.preprocessing",
    "check_pipeline": "privsdr.preprocessing",
    "Plan": "privsdr.plan",
    "Release": "privsdr.plan",
    "Run": "privsdr.plan",
    "execute": "privsdr.plan",
    "PrivacyReport": "privsdr.report",
    "Chunks": "privsdr.rows",
    "DPBCDRegression": "privsdr.vertical",
    "PRIDERegressor": "privsdr.vertical",
    "SecureVerticalRegression": "privsdr.vertical",
}

__all__ = [
    "__version__",
    "ACCOUNTANT_NAMES",
    "AdaSSPRegression",
    "available_mechanisms",
    "Budget",
    "BudgetExceededError",
    "check_pipeline",
    "Chunks",
    "Cost",
    "default_ledger",
    "DetachedLedgerError",
    "DPBCDRegression",
    "DPMeanCovariance",
    "DPStandardScaler",
    "DPPLS",
    "DPSIR",
    "DPSparsePCA",
    "execute",
    "FederatedSIR",
    "FreshBudgetWarning",
    "get_mechanism",
    "Ledger",
    "ledger_to_markdown",
    "load_model",
    "NoiseDominatesWarning",
    "NonPrivatePreprocessingWarning",
    "WholeBudgetWarning",
    "NotIdentifiedWarning",
    "Plan",
    "PlanError",
    "PRIDERegressor",
    "PrivacyReport",
    "PrivsdrError",
    "PublicRangeScaler",
    "register_mechanism",
    "Relation",
    "RelationMismatchError",
    "Release",
    "Run",
    "Scope",
    "SecureVerticalRegression",
    "Sensitivity",
    "set_default_ledger",
    "SparseDPSIR",
    "Status",
    "UncertifiedPlanError",
    "ValidationError",
]


def __getattr__(name: str) -> Any:
    """Load a public name (and, for a subpackage such as ``privsdr.core``, the subpackage) on first use."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # static checkers see the eager imports
    from .accounting import Budget, Cost, Ledger, Relation, Scope, Status
    from .accounting.accountants import ACCOUNTANT_NAMES
    from .accounting.default import default_ledger, set_default_ledger
    from .algorithms import DPPLS, DPSIR, AdaSSPRegression, DPMeanCovariance, DPSparsePCA, SparseDPSIR
    from .errors import (
        BudgetExceededError,
        DetachedLedgerError,
        FreshBudgetWarning,
        NoiseDominatesWarning,
        NonPrivatePreprocessingWarning,
        NotIdentifiedWarning,
        PlanError,
        PrivsdrError,
        RelationMismatchError,
        UncertifiedPlanError,
        ValidationError,
        WholeBudgetWarning,
    )
    from .federated import FederatedSIR
    from .mechanisms import Sensitivity, available_mechanisms, get_mechanism, register_mechanism
    from .persistence import load_model
    from .plan import Plan, Release, Run, execute
    from .preprocessing import DPStandardScaler, PublicRangeScaler, check_pipeline
    from .report import PrivacyReport, ledger_to_markdown
    from .rows import Chunks
    from .vertical import DPBCDRegression, PRIDERegressor, SecureVerticalRegression
