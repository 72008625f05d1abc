"""Budgets, events, accountants (basic, advanced, RDP, PLD, best) and the ledger."""
from .accountants import (
    ACCOUNTANT_NAMES,
    Accountant,
    AdvancedAccountant,
    BasicAccountant,
    BestAccountant,
    PldAccountant,
    RdpAccountant,
    accountant_from_dict,
    drv_epsilon,
    kov_epsilon,
    make_accountant,
)
from .budget import Budget, Cost, as_budget
from .charge import Charge, Chargeable
from .events import (
    ApproxEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DistributedDiscreteGaussianEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PureEvent,
)
from .gaussian import analytic_noise_multiplier, gaussian_delta, gaussian_epsilon
from .ledger import Ledger, Preflight, PreflightItem, Reservation
from .relation import Relation, Status
from .scope import Scope
from .zcdp import zcdp_epsilon, zcdp_rho_for

__all__ = [
    "Accountant", "accountant_from_dict", "ACCOUNTANT_NAMES", "AdvancedAccountant",
    "analytic_noise_multiplier", "ApproxEvent", "as_budget", "BasicAccountant", "BestAccountant", "Budget",
    "Charge", "Chargeable", "Cost", "DiscreteGaussianEvent", "DiscreteLaplaceEvent", "DistributedDiscreteGaussianEvent", "drv_epsilon", "Event",
    "gaussian_delta", "gaussian_epsilon", "GaussianEvent", "kov_epsilon", "LaplaceEvent", "Ledger",
    "make_accountant", "NonPrivateEvent", "PldAccountant", "Preflight", "PreflightItem", "PureEvent",
    "RdpAccountant", "Relation", "Reservation", "Scope", "Status", "zcdp_epsilon", "zcdp_rho_for",
]
