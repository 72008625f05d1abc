"""Issue 15: what full adaptivity costs. One 10-fit journal history, mixed Gaussian and Laplace nodes, priced
by every privacy filter (runs chosen one after the other, each after seeing the last) against the
non-adaptive composition of the same nodes (the ten plans declared up front with ``Ledger.commit``).

    python benchmarks/bench_filters.py            # prints the two markdown tables of docs/accounting.md

The figures are exact outputs of the code (no timing, no randomness in the totals), so
``tests/test_filters.py`` recomputes them and checks they equal the tables pasted in docs/accounting.md
between the ``bench_filters`` marker comments.
"""
from __future__ import annotations

import functools
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # price with the source tree next to this script
    sys.path.insert(0, str(ROOT))

from privsdr import Budget, Ledger, Plan, Sensitivity  # noqa: E402
from privsdr.accounting import BasicAccountant, filters  # noqa: E402
from privsdr.plan import Run  # noqa: E402

#: the journal's total budget: large enough that every accountant admits all ten fits
LEDGER = Budget(10.0, 1e-5)
#: the delta share of one fit's Gaussian nodes (split evenly among them): ten fits use 1e-6 = LEDGER.delta / 10
FIT_DELTA = 1e-7

#: the history, in order: (fit, [(node, mechanism, epsilon share)]). Five Gaussian-only fits (means,
#: covariances, cross-moments), then five that mix in Laplace counts and histograms.
HISTORY: tuple[tuple[str, tuple[tuple[str, str, float], ...]], ...] = (
    ("mean + covariance", (("mean", "gaussian", 0.2), ("covariance", "gaussian", 0.3))),
    ("ridge moments", (("xtx", "gaussian", 0.3), ("xty", "gaussian", 0.2))),
    ("sir slice means", (("slice_means", "gaussian", 0.3), ("second_moment", "gaussian", 0.2))),
    ("pca covariance", (("covariance", "gaussian", 0.4),)),
    ("pls cross-moments", (("xty", "gaussian", 0.2), ("xtx", "gaussian", 0.2), ("yty", "gaussian", 0.1))),
    ("slice counts + means", (("counts", "laplace", 0.1), ("slice_means", "gaussian", 0.3))),
    ("histogram", (("bins", "laplace", 0.3),)),
    ("count + sum", (("count", "laplace", 0.1), ("sum", "laplace", 0.2))),
    ("group means", (("counts", "laplace", 0.1), ("sums", "gaussian", 0.3), ("covariance", "gaussian", 0.2))),
    ("refit covariance", (("covariance", "gaussian", 0.3), ("count", "laplace", 0.1))),
)
GAUSSIAN_ONLY = 5  #: the first five fits have only Gaussian nodes

RULE_ROWS = (
    ("basic", "basic filter: Σε_r with Σδ_r ≤ δ"),
    ("advanced", "advanced filter: √(2 ln(2/δ) Σε_r²) + Σε_r²/2, Σδ_r ≤ δ/2"),
    ("rdp", "Rényi filter at the 17 fixed orders α: min over α of Σρ_r(α) + ln(17/δ)/(α−1)"),
    ("gdp", "Gaussian-DP filter: μ = √(Σμ_r²), read at δ"),
    ("best", "best: the smallest of the four, each held to δ/4"),
)
ACCOUNTANTS = ("basic", "advanced", "rdp", "pld", "best")


def fit_plan(index: int):
    """The calibrated plan of fit ``index`` (shares as given; analytic Gaussian, Laplace at b = 1/eps)."""
    name, nodes = HISTORY[index]
    plan = Plan(f"fit{index + 1}: {name}", "replace_one")
    gaussians = sum(1 for _, mech, _ in nodes if mech == "gaussian")
    for node, mech, eps in nodes:
        if mech == "gaussian":
            plan.add(node, "gaussian", Sensitivity(1.0, "l2"), share=(eps, FIT_DELTA / gaussians))
        else:
            plan.add(node, "laplace", Sensitivity(1.0, "l1"), share=(eps, 0.0))
    total = math.fsum(eps for _, _, eps in nodes)
    return plan.allocate(Budget(total, FIT_DELTA if gaussians else 0.0))


def run_history(ledger: Ledger, fits: int = len(HISTORY)) -> Ledger:
    """Run the first ``fits`` fits on ``ledger``, one after the other (the released values do not matter)."""
    for i in range(fits):
        plan = fit_plan(i)
        with Run(plan, ledger, random_state=i) as run:
            for node in plan.nodes:
                run.release(node, np.zeros(3))
    return ledger


@functools.cache
def rule_usages(fits: int) -> dict[str, tuple[float, str]]:
    """Each filter rule on the first ``fits`` fits at LEDGER.delta, each run profiled within the run under
    ``best`` (the run is non-adaptive: any accountant applies inside it). -> {rule: (epsilon, rule used)}."""
    accountant = Ledger(LEDGER, "best").accountant
    profiles = []
    for i in range(fits):
        charges = fit_plan(i).charges()
        share = BasicAccountant().cost(charges).delta  # the run's delta share, as the ledger computes it
        profiles.append(filters.profile(charges, share, accountant))
    out = {}
    for rule, _ in RULE_ROWS:
        result = filters.usage(profiles, rule, LEDGER.delta)
        out[rule] = (result.epsilon, result.rule)
    return out


@functools.cache
def ledger_totals(fits: int, accountant: str, committed: bool) -> tuple[float, str]:
    """``ledger.spent`` epsilon after the first ``fits`` fits on a journal-backed ledger, run one at a time
    (privacy filter) or declared up front with ``Ledger.commit`` (non-adaptive). -> (epsilon, rule)."""
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(LEDGER, accountant, journal=Path(tmp) / "history.jsonl")
        if committed:
            ledger.commit([fit_plan(i) for i in range(fits)])
        run_history(ledger, fits)
        return ledger.spent.epsilon, ledger.composition["rule"]


def _f(x: float) -> str:
    return "n/a" if math.isinf(x) else f"{x:.3f}"


def rules_table() -> str:
    early, full = rule_usages(GAUSSIAN_ONLY), rule_usages(len(HISTORY))
    lines = [f"| rule (at δ = {LEDGER.delta:g}) | after fits 1–{GAUSSIAN_ONLY} (Gaussian only) | after all {len(HISTORY)} fits |",
             "|---|---|---|"]
    for rule, label in RULE_ROWS:
        cells = []
        for eps, used in (early[rule], full[rule]):
            cells.append(_f(eps) + (f" ({used.split('(')[1].rstrip(')')})" if rule == "best" and math.isfinite(eps) else ""))
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    pld_early, pld_full = ledger_totals(GAUSSIAN_ONLY, "pld", True)[0], ledger_totals(len(HISTORY), "pld", True)[0]
    lines.append(f"| non-adaptive PLD of the same nodes (a committed batch) | {_f(pld_early)} | {_f(pld_full)} |")
    best_early, best_full = early["best"][0], full["best"][0]
    lines.append(f"| best filter ÷ non-adaptive PLD | {best_early / pld_early:.2f} | {best_full / pld_full:.2f} |")
    return "\n".join(lines)


def ledger_table() -> str:
    lines = ["| ledger accountant | `spent` ε, fits run one at a time | `spent` ε, the ten plans committed up front | ratio |",
             "|---|---|---|---|"]
    for name in ACCOUNTANTS:
        adaptive, rule = ledger_totals(len(HISTORY), name, False)
        batch, _ = ledger_totals(len(HISTORY), name, True)
        lines.append(f"| `{name}` | {_f(adaptive)} ({rule}) | {_f(batch)} | {adaptive / batch:.2f} |")
    return "\n".join(lines)


def history_table() -> str:
    lines = ["| fit | nodes (mechanism: ε share) |", "|---|---|"]
    for i, (name, nodes) in enumerate(HISTORY):
        lines.append(f"| {i + 1}. {name} | " + ", ".join(f"{n} ({m}: {e:g})" for n, m, e in nodes) + " |")
    return "\n".join(lines)


def tables() -> str:
    return "\n\n".join([history_table(), rules_table(), ledger_table()])


if __name__ == "__main__":
    print(tables())
