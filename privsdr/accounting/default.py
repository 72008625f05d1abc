"""The process-wide default ledger: what a fit given no ``ledger=`` is charged to.

Two cases (``default_ledger()`` returns whichever holds):

* **Configured** (``set_default_ledger(Ledger(...))``, in memory or journal-backed): a fit without
  ``ledger=`` is charged to it exactly as if it had been passed ``ledger=`` (its calibration, the
  relation conversion, the refusal when it would not fit, ``budget=None`` taking what is left).
* **Not configured**: each fit still runs against a fresh ledger of its own ``budget`` (its calibration
  and report are unchanged), and that fresh ledger reports the fit's guarantee to the process's
  *tracking* ledger: unlimited, basic composition, in memory. So ``cross_val_score`` and loops
  accumulate there, and from the second such fit on a ``FreshBudgetWarning`` says what they have spent
  together. Fits at ``Budget.infinite()`` (declared non-private baselines) are not tracked.

Each fit's entry in the tracking ledger is one opaque ``(eps, delta)`` event: the fit's own guarantee
under its own accountant. An add/remove fit is entered under replace-one by group privacy for two
changes, ``(2 eps, (1 + e^eps) delta)`` (Dwork & Roth 2014, Thm 2.2 and its approximate-DP form), so one
tracking ledger holds every method. Basic composition of those entries is a valid bound on the total.
"""
from __future__ import annotations

import math
import os
import threading
from typing import Any

from ..errors import BudgetExceededError, ValidationError
from .accountants import Accountant, make_accountant
from .budget import Budget
from .ledger import Ledger
from .relation import Relation
from .tracking import FitEntry, warn_if_earlier_fits  # noqa: F401  (re-exported: the tracking ledger's records live there)

_LOCK = threading.Lock()
_CONFIGURED: Ledger | None = None
_TRACKER: Ledger | None = None
CARRIED = "_privsdr_default_ledger"  #: the attribute a pickled estimator carries its process's configured ledger in


def _new_tracker() -> Ledger:
    tracker = Ledger(Budget(math.inf, 0.0, unlimited=True), accountant="basic", relation=Relation.REPLACE_ONE)
    tracker.tracking = True
    return tracker


def _tracker() -> Ledger:
    """This process's tracking ledger (a forked child gets its own: the parent's is an account of the parent)."""
    global _TRACKER
    with _LOCK:
        if _TRACKER is None or _TRACKER.pid != os.getpid():
            _TRACKER = _new_tracker()
        return _TRACKER


def default_ledger() -> Ledger:
    """The ledger a fit without ``ledger=`` is charged to: the configured one, else this process's tracking
    ledger (unlimited, in memory; module docstring). ``privsdr.ledger_to_markdown(default_ledger().summary())``
    prints it as ``privsdr ledger show`` does."""
    return _CONFIGURED if _CONFIGURED is not None else _tracker()


def set_default_ledger(ledger: Ledger | None) -> Ledger | None:
    """Charge every later fit without ``ledger=`` to ``ledger`` (``None``: no configured ledger; the tracking ledger
    keeps what it recorded). Returns the previously configured ledger (None if there was none), so a caller can
    restore it. Other processes: an estimator pickled to a worker (joblib, Dask) carries the configured ledger, which
    arrives there as any pickled ledger does (reattached to its journal, or a copy that refuses to spend); a forked
    child refuses to spend an in-memory one. So a budget shared with workers is a journal-backed ledger."""
    global _CONFIGURED
    if ledger is not None and not isinstance(ledger, Ledger):
        raise ValidationError(f"the default ledger must be a privsdr.Ledger or None, got {type(ledger).__name__}")
    with _LOCK:
        previous, _CONFIGURED = _CONFIGURED, ledger
        return previous


def reset_tracking_ledger() -> None:
    """Start a new, empty tracking ledger for this process (what was recorded is dropped: tests, a new session)."""
    global _TRACKER
    with _LOCK:
        _TRACKER = None


def configured_ledger() -> Ledger | None:
    """The default ledger if one was configured with ``set_default_ledger``, else None."""
    return _CONFIGURED


def ledger_for(estimator: Any) -> Ledger | None:
    """The ledger a fit of ``estimator`` is charged to before any fresh one: its ``ledger=``, else the configured default
    ledger it carried from the process that pickled it (a worker), else this process's configured default, else None."""
    own = getattr(estimator, "ledger", None)
    if own is not None:
        return own  # type: ignore[no-any-return]
    carried = getattr(estimator, "__dict__", {}).get(CARRIED)
    return carried if carried is not None else _CONFIGURED


def remaining_budget(ledger: Ledger, who: str) -> Budget:
    """Everything left in ``ledger`` as a fit's budget (``budget=None``/``"remaining"``); refused when nothing is left."""
    eps, delta = ledger.remaining
    if eps <= 0 or (ledger.budget.delta > 0 and delta <= 0):
        raise BudgetExceededError(who, (0.0, 0.0), (eps, delta), [], ledger.accountant.name, ledger.spent)
    return Budget(eps, delta)


def fresh_ledger(budget: Budget, accountant: str | Accountant, who: str) -> Ledger:
    """The fresh ledger of a fit given a budget and no ledger (none configured), under ``accountant`` (a name, read at
    the budget's delta, or an instance): each run it reserves is entered in the tracking ledger, and warns
    ``FreshBudgetWarning`` when earlier fits in this process released something the same way
    (``warn_if_earlier_fits``). Noise-off budgets are not tracked."""
    try:
        ledger = Ledger(budget, accountant=make_accountant(accountant, budget.delta))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"accountant: {exc}") from None
    if not budget.is_infinite:
        ledger.report_to, ledger.report_as = _tracker(), who
    return ledger
