"""What one fit may spend and the account it is charged to, without scikit-learn (a party process of a secure run
needs it too): ``BudgetedFit._resolve_budget`` (budget / ledger / the process's default ledger) and ``for_ledger``."""
from __future__ import annotations

from ..accounting import Budget, Ledger, as_budget
from ..accounting.default import fresh_ledger, ledger_for, remaining_budget
from ..errors import PlanError, ValidationError
from .graph import Plan


class BudgetedFit:
    """A fit's ``budget`` and ``ledger`` resolved (``algorithms._base.PrivateEstimator``'s docstring): ``budget`` is
    what one fit may spend, ``ledger`` (optional) the account it is charged to."""

    def _resolve_budget(self) -> tuple[Budget, Ledger]:
        budget, ledger = getattr(self, "budget", None), getattr(self, "ledger", None)
        if ledger is not None and not isinstance(ledger, Ledger):
            raise ValidationError(f"ledger must be a privsdr.Ledger, got {type(ledger).__name__}")
        ledger = ledger_for(self)
        explicit = isinstance(budget, str) and budget == "remaining"  # asked for by name: no warning
        if explicit:
            budget = None
        if budget is None:
            if ledger is None:
                raise ValidationError("give budget=Budget(epsilon, delta) or ledger=Ledger(...) "
                                      "(or configure one with privsdr.set_default_ledger)")
            budget = remaining_budget(ledger, type(self).__name__)
            eps, delta = budget
            if not explicit and (ledger.journal_path is not None or ledger.spent.epsilon > 0):
                import warnings

                from ..errors import WholeBudgetWarning

                warnings.warn(f"budget=None: this {type(self).__name__} fit takes everything left in the ledger (eps = {eps:.4g}, "
                              f"delta = {delta:.3g}), which leaves nothing for later fits on it; pass budget=Budget(epsilon, delta) "
                              "to take a share, or budget=\"remaining\" to take it all without this warning", WholeBudgetWarning, stacklevel=3)
        budget = as_budget(budget)
        if ledger is None:
            ledger = fresh_ledger(budget, getattr(self, "accountant", "best"), type(self).__name__)
        return budget, ledger


def for_ledger(plan: Plan, ledger: Ledger) -> Plan:
    """The plan under its ledger's relation when the two differ and a sound conversion exists (``Plan.converted``:
    add/remove -> replace-one, sensitivities x 2), so one journal serves every method of a data set; otherwise the
    plan unchanged (the ledger then refuses the mismatch and says why)."""
    if ledger.relation is None or ledger.relation == plan.relation:
        return plan
    try:
        return plan.converted(ledger.relation)
    except PlanError:
        return plan
