"""A release charged to a cell of a row partition reads only that cell's rows (``Run.release(..., rows=)``)."""
from __future__ import annotations

import numpy as np
import pytest

from privsdr import Budget, Ledger, Plan, Run, Sensitivity
from privsdr.errors import PlanError

CELLS = {"batch": {"a": [0, 2, 4, 6], "b": [1, 3, 5, 7]}}


def _plan():
    p = Plan("rows", "replace_one", {"n": 8})
    a, b = p.partition("batch", ["a", "b"], rows=True)
    p.add("in_a", "laplace", Sensitivity(1.0, "l1"), scope=a)
    p.add("in_b", "laplace", Sensitivity(1.0, "l1"), scope=b)
    return p.allocate(Budget(1.0, 0.0))


@pytest.mark.parametrize("rows, outside", [([0, 1], 1), ([7, 5, 3], 3), ([0, 2, 4, 6, 8], 1)])
def test_a_release_reading_rows_outside_its_cell_is_refused_before_its_charge(rows, outside):
    ledger = Ledger(Budget(4.0, 0.0))
    with Run(_plan(), ledger, random_state=0, row_cells=CELLS) as run:
        with pytest.raises(PlanError, match=f"reads {outside} rows outside it"):
            run.release("in_a", 0.0, rows=rows)
        assert run._reservation.charged == []  # refused before the write-ahead charge
        with pytest.raises(PlanError, match="release it with rows="):
            run.release("in_a", 0.0)
        run.release("in_a", 0.0, rows=[6, 0, 2])  # inside its cell, in any order
        run.release("in_b", 0.0, rows=np.array([1, 7]))
    assert run.rows_of("in_b").tolist() == [1, 3, 5, 7]
