"""The Gram-block spec (privsdr.released.gram): each block's declared sensitivity equals a brute-force worst case over
extreme neighbours, computed on the statistic itself (small sizes), under both neighbouring relations."""
import itertools
import math

import numpy as np
import pytest

from privsdr.released import gram

C, CY, N = 1.5, 0.7, 7  # row bound, label bound, a public n to divide by


def _ball_points(radius: float, p: int = 2) -> list[np.ndarray]:
    """0, and points of norm radius/2 and radius in 8 directions (extreme and interior rows of a ball in R^p)."""
    points = [np.zeros(p)]
    for angle in np.linspace(0.0, 2 * np.pi, 8, endpoint=False):
        direction = np.zeros(p)
        direction[:2] = np.cos(angle), np.sin(angle)
        points += [0.5 * radius * direction, radius * direction]
    return points


def _upper(m: np.ndarray) -> np.ndarray:
    return m[np.triu_indices(m.shape[0])]


# each block: (its statistic of one row, the rows to try, its spec sensitivity under a relation)
ROWS = [(x, y, h) for x in _ball_points(C) for y in (-CY, 0.0, CY) for h in range(3)]
BLOCKS = {
    "xtx": (lambda x, y, h: _upper(np.outer(x, x)), lambda rel: gram.xtx(C, rel, N)),
    "xty": (lambda x, y, h: x * y, lambda rel: gram.xty(C, CY, rel, N)),
    "column_sum": (lambda x, y, h: x, lambda rel: gram.column_sum(C, rel, N)),
    "label_sum": (lambda x, y, h: np.array([y]), lambda rel: gram.label_sum(CY, rel, N)),
    "slice_sums": (lambda x, y, h: np.outer(x, np.eye(3)[h]).ravel(), lambda rel: gram.slice_sums(C, rel, N)),
    "slice_counts": (lambda x, y, h: np.eye(3)[h], lambda rel: gram.slice_counts(rel, N)),
    "count": (lambda x, y, h: np.array([1.0]), lambda rel: gram.count(rel)),
}


def _worst_case(statistic, relation: str, per: float) -> float:
    """max ||f(D) - f(D')|| over the rows tried: D' = D plus one row (add/remove) or D with one row replaced."""
    values = [statistic(*row) for row in ROWS]
    if relation == "add_remove":
        return max(float(np.linalg.norm(v)) for v in values) / per
    return max(float(np.linalg.norm(a - b)) for a, b in itertools.combinations(values, 2)) / per


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_block_sensitivity_is_the_worst_case_over_extreme_neighbours(name, relation):
    statistic, declared = BLOCKS[name]
    per = 1.0 if name == "count" else N
    if name == "count" and relation == "replace_one":
        with pytest.raises(ValueError, match="not a release"):
            declared(relation)
        assert _worst_case(statistic, relation, per) == 0.0
        return
    sensitivity = declared(relation)
    assert sensitivity.relation.value == relation and sensitivity.norm == "l2"
    assert "privsdr.released.gram" in sensitivity.derivation
    # never below the worst case (a sound bound), and attained by the extreme neighbours (not loose)
    assert sensitivity.value == pytest.approx(_worst_case(statistic, relation, per), rel=1e-12)


def test_the_box_sums_and_the_eigenvalue():
    """The DP scaler's blocks (column sums of U in [-1, 1]^p and of U^2 in [0, 1]^p), and Weyl's bound on lambda_min."""
    p = 3
    corners = [np.array(c, dtype=float) for c in itertools.product((-1.0, 1.0), repeat=p)]
    worst = max(np.linalg.norm(a - b) for a, b in itertools.combinations(corners, 2))
    assert gram.box_sum(-np.ones(p), np.ones(p), "replace_one", N).value == pytest.approx(worst / N, rel=1e-12)
    squares = [np.array(c, dtype=float) for c in itertools.product((0.0, 1.0), repeat=p)]
    worst = max(np.linalg.norm(a - b) for a, b in itertools.combinations(squares, 2))
    assert gram.box_sum(np.zeros(p), np.ones(p), "replace_one", N).value == pytest.approx(worst / N, rel=1e-12)
    rng = np.random.default_rng(0)
    base = rng.standard_normal((6, 2))
    moves = []
    G = base.T @ base
    lam = np.linalg.eigvalsh(G)[0]
    for x, x2 in itertools.product(_ball_points(C), repeat=2):
        with_x = G + np.outer(x, x)
        moves.append(abs(np.linalg.eigvalsh(with_x)[0] - lam))  # add/remove x
        moves.append(abs(np.linalg.eigvalsh(G + np.outer(x2, x2))[0] - np.linalg.eigvalsh(with_x)[0]))  # x replaced by x2
    for relation in ("add_remove", "replace_one"):
        assert max(moves) <= gram.gram_eigenvalue(C, relation).value + 1e-12
    assert gram.gram_eigenvalue(C, "add_remove").value == C * C


def test_the_spec_refuses_relations_it_does_not_cover():
    with pytest.raises(ValueError, match="covers add_remove and replace_one"):
        gram.xtx(C, "replace_entry")


def test_estimators_declare_the_spec_values():
    """Every estimator that releases a Gram block declares the spec's value for it (numbers kept identical)."""
    from privsdr import Budget
    from privsdr.algorithms.adassp import add_adassp_nodes
    from privsdr.algorithms.mean_covariance import DPMeanCovariance
    from privsdr.plan import Plan
    from privsdr.released.moments import add_moment_nodes

    plan = Plan("t", "add_remove", {})
    add_adassp_nodes(plan, C, CY, {"lambda_min": 1.0, "xtx": 1.0, "xty": 1.0})
    assert [plan.nodes[k].sensitivity.value for k in ("lambda_min", "xtx", "xty")] == [C * C, C * C, C * CY]
    plan = Plan("t", "replace_one", {})
    add_moment_nodes(plan, N, 2, np.array([0.9, 1.2]), ())
    c = math.hypot(0.9, 1.2)
    assert plan.nodes["slice_sums"].sensitivity.value == pytest.approx(2 * c / N, rel=1e-15)
    assert plan.nodes["slice_counts"].sensitivity.value == pytest.approx(math.sqrt(2) / N, rel=1e-15)
    assert plan.nodes["second_moment"].sensitivity.value == pytest.approx(math.sqrt(2) * (0.81 + 1.44) / N, rel=1e-15)
    mc = DPMeanCovariance(clip=C, budget=Budget(1.0, 1e-6)).build_plan(N, 3)
    assert mc.nodes["mean"].sensitivity.value == 2 * C / N
    assert mc.nodes["second_moment"].sensitivity.value == pytest.approx(math.sqrt(2) * C * C / N, rel=1e-15)
