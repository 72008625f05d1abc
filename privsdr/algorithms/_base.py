"""What every privsdr estimator shares: budget/ledger resolution and input checks before spending."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import core
from ..accounting import Budget, Ledger, as_budget, make_accountant
from .._validation import check_matrix, check_positive  # noqa: F401 (re-exported for the estimators)
from ..errors import BudgetExceededError, ValidationError


class PrivateEstimator:
    """Base class following scikit-learn conventions (no logic in ``__init__``, ``*_`` after fit).

    ``budget`` is what one fit may spend; ``ledger`` (optional) is the account it is charged to. With
    only a budget, a fresh ledger of that budget is used; with only a ledger, the fit spends what
    remains of it.
    """

    def get_params(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.endswith("_") and not k.startswith("_")}

    def _resolve_budget(self) -> tuple[Budget, Ledger]:
        budget, ledger = getattr(self, "budget", None), getattr(self, "ledger", None)
        if ledger is not None and not isinstance(ledger, Ledger):
            raise ValidationError(f"ledger must be a privsdr.Ledger, got {type(ledger).__name__}")
        if budget is None and ledger is None:
            raise ValidationError("give budget=Budget(epsilon, delta) or ledger=Ledger(...)")
        if budget is None:
            eps, delta = ledger.remaining
            if eps <= 0 or (ledger.budget.delta > 0 and delta <= 0):
                raise BudgetExceededError(type(self).__name__, (0.0, 0.0), (eps, delta), [], ledger.accountant.name, ledger.spent)
            budget = Budget(eps, delta)
        budget = as_budget(budget)
        if ledger is None:
            ledger = Ledger(budget, accountant=make_accountant(getattr(self, "accountant", "best"), budget.delta))
        return budget, ledger


def public_split(random_state: Any, n: int, n_init: int, n_batches: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """A data-independent split of range(n): the sorted init rows and ``n_batches`` sorted batches of
    the rest (DP-SIR spec §4.0 item 4). Under replace-one each record stays in one part, so the
    parts are disjoint scopes; sorting keeps the sets and makes row gathers sequential in memory."""
    seed = random_state.integers(2**63) if isinstance(random_state, np.random.Generator) else random_state
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    rest = order[n_init:]
    return np.sort(order[:n_init]), [np.sort(rest[b]) for b in core.batches(n - n_init, n_batches, rng)]


class ClippedRows:
    """Rows of X clipped to [-bound, bound] on demand, part by part (no clipped copy of all of X)."""

    def __init__(self, X: np.ndarray, bound: float, labels: np.ndarray | None = None) -> None:
        self.X, self.bound, self.labels = X, bound, labels
        self.p = X.shape[1]

    def take(self, idx: np.ndarray) -> Any:
        """The clipped rows ``idx`` (integer indices: always a copy), with their labels if any."""
        rows = self.X[np.asarray(idx, dtype=np.intp)]
        np.clip(rows, -self.bound, self.bound, out=rows)  # what makes the declared sensitivities true
        return rows if self.labels is None else (rows, self.labels[idx])
