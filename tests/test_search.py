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


def test_a_scaled_noise_spec_is_attrs_evolve_of_every_field():
    """``NoiseSpec.scaled`` builds the scaled spec field by field (the tight search scales every spec per step): the
    same spec as ``attrs.evolve``, for a spec of every field set."""
    import attrs

    from privsdr import Budget, Sensitivity
    from privsdr.mechanisms import NoiseSpec

    spec = NoiseSpec("gaussian", Sensitivity(2.0, "l2"), 3.5, "analytic", 1e-6, Budget(1.0, 1e-6), {"n": 4}, "secure")
    assert {a.name for a in attrs.fields(NoiseSpec)} == {"mechanism", "sensitivity", "noise_multiplier", "calibration", "delta",
                                                          "share", "params", "sampler"}
    scaled = spec.scaled(0.75)
    assert scaled == attrs.evolve(spec, noise_multiplier=3.5 * 0.75, calibration="analytic*tight") and type(scaled) is NoiseSpec
