"""privsdr.accounting.pld_build builds dp-accounting's Gaussian and Laplace privacy-loss distributions in array
operations: every field of the result must be dp-accounting's own, exactly (the same class, the same doubles)."""
from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld

from privsdr.accounting.accountants import PldAccountant, _event_pld
from privsdr.accounting.events import GaussianEvent, LaplaceEvent
from privsdr.accounting.pld_build import epsilon_for_delta, gaussian_pld, laplace_pld


def assert_same_distribution(ours: Any, theirs: Any) -> None:
    """Same PMF class, and every attribute equal and of the same type (arrays: same dtype, equal element by element;
    sparse PMFs: the same (loss, mass) items in the same order)."""
    assert ours._symmetric and theirs._symmetric
    assert ours._pmf_add is ours._pmf_remove
    mine, ref = ours._pmf_remove, theirs._pmf_remove
    assert type(mine) is type(ref)
    assert vars(mine).keys() == vars(ref).keys()
    for name, value in vars(ref).items():
        got = vars(mine)[name]
        if isinstance(value, np.ndarray):
            assert got.dtype == value.dtype and got.shape == value.shape, name
            assert np.array_equal(got, value), name
        elif isinstance(value, dict):
            assert list(got.items()) == list(value.items()), name
        else:
            assert type(got) is type(value) and got == value, (name, got, value)


# (noise multiplier, grid): dense grids of 10^3-10^4 points, sparse ones (<= 1000 points), grids the PLD accountant
# picks for large atoms (basic epsilon / 2e4, any double), and dp-accounting's default grid; each build by the library
# costs < 0.2 s
GAUSSIAN_GRID = [(0.5, 1e-2), (1.3, 3.7e-3), (3.0, 1e-3), (40.0, 1e-4), (40.0, 1e-3), (300.0, 1e-2), (6.1, 1.2345e-3)]
LAPLACE_GRID = [(0.2, 1e-3), (0.9, 1e-3), (2.0, 1e-4), (40.0, 1e-4), (0.5, 1e-2), (0.01, 1e-2), (3.3, 7.77e-4)]


@pytest.mark.parametrize(("z", "vdi"), GAUSSIAN_GRID)
def test_the_gaussian_distribution_is_dp_accountings_bit_for_bit(z: float, vdi: float) -> None:
    theirs = pld.from_gaussian_mechanism(z, sensitivity=1.0, value_discretization_interval=vdi)
    assert_same_distribution(gaussian_pld(z, vdi), theirs)


@pytest.mark.parametrize(("b", "vdi"), LAPLACE_GRID)
def test_the_laplace_distribution_is_dp_accountings_bit_for_bit(b: float, vdi: float) -> None:
    theirs = pld.from_laplace_mechanism(b, sensitivity=1.0, value_discretization_interval=vdi)
    assert_same_distribution(laplace_pld(b, vdi), theirs)


def test_the_grid_covers_both_pmf_kinds() -> None:
    """The grids above exercise the dense construction and the sparse one (left to dp-accounting) for both noises."""
    kinds = {(kind, type(build(z, vdi)._pmf_remove).__name__)
             for kind, build, grid in [("gaussian", gaussian_pld, GAUSSIAN_GRID), ("laplace", laplace_pld, LAPLACE_GRID)]
             for z, vdi in grid}
    assert kinds == {(k, p) for k in ("gaussian", "laplace") for p in ("DensePLDPmf", "SparsePLDPmf")}


def test_the_accountant_composes_the_librarys_distributions() -> None:
    """The PLD accountant's memoised builds and its epsilon for a mixed composition are dp-accounting's own: two
    Gaussian releases (one self-composed) and a Laplace one, read at 1e-6."""
    vdi = 1e-3
    gauss, laplace = GaussianEvent(2.0, 1e-7), LaplaceEvent(3.0)
    assert_same_distribution(_event_pld(gauss, vdi, 1), pld.from_gaussian_mechanism(2.0, value_discretization_interval=vdi))
    assert_same_distribution(_event_pld(laplace, vdi, 1), pld.from_laplace_mechanism(3.0, value_discretization_interval=vdi))
    theirs = (pld.from_gaussian_mechanism(2.0, sensitivity=1.0, value_discretization_interval=vdi).self_compose(2)
              .compose(pld.from_laplace_mechanism(3.0, sensitivity=1.0, value_discretization_interval=vdi)))
    accountant = PldAccountant(value_discretization_interval=vdi)
    assert accountant._epsilon([gauss, laplace, gauss], 1e-6) == theirs.get_epsilon_for_delta(1e-6)


@pytest.mark.parametrize(("build", "library"), [(gaussian_pld, pld.from_gaussian_mechanism), (laplace_pld, pld.from_laplace_mechanism)])
@pytest.mark.parametrize(("z", "vdi"), [(0.0, 1e-3), (-1.0, 1e-3), (1.0, 0.0)])
def test_degenerate_parameters_fail_as_in_dp_accounting(build: Any, library: Any, z: float, vdi: float) -> None:
    """No noise, or no grid: dp-accounting's own function answers, so the same exception."""
    with np.errstate(divide="ignore"), pytest.raises(Exception) as theirs:
        library(z, sensitivity=1.0, value_discretization_interval=vdi)
    with np.errstate(divide="ignore"), pytest.raises(type(theirs.value)):
        build(z, vdi)


def test_the_running_sums_of_the_losses_are_the_librarys_repeated_subtraction() -> None:
    """dp-accounting walks the losses with ``itertools.count(upper, -d)`` (repeated float addition); ``np.cumsum``
    must add in the same sequence, far enough down a grid for rounding to accumulate."""
    for upper, d in [(12.3456, 1e-4), (3.0, 3.7e-3), (-1e-4, 1e-4)]:
        steps = np.full(100_000, -d)
        steps[0] = upper
        assert np.array_equal(np.cumsum(steps), np.fromiter(itertools.islice(itertools.count(upper, -d), 100_000), float))


@functools.cache
def _composed_distributions() -> dict[str, Any]:
    from dp_accounting.pld import common

    pure = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(0.3, 1e-6), value_discretization_interval=1e-3)
    return {
        "gaussian": gaussian_pld(1.0, 1e-3),
        "gaussian x3": gaussian_pld(0.7, 1e-3).self_compose(3),
        "gaussian + laplace": gaussian_pld(2.0, 1e-3).compose(laplace_pld(3.0, 1e-3)),
        "laplace": laplace_pld(0.5, 1e-4),
        "gaussian + approximate": gaussian_pld(5.0, 1e-3).compose(pure),
        "laplace x20": laplace_pld(10.0, 1e-3).self_compose(20),
        "sparse laplace": laplace_pld(3.0, 1e-2),
    }


@pytest.mark.parametrize("name", ["gaussian", "gaussian x3", "gaussian + laplace", "laplace", "gaussian + approximate",
                                  "laplace x20", "sparse laplace"])
def test_epsilon_for_delta_is_dp_accountings_bit_for_bit(name: str) -> None:
    """Every delta from 0 (infinite epsilon: the pessimistic tail mass) through the usual 1e-12..1e-5 to 1 (epsilon 0),
    on dense and sparse, self-composed and composed distributions: the same double as dp-accounting's walk."""
    dist = _composed_distributions()[name]
    for delta in [0.0, 1e-300, 1e-15, 1e-12, 1e-9, 3e-7, 1e-6, 1e-5, 1e-3, 0.01, 0.1, 0.5, 0.9, 1.0]:
        theirs = float(dist.get_epsilon_for_delta(delta))
        ours = epsilon_for_delta(dist, delta)
        assert ours == theirs or (math.isinf(ours) and math.isinf(theirs)), (delta, ours, theirs)


def test_losses_below_exps_range_are_read_as_the_library_reads_them() -> None:
    """A dense distribution whose losses reach below -700 (exp(-l) overflows a double) gives the library's epsilon,
    not an OverflowError from a block's points past where the library's walk stops (review)."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as pld

    probs = np.zeros(811)
    probs[-1], probs[800] = 0.6, 0.4  # losses -800 .. 10 on a grid of 1: mass at 10 and at 0
    dist = pld.PrivacyLossDistribution(pld_pmf.DensePLDPmf(1.0, -800, probs, 0.0, True))
    for delta in [1e-6, 0.3]:
        assert epsilon_for_delta(dist, delta) == float(dist.get_epsilon_for_delta(delta))
