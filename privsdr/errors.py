"""Exceptions raised by privsdr.

Every error that privsdr raises because of the caller's input derives from :class:`PrivsdrError`
and from the matching builtin (``ValueError``/``TypeError``), so ``except ValueError`` keeps working.
"""
from __future__ import annotations

from typing import Any


class PrivsdrError(Exception):
    """Base class of every privsdr error."""


class ValidationError(PrivsdrError, ValueError):
    """Bad input (NaN, wrong shape, impossible parameter) detected before any budget is spent."""


class InputTypeError(PrivsdrError, TypeError):
    """An argument of the wrong type (a string where a number is needed, ...), before any budget is spent."""


class PlanError(PrivsdrError, ValueError):
    """A plan is malformed: unknown parent, cycle, duplicate node, missing calibration."""


class ComplexDataError(InputTypeError, ValidationError):
    """Complex numbers where real ones are needed: a TypeError, and a ValueError as scikit-learn expects."""


class UncertifiedPlanError(PrivsdrError, PermissionError):
    """A plan has `claimed`/`none` nodes and the caller did not opt in to running it."""


class RelationMismatchError(PrivsdrError, ValueError):
    """Charges under different neighbouring relations cannot be composed."""


class DetachedLedgerError(PrivsdrError, RuntimeError):
    """A copy of a ledger made by unpickling (another process, a saved model) was asked to spend: only the
    original account, or a ledger reattached to the same journal, can spend (``Ledger`` docs, "copies")."""


class BudgetExceededError(PrivsdrError):
    """A plan does not fit in what remains of a ledger's budget. Nothing was spent.

    Attributes: ``requested`` (cost of the plan alone), ``remaining`` (before the plan), ``items``
    (per-node ``(label, cost)``), ``accountant`` and ``plan`` names.
    """

    def __init__(self, plan: str, requested: tuple, remaining: tuple, items: list, accountant: str, total_after: tuple) -> None:
        self.plan = plan
        self.requested = requested
        self.remaining = remaining
        self.items = list(items)
        self.accountant = accountant
        self.total_after = total_after
        lines = [
            f"plan {plan!r} needs (epsilon={requested[0]:.6g}, delta={requested[1]:.3g}) under the "
            f"{accountant!r} accountant, but only (epsilon={remaining[0]:.6g}, delta={remaining[1]:.3g}) "
            f"remains (composed total would be epsilon={total_after[0]:.6g}, delta={total_after[1]:.3g}); "
            "nothing was spent.",
            "Items (basic cost of each node):",
        ]
        lines += [f"  {label}: epsilon={cost[0]:.6g}, delta={cost[1]:.3g}" for label, cost in self.items]
        super().__init__("\n".join(lines))


class NotIdentifiedWarning(UserWarning):
    """An estimate is not determined by the data: e.g. tied eigenvalues at the K-th direction, where any
    basis of the tied eigenspace is an equally valid answer and the one returned depends on the BLAS build."""


class WholeBudgetWarning(UserWarning):
    """``budget=None`` with a ledger that is shared (a journal) or already charged: the fit takes everything left in
    it, which on a shared journal leaves nothing for anyone else; pass ``budget=Budget(epsilon, delta)`` for a share."""


class FreshBudgetWarning(UserWarning):
    """A fit given ``budget=`` and no ``ledger=`` (and no default ledger configured) ran on a fresh budget of its own
    while earlier fits in the process did the same: nothing bounds their total. ``privsdr.default_ledger()`` shows
    what they spent together; ``privsdr.set_default_ledger(Ledger(...))`` gives them one budget."""


class NonPrivatePreprocessingWarning(UserWarning):
    """A privsdr estimator was fitted in a scikit-learn ``Pipeline`` after a step fitted on the rows without noise (a
    ``StandardScaler``, ``PCA``, ...): its guarantee does not hold for that pipeline (``privsdr.check_pipeline``)."""


class NoiseDominatesWarning(UserWarning):
    """The noise alone moves the estimate by a large share of the distance to a random answer: at this
    budget and sample size the estimate cannot be told reliably from noise."""


def _not_fitted_error() -> type:
    """``NotFittedError``: ``transform``/``predict`` before ``fit``. It derives from scikit-learn's ``NotFittedError`` too,
    so it is built on first use (``__getattr__``): importing the errors never imports scikit-learn, and this module
    imports nothing of privsdr."""
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    class NotFittedError(ValidationError, SklearnNotFittedError):
        """``transform``/``predict`` before ``fit`` (also scikit-learn's ``NotFittedError``)."""

    NotFittedError.__module__, NotFittedError.__qualname__ = __name__, "NotFittedError"  # pickles as privsdr.errors.NotFittedError
    return NotFittedError


def __getattr__(name: str) -> Any:
    if name == "NotFittedError":
        globals()[name] = cls = _not_fitted_error()  # built once: every later lookup finds the same class
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
