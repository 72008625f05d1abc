"""The one calibration search (privsdr.mechanisms.search), used by the plan's tight calibration and by the distributed
discrete Gaussian: the smallest factor that fits, always one that was checked to fit."""
import math

import pytest

from privsdr.mechanisms.search import smallest_fitting_factor


def _toy(target: float):
    """eps(f) = 1 / f (more noise, less epsilon): the smallest fitting factor is 1 / target."""
    checked = []

    def fits(f):
        checked.append(f)
        return 1.0 / f <= target

    return fits, (lambda f: math.log((1.0 / f) / target)), checked


@pytest.mark.parametrize("target", [0.003, 0.3, 0.9, 1.0, 2.5, 400.0])
def test_the_smallest_fitting_factor_to_the_tolerance_and_checked_to_fit(target):
    fits, excess, checked = _toy(target)
    factor = smallest_fitting_factor(fits, excess, 1e-4)
    assert factor in checked and 1.0 / factor <= target
    assert factor == pytest.approx(1.0 / target, rel=1e-4)


def test_a_fitting_start_is_kept_when_the_caller_asks_and_nothing_fitting_is_infinite():
    fits, excess, _ = _toy(4.0)
    assert smallest_fitting_factor(fits, excess, 1e-6, below_one=False) == 1.0
    assert smallest_fitting_factor(fits, excess, 1e-6) == pytest.approx(0.25, rel=1e-6)
    assert smallest_fitting_factor(lambda f: False, lambda f: math.inf, 1e-6) == math.inf
