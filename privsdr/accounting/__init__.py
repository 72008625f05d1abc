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
    Event,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PureEvent,
)
from .gaussian import analytic_noise_multiplier, gaussian_delta, gaussian_epsilon
from .ledger import Ledger, Preflight, PreflightItem, Reservation
from .relation import Relation, Status
from .zcdp import zcdp_epsilon, zcdp_rho_for
from .scope import Scope

__all__ = [name for name in dir() if not name.startswith("_")]
