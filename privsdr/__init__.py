"""privsdr: differentially private dimension reduction and regression, privacy accounting first.

Public API (a contract): ``Budget``, ``Ledger``, ``BudgetExceededError``, ``PrivacyReport``, the
accountant names ``"basic"``, ``"advanced"``, ``"rdp"``, ``"pld"``, ``"best"``, and the estimators.
dp-accounting is imported only when an RDP/PLD accountant runs.
"""
from ._version import __version__
from .accounting import Budget, Cost, Ledger, Relation, Scope, Status
from .accounting.accountants import ACCOUNTANT_NAMES
from .algorithms import DPPLS, DPSIR, DPMeanCovariance, DPSparsePCA, SparseDPSIR
from .errors import (
    BudgetExceededError,
    DetachedLedgerError,
    NoiseDominatesWarning,
    NotIdentifiedWarning,
    PlanError,
    PrivsdrError,
    RelationMismatchError,
    UncertifiedPlanError,
    ValidationError,
)
from .federated import FederatedSIR
from .mechanisms import Sensitivity, available_mechanisms, get_mechanism, register_mechanism
from .persistence import load_model
from .plan import Plan, Release, Run, execute
from .report import PrivacyReport
from .rows import Chunks
from .vertical import DPBCDRegression, PRIDERegressor

__all__ = [
    "ACCOUNTANT_NAMES",
    "Budget",
    "BudgetExceededError",
    "Chunks",
    "Cost",
    "DetachedLedgerError",
    "DPBCDRegression",
    "DPMeanCovariance",
    "DPPLS",
    "DPSIR",
    "DPSparsePCA",
    "FederatedSIR",
    "SparseDPSIR",
    "Ledger",
    "NoiseDominatesWarning",
    "NotIdentifiedWarning",
    "Plan",
    "PlanError",
    "PRIDERegressor",
    "PrivacyReport",
    "PrivsdrError",
    "Relation",
    "RelationMismatchError",
    "Release",
    "Run",
    "Scope",
    "Sensitivity",
    "Status",
    "UncertifiedPlanError",
    "ValidationError",
    "__version__",
    "available_mechanisms",
    "execute",
    "get_mechanism",
    "load_model",
    "register_mechanism",
]
